//! The layering rule of docs/architecture.md, checked on the source: each
//! top-level module of wf-host refers (`crate::…`) only to modules below it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Bottom to top; a module may use only modules of a lower layer.
const LAYERS: &[&[&str]] = &[
    &[
        "blocking",
        "clock",
        "file_watch",
        "secrets",
        "status",
        "text",
        "telemetry",
    ],
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

/// One crate's modules for the circle check: module path (`[]` for the
/// crate root, `[store, pg]` for `store/pg.rs` or `store/pg/mod.rs`) → the
/// file's name and its text.
type Modules = std::collections::BTreeMap<Vec<String>, (String, String)>;

/// A crate's modules, read from its `src/` (binaries in `src/bin/` and a
/// `main.rs` beside a `lib.rs` are crates of their own and sit above it).
fn crate_modules(src: &Path) -> Modules {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let has_lib = src.join("lib.rs").exists();
    let mut out = Modules::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("a file of src/");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.first().is_some_and(|p| p == "bin") {
            continue;
        }
        let last = parts.pop().expect("a file name");
        match last.as_str() {
            "main.rs" if parts.is_empty() && has_lib => continue,
            "lib.rs" | "main.rs" if parts.is_empty() => {}
            "mod.rs" => {}
            _ => parts.push(last.trim_end_matches(".rs").to_string()),
        }
        let text = std::fs::read_to_string(&file).expect("readable source file");
        out.insert(parts, (rel.display().to_string(), text));
    }
    out
}

/// The text without comments (a doc link is not an import) and test modules.
fn code_of(text: &str) -> String {
    let text = without_tests(text);
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].ends_with(':') && l[..i].matches('"').count() % 2 == 0 => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_child(modules: &Modules, of: &[String], name: &str) -> bool {
    let mut p = of.to_vec();
    p.push(name.to_string());
    modules.contains_key(&p)
}

/// `path` (as written in module `at`: `crate::…`, `super::…`, `self::…` or
/// a child's name) from the crate root; `None` for another crate's path.
fn absolute(modules: &Modules, at: &[String], path: &[String]) -> Option<Vec<String>> {
    let (first, rest) = path.split_first()?;
    let mut base = match first.as_str() {
        "crate" => Vec::new(),
        "self" => at.to_vec(),
        "super" => at[..at.len().checked_sub(1)?].to_vec(),
        name if is_child(modules, at, name) => return Some([at, path].concat()),
        _ => return None,
    };
    let mut rest = rest;
    while let Some(("super", more)) = rest.split_first().map(|(f, m)| (f.as_str(), m)) {
        base.pop();
        rest = more;
    }
    Some([base.as_slice(), rest].concat())
}

/// The names a module brings in with `use` (its own and its children may
/// name them): name → the path it stands for, as written.
fn imports(code: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut out = std::collections::BTreeMap::new();
    for rest in after(code, "use ") {
        for path in expand(rest) {
            match path.as_slice() {
                [.., name, last] if last == "self" => out.insert(name.clone(), path.clone()),
                [_, .., last] => out.insert(last.clone(), path.clone()),
                _ => None,
            };
        }
    }
    out
}

/// The module `path` (from the root) lands in: down through child modules,
/// and through a module's `use` to where a name comes from.
fn resolve(modules: &Modules, mut path: Vec<String>) -> Vec<String> {
    let mut depth = 0;
    let mut hops = 0;
    while depth < path.len() && hops < 16 {
        if is_child(modules, &path[..depth], &path[depth]) {
            depth += 1;
            continue;
        }
        let at = &path[..depth];
        let Some((_, text)) = modules.get(at) else {
            break;
        };
        let Some(from) = imports(&code_of(text)).remove(&path[depth]) else {
            break;
        };
        let Some(target) = absolute(modules, at, &from) else {
            break;
        };
        hops += 1;
        path = [target.as_slice(), &path[depth + 1..]].concat();
        depth = 0;
    }
    path.truncate(depth);
    path
}

/// Every module the source of module `me` names (`crate::…`, `$crate::…`,
/// `super::…`, `self::…`, its children by name), resolved.
fn module_references(modules: &Modules, me: &[String], text: &str) -> Vec<Vec<String>> {
    let code = code_of(text);
    let mut written: Vec<Vec<String>> = Vec::new();
    for prefix in ["crate::", "super::", "self::"] {
        for rest in after(&code, prefix) {
            let head = prefix.trim_end_matches("::").to_string();
            written.extend(
                expand(rest)
                    .into_iter()
                    .map(|p| std::iter::once(head.clone()).chain(p).collect::<Vec<_>>()),
            );
        }
    }
    let children: Vec<String> = modules
        .keys()
        .filter(|k| k.len() == me.len() + 1 && k.starts_with(me))
        .map(|k| k[me.len()].clone())
        .collect();
    for child in &children {
        for rest in after(&code, &format!("{child}::")) {
            let tails = expand(rest);
            if tails.is_empty() {
                written.push(vec![child.clone()]);
            }
            written.extend(
                tails
                    .into_iter()
                    .map(|t| std::iter::once(child.clone()).chain(t).collect()),
            );
        }
    }
    written
        .into_iter()
        .filter_map(|p| absolute(modules, me, &p))
        .map(|p| resolve(modules, p))
        .collect()
}

/// The circles of one crate: per folder ("room"), the sets of its members
/// (its files, and its sub-folders by their `mod.rs`) that import each other
/// round, each named with its imports. An import of something inside a
/// sibling sub-folder is an import of that sub-folder.
fn crate_circles(name: &str, modules: &Modules) -> Vec<String> {
    // member → member it uses (siblings of one room), with a file that does it.
    let mut edges: std::collections::BTreeMap<
        Vec<String>,
        std::collections::BTreeMap<Vec<String>, String>,
    > = Default::default();
    for (me, (file, text)) in modules {
        for target in module_references(modules, me, text) {
            let common = me.iter().zip(&target).take_while(|(a, b)| a == b).count();
            // A folder and what is in it may use each other; a file deeper
            // down is its own folder's member, not this room's.
            if common == me.len() || common == target.len() || common + 1 != me.len() {
                continue;
            }
            edges
                .entry(me[..=common].to_vec())
                .or_default()
                .entry(target[..=common].to_vec())
                .or_insert_with(|| file.clone());
        }
    }
    strongly_connected(&edges)
        .into_iter()
        .map(|circle| {
            let room = &circle[0][..circle[0].len() - 1];
            let room = if room.is_empty() {
                format!("{name}/src")
            } else {
                format!("{name}/src/{}", room.join("/"))
            };
            let names: Vec<&str> = circle.iter().map(|m| m.last().unwrap().as_str()).collect();
            let uses: Vec<String> = circle
                .iter()
                .flat_map(|a| {
                    edges[a]
                        .iter()
                        .filter(|(b, _)| circle.contains(b))
                        .map(move |(b, file)| {
                            format!("{} → {} ({file})", a.last().unwrap(), b.last().unwrap())
                        })
                })
                .collect();
            format!(
                "a circle in {room}: {}; {}",
                names.join(" ↔ "),
                uses.join(", ")
            )
        })
        .collect()
}

/// The strongly connected sets of more than one node (Tarjan's algorithm).
fn strongly_connected<V>(
    edges: &std::collections::BTreeMap<Vec<String>, std::collections::BTreeMap<Vec<String>, V>>,
) -> Vec<Vec<Vec<String>>> {
    struct State<'a> {
        index: std::collections::BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        out: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a, V>(
        n: &'a Vec<String>,
        edges: &'a std::collections::BTreeMap<
            Vec<String>,
            std::collections::BTreeMap<Vec<String>, V>,
        >,
        s: &mut State<'a>,
    ) -> usize {
        let i = s.index.len();
        s.index.insert(n, (i, i));
        s.stack.push(n);
        let mut low = i;
        for (next, _) in edges.get(n).into_iter().flatten() {
            match s.index.get(next) {
                None => low = low.min(visit(next, edges, s)),
                Some(&(j, _)) if s.stack.contains(&next) => low = low.min(j),
                Some(_) => {}
            }
        }
        s.index.insert(n, (i, low));
        if low == i {
            let at = s.stack.iter().position(|m| *m == n).expect("on the stack");
            let set: Vec<Vec<String>> = s.stack.drain(at..).cloned().collect();
            if set.len() > 1 {
                s.out.push(set);
            }
        }
        low
    }
    let mut s = State {
        index: Default::default(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for n in edges.keys() {
        if !s.index.contains_key(n) {
            visit(n, edges, &mut s);
        }
    }
    for set in &mut s.out {
        set.sort();
    }
    s.out
}

/// Every crate of the workspace with a `src/`: host, plugin-api, the
/// plugins, the bench, the fixtures; not the published plugin APIs kept
/// as they were released for the compatibility test (`tests/compat`).
fn workspace_crates() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    let mut dirs = vec![(String::new(), root.clone())];
    while let Some((name, dir)) = dirs.pop() {
        if dir.join("Cargo.toml").exists() && dir.join("src").is_dir() {
            out.push((name.clone(), dir.join("src")));
        }
        if name.split('/').count() >= 3 {
            continue;
        }
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            let skip = file.starts_with('.')
                || ["target", "node_modules", "src", "docs"].contains(&file.as_str())
                || (name == "tests" && file == "compat");
            if e.path().is_dir() && !skip {
                let sub = if name.is_empty() {
                    file
                } else {
                    format!("{name}/{file}")
                };
                dirs.push((sub, e.path()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let crates = workspace_crates();
    let names: Vec<&str> = crates.iter().map(|(n, _)| n.as_str()).collect();
    for needed in ["host", "plugin-api", "plugins/openapi", "plugins/mcp"] {
        assert!(
            names.contains(&needed),
            "no {needed} among {names:?}: is the walk broken?"
        );
    }
    let mut circles = Vec::new();
    for (name, src) in &crates {
        circles.extend(crate_circles(name, &crate_modules(src)));
    }
    assert!(
        circles.is_empty(),
        "{} import circles:\n{}",
        circles.len(),
        circles.join("\n")
    );
}

#[test]
fn the_circle_scan_sees_a_circle_through_supers_uses_and_re_exports() {
    let modules: Modules = [
        (vec![], "mod a; mod b; mod c; mod d;"),
        // a → b by `super::`, b → c by `crate::`, c → a through the root's `use`.
        (vec!["a"], "use super::b::X;"),
        (vec!["b"], "fn f() { crate::c::g() }"),
        (
            vec!["c"],
            "pub use crate::Y;\n// super::d::nothing: a comment is no import",
        ),
        (vec!["d"], "#[cfg(test)]\nmod tests { use crate::a::Z; }"),
    ]
    .into_iter()
    .map(|(p, t)| {
        let p: Vec<String> = p.into_iter().map(str::to_string).collect();
        (p.clone(), (format!("{}.rs", p.join("/")), t.to_string()))
    })
    .collect();
    let mut modules = modules;
    modules.get_mut(&vec![]).unwrap().1.push_str("\nuse a::Y;");
    let circles = crate_circles("k", &modules);
    assert_eq!(circles.len(), 1, "{circles:?}");
    assert!(
        circles[0].starts_with("a circle in k/src: a ↔ b ↔ c;"),
        "{circles:?}"
    );
    // A folder may use what is in it, and what is in it the folder.
    let tree: Modules = [
        (
            vec!["s".to_string()],
            (
                "s/mod.rs".to_string(),
                "pub use pg::Pool; mod pg;".to_string(),
            ),
        ),
        (
            vec!["s".to_string(), "pg".to_string()],
            ("s/pg.rs".to_string(), "use super::Config;".to_string()),
        ),
    ]
    .into_iter()
    .collect();
    assert!(crate_circles("k", &tree).is_empty());
}
