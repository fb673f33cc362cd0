//! Rust types and glue for the WIT world `wf:source/source@1.0.0`
//! (`plugins/wasm/wit/source.wit`), generated at build time.
#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "wit",
    world: "source",
    imports: { default: async },
    exports: { default: async },
});
