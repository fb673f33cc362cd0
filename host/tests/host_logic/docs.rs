//! The documents, checked on their text: no page (nor the changelog) names an issue number (a
//! reader cannot follow one; a page is named for its subject), and every
//! relative link, anchor included, lands on a file and a heading that exist.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("readable docs dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            markdown_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
}

/// Every page of the book, and the README that links into it.
fn documents() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    markdown_files(&repo().join("docs"), &mut files);
    files.sort();
    files
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn shown(p: &Path) -> String {
    p.strip_prefix(repo())
        .unwrap_or(p)
        .display()
        .to_string()
        .replace("host/../", "")
}

/// The text outside fenced code blocks, line by line (numbered from 1).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

#[test]
fn no_document_names_an_issue_number() {
    // "issue 32", "Issue #55", "issue-56", "(#31)"; not an HTML entity (`&#123;`)
    // nor a URL's fragment.
    let pattern = Regex::new(r"(?i)\bissues?[ \-]#?[0-9]+|(?:^|[^&\w/#])#[0-9]+\b").unwrap();
    let mut found = Vec::new();
    let changelog = repo().join("CHANGELOG.md");
    for file in documents().into_iter().chain([changelog]) {
        for (n, line) in read(&file).lines().enumerate() {
            if let Some(m) = pattern.find(line) {
                found.push(format!("{}:{}: {}", shown(&file), n + 1, m.as_str().trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "documents name issue numbers (say what the change is instead):\n{}",
        found.join("\n")
    );
}

/// A heading's anchor as mdBook and GitHub make it: lower case, spaces to
/// `-`, everything but letters, digits, `-` and `_` dropped; repeats get `-1`, `-2`….
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let Some(title) = line.strip_prefix('#').map(|t| t.trim_start_matches('#')) else {
            continue;
        };
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_lowercase().next()?),
                _ => None,
            })
            .collect();
        let n = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    // Explicit anchors (`<a id="…">`, `{#id}`).
    let explicit = Regex::new(r#"<a (?:id|name)="([^"]+)"|\{#([A-Za-z0-9_-]+)\}"#).unwrap();
    for c in explicit.captures_iter(text) {
        if let Some(m) = c.get(1).or_else(|| c.get(2)) {
            out.insert(m.as_str().to_string());
        }
    }
    out
}

#[test]
fn every_relative_link_lands() {
    // `[text](target)`; the target ends at the first space or `)`.
    let link = Regex::new(r"\]\(([^)\s]+)(?:\s+[^)]*)?\)").unwrap();
    let inline_code = Regex::new(r"`[^`]*`").unwrap();
    let mut broken = Vec::new();
    for file in documents() {
        let text = read(&file);
        for (n, line) in prose_lines(&text) {
            let line = inline_code.replace_all(line, "");
            for c in link.captures_iter(&line) {
                let target = &c[1];
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target, None),
                };
                let dest = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                let at = format!("{}:{n}: {target}", shown(&file));
                if !dest.exists() {
                    broken.push(format!("{at} (no such file)"));
                    continue;
                }
                if let Some(anchor) = anchor
                    && dest.extension().is_some_and(|x| x == "md")
                    && !anchors(&read(&dest)).contains(anchor)
                {
                    broken.push(format!("{at} (no such heading)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_follow_headings() {
    let text = "# A page\n## Tool pins and screening\n```\n# not a heading\n```\n## Tool pins and screening\n### `wf serve` (HTTP)\n";
    let got = anchors(text);
    assert!(got.contains("a-page"));
    assert!(got.contains("tool-pins-and-screening"));
    assert!(got.contains("tool-pins-and-screening-1"));
    assert!(got.contains("wf-serve-http"));
    assert!(!got.contains("not-a-heading"));
}
