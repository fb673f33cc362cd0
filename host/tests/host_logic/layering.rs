//! The layering rule of docs/architecture.md, checked on the source: each
//! top-level module of wf-host refers (`crate::…`) only to modules below it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Bottom to top; a module may use only modules of a lower layer.
const LAYERS: &[&[&str]] = &[
    &["clock", "secrets", "status", "text", "telemetry"],
    &["store", "config"],
    &["plugins", "audit"],
    &["sources"],
    &["catalog"],
    &["pipeline"],
    &["projection", "workflow"],
    &["app"],
    &["surfaces"],
    &["server"],
    &["cli"],
];

fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir)
        .expect("readable source dir")
        .flatten()
    {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file belongs to (`src/app.rs` and `src/app/x.rs`: `app`).
fn owner(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    Some(first.trim_end_matches(".rs").to_string())
}

/// Every `crate::name` the text refers to.
fn references(text: &str) -> BTreeSet<String> {
    text.match_indices("crate::")
        .filter(|(i, _)| {
            // `wf_host::crate::` never occurs; skip identifiers ending in `crate`.
            !text[..*i].ends_with(|c: char| c.is_alphanumeric() || c == '_')
        })
        .filter_map(|(i, m)| {
            let rest = &text[i + m.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

#[test]
fn no_module_reaches_up() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in &files {
        let Some(module) = owner(&src, file) else {
            continue;
        };
        let Some(mine) = layer(&module) else {
            // lib.rs, main.rs and the other binaries (src/bin/) sit above everything.
            assert!(
                module == "lib" || module == "main" || module == "bin",
                "module {module:?} ({}) has no layer: add it to LAYERS and to docs/architecture.md",
                file.display()
            );
            continue;
        };
        let text = std::fs::read_to_string(file).expect("readable source file");
        for target in references(&text) {
            checked += 1;
            if target == module {
                continue;
            }
            match layer(&target) {
                Some(theirs) if theirs < mine => {}
                Some(_) => problems.push(format!(
                    "{}: {module} uses crate::{target}, which is not below it",
                    file.display()
                )),
                None => problems.push(format!("{}: crate::{target} has no layer", file.display())),
            }
        }
    }
    assert!(
        checked > 50,
        "found only {checked} references: is the scan broken?"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_scan_sees_a_reference_up() {
    let refs = references("use crate::server::x; let y = crate::app::App::start; a_crate::no");
    assert_eq!(
        refs.into_iter().collect::<Vec<_>>(),
        vec!["app".to_string(), "server".to_string()]
    );
}

/// Inside `server/`, bottom to top: its rooms (sub-folders, or files at its
/// top). A room may use only rooms of a lower layer; `server/mod.rs` sits
/// above them all and may use any. `http` is above `console`,
/// `metrics_route` and `readiness` because it serves them.
const SERVER_LAYERS: &[&[&str]] = &[
    &["jsonrpc", "handles"],
    &["identity"],
    &["mcp"],
    &["stdio", "console", "metrics_route", "readiness"],
    &["http"],
];

fn server_layer(room: &str) -> Option<usize> {
    SERVER_LAYERS.iter().position(|l| l.contains(&room))
}

/// The paths a `use`/expression path starting at `rest` names, expanding
/// `{a, b::c}` groups: `a::{b, c::d}` gives `[a, b]` and `[a, c, d]`.
fn expand(rest: &str) -> Vec<Vec<String>> {
    let rest = rest.trim_start();
    if let Some(inner) = rest.strip_prefix('{') {
        let mut depth = 0;
        let mut items = Vec::new();
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    items.push(&inner[start..i]);
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&inner[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        return items.into_iter().flat_map(expand).collect();
    }
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if name.is_empty() {
        return Vec::new(); // `*`, or no path at all
    }
    match rest[name.len()..].strip_prefix("::") {
        Some(more) if !more.trim_start().starts_with('*') => {
            let tails = expand(more);
            if tails.is_empty() {
                return vec![vec![name]];
            }
            tails
                .into_iter()
                .map(|t| std::iter::once(name.clone()).chain(t).collect())
                .collect()
        }
        _ => vec![vec![name]],
    }
}

/// Where each occurrence of `prefix` (not inside a longer identifier or
/// path) starts, with the text after it.
fn after<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.match_indices(prefix)
        .filter(|(i, _)| {
            !text[..*i].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':')
        })
        .map(|(i, m)| &text[i + m.len()..])
        .collect()
}

/// A file of `server/`, as a module path below `server` (`server/mcp/handler.rs`:
/// `[mcp, handler]`; `server/mcp/mod.rs`: `[mcp]`; `server/mod.rs`: `[]`).
fn server_module(server: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(server).expect("a file of server/");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    if last != "mod.rs" {
        parts.push(last.trim_end_matches(".rs").to_string());
    }
    parts
}

/// Every path into `server/` the source of module `me` names, as a path
/// below `server`: `crate::server::…`, `super::…` (outside its tests, where
/// `super` is the file itself) and, in a folder's `mod.rs`, `self::child…`
/// and `child::…` for its own children.
fn server_references(
    text: &str,
    me: &[String],
    is_folder: bool,
    children: &[String],
) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for rest in after(text, "crate::server::") {
        out.extend(expand(rest));
    }
    let code = without_tests(text);
    let code = code.as_str();
    // `super` of `server/mcp/handler.rs` is `server::mcp`; of `server/mcp/mod.rs`, `server`.
    let mut base = me.to_vec();
    if !is_folder || !base.is_empty() {
        base.pop();
    }
    for rest in after(code, "super::") {
        let (mut base, mut rest) = (base.clone(), rest);
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        out.extend(
            expand(rest)
                .into_iter()
                .map(|p| base.iter().cloned().chain(p).collect()),
        );
    }
    if is_folder {
        for child in children {
            let mut hits = after(code, &format!("self::{child}::"));
            hits.extend(after(code, &format!("{child}::")));
            for rest in hits {
                let mut p = me.to_vec();
                p.push(child.clone());
                out.extend(
                    expand(rest)
                        .into_iter()
                        .map(|t| p.iter().cloned().chain(t).collect()),
                );
                if expand(rest).is_empty() {
                    out.push(p);
                }
            }
        }
    }
    out
}

/// The text without its `#[cfg(test)] mod … { … }` blocks (in them `super`
/// is the file itself).
fn without_tests(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        let Some(open) = after.find('{').filter(|o| after[..*o].contains("mod ")) else {
            rest = &after["#[cfg(test)]".len()..];
            continue;
        };
        let mut depth = 0;
        let mut end = after.len();
        for (j, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The modules a folder's `mod.rs` re-exports names from (`pub use a::b::X;`,
/// `pub use a::{X, Y};`): name → the child module `a`.
fn re_exports(mod_rs: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for rest in after(mod_rs, "pub use ") {
        for path in expand(rest) {
            if path.len() >= 2 {
                out.insert(path.last().unwrap().clone(), path[0].clone());
            }
        }
    }
    out
}

/// The sub-layer rule of `server/`, and no cycle between the files of one of
/// its folders. A folder's own `mod.rs` is the folder itself: its children
/// may use what it defines, and it may use them.
fn server_problems(server: &Path) -> (Vec<String>, usize) {
    let mut files = Vec::new();
    rust_files(server, &mut files);
    let folder_of =
        |m: &[String]| -> PathBuf { m.iter().fold(server.to_path_buf(), |p, c| p.join(c)) };
    let children = |m: &[String]| -> Vec<String> {
        let dir = folder_of(m);
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        let p = e.path();
                        if p.is_dir() && p.join("mod.rs").exists() {
                            Some(name)
                        } else {
                            name.strip_suffix(".rs")
                                .filter(|n| *n != "mod")
                                .map(str::to_string)
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let exports_of = |m: &[String]| {
        std::fs::read_to_string(folder_of(m).join("mod.rs"))
            .map(|t| re_exports(&t))
            .unwrap_or_default()
    };
    let mut problems = Vec::new();
    let mut checked = 0;
    // Per folder: file → the sibling files it uses.
    let mut edges: std::collections::BTreeMap<Vec<String>, BTreeSet<Vec<String>>> =
        Default::default();
    for file in &files {
        let me = server_module(server, file);
        let is_folder = file.ends_with("mod.rs");
        let text = std::fs::read_to_string(file).expect("readable source file");
        let mine = children(&me);
        for mut path in
            server_references(&text, &me, is_folder, if is_folder { &mine } else { &[] })
        {
            checked += 1;
            // Through a folder's re-exports to the child that defines the name.
            let mut depth = 0;
            while depth < path.len() {
                let kids = children(&path[..depth]);
                if kids.contains(&path[depth]) {
                    depth += 1;
                    continue;
                }
                match exports_of(&path[..depth]).get(&path[depth]) {
                    Some(child) => {
                        path.insert(depth, child.clone());
                        depth += 1;
                    }
                    None => break,
                }
            }
            let target: Vec<String> = path[..depth].to_vec();
            let Some(room) = target.first() else {
                if !me.is_empty() {
                    problems.push(format!(
                        "{}: uses server/mod.rs ({}), which sits above every room",
                        file.display(),
                        path.join("::")
                    ));
                }
                continue;
            };
            let Some(mine_room) = me.first() else {
                continue; // server/mod.rs may use any room
            };
            if room != mine_room {
                match (server_layer(mine_room), server_layer(room)) {
                    (Some(a), Some(b)) if b < a => {}
                    (None, _) | (_, None) => problems.push(format!(
                        "{}: server room {mine_room:?} or {room:?} has no layer: add it to SERVER_LAYERS and to docs/architecture.md",
                        file.display()
                    )),
                    _ => problems.push(format!(
                        "{}: server/{mine_room} uses server/{room} ({}), which is not below it",
                        file.display(),
                        path.join("::")
                    )),
                }
                continue;
            }
            // Within one folder: an edge between two of its files (not its mod.rs).
            let parent = me[..me.len() - usize::from(!is_folder)].to_vec();
            if is_folder || target.len() <= parent.len() || target[..parent.len()] != parent[..] {
                continue;
            }
            let sibling = target[..parent.len() + 1].to_vec();
            if sibling != me {
                edges.entry(me.clone()).or_default().insert(sibling);
            }
        }
    }
    problems.extend(cycles(&edges));
    (problems, checked)
}

/// A cycle in `edges`, named file by file, if there is one.
fn cycles(
    edges: &std::collections::BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
) -> Option<String> {
    fn visit(
        n: &Vec<String>,
        edges: &std::collections::BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        stack: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<String> {
        if let Some(i) = stack.iter().position(|s| s == n) {
            let names: Vec<String> = stack[i..]
                .iter()
                .chain(std::iter::once(n))
                .map(|m| m.join("/"))
                .collect();
            return Some(format!("an import cycle in server/: {}", names.join(" → ")));
        }
        if !done.insert(n.clone()) {
            return None;
        }
        stack.push(n.clone());
        for next in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(next, edges, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_room_of_server_reaches_up_or_round() {
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server");
    let (problems, checked) = server_problems(&server);
    assert!(
        checked > 50,
        "found only {checked} references inside server/: is the scan broken?"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_server_scan_reads_groups_supers_and_children() {
    assert_eq!(
        expand("a::{b, c::{d, e}}, x"),
        vec![
            vec!["a".to_string(), "b".to_string()],
            vec!["a".to_string(), "c".to_string(), "d".to_string()],
            vec!["a".to_string(), "c".to_string(), "e".to_string()],
        ]
    );
    let me = vec!["mcp".to_string(), "handler".to_string()];
    let refs = server_references(
        "use super::{caller, forwarding::Downstream};\nuse super::super::jsonrpc::X;\nuse crate::server::http::direct;\n#[cfg(test)]\nmod tests { use super::helper; }\nuse super::roots;",
        &me,
        false,
        &[],
    );
    let s = |p: &[&str]| p.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        refs,
        vec![
            s(&["http", "direct"]),
            s(&["mcp", "caller"]),
            s(&["mcp", "forwarding", "Downstream"]),
            s(&["jsonrpc", "X"]),
            s(&["mcp", "roots"]),
        ]
    );
    let http = vec!["http".to_string()];
    let refs = server_references(
        "use self::direct::Direct;\nfn f() { connections::serve(); }",
        &http,
        true,
        &["connections".to_string(), "direct".to_string()],
    );
    assert!(
        refs.contains(&s(&["http", "connections", "serve"])),
        "{refs:?}"
    );
    assert!(refs.contains(&s(&["http", "direct", "Direct"])), "{refs:?}");
}
