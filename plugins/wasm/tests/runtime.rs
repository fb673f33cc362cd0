//! The `wasm` source through the plugin ABI (the harness), against the test
//! component built for wf:source@1.0.0 (`components/guest-1.0.0.wasm`,
//! source in `guest/`): the frozen-WIT compat test, calls, traps, the CPU
//! deadline, the memory limit and every capability, denied then granted.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use serde_json::{Value, json};
use wf_plugin_api::testing::{Harness, TestSource, schema_problems};
use wf_plugin_api::{ErrorCode, SourceRequest};
use wf_source_wasm::WasmPlugin;

fn component() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/components/guest-1.0.0.wasm")
        .display()
        .to_string()
}

/// A source on `config` (with the component's path added) in its own data
/// directory, kept by the returned guard.
fn source(h: &Harness, config: Value) -> (TestSource, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config;
    config["path"] = json!(component());
    let src = h
        .source_in("guest", "wasm", config, dir.path().to_path_buf())
        .unwrap();
    (src, dir)
}

fn text(r: &wf_plugin_api::CallResult) -> String {
    r.content[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn status(src: &TestSource) -> Value {
    src.request(&SourceRequest::Status).await.unwrap()
}

/// The frozen-WIT compat test: a component built against 1.0.0 serves its
/// whole catalog, mapped as native plugins' are.
#[tokio::test]
async fn a_1_0_0_component_serves_its_catalog() {
    let h = Harness::start::<WasmPlugin>().unwrap();
    let (src, _dir) = source(&h, json!({}));
    let cat = src.catalog().await.unwrap();
    assert!(
        schema_problems(&cat).is_empty(),
        "{:?}",
        schema_problems(&cat)
    );
    let tools: Vec<&str> = cat.tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        tools.contains(&"echo") && tools.contains(&"add"),
        "{tools:?}"
    );
    assert_eq!(cat.node_specs.len(), 1);
    assert_eq!(cat.node_specs[0].name, "add");
    assert_eq!(cat.prompts[0].name, "greet");
    assert_eq!(cat.prompts[0].arguments[0].required, Some(true));
    assert_eq!(cat.resources[0].uri, "guest://readme");
    assert_eq!(cat.resource_templates[0].uri_template, "guest://item/{id}");
    let st = status(&src).await;
    assert_eq!(st["interface"], "wf:source/guest@1.0.0");
    assert_eq!(st["name"], "guest");
}

#[tokio::test]
async fn calls_nodes_resources_and_prompts() {
    let h = Harness::start::<WasmPlugin>().unwrap();
    let (src, _dir) = source(&h, json!({}));
    let r = src.call_tool("echo", json!({"text": "hi"})).await.unwrap();
    assert_eq!(text(&r), "hi");
    assert!(!r.is_error);
    assert_eq!(
        src.run_node("add", json!({"a": 2, "b": 3})).await.unwrap(),
        json!({"sum": 5})
    );
    let e = src.run_node("add", json!({"a": "x"})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidArguments);
    let res = src.read_resource("guest://readme").await.unwrap();
    assert_eq!(res.contents[0]["text"], "the test guest");
    let res = src.read_resource("guest://item/ab").await.unwrap();
    assert_eq!(res.contents[0]["blob"], "YWI=");
    let mut args = serde_json::Map::new();
    args.insert("who".into(), json!("Ada"));
    let p = src.get_prompt("greet", args).await.unwrap();
    assert_eq!(p.messages[0]["content"]["text"], "Say hello to Ada");
    let e = src.call_tool("nope", json!({})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    let r = src.call_tool("settings", json!({})).await.unwrap();
    assert_eq!(text(&r), "{}");
}

#[tokio::test]
async fn host_imports_reach_the_call() {
    let h = Harness::start::<WasmPlugin>().unwrap();
    let (src, _dir) = source(&h, json!({"settings": {"greeting": "hey"}}));
    let r = src.call_tool("settings", json!({})).await.unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&text(&r)).unwrap(),
        json!({"greeting": "hey"})
    );
    let r = src.call_tool("work", json!({})).await.unwrap();
    assert!(text(&r).starts_with("cancelled=false"), "{}", text(&r));
    assert_eq!(src.progress().len(), 2, "{:?}", src.progress());
    // Nobody to ask in the harness: the component reads `unsupported`.
    let r = src.call_tool("ask", json!({})).await.unwrap();
    assert!(text(&r).contains("Unsupported"), "{}", text(&r));
    src.answer_caller(Ok(json!({"action": "accept", "content": {"ok": true}})));
    let r = src.call_tool("ask", json!({})).await.unwrap();
    assert!(
        text(&r).contains("Accept") && text(&r).ends_with(r#"{"ok":true}"#),
        "{}",
        text(&r)
    );
    let r = src.call_tool("print", json!({})).await.unwrap();
    assert_eq!(text(&r), "printed");
}

#[tokio::test]
async fn a_trap_fails_only_its_call() {
    let h = Harness::start::<WasmPlugin>().unwrap();
    let (src, _dir) = source(&h, json!({}));
    let e = src.call_tool("trap", json!({})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Failed);
    assert!(e.message.contains("the component trapped"), "{}", e.message);
    assert_eq!(e.data, Some(json!({"stopped": "trap"})));
    assert_eq!(
        text(
            &src.call_tool("echo", json!({"text": "still"}))
                .await
                .unwrap()
        ),
        "still"
    );
    assert_eq!(status(&src).await["traps"], 1);
}

#[tokio::test]
async fn a_component_that_never_yields_is_stopped_at_its_deadline() {
    let h = Harness::start::<WasmPlugin>().unwrap();
    let (src, _dir) = source(&h, json!({"timeout_ms": 300}));
    let e = src.call_tool("spin", json!({})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Timeout);
    assert!(e.message.contains("timeout_ms = 300"), "{}", e.message);
    assert_eq!(e.data, Some(json!({"stopped": "deadline"})));
    assert_eq!(
        text(
            &src.call_tool("echo", json!({"text": "after"}))
                .await
                .unwrap()
        ),
        "after"
    );
    // The busy loop gave its thread back at every tick.
    assert!(h.recorded.lock().unwrap().blocked.is_empty());
}

#[tokio::test]
async fn a_component_that_allocates_without_bound_is_stopped_at_its_memory_limit() {
    let h = Harness::start::<WasmPlugin>().unwrap();
    let (src, _dir) = source(&h, json!({"memory_mb": 32}));
    let e = src.call_tool("hog", json!({})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::Failed);
    assert!(e.message.contains("memory_mb = 32"), "{}", e.message);
    assert_eq!(e.data, Some(json!({"stopped": "memory"})));
    assert_eq!(
        text(
            &src.call_tool("echo", json!({"text": "after"}))
                .await
                .unwrap()
        ),
        "after"
    );
    assert_eq!(status(&src).await["memory_limits"], 1);
}

#[tokio::test]
async fn a_result_over_its_bound_fails_cleanly() {
    let h = Harness::start::<WasmPlugin>().unwrap();
    let (src, _dir) = source(&h, json!({"max_result_bytes": 65536}));
    let e = src.call_tool("big", json!({"mb": "2"})).await.unwrap_err();
    assert!(
        e.message.contains("max_result_bytes = 65536"),
        "{}",
        e.message
    );
    assert_eq!(
        text(&src.call_tool("echo", json!({"text": "ok"})).await.unwrap()),
        "ok"
    );
}

#[tokio::test]
async fn files_and_environment_are_denied_unless_granted() {
    let h = Harness::start::<WasmPlugin>().unwrap();
    let shared = tempfile::tempdir().unwrap();
    std::fs::write(shared.path().join("note.txt"), "granted").unwrap();
    // SAFETY: this test's own variable, read by nothing else.
    unsafe { std::env::set_var("WF_WASM_TEST_SECRET", "s3cret") };

    let (src, _dir) = source(&h, json!({}));
    let note = format!("{}/note.txt", shared.path().display());
    let r = src
        .call_tool("read_file", json!({"path": note}))
        .await
        .unwrap();
    assert!(r.is_error, "read without a grant: {}", text(&r));
    let r = src
        .call_tool("read_file", json!({"path": "/etc/passwd"}))
        .await
        .unwrap();
    assert!(r.is_error, "{}", text(&r));
    let r = src
        .call_tool("env", json!({"name": "WF_WASM_TEST_SECRET"}))
        .await
        .unwrap();
    assert_eq!(text(&r), "WF_WASM_TEST_SECRET is not set");
    let r = src.call_tool("env", json!({"name": "PATH"})).await.unwrap();
    assert_eq!(text(&r), "PATH is not set");

    let host = shared.path().display().to_string();
    let (ro, _d1) = source(
        &h,
        json!({"dirs": [{"host": host, "guest": "/data"}], "env": ["WF_WASM_TEST_SECRET"]}),
    );
    assert_eq!(
        text(
            &ro.call_tool("read_file", json!({"path": "/data/note.txt"}))
                .await
                .unwrap()
        ),
        "granted"
    );
    let r = ro
        .call_tool("write_file", json!({"path": "/data/new.txt"}))
        .await
        .unwrap();
    assert!(r.is_error, "a read-only grant wrote: {}", text(&r));
    assert!(!shared.path().join("new.txt").exists());
    assert_eq!(
        text(
            &ro.call_tool("env", json!({"name": "WF_WASM_TEST_SECRET"}))
                .await
                .unwrap()
        ),
        "s3cret"
    );
    let r = ro
        .call_tool("read_file", json!({"path": "/data/../../etc/passwd"}))
        .await
        .unwrap();
    assert!(r.is_error, "escaped its directory: {}", text(&r));

    let (rw, _d2) = source(
        &h,
        json!({"dirs": [{"host": host, "guest": "/data", "mode": "rw"}]}),
    );
    assert_eq!(
        text(
            &rw.call_tool("write_file", json!({"path": "/data/new.txt"}))
                .await
                .unwrap()
        ),
        "written"
    );
    assert_eq!(
        std::fs::read_to_string(shared.path().join("new.txt")).unwrap(),
        "written by the guest"
    );
}

/// A one-request-at-a-time HTTP server on 127.0.0.1 answering 200.
async fn http_server() -> (u16, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        for _ in 0..8 {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
                .await;
        }
    });
    (port, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outgoing_http_is_denied_unless_the_host_is_allowed() {
    let h = Harness::start::<WasmPlugin>().unwrap();
    let (port, server) = http_server().await;
    let url = format!("http://127.0.0.1:{port}/x");
    let (denied, _d1) = source(&h, json!({}));
    let r = denied
        .call_tool("fetch", json!({"url": url}))
        .await
        .unwrap();
    assert!(
        r.is_error && text(&r).contains("HttpRequestDenied"),
        "{}",
        text(&r)
    );
    let (other, _d2) = source(
        &h,
        json!({"allow_hosts": [format!("127.0.0.1:{}", port.wrapping_add(1))]}),
    );
    let r = other.call_tool("fetch", json!({"url": url})).await.unwrap();
    assert!(
        r.is_error && text(&r).contains("HttpRequestDenied"),
        "another port: {}",
        text(&r)
    );
    let (granted, _d3) = source(&h, json!({"allow_hosts": [format!("127.0.0.1:{port}")]}));
    let r = granted
        .call_tool("fetch", json!({"url": url}))
        .await
        .unwrap();
    assert_eq!(text(&r), "status 200");
    server.abort();
}

#[tokio::test]
async fn compiled_code_is_cached_by_hash_and_pins_are_checked() {
    let h = Harness::start::<WasmPlugin>().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = json!({"path": component()});
    let first = h
        .source_in("guest", "wasm", config.clone(), dir.path().into())
        .unwrap();
    first.catalog().await.unwrap();
    assert_eq!(status(&first).await["compiled"], "now");
    let compiled: Vec<_> = std::fs::read_dir(dir.path().join("compiled"))
        .unwrap()
        .collect();
    assert_eq!(compiled.len(), 1);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let f = compiled[0].as_ref().unwrap().path();
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let second = h
        .source_in("guest", "wasm", config.clone(), dir.path().into())
        .unwrap();
    second.catalog().await.unwrap();
    let st = status(&second).await;
    assert_eq!(st["compiled"], "cache");
    let sha = st["sha256"].as_str().unwrap().to_string();

    let mut pinned = config.clone();
    pinned["sha256"] = json!(sha);
    let ok = h
        .source_in("guest", "wasm", pinned, dir.path().into())
        .unwrap();
    ok.catalog().await.unwrap();
    let mut wrong = config;
    wrong["sha256"] = json!("0".repeat(64));
    let bad = h
        .source_in("guest", "wasm", wrong, dir.path().into())
        .unwrap();
    let e = bad.catalog().await.unwrap_err();
    assert!(e.message.contains("sha256 mismatch"), "{}", e.message);
}

#[tokio::test]
async fn bad_settings_and_files_are_refused_with_their_key() {
    let h = Harness::start::<WasmPlugin>().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let e = h
        .source_in(
            "x",
            "wasm",
            json!({"path": "/nonexistent/x.wasm"}),
            dir.path().into(),
        )
        .err()
        .unwrap();
    assert!(e.message.contains("sources.x.path"), "{}", e.message);
    let junk = dir.path().join("junk.wasm");
    std::fs::write(&junk, b"not wasm").unwrap();
    let src = h
        .source_in(
            "junk",
            "wasm",
            json!({"path": junk.display().to_string()}),
            dir.path().into(),
        )
        .unwrap();
    let e = src.catalog().await.unwrap_err();
    assert!(
        e.message.contains("not a usable component"),
        "{}",
        e.message
    );
}

/// With one instance allowed, calls at once wait their turn (none is
/// refused, none finds the instance pool empty), and a trap among them
/// fails only its own call.
#[tokio::test]
async fn calls_at_once_share_one_instance_and_a_trap_fails_only_its_own() {
    let h = Harness::start::<WasmPlugin>().unwrap();
    let (src, _dir) = source(&h, json!({"max_instances": 1}));
    for round in 0..3 {
        let (a, b, c, d) = tokio::join!(
            src.call_tool("echo", json!({"text": "a"})),
            src.call_tool("echo", json!({"text": "b"})),
            src.call_tool("trap", json!({})),
            src.call_tool("echo", json!({"text": "d"})),
        );
        assert_eq!(text(&a.unwrap()), "a", "round {round}");
        assert_eq!(text(&b.unwrap()), "b", "round {round}");
        assert!(c.unwrap_err().message.contains("the component trapped"));
        assert_eq!(text(&d.unwrap()), "d", "round {round}");
    }
    let st = status(&src).await;
    assert_eq!(st["calls"], 12, "{st}");
    assert_eq!(st["traps"], 3, "{st}");
    assert_eq!(st["busy"], 0, "{st}");
}

/// The smallest component (`components/echo-min-1.0.0.wasm`, source in
/// `echo-min/`; the benchmark's baseline): no_std, one core module, and it
/// imports nothing but wf:source's types — no WASI, no host functions. It
/// serves its one tool, one instance after another in one pool slot, and an
/// unknown name fails with `not-found`.
#[tokio::test]
async fn the_smallest_component_imports_no_wasi_and_echoes() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/components/echo-min-1.0.0.wasm");
    let engine = wasmtime::Engine::default();
    let component = wasmtime::component::Component::from_file(&engine, &path).unwrap();
    let imports: Vec<String> = component
        .component_type()
        .imports(&engine)
        .map(|(name, _)| name.to_string())
        .collect();
    assert_eq!(imports, ["wf:source/types@1.0.0"], "{imports:?}");

    let h = Harness::start::<WasmPlugin>().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let src = h
        .source_in(
            "echomin",
            "wasm",
            json!({"path": path, "max_instances": 1}),
            dir.path().to_path_buf(),
        )
        .unwrap();
    let cat = src.catalog().await.unwrap();
    let tools: Vec<&str> = cat.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["echo"]);
    assert!(schema_problems(&cat).is_empty());
    for i in 0..50 {
        let r = src
            .call_tool("echo", json!({"text": format!("hi {i}")}))
            .await
            .unwrap();
        assert_eq!(text(&r), format!("hi {i}"));
    }
    let e = src.call_tool("nope", json!({})).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound, "{e:?}");
    let st = status(&src).await;
    assert_eq!(st["name"], "echo-min");
    assert_eq!(st["interface"], "wf:source/guest@1.0.0");
    assert_eq!(st["traps"], 0, "{st}");
}
