//! The plugin through the real ABI (the harness) against real HTTP servers
//! (axum on loopback): security schemes per operation, per-operation
//! servers, external `$ref`s within the origin, the spec fetched with
//! credentials, form and multipart bodies, array and XML answers, and the
//! periodic refetch.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};
use wf_plugin_api::testing::{Harness, schema_problems};
use wf_source_openapi::OpenApiPlugin;

const SECRET: &str = "s3cr3t-token-456";

/// A server answering documents from `docs` (path → text) and echoing
/// every other request; `private` paths need the bearer token.
#[derive(Clone, Default)]
struct Server {
    docs: Arc<Mutex<BTreeMap<String, String>>>,
    private: Arc<Mutex<Vec<String>>>,
    hits: Arc<Mutex<Vec<Value>>>,
}

impl Server {
    async fn start(&self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let me = self.clone();
        let app = axum::Router::new().fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
                let me = me.clone();
                async move { me.handle(method, uri, headers, body) }
            },
        );
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        base
    }

    fn doc(&self, path: &str, doc: Value) {
        self.docs
            .lock()
            .unwrap()
            .insert(path.into(), doc.to_string());
    }

    fn hits(&self) -> Vec<Value> {
        self.hits.lock().unwrap().clone()
    }

    fn handle(&self, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
        let header = |k: &str| headers.get(k).map(|v| v.to_str().unwrap().to_string());
        let auth = header("authorization");
        self.hits.lock().unwrap().push(json!({
            "method": method.as_str(), "path": uri.path(), "query": uri.query(), "auth": auth,
            "key": header("x-key"),
        }));
        let path = uri.path().to_string();
        if self.private.lock().unwrap().contains(&path)
            && auth.as_deref() != Some(&format!("Bearer {SECRET}"))
        {
            return (StatusCode::UNAUTHORIZED, "a bearer token is required").into_response();
        }
        if let Some(doc) = self.docs.lock().unwrap().get(&path) {
            return ([("content-type", "application/json")], doc.clone()).into_response();
        }
        match path.as_str() {
            "/list" => axum::Json(json!([{"id": 1}, {"id": 2}])).into_response(),
            "/xml" => (
                [("content-type", "application/xml")],
                "<pet><name>Rex</name></pet>",
            )
                .into_response(),
            _ => axum::Json(json!({
                "path": path, "query": uri.query(), "auth": auth,
                "content_type": header("content-type"),
                "body": String::from_utf8_lossy(&body),
            }))
            .into_response(),
        }
    }
}

fn op(id: &str) -> Value {
    json!({"operationId": id, "responses": {"200": {"description": "ok"}}})
}

#[tokio::test]
async fn credentials_go_only_to_operations_that_need_them() {
    let server = Server::default();
    let base = server.start().await;
    let mut secured = op("secured");
    secured["security"] = json!([{"bearerAuth": []}]);
    let mut open = op("open");
    open["security"] = json!([]);
    let mut optional = op("optional");
    optional["security"] = json!([{}, {"bearerAuth": []}]);
    server.doc(
        "/openapi.json",
        json!({
            "openapi": "3.1.0", "info": {"title": "s", "version": "1"}, "servers": [{"url": base}],
            "security": [{"bearerAuth": []}],
            "components": {"securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer"},
                "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
            }},
            "paths": {
                "/secured": {"get": secured}, "/open": {"get": open},
                "/optional": {"get": optional}, "/inherits": {"get": op("inherits")},
            },
        }),
    );
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let src = h
        .source(
            "api",
            "openapi",
            json!({"spec": format!("{base}/openapi.json"), "auth": {"type": "bearer", "token": SECRET}}),
        )
        .unwrap();
    src.catalog().await.unwrap();
    let bearer = Some(format!("Bearer {SECRET}"));
    for (tool, expect) in [
        ("secured", bearer.clone()),
        ("inherits", bearer.clone()),
        ("optional", bearer.clone()),
        ("open", None),
    ] {
        let r = src.call_tool(tool, json!({})).await.unwrap();
        assert!(!r.is_error, "{tool}: {:?}", r.content);
        let got = r.structured_content.unwrap()["auth"]
            .as_str()
            .map(str::to_string);
        assert_eq!(got, expect, "{tool}");
    }
    let status: Value = src
        .request(&wf_plugin_api::SourceRequest::Status)
        .await
        .unwrap();
    assert_eq!(status["operations_with_credentials"], 3, "{status}");
    assert_eq!(
        status["security_schemes"]["key"], "apiKey (header X-Key)",
        "{status}"
    );

    // An API key: only the operation whose scheme takes that key gets it.
    let mut keyed = op("keyed");
    keyed["security"] = json!([{"key": []}]);
    server.doc(
        "/keyed.json",
        json!({
            "openapi": "3.1.0", "info": {"title": "k", "version": "1"}, "servers": [{"url": base}],
            "components": {"securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer"},
                "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
            }},
            "paths": {"/keyed": {"get": keyed}, "/secured": {"get": {"operationId": "secured",
                "security": [{"bearerAuth": []}], "responses": {"200": {"description": "ok"}}}}},
        }),
    );
    let src = h
        .source(
            "keyed",
            "openapi",
            json!({"spec": format!("{base}/keyed.json"),
                   "auth": {"type": "api_key", "in": "header", "name": "x-key", "value": SECRET}}),
        )
        .unwrap();
    src.catalog().await.unwrap();
    for (tool, sent) in [("keyed", true), ("secured", false)] {
        let r = src.call_tool(tool, json!({})).await.unwrap();
        let hit = server.hits().last().cloned().unwrap();
        assert_eq!(hit["key"].as_str() == Some(SECRET), sent, "{tool}: {hit}");
        assert!(!r.is_error);
    }
    let status: Value = src
        .request(&wf_plugin_api::SourceRequest::Status)
        .await
        .unwrap();
    assert_eq!(
        status["operations_wanting_other_credentials"], 1,
        "{status}"
    );

    // A document that says nothing about security: every operation gets them.
    server.doc(
        "/plain.json",
        json!({"openapi": "3.0.3", "info": {"title": "p", "version": "1"}, "servers": [{"url": base}],
               "paths": {"/plain": {"get": op("plain")}}}),
    );
    let src = h
        .source(
            "plain",
            "openapi",
            json!({"spec": format!("{base}/plain.json"), "auth": {"type": "bearer", "token": SECRET}}),
        )
        .unwrap();
    src.catalog().await.unwrap();
    let r = src.call_tool("plain", json!({})).await.unwrap();
    assert_eq!(r.structured_content.unwrap()["auth"], json!(bearer));
}

#[tokio::test]
async fn operation_and_path_servers_override_the_document_server() {
    let (main, other) = (Server::default(), Server::default());
    let (base, other_base) = (main.start().await, other.start().await);
    let mut own = op("own");
    own["servers"] = json!([{"url": "{host}/v2", "variables": {"host": {"default": other_base}}}]);
    main.doc(
        "/openapi.json",
        json!({
            "openapi": "3.1.0", "info": {"title": "s", "version": "1"}, "servers": [{"url": format!("{base}/v1")}],
            "paths": {
                "/own": {"get": own},
                "/relative": {"servers": [{"url": "/v3"}], "get": op("relative")},
                "/default": {"get": op("default")},
            },
        }),
    );
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let src = h
        .source(
            "api",
            "openapi",
            json!({"spec": format!("{base}/openapi.json")}),
        )
        .unwrap();
    src.catalog().await.unwrap();
    let path = |r: wf_plugin_api::CallResult| r.structured_content.unwrap()["path"].clone();
    assert_eq!(
        path(src.call_tool("default", json!({})).await.unwrap()),
        "/v1/default"
    );
    assert_eq!(
        path(src.call_tool("relative", json!({})).await.unwrap()),
        "/v3/relative"
    );
    assert_eq!(
        path(src.call_tool("own", json!({})).await.unwrap()),
        "/v2/own"
    );
    assert!(other.hits().iter().any(|h| h["path"] == "/v2/own"));
    // base_url overrides every level.
    let src = h
        .source(
            "forced",
            "openapi",
            json!({"spec": format!("{base}/openapi.json"), "base_url": format!("{base}/x")}),
        )
        .unwrap();
    src.catalog().await.unwrap();
    assert_eq!(
        path(src.call_tool("own", json!({})).await.unwrap()),
        "/x/own"
    );
}

#[tokio::test]
async fn file_refs_resolve_under_the_folder_and_no_further() {
    let dir = std::env::temp_dir().join(format!("wf-openapi-refs-{}", std::process::id()));
    let spec_dir = dir.join("spec");
    std::fs::create_dir_all(spec_dir.join("schemas")).unwrap();
    std::fs::write(
        spec_dir.join("schemas/pet.yaml"),
        "Pet:\n  type: object\n  properties:\n    name: {type: string}\n    owner: {$ref: 'owner.json#/Owner'}\n    kind: {$ref: '#/Kind'}\nKind: {type: string, enum: [cat, dog]}\n",
    )
    .unwrap();
    std::fs::write(
        spec_dir.join("schemas/owner.json"),
        json!({"Owner": {"type": "object", "properties": {"pets": {"type": "array", "items": {"$ref": "pet.yaml#/Pet"}}}}}).to_string(),
    )
    .unwrap();
    std::fs::write(dir.join("outside.yaml"), "X: {type: string}\n").unwrap();
    let doc = |schema: Value| {
        json!({"openapi": "3.1.0", "info": {"title": "r", "version": "1"}, "paths": {"/pets": {"post": {
            "operationId": "addPet",
            "requestBody": {"content": {"application/json": {"schema": schema}}},
            "responses": {"200": {"description": "ok"}}}}}})
    };
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let write = |name: &str, d: Value| {
        let p = spec_dir.join(name);
        std::fs::write(&p, d.to_string()).unwrap();
        p.to_str().unwrap().to_string()
    };
    let good = write("good.json", doc(json!({"$ref": "schemas/pet.yaml#/Pet"})));
    let src = h
        .source(
            "good",
            "openapi",
            json!({"spec": good, "base_url": "http://127.0.0.1:9"}),
        )
        .unwrap();
    let cat = src.catalog().await.unwrap();
    assert!(
        schema_problems(&cat).is_empty(),
        "{:?}",
        schema_problems(&cat)
    );
    let input = &cat.tools[0].input_schema;
    let body = &input["properties"]["body"];
    let at = |s: &Value| wf_source_openapi::refs::local(input, s).clone();
    assert_eq!(
        at(&body["properties"]["kind"])["enum"],
        json!(["cat", "dog"]),
        "{input}"
    );
    // pet → owner → pet: the cycle across documents is a reference into
    // the tool's $defs.
    let owner = at(&body["properties"]["owner"]);
    let pets = &owner["properties"]["pets"]["items"];
    assert!(
        pets["$ref"].as_str().unwrap().starts_with("#/$defs/"),
        "{input}"
    );

    for (name, reference, why) in [
        ("up.json", "../outside.yaml#/X", "outside the spec's folder"),
        ("url.json", "http://127.0.0.1:9/x.json#/X", "not URLs"),
        ("missing.json", "schemas/nope.yaml#/X", "cannot read"),
        ("anchor.json", "schemas/pet.yaml#Pet", "JSON pointer"),
    ] {
        let path = write(name, doc(json!({"$ref": reference})));
        let e = h
            .source(name, "openapi", json!({"spec": path}))
            .unwrap()
            .catalog()
            .await
            .unwrap_err();
        assert!(
            e.message.contains("external $ref") && e.message.contains(why),
            "{name}: {}",
            e.message
        );
        assert_eq!(
            e.data.as_ref().unwrap()["pointer"],
            "/paths/~1pets/post/requestBody/content/application~1json/schema/$ref",
            "{name}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn url_refs_are_fetched_from_the_same_origin_with_the_spec_credentials() {
    let (server, other) = (Server::default(), Server::default());
    let (base, other_base) = (server.start().await, other.start().await);
    let spec = |schema: Value| {
        json!({"openapi": "3.1.0", "info": {"title": "u", "version": "1"}, "servers": [{"url": base}],
               "paths": {"/a": {"get": {"operationId": "a", "responses": {"200": {"description": "ok",
                   "content": {"application/json": {"schema": schema}}}}}}}})
    };
    server.doc(
        "/private/openapi.json",
        spec(json!({"$ref": "schemas/thing.json#/Thing"})),
    );
    server.doc(
        "/private/schemas/thing.json",
        json!({"Thing": {"type": "object", "properties": {"id": {"type": "integer"}}}}),
    );
    *server.private.lock().unwrap() = vec![
        "/private/openapi.json".into(),
        "/private/schemas/thing.json".into(),
    ];
    server.doc(
        "/elsewhere.json",
        spec(json!({"$ref": format!("{other_base}/x.json#/X")})),
    );
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let auth = json!({"type": "bearer", "token": SECRET});
    // Without spec_auth the spec's own request carries no credentials.
    let e = h
        .source(
            "noauth",
            "openapi",
            json!({"spec": format!("{base}/private/openapi.json"), "auth": auth}),
        )
        .unwrap()
        .catalog()
        .await
        .unwrap_err();
    assert!(e.message.contains("HTTP status 401"), "{}", e.message);
    let src = h
        .source(
            "api",
            "openapi",
            json!({"spec": format!("{base}/private/openapi.json"), "auth": auth, "spec_auth": true,
                   "strict_responses": true}),
        )
        .unwrap();
    let cat = src.catalog().await.unwrap();
    assert_eq!(
        cat.tools[0].output_schema.as_ref().unwrap()["properties"]["id"]["type"],
        "integer"
    );
    // Another origin is never asked, with or without credentials.
    let e = h
        .source(
            "far",
            "openapi",
            json!({"spec": format!("{base}/elsewhere.json"), "auth": auth, "spec_auth": true}),
        )
        .unwrap()
        .catalog()
        .await
        .unwrap_err();
    assert!(e.message.contains("another origin"), "{}", e.message);
    assert!(other.hits().is_empty(), "{:?}", other.hits());
    assert_eq!(
        e.data.as_ref().unwrap()["pointer"],
        "/paths/~1a/get/responses/200/content/application~1json/schema/$ref"
    );
}

#[tokio::test]
async fn forms_multipart_arrays_and_xml() {
    let server = Server::default();
    let base = server.start().await;
    server.doc(
        "/openapi.json",
        json!({
            "openapi": "3.1.0", "info": {"title": "b", "version": "1"}, "servers": [{"url": base}],
            "paths": {
                "/form": {"post": {"operationId": "form", "requestBody": {"content": {
                    "application/x-www-form-urlencoded": {"schema": {"type": "object", "properties": {
                        "name": {"type": "string"}, "n": {"type": "integer"}}}}}},
                    "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
                "/upload": {"post": {"operationId": "upload", "requestBody": {"content": {
                    "multipart/form-data": {"schema": {"type": "object", "properties": {
                        "title": {"type": "string"},
                        "file": {"type": "string", "format": "binary"}}}}}},
                    "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
                "/list": {"get": {"operationId": "list", "responses": {"200": {"description": "ok",
                    "content": {"application/json": {"schema": {"type": "array", "items": {"type": "object"}}}}}}}},
                "/xml": {"get": {"operationId": "xml", "responses": {"200": {"description": "ok",
                    "content": {"application/xml": {"schema": {"type": "object"}}}}}}},
            },
        }),
    );
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let src = h
        .source(
            "api",
            "openapi",
            json!({"spec": format!("{base}/openapi.json")}),
        )
        .unwrap();
    let cat = src.catalog().await.unwrap();
    assert!(
        schema_problems(&cat).is_empty(),
        "{:?}",
        schema_problems(&cat)
    );
    let tool = |n: &str| cat.tools.iter().find(|t| t.name == n).unwrap().clone();

    let r = src
        .call_tool("form", json!({"body": {"name": "a b&c", "n": 3}}))
        .await
        .unwrap();
    let echo = r.structured_content.unwrap();
    assert_eq!(echo["content_type"], "application/x-www-form-urlencoded");
    assert_eq!(echo["body"], "name=a%20b%26c&n=3");

    let file = tool("upload").input_schema["properties"]["body"]["properties"]["file"].clone();
    assert_eq!(file["contentEncoding"], "base64", "{file}");
    let encoded = base64::engine::general_purpose::STANDARD.encode(b"hello file");
    let r = src
        .call_tool("upload", json!({"body": {"title": "T", "file": encoded}}))
        .await
        .unwrap();
    let echo = r.structured_content.unwrap();
    let ct = echo["content_type"].as_str().unwrap();
    let boundary = ct.strip_prefix("multipart/form-data; boundary=").unwrap();
    let body = echo["body"].as_str().unwrap();
    assert!(body.contains("name=\"title\"\r\n\r\nT\r\n"), "{body}");
    assert!(
        body.contains(
            "filename=\"file\"\r\nContent-Type: application/octet-stream\r\n\r\nhello file\r\n"
        ),
        "{body}"
    );
    assert!(body.ends_with(&format!("--{boundary}--\r\n")));
    let r = src
        .call_tool("upload", json!({"body": {"file": "not base64!"}}))
        .await
        .unwrap();
    assert!(r.is_error, "{:?}", r.content);

    // An array answer: wrapped, and said so (the listed schema is one
    // every answer matches; strict_responses lists the document's).
    let list = tool("list");
    assert_eq!(
        list.output_schema.as_ref().unwrap(),
        &json!({"type": "object", "properties": {"result": {}}})
    );
    let d = list.description.clone().unwrap_or_default();
    assert!(d.contains("{\"result\": <answer>}"), "{d}");
    let r = src.call_tool("list", json!({})).await.unwrap();
    assert_eq!(
        r.structured_content.unwrap(),
        json!({"result": [{"id": 1}, {"id": 2}]})
    );
    assert_eq!(
        src.run_node("list", json!({})).await.unwrap(),
        json!({"result": [{"id": 1}, {"id": 2}]})
    );

    // XML is text.
    let r = src.call_tool("xml", json!({})).await.unwrap();
    assert!(!r.is_error && r.structured_content.is_none());
    assert_eq!(r.content[0]["text"], "<pet><name>Rex</name></pet>");
}

#[tokio::test]
async fn a_changed_document_is_announced_by_the_periodic_refetch() {
    let server = Server::default();
    let base = server.start().await;
    let doc = |paths: Value| json!({"openapi": "3.1.0", "info": {"title": "r", "version": "1"}, "servers": [{"url": base}], "paths": paths});
    server.doc("/openapi.json", doc(json!({"/a": {"get": op("a")}})));
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let src = h
        .source(
            "api",
            "openapi",
            json!({"spec": format!("{base}/openapi.json"), "refresh_interval_ms": 1000}),
        )
        .unwrap();
    assert_eq!(src.catalog().await.unwrap().tools.len(), 1);
    let changed = || {
        h.recorded
            .lock()
            .unwrap()
            .events
            .iter()
            .filter(|e| e["event"] == "capabilities_changed" && e["source"] == "api")
            .count()
    };
    // Unchanged: fetched again, nothing announced.
    let fetches = || {
        server
            .hits()
            .iter()
            .filter(|h| h["path"] == "/openapi.json")
            .count()
    };
    let started = std::time::Instant::now();
    while fetches() < 3 && started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(fetches() >= 3, "the document was not fetched again");
    assert_eq!(changed(), 0, "{:?}", h.recorded.lock().unwrap().events);
    server.doc(
        "/openapi.json",
        doc(json!({"/a": {"get": op("a")}, "/b": {"get": op("b")}})),
    );
    let started = std::time::Instant::now();
    while changed() == 0 && started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let events = h.recorded.lock().unwrap().events.clone();
    assert!(changed() >= 1, "{events:?}");
    assert_eq!(src.catalog().await.unwrap().tools.len(), 2);
}

/// A raw HTTP/1.1 server that counts its connections; `close` answers each
/// request with `Connection: close` and closes, as HTTP/1.0 servers do.
async fn raw_server(close: bool, accepted: Arc<Mutex<usize>>) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let doc = json!({"openapi": "3.1.0", "info": {"title": "raw", "version": "1"}, "servers": [{"url": base}],
        "paths": {"/n": {"get": op("n")}}})
    .to_string();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            *accepted.lock().unwrap() += 1;
            let doc = doc.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    buf.drain(..end);
                    let body = if head.starts_with("GET /openapi.json") {
                        doc.clone()
                    } else {
                        json!({"ok": true}).to_string()
                    };
                    let connection = if close { "close" } else { "keep-alive" };
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: {connection}\r\n\r\n{body}",
                        body.len()
                    );
                    if socket.write_all(answer.as_bytes()).await.is_err() || close {
                        return;
                    }
                }
            });
        }
    });
    base
}

#[tokio::test]
async fn plain_http_keeps_its_connection_and_survives_servers_that_close() {
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    for close in [false, true] {
        let accepted = Arc::new(Mutex::new(0));
        let base = raw_server(close, accepted.clone()).await;
        let src = h
            .source(
                &format!("raw{close}"),
                "openapi",
                json!({"spec": format!("{base}/openapi.json")}),
            )
            .unwrap();
        src.catalog().await.unwrap();
        let before = *accepted.lock().unwrap();
        for _ in 0..5 {
            let r = src.call_tool("n", json!({})).await.unwrap();
            assert_eq!(r.structured_content, Some(json!({"ok": true})), "{r:?}");
        }
        let used = *accepted.lock().unwrap() - before;
        if close {
            assert_eq!(used, 5, "a closed connection is not reused");
        } else {
            assert_eq!(used, 1, "five calls, one kept connection");
        }
    }
}

#[tokio::test]
async fn external_refs_are_bounded_in_depth_count_and_size() {
    let dir = std::env::temp_dir().join(format!("wf-openapi-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let doc = |schema: Value| {
        json!({"openapi": "3.1.0", "info": {"title": "b", "version": "1"}, "paths": {"/a": {"get": {
            "operationId": "a", "responses": {"200": {"description": "ok",
                "content": {"application/json": {"schema": schema}}}}}}}})
        .to_string()
    };
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let fails = |name: &str, extra: Value| {
        let mut config =
            json!({"spec": dir.join(name).to_str().unwrap(), "base_url": "http://127.0.0.1:9"});
        config
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let src = h.source(name, "openapi", config).unwrap();
        async move { src.catalog().await }
    };
    // A chain of documents ten deep.
    for i in 0..10 {
        std::fs::write(
            dir.join(format!("d{i}.json")),
            json!({"S": {"$ref": format!("d{}.json#/S", i + 1)}}).to_string(),
        )
        .unwrap();
    }
    std::fs::write(
        dir.join("d10.json"),
        json!({"S": {"type": "string"}}).to_string(),
    )
    .unwrap();
    std::fs::write(dir.join("deep.json"), doc(json!({"$ref": "d0.json#/S"}))).unwrap();
    let e = fails("deep.json", json!({})).await.unwrap_err();
    assert!(e.message.contains("more than 8 deep"), "{}", e.message);
    // 40 documents referenced from one.
    let mut props = serde_json::Map::new();
    for i in 0..40 {
        std::fs::write(
            dir.join(format!("w{i}.json")),
            json!({"S": {"type": "integer"}}).to_string(),
        )
        .unwrap();
        props.insert(format!("p{i}"), json!({"$ref": format!("w{i}.json#/S")}));
    }
    std::fs::write(
        dir.join("wide.json"),
        doc(json!({"type": "object", "properties": props})),
    )
    .unwrap();
    let e = fails("wide.json", json!({})).await.unwrap_err();
    assert!(
        e.message.contains("over 32 referenced documents"),
        "{}",
        e.message
    );
    // Together over max_spec_bytes.
    std::fs::write(
        dir.join("big.json"),
        json!({"S": {"type": "string", "description": "x".repeat(4096)}}).to_string(),
    )
    .unwrap();
    std::fs::write(dir.join("sized.json"), doc(json!({"$ref": "big.json#/S"}))).unwrap();
    let e = fails("sized.json", json!({"max_spec_bytes": 2048}))
        .await
        .unwrap_err();
    assert!(
        e.message.contains("together are over max_spec_bytes"),
        "{}",
        e.message
    );
    // Within the bounds the same documents resolve.
    assert!(fails("sized.json", json!({})).await.is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}
