//! The screening as it was before its needles were searched in one pass
//! (issue #55), kept to check that today's finds exactly what it found.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;
use wf_plugin_api::{Catalog, Tool};

use super::*;

/// Screens every tool of one source's catalog, as before issue #55.
pub fn scan(catalog: &Catalog, others: &Others) -> Vec<Finding> {
    let own: BTreeSet<&str> = catalog.tools.iter().map(|t| t.name.as_str()).collect();
    let norm = norm_length(&catalog.tools);
    let skeletons: HashMap<String, &str> = own
        .iter()
        .copied()
        .chain(others.tools.iter().map(String::as_str))
        .map(|n| (skeleton(n), n))
        .collect();
    let mut out = Vec::new();
    for tool in &catalog.tools {
        let before = out.len();
        scan_name(tool, &skeletons, &mut out);
        for (field, text) in texts(tool) {
            scan_text(&tool.name, &field, &text, &own, others, &mut out);
        }
        let len = tool.description.as_deref().map_or(0, |d| d.chars().count());
        if len > norm {
            out.push(Finding {
                name: tool.name.clone(),
                rule: "long_description",
                field: "description".into(),
                span: [0, len],
                excerpt: format!("{len} characters; this source's norm allows {norm}"),
            });
        }
        // One finding per rule and field is enough to act on.
        let mut seen = BTreeSet::new();
        let mut i = before;
        while i < out.len() {
            if seen.insert((out[i].rule, out[i].field.clone())) {
                i += 1;
            } else {
                out.remove(i);
            }
        }
    }
    out
}

/// The texts of a tool the model reads: title, description, and every
/// `description`/`title` string inside its input schema.
fn texts(tool: &Tool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(Value::String(t)) = tool.extra.get("title") {
        out.push(("title".into(), t.clone()));
    }
    if let Some(d) = &tool.description {
        out.push(("description".into(), d.clone()));
    }
    schema_texts(&tool.input_schema, "inputSchema", 0, &mut out);
    out
}

fn schema_texts(v: &Value, path: &str, depth: usize, out: &mut Vec<(String, String)>) {
    if depth > 32 {
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let p = format!("{path}.{k}");
                match (k.as_str(), v) {
                    ("description" | "title", Value::String(s)) => out.push((p, s.clone())),
                    _ => schema_texts(v, &p, depth + 1, out),
                }
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                schema_texts(v, &format!("{path}[{i}]"), depth + 1, out);
            }
        }
        _ => {}
    }
}

fn scan_text(
    tool: &str,
    field: &str,
    text: &str,
    own: &BTreeSet<&str>,
    others: &Others,
    out: &mut Vec<Finding>,
) {
    let chars: Vec<char> = text.chars().collect();
    let mut push = |rule: &'static str, span: [usize; 2], excerpt: String| {
        out.push(Finding {
            name: tool.into(),
            rule,
            field: field.into(),
            span,
            excerpt,
        });
    };
    let show = |[a, b]: [usize; 2]| -> String {
        chars[a.min(chars.len())..b.min(chars.len())]
            .iter()
            .map(|c| {
                if is_invisible(*c) || is_bidi(*c) {
                    format!("U+{:04X}", *c as u32)
                } else {
                    c.to_string()
                }
            })
            .collect()
    };
    for (rule, test) in [
        ("invisible_unicode", is_invisible as fn(char) -> bool),
        ("bidi_control", is_bidi),
    ] {
        if let Some(start) = chars.iter().position(|c| test(*c)) {
            let end = chars[start..]
                .iter()
                .position(|c| !test(*c))
                .map_or(chars.len(), |n| start + n);
            push(rule, [start, end], show([start, end]));
        }
    }
    let (norm, at) = normalized(text);
    let span = |(a, b): (usize, usize)| -> [usize; 2] {
        let start = at.get(a).copied().unwrap_or(0);
        let end = b
            .checked_sub(1)
            .and_then(|i| at.get(i))
            .map_or(start, |e| e + 1);
        [start, end]
    };
    for (rule, phrases) in [
        ("override_instructions", OVERRIDE),
        ("conceal_from_user", CONCEAL),
        ("hidden_block", BLOCKS),
    ] {
        if let Some(hit) = phrases.iter().find_map(|p| find_word(&norm, p)) {
            let s = span(hit);
            push(rule, s, show(s));
        }
    }
    // A secret path counts when a verb asks for it nearby ("read ~/.ssh/id_rsa"),
    // not when a description says such paths are refused.
    let asked = |(a, b): (usize, usize)| {
        let window: String = norm
            .chars()
            .skip(a.saturating_sub(80))
            .take(b - a.saturating_sub(80) + 40)
            .collect();
        SECRET_VERBS.iter().any(|v| find_word(&window, v).is_some())
    };
    let secret = SECRET_PATHS
        .iter()
        .find_map(|p| find_word(&norm, p).filter(|hit| asked(*hit)))
        .or_else(|| PASS_ALONG.iter().find_map(|p| find_word(&norm, p)));
    if let Some(hit) = secret {
        let s = span(hit);
        push("sensitive_read", s, show(s));
    }
    // Another source's tool named in this description. Only distinctive
    // names count (`browser_navigate`, `send-email`), never a common word
    // like `search` that many servers use, nor one this source has itself.
    let named = others
        .tools
        .iter()
        .filter(|n| distinctive(n) && !own.contains(n.as_str()))
        .find_map(|n| find_word(&norm, &n.to_lowercase()).map(|hit| (n, hit)));
    if let Some((_, hit)) = named {
        let s = span(hit);
        push("names_other_source_tool", s, show(s));
    }
    // Steering away from other tools: a strong phrase alone, or a weak one
    // ("instead of") followed closely by another source's tool or name.
    let strong = STRONG_PREFER.iter().find_map(|p| find_word(&norm, p));
    let weak = || {
        WEAK_PREFER.iter().find_map(|p| {
            let mut from = 0;
            while let Some((a, b)) = find_word(&norm[from..], p).map(|(a, b)| {
                let off = norm[..from].chars().count();
                (a + off, b + off)
            }) {
                let after: String = norm.chars().skip(b).take(48).collect();
                let names_other = others
                    .tools
                    .iter()
                    .filter(|n| distinctive(n) && !own.contains(n.as_str()))
                    .chain(others.sources.iter().filter(|s| s.len() >= 4))
                    .any(|n| find_word(&after, &n.to_lowercase()).is_some());
                if names_other {
                    return Some((a, b));
                }
                from = norm.char_indices().nth(b).map_or(norm.len(), |(i, _)| i);
            }
            None
        })
    };
    if let Some(hit) = strong.or_else(weak) {
        let s = span(hit);
        push("prefers_over_other_tool", s, show(s));
    }
}
