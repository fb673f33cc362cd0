//! The layering rule of docs/architecture.md, checked on the source: each
//! top-level module of wf-host refers (`crate::…`) only to modules below it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Bottom to top; a module may use only modules of a lower layer.
const LAYERS: &[&[&str]] = &[
    &["clock", "secrets", "status", "text", "telemetry"],
    &["store", "config"],
    &["plugins"],
    &["sources"],
    &["catalog"],
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
            // lib.rs and main.rs sit above everything.
            assert!(
                module == "lib" || module == "main",
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
