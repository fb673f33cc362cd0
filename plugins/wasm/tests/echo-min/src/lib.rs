//! The smallest wf source component: `describe`, a catalog of one tool and
//! `echo` (the test guest's, byte for byte the same answer), with no Rust
//! std and so no WASI imports. Every instance lives for one call, so the
//! allocator only bumps a pointer and never frees.

#![no_std]

extern crate alloc;

use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};

wit_bindgen::generate!({
    path: "../../wit",
    world: "source",
});

use exports::wf::source::guest::Guest;
use wf::source::types::*;

struct Component;

/// The string value of `key` in a flat JSON object (the test guest's).
fn arg(json: &str, key: &str) -> Option<String> {
    let needle = alloc::format!("\"{key}\"");
    let at = json.find(needle.as_str())?;
    let rest = &json[at + key.len() + 2..];
    let rest = &rest[rest.find('"')? + 1..];
    Some(rest[..rest.find('"')?].to_string())
}

fn err(code: ErrorCode, message: String) -> Error {
    Error { code, message, data: None }
}

impl Guest for Component {
    fn describe() -> Metadata {
        Metadata {
            name: "echo-min".into(),
            version: "1.0.0".into(),
            description: "the smallest wf source component: echo, no WASI".into(),
        }
    }

    fn catalog() -> Result<Capabilities, Error> {
        Ok(Capabilities {
            tools: vec![Tool {
                name: "echo".into(),
                description: Some("Returns its text".into()),
                input_schema: r#"{"type":"object","properties":{"text":{"type":"string"}}}"#.into(),
                output_schema: None,
            }],
            node_specs: Vec::new(),
            prompts: Vec::new(),
            resources: Vec::new(),
            resource_templates: Vec::new(),
        })
    }

    fn call_tool(name: String, arguments: String) -> Result<ToolResult, Error> {
        if name != "echo" {
            return Err(err(ErrorCode::NotFound, alloc::format!("no tool {name}")));
        }
        Ok(ToolResult {
            content: vec![Content::Text(arg(&arguments, "text").unwrap_or_default())],
            structured: None,
            is_error: false,
        })
    }

    fn run_node(name: String, _input: String) -> Result<String, Error> {
        Err(err(ErrorCode::NotFound, alloc::format!("no node {name}")))
    }

    fn read_resource(uri: String) -> Result<Vec<ResourceContents>, Error> {
        Err(err(ErrorCode::NotFound, alloc::format!("no resource {uri}")))
    }

    fn get_prompt(name: String, _arguments: Vec<(String, String)>) -> Result<PromptResult, Error> {
        Err(err(ErrorCode::NotFound, alloc::format!("no prompt {name}")))
    }
}

export!(Component);

/// Hands out memory from a static arena, then from pages it grows the
/// linear memory by; never frees (an instance serves one call, then is
/// dropped). The arena is zeroed data inside the initial memory: a call that
/// fits in it grows nothing, and growing costs the host two `mprotect`s per
/// call (making the pages accessible, then inaccessible again when the
/// instance's pool slot is reset).
struct Bump;

const ARENA: usize = 64 * 1024;

#[repr(C, align(16))]
struct Arena(core::cell::UnsafeCell<[u8; ARENA]>);

// SAFETY: a component instance has one thread.
unsafe impl Sync for Arena {}

static HEAP: Arena = Arena(core::cell::UnsafeCell::new([0; ARENA]));

/// The next free byte and the end of the region it lies in (0: the arena,
/// not yet used). Atomics only to avoid `static mut`.
static NEXT: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);

const PAGE: usize = 64 * 1024;

fn align_up(n: usize, align: usize) -> Option<usize> {
    Some(n.checked_add(align - 1)? & !(align - 1))
}

/// The block of `size` at `align` from `next` if it ends by `end`.
fn fit(next: usize, end: usize, size: usize, align: usize) -> Option<(usize, usize)> {
    let start = align_up(next, align)?;
    let stop = start.checked_add(size)?;
    (stop <= end).then_some((start, stop))
}

unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (size, align) = (layout.size(), layout.align());
        let (mut next, mut end) = (NEXT.load(Relaxed), END.load(Relaxed));
        if end == 0 {
            next = HEAP.0.get() as usize;
            end = next + ARENA;
        }
        let (start, stop) = match fit(next, end, size, align) {
            Some(f) => f,
            None => {
                // Fresh pages enough for the block at any alignment.
                let Some(need) = size.checked_add(align) else {
                    return core::ptr::null_mut();
                };
                let pages = need.div_ceil(PAGE);
                let old = core::arch::wasm32::memory_grow(0, pages);
                if old == usize::MAX {
                    return core::ptr::null_mut();
                }
                if old * PAGE != end {
                    next = old * PAGE;
                }
                end = (old + pages) * PAGE;
                match fit(next, end, size, align) {
                    Some(f) => f,
                    None => return core::ptr::null_mut(),
                }
            }
        };
        NEXT.store(stop, Relaxed);
        END.store(end, Relaxed);
        start as *mut u8
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}

#[global_allocator]
static ALLOC: Bump = Bump;

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::arch::wasm32::unreachable()
}

/// `memcmp`, which string comparison calls: without std the target links
/// no C library (the bulk-memory instructions cover `memcpy` and `memset`).
///
/// # Safety
/// `a` and `b` point to `n` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    let mut i = 0;
    while i < n {
        // SAFETY: i < n, and the caller gives n readable bytes at each.
        let (x, y) = unsafe { (*a.add(i), *b.add(i)) };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
        i += 1;
    }
    0
}

/// The canonical ABI's allocator export, through which wasmtime writes a
/// call's arguments into the instance (wit-bindgen leaves it to the C
/// library on wasm32-wasip2, which this component does not link).
///
/// # Safety
/// As the canonical ABI calls it: `old_ptr` holds `old_len` bytes allocated
/// with `align`, a power of two.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cabi_realloc(
    old_ptr: *mut u8,
    old_len: usize,
    align: usize,
    new_len: usize,
) -> *mut u8 {
    if new_len == 0 {
        return align as *mut u8;
    }
    // SAFETY: the canonical ABI passes a power-of-two alignment.
    let layout = unsafe { Layout::from_size_align_unchecked(new_len, align) };
    // SAFETY: a non-zero size.
    let ptr = unsafe { ALLOC.alloc(layout) };
    if ptr.is_null() {
        core::arch::wasm32::unreachable();
    }
    if old_len != 0 {
        // SAFETY: both blocks are live and distinct (a bump never reuses).
        unsafe { core::ptr::copy_nonoverlapping(old_ptr, ptr, old_len.min(new_len)) };
    }
    ptr
}
