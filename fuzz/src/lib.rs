//! wf's fuzz targets: each takes arbitrary bytes, feeds them to one of wf's
//! parsers the way the host (or a plugin) does, and checks what must hold for
//! any input. A panic, an abort or a failed check is a finding. Two drivers
//! run these same functions: libFuzzer (`cargo +nightly fuzz run <target>`,
//! fuzz_targets/) and the stable smoke test (tests/smoke.rs). See
//! docs/fuzzing.md.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use serde_json::Value;
use wf_host::catalog::Snapshot;
use wf_host::config::{LoadedConfig, check_source_name};
use wf_host::surfaces::proxy::{NameRules, Projection, is_client_safe};
use wf_host::workflow::{PlannerCatalog, Workflow, validate};
use wf_plugin_api::{
    CallResult, Catalog, ErrorCode, Event, GetPromptResult, Manifest, PluginError, Prompt,
    ReadResourceResult, Resource, SessionInfo, SourceRequest, Tool,
};

mod abi;
mod http;

pub use http::http;

/// Keeps plugin code linked in from installing its log forwarder (and its
/// panic hook): a fuzzer must see every panic as it happens.
fn quiet() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let _ = tracing::subscriber::set_global_default(tracing::subscriber::NoSubscriber::new());
    });
}

/// A scratch directory of this process (config files must be files).
fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("wf-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    })
}

/// The config loader: the first byte picks the file type (TOML, JSON — a
/// Claude Desktop `mcpServers` file is JSON), the rest is the file. Any error
/// is the promised one line; a config that loads yields its sources (the
/// `mcpServers` conversion) or one-line errors again.
pub fn config(data: &[u8]) {
    let Some((&kind, text)) = data.split_first() else {
        return;
    };
    let ext = match kind % 3 {
        0 => "toml",
        1 => "json",
        _ => "JSON",
    };
    let path = scratch().join(format!("config.{ext}"));
    std::fs::write(&path, text).expect("write scratch config");
    match LoadedConfig::load(&path) {
        Err(e) => one_line("config error", &e.to_string()),
        Ok(loaded) => match loaded.sources() {
            Err(e) => one_line("config error", &e.to_string()),
            Ok(sources) => {
                for name in sources.keys() {
                    assert!(check_source_name(name).is_ok(), "accepted source {name:?}");
                }
            }
        },
    }
}

fn one_line(what: &str, message: &str) {
    assert!(
        !message.contains('\n') && !message.contains('\r'),
        "{what} is not one line: {message:?}"
    );
}

/// wf.std's real catalog, as the planner sees it (fetched through the ABI).
fn std_catalog() -> &'static PlannerCatalog {
    static CATALOG: OnceLock<PlannerCatalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let text = abi::request(r#"{"op":"catalog"}"#).expect("wf.std catalog");
        let catalog: Catalog = serde_json::from_str(&text).expect("wf.std catalog JSON");
        PlannerCatalog::from_snapshot(&Snapshot {
            sources: vec![("wf.std".into(), Arc::new(catalog))],
        })
    })
}

/// The workflow document parser and validator, against wf.std's catalog.
pub fn workflow(data: &[u8]) {
    quiet();
    let Ok(doc) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Ok(wf) = Workflow::from_value(&doc) else {
        return;
    };
    // Every problem has a kind (a `ProblemKind`, by type) and a message.
    for p in validate(&wf, std_catalog()) {
        assert!(!p.message.is_empty(), "{p:?}");
    }
}

/// The plugin side of the ABI: raw request text through the real export
/// glue (decode, dispatch, encode) into wf.std. Every answer is JSON; every
/// error is an encoded `PluginError`; an unknown `op` is `unsupported`.
pub fn source_request(data: &[u8]) {
    quiet();
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let decoded = serde_json::from_str::<SourceRequest>(text);
    // wf.std.sleep would only measure the clock.
    if let Ok(SourceRequest::CallTool { name, .. } | SourceRequest::RunNode { name, .. }) = &decoded
        && name == "sleep"
    {
        return;
    }
    match abi::request(text) {
        Ok(reply) => {
            assert!(decoded.is_ok(), "answered an undecodable request: {text:?}");
            serde_json::from_str::<Value>(&reply).expect("a reply is JSON");
        }
        Err(error) => {
            let e: PluginError = serde_json::from_str(&error).unwrap_or_else(|_| {
                panic!("an error that is not an encoded PluginError: {error:?}")
            });
            match decoded {
                Ok(SourceRequest::Unknown) => assert_eq!(e.code, ErrorCode::Unsupported, "{e}"),
                Err(_) => assert_eq!(e.code, ErrorCode::InvalidArguments, "{e}"),
                Ok(_) => assert_ne!(e.code, ErrorCode::Panicked, "wf.std panicked: {e}"),
            }
        }
    }
}

/// The host side of the ABI: a plugin's reply text decoded as each reply the
/// host reads, and a decoded catalog carried on into the planner catalog and
/// the proxy projection, as discovery does.
pub fn plugin_reply(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let e = PluginError::from_json(text);
    let _ = e.to_json();
    let _ = serde_json::from_str::<Manifest>(text);
    let _ = serde_json::from_str::<SessionInfo>(text);
    let _ = serde_json::from_str::<ReadResourceResult>(text);
    let _ = serde_json::from_str::<GetPromptResult>(text);
    let _ = serde_json::from_str::<Vec<Resource>>(text);
    let _ = serde_json::from_str::<Vec<Prompt>>(text);
    let _ = serde_json::from_str::<Event>(text);
    if let Ok(r) = serde_json::from_str::<CallResult>(text) {
        let _ = r.into_node_output();
    }
    if let Ok(catalog) = serde_json::from_str::<Catalog>(text) {
        let _ = wf_plugin_api::testing::schema_problems(&catalog);
        let snapshot = Snapshot {
            sources: vec![("src".into(), Arc::new(catalog))],
        };
        let _ = PlannerCatalog::from_snapshot(&snapshot);
        check_projection(&snapshot, NameRules { max_len: 48 });
    }
}

/// The name projection: lines of `source<TAB>t|p|r<TAB>name` build a
/// snapshot (sources the host would refuse are left out; the first byte sets
/// the length limit within the host's clamp). Every tool and prompt name is
/// client-safe, within the limit, unique, and routes back to its capability.
pub fn projection(data: &[u8]) {
    let Some((&len, rest)) = data.split_first() else {
        return;
    };
    let max_len = 16 + usize::from(len) % 49;
    let text = String::from_utf8_lossy(rest);
    let mut sources: BTreeMap<String, Catalog> = BTreeMap::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, '\t');
        let (Some(source), Some(kind), Some(name)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if check_source_name(source).is_err() {
            continue;
        }
        let cat = sources.entry(source.to_string()).or_default();
        match kind {
            "t" => cat.tools.push(Tool::new(name, "", serde_json::json!({}))),
            "p" => cat.prompts.push(Prompt::new(name, "")),
            _ => cat
                .resources
                .push(Resource::new(name, name, "", "text/plain")),
        }
    }
    let snapshot = Snapshot {
        sources: sources.into_iter().map(|(k, v)| (k, Arc::new(v))).collect(),
    };
    check_projection(&snapshot, NameRules { max_len });
}

fn check_projection(snapshot: &Snapshot, rules: NameRules) {
    let p = Projection::build(snapshot, rules);
    let wanted_tools: usize = snapshot.sources.iter().map(|(_, c)| c.tools.len()).sum();
    let wanted_prompts: usize = snapshot.sources.iter().map(|(_, c)| c.prompts.len()).sum();
    assert_eq!(p.tools.len(), wanted_tools, "a tool was lost");
    assert_eq!(p.prompts.len(), wanted_prompts, "a prompt was lost");
    let mut seen = HashSet::new();
    for t in &p.tools {
        assert!(
            is_client_safe(&t.name),
            "tool name not client-safe: {:?}",
            t.name
        );
        assert!(
            t.name.len() <= rules.max_len,
            "tool name too long: {:?}",
            t.name
        );
        assert!(seen.insert(t.name.clone()), "tool name twice: {:?}", t.name);
        let back = p.tool(&t.name).expect("a projected tool routes back");
        assert_eq!((&back.source, &back.original), (&t.source, &t.original));
    }
    let mut seen = HashSet::new();
    for pr in &p.prompts {
        assert!(
            is_client_safe(&pr.name),
            "prompt name not client-safe: {:?}",
            pr.name
        );
        assert!(
            pr.name.len() <= rules.max_len,
            "prompt name too long: {:?}",
            pr.name
        );
        assert!(
            seen.insert(pr.name.clone()),
            "prompt name twice: {:?}",
            pr.name
        );
        let back = p.prompt(&pr.name).expect("a projected prompt routes back");
        assert_eq!((&back.source, &back.original), (&pr.source, &pr.original));
    }
    let mut seen = HashSet::new();
    for r in &p.resources {
        assert!(
            seen.insert(r.name.clone()),
            "resource URI twice: {:?}",
            r.name
        );
        let route = p.resource_route(&r.name).expect("a resource routes back");
        assert_eq!((&route.source, &route.uri), (&r.source, &r.original));
    }
}
