//! The guest interface's functions, looked up and type-checked once per
//! component, then called on each call's fresh instance without either.
//!
//! The generated bindings (`SourcePre::instantiate_async`) look up and
//! type-check all six exports on every instance: about 8 K instructions a
//! call (callgrind), for the one function the call uses. [`Exports`] is
//! built only from a checked instance of its component, and a function's
//! type belongs to the component, not the instance: later instances of the
//! same component take the checked types unchecked.

use wasmtime::component::{
    Component, ComponentExportIndex, ComponentNamedList, Func, Instance, Lift, Lower, TypedFunc,
};
use wasmtime::{AsContextMut, Store};

use crate::bindings::wf::source::types as wit;
use crate::runtime::Ctx;

type Describe = TypedFunc<(), (wit::Metadata,)>;
type Catalog = TypedFunc<(), (Result<wit::Capabilities, wit::Error>,)>;
type CallTool<'a> = TypedFunc<(&'a str, &'a str), (Result<wit::ToolResult, wit::Error>,)>;
type RunNode<'a> = TypedFunc<(&'a str, &'a str), (Result<String, wit::Error>,)>;
type ReadResource<'a> = TypedFunc<(&'a str,), (Result<Vec<wit::ResourceContents>, wit::Error>,)>;
type GetPrompt<'a> =
    TypedFunc<(&'a str, &'a [(String, String)]), (Result<wit::PromptResult, wit::Error>,)>;

/// Where each guest function is in the component; only made by
/// [`Exports::checked`].
pub struct Exports {
    describe: ComponentExportIndex,
    catalog: ComponentExportIndex,
    call_tool: ComponentExportIndex,
    run_node: ComponentExportIndex,
    read_resource: ComponentExportIndex,
    get_prompt: ComponentExportIndex,
}

impl Exports {
    /// The exports of `interface` (e.g. `wf:source/guest@1.0.0`) in
    /// `component`, each type-checked against `instance`, an instance of it.
    pub fn checked(
        component: &Component,
        interface: &str,
        store: &mut Store<Ctx>,
        instance: &Instance,
    ) -> wasmtime::Result<Self> {
        let iface = component
            .get_export_index(None, interface)
            .ok_or_else(|| wasmtime::format_err!("it exports no {interface}"))?;
        let index = |name: &str| {
            component
                .get_export_index(Some(&iface), name)
                .ok_or_else(|| wasmtime::format_err!("it exports no {interface}#{name}"))
        };
        let e = Exports {
            describe: index("describe")?,
            catalog: index("catalog")?,
            call_tool: index("call-tool")?,
            run_node: index("run-node")?,
            read_resource: index("read-resource")?,
            get_prompt: index("get-prompt")?,
        };
        let _: Describe = typed(store, instance, e.describe, true)?;
        let _: Catalog = typed(store, instance, e.catalog, true)?;
        let _: CallTool<'_> = typed(store, instance, e.call_tool, true)?;
        let _: RunNode<'_> = typed(store, instance, e.run_node, true)?;
        let _: ReadResource<'_> = typed(store, instance, e.read_resource, true)?;
        let _: GetPrompt<'_> = typed(store, instance, e.get_prompt, true)?;
        Ok(e)
    }

    pub fn describe(&self, store: &mut Store<Ctx>, i: &Instance) -> wasmtime::Result<Describe> {
        typed(store, i, self.describe, false)
    }
    pub fn catalog(&self, store: &mut Store<Ctx>, i: &Instance) -> wasmtime::Result<Catalog> {
        typed(store, i, self.catalog, false)
    }
    pub fn call_tool<'a>(
        &self,
        store: &mut Store<Ctx>,
        i: &Instance,
    ) -> wasmtime::Result<CallTool<'a>> {
        typed(store, i, self.call_tool, false)
    }
    pub fn run_node<'a>(
        &self,
        store: &mut Store<Ctx>,
        i: &Instance,
    ) -> wasmtime::Result<RunNode<'a>> {
        typed(store, i, self.run_node, false)
    }
    pub fn read_resource<'a>(
        &self,
        store: &mut Store<Ctx>,
        i: &Instance,
    ) -> wasmtime::Result<ReadResource<'a>> {
        typed(store, i, self.read_resource, false)
    }
    pub fn get_prompt<'a>(
        &self,
        store: &mut Store<Ctx>,
        i: &Instance,
    ) -> wasmtime::Result<GetPrompt<'a>> {
        typed(store, i, self.get_prompt, false)
    }
}

/// The function at `index` of `instance` as `TypedFunc<P, R>`: type-checked
/// when `check`, else trusted (sound only for an index [`Exports::checked`]
/// checked with the same `P` and `R`, which the aliases above keep equal).
fn typed<P, R>(
    store: &mut Store<Ctx>,
    instance: &Instance,
    index: ComponentExportIndex,
    check: bool,
) -> wasmtime::Result<TypedFunc<P, R>>
where
    P: ComponentNamedList + Lower,
    R: ComponentNamedList + Lift,
{
    let func: Func = instance
        .get_func(store.as_context_mut(), index)
        .ok_or_else(|| wasmtime::format_err!("the component's instance lacks an export"))?;
    if check {
        return func.typed::<P, R>(&*store);
    }
    // SAFETY: `index` is an export of this instance's component whose type
    // `Exports::checked` verified as `TypedFunc<P, R>` (see above).
    Ok(unsafe { TypedFunc::new_unchecked(func) })
}
