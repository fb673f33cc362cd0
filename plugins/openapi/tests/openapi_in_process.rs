//! The plugin through the real ABI (the harness) against real HTTP servers
//! (axum on loopback): discovery, calls, auth, errors, bounds, redirects.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use wf_plugin_api::testing::{Harness, TestSource, schema_problems};
use wf_source_openapi::OpenApiPlugin;

const SECRET: &str = "s3cr3t-token-123";

#[derive(Clone, Default)]
struct Seen {
    hits: Arc<Mutex<Vec<String>>>,
    /// Set when a slow request's connection went away before it finished.
    dropped: Arc<Mutex<bool>>,
}

fn spec(base: &str) -> Value {
    json!({
        "openapi": "3.1.0",
        "info": {"title": "Test API", "version": "1", "description": "For tests."},
        "servers": [{"url": base}],
        "tags": [{"name": "pets", "description": "Pets and such"}],
        "paths": {
            "/pets/{id}": {
                "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
                "get": {
                    "operationId": "getPet", "tags": ["pets"], "summary": "One pet",
                    "parameters": [
                        {"name": "tags", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
                        {"name": "flat", "in": "query", "explode": false, "schema": {"type": "array", "items": {"type": "integer"}}},
                        {"name": "filter", "in": "query", "style": "deepObject", "schema": {"type": "object", "additionalProperties": {"type": "string"}}},
                        {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
                        {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                    ],
                    "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Echo"}}}}},
                },
            },
            "/pets": {
                "post": {
                    "operationId": "addPet", "tags": ["pets"],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}},
                    "responses": {"201": {"description": "made", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Echo"}}}}},
                },
            },
            "/fail": {"get": {"operationId": "fail", "responses": {"404": {"description": "no"}}}},
            "/big": {"get": {"operationId": "big", "responses": {"200": {"description": "a lot"}}}},
            "/slow": {"get": {"operationId": "slow", "responses": {"200": {"description": "late"}}}},
            "/away": {"get": {"operationId": "away", "responses": {"200": {"description": "elsewhere"}}}},
            "/bin": {"get": {"responses": {"200": {"description": "bytes", "content": {"application/octet-stream": {}}}}}},
            "/upload": {"put": {"operationId": "upload",
                "requestBody": {"required": true, "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
                "responses": {"200": {"description": "ok", "content": {
                    "application/xml": {"schema": {"$ref": "#/components/schemas/Echo"}},
                    "application/json": {"schema": {"$ref": "#/components/schemas/Echo"}}}}}}},
        },
        "components": {"schemas": {
            "Pet": {"type": "object", "properties": {
                "name": {"type": "string"},
                "parent": {"$ref": "#/components/schemas/Pet"},
            }, "required": ["name"]},
            "Echo": {"type": "object", "properties": {
                "method": {"type": "string"}, "path": {"type": "string"}, "query": {"type": ["string", "null"]},
                "headers": {"type": "object"}, "body": {},
            }},
        }},
    })
}

async fn serve(seen: Seen, other: Option<String>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let spec = spec(&base);
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (seen, spec, other) = (seen.clone(), spec.clone(), other.clone());
            async move { handle(seen, spec, other, method, uri, headers, body).await }
        },
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

struct DropFlag(Arc<Mutex<bool>>, bool);
impl Drop for DropFlag {
    fn drop(&mut self) {
        if !self.1 {
            *self.0.lock().unwrap() = true;
        }
    }
}

async fn handle(
    seen: Seen,
    spec: Value,
    other: Option<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let hit = format!(
        "{method} {uri} auth={:?}",
        headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_string())
    );
    seen.hits.lock().unwrap().push(hit);
    let auth_ok = headers.get("authorization").and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {SECRET}"));
    match uri.path() {
        "/openapi.json" => axum::Json(spec).into_response(),
        _ if !auth_ok => (StatusCode::UNAUTHORIZED, "missing bearer").into_response(),
        "/fail" => (
            StatusCode::NOT_FOUND,
            format!("no such thing; you sent {SECRET}"),
        )
            .into_response(),
        "/big" => {
            let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
            let stream =
                futures::stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()))
                    .take(160_000);
            Response::builder()
                .header("content-type", "text/plain")
                .body(Body::from_stream(stream))
                .unwrap()
        }
        "/slow" => {
            let mut flag = DropFlag(seen.dropped.clone(), false);
            tokio::time::sleep(Duration::from_secs(30)).await;
            flag.1 = true;
            "late".into_response()
        }
        "/away" => match other {
            Some(o) => Response::builder()
                .status(StatusCode::FOUND)
                .header("location", format!("{o}/pets/1"))
                .body(Body::empty())
                .unwrap(),
            None => "no".into_response(),
        },
        "/bin" => Response::builder()
            .header("content-type", "application/octet-stream")
            .body(Body::from(vec![0u8, 159, 146, 150]))
            .unwrap(),
        _ => {
            let keep = ["x-trace", "cookie", "content-type", "accept"];
            let h: serde_json::Map<String, Value> = headers
                .iter()
                .filter(|(k, _)| keep.contains(&k.as_str()))
                .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap())))
                .collect();
            let body: Value = match headers.get("content-type").map(|v| v.to_str().unwrap()) {
                Some("application/octet-stream") => json!({"bytes": body.to_vec()}),
                _ => serde_json::from_slice(&body).unwrap_or(Value::Null),
            };
            let status = if method == Method::POST {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            (
                status,
                axum::Json(json!({
                    "method": method.as_str(), "path": uri.path(), "query": uri.query(),
                    "headers": h, "body": body,
                })),
            )
                .into_response()
        }
    }
}

use futures::StreamExt as _;

fn source(h: &Harness, config: Value) -> TestSource {
    h.source("api", "openapi", config).unwrap()
}

#[tokio::test]
async fn discovery_and_calls_against_a_real_server() {
    let seen = Seen::default();
    let base = serve(seen.clone(), None).await;
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let src = source(
        &h,
        json!({"spec": format!("{base}/openapi.json"), "auth": {"type": "bearer", "token": SECRET}, "timeout_ms": 2000}),
    );
    let cat = src.catalog().await.unwrap();
    assert!(
        schema_problems(&cat).is_empty(),
        "{:?}",
        schema_problems(&cat)
    );
    let names: Vec<&str> = cat.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "getPet", "addPet", "fail", "big", "slow", "away", "get_bin", "upload"
        ]
    );
    assert_eq!(cat.node_specs.len(), 8);
    let add = cat.tools.iter().find(|t| t.name == "addPet").unwrap();
    // The cycle Pet.parent → Pet is a reference into the tool's own $defs.
    let body = &add.input_schema["properties"]["body"];
    assert_eq!(body["properties"]["parent"], json!({"$ref": "#/$defs/Pet"}));
    assert_eq!(
        add.input_schema["$defs"]["Pet"]["properties"]["parent"],
        json!({"$ref": "#/$defs/Pet"})
    );
    assert_eq!(add.input_schema["required"], json!(["body"]));
    assert!(
        cat.node_specs
            .iter()
            .find(|n| n.name == "addPet")
            .unwrap()
            .side_effects
    );
    assert!(
        !cat.node_specs
            .iter()
            .find(|n| n.name == "getPet")
            .unwrap()
            .side_effects
    );

    // Path, query (form exploded and not, deepObject), header and cookie parameters.
    let r = src
        .call_tool(
            "getPet",
            json!({"id": 7, "tags": ["a b", "c"], "flat": [1, 2], "filter": {"kind": "cat"}, "X-Trace": "t1", "session": "abc"}),
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{r:?}");
    let out = r.structured_content.unwrap();
    assert_eq!(out["path"], "/pets/7");
    assert_eq!(
        out["query"],
        "tags=a%20b&tags=c&flat=1,2&filter%5Bkind%5D=cat"
    );
    assert_eq!(out["headers"]["x-trace"], "t1");
    assert_eq!(out["headers"]["cookie"], "session=abc");
    // The JSON the tool can check is asked for first.
    assert_eq!(out["headers"]["accept"], "application/json, */*;q=0.1");

    // A binary body is given as base64 and sent as its bytes; JSON is
    // preferred over the XML the document lists first.
    let r = src
        .call_tool("upload", json!({"body": "AJ+Slg=="}))
        .await
        .unwrap();
    assert!(!r.is_error, "{r:?}");
    let out = r.structured_content.unwrap();
    assert_eq!(out["body"]["bytes"], json!([0, 159, 146, 150]));
    assert_eq!(out["headers"]["content-type"], "application/octet-stream");
    assert_eq!(
        out["headers"]["accept"],
        "application/json, application/xml;q=0.5, */*;q=0.1"
    );
    let r = src
        .call_tool("upload", json!({"body": "not base64!"}))
        .await
        .unwrap();
    assert!(
        r.is_error && r.content[0]["text"].as_str().unwrap().contains("base64"),
        "{r:?}"
    );

    // A JSON body.
    let r = src
        .call_tool("addPet", json!({"body": {"name": "Rex"}}))
        .await
        .unwrap();
    assert_eq!(
        r.structured_content.unwrap()["body"],
        json!({"name": "Rex"})
    );
    // As a workflow node.
    let out = src
        .run_node("addPet", json!({"body": {"name": "Ada"}}))
        .await
        .unwrap();
    assert_eq!(out["method"], "POST");

    // Bad arguments are a tool error the model reads; nothing is sent.
    let before = seen.hits.lock().unwrap().len();
    let r = src
        .call_tool("getPet", json!({"id": "seven"}))
        .await
        .unwrap();
    assert!(
        r.is_error && r.content[0]["text"].as_str().unwrap().contains("$.id"),
        "{r:?}"
    );
    let r = src
        .call_tool("getPet", json!({"id": 1, "nope": 1}))
        .await
        .unwrap();
    assert!(r.is_error, "{r:?}");
    assert_eq!(seen.hits.lock().unwrap().len(), before);

    // A non-2xx status is a tool error with the status and the body, secret blanked.
    let r = src.call_tool("fail", json!({})).await.unwrap();
    let text = r.content[0]["text"].as_str().unwrap();
    assert!(
        r.is_error && text.contains("404") && text.contains("no such thing"),
        "{text}"
    );
    assert!(
        !text.contains(SECRET) && text.contains("[REDACTED]"),
        "{text}"
    );

    // Binary bodies are an embedded resource.
    let r = src.call_tool("get_bin", json!({})).await.unwrap();
    assert_eq!(
        r.content[0]["resource"]["mimeType"],
        "application/octet-stream"
    );
    assert_eq!(r.content[0]["resource"]["blob"], "AJ+Slg==");

    // The document is a resource; the prompt explains the tags.
    let doc = src.read_resource("openapi://api/document").await.unwrap();
    assert!(
        doc.contents[0]["text"]
            .as_str()
            .unwrap()
            .contains("\"Test API\"")
    );
    let p = src
        .get_prompt("api_overview", Default::default())
        .await
        .unwrap();
    let text = p.messages[0]["content"]["text"].as_str().unwrap();
    assert!(
        text.contains("## pets") && text.contains("Pets and such") && text.contains("`getPet`"),
        "{text}"
    );
}

#[tokio::test]
async fn without_the_secret_the_api_refuses() {
    let base = serve(Seen::default(), None).await;
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let src = source(&h, json!({"spec": format!("{base}/openapi.json")}));
    src.catalog().await.unwrap();
    let r = src.call_tool("getPet", json!({"id": 1})).await.unwrap();
    assert!(
        r.is_error && r.content[0]["text"].as_str().unwrap().contains("401"),
        "{r:?}"
    );
}

#[tokio::test]
async fn bounds_hangs_and_cancellation() {
    let seen = Seen::default();
    let base = serve(seen.clone(), None).await;
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let config = |timeout: u64| {
        json!({"spec": format!("{base}/openapi.json"), "auth": {"type": "bearer", "token": SECRET},
               "timeout_ms": timeout, "max_response_bytes": 1_000_000})
    };
    let src = source(&h, config(500));
    src.catalog().await.unwrap();
    // 10 GB offered: refused at the bound.
    let r = src.call_tool("big", json!({})).await.unwrap();
    let text = r.content[0]["text"].as_str().unwrap();
    assert!(r.is_error && text.contains("max_response_bytes"), "{text}");
    // A server that hangs: the call times out.
    let r = src.call_tool("slow", json!({})).await.unwrap();
    let text = r.content[0]["text"].as_str().unwrap();
    assert!(r.is_error && text.contains("timed out"), "{text}");

    // A call dropped by the host (as on cancellation) closes its connection
    // (a server of its own, so the timed-out request above cannot be the one seen).
    let seen = Seen::default();
    let base = serve(seen.clone(), None).await;
    let src = source(
        &h,
        json!({"spec": format!("{base}/openapi.json"), "auth": {"type": "bearer", "token": SECRET}}),
    );
    src.catalog().await.unwrap();
    let _ =
        tokio::time::timeout(Duration::from_millis(300), src.call_tool("slow", json!({}))).await;
    let mut waited = 0;
    while !*seen.dropped.lock().unwrap() && waited < 50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 1;
    }
    assert!(
        *seen.dropped.lock().unwrap(),
        "the server still serves the abandoned request"
    );
}

#[tokio::test]
async fn a_redirect_to_another_host_never_carries_credentials() {
    let other = Seen::default();
    let other_base = serve(other.clone(), None).await;
    let seen = Seen::default();
    let base = serve(seen.clone(), Some(other_base)).await;
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let src = source(
        &h,
        json!({"spec": format!("{base}/openapi.json"), "auth": {"type": "bearer", "token": SECRET}}),
    );
    src.catalog().await.unwrap();
    let r = src.call_tool("away", json!({})).await.unwrap();
    let text = r.content[0]["text"].as_str().unwrap();
    assert!(r.is_error && text.contains("not followed"), "{text}");
    assert!(
        other.hits.lock().unwrap().is_empty(),
        "{:?}",
        other.hits.lock().unwrap()
    );
}

#[tokio::test]
async fn api_key_in_the_query_and_readonly_and_filters() {
    let seen = Seen::default();
    let base = serve(seen.clone(), None).await;
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let src = source(
        &h,
        json!({"spec": format!("{base}/openapi.json"), "readonly": true, "exclude": ["slow", "/big"],
               "auth": {"type": "api_key", "in": "query", "name": "key", "value": "k-1234567"}}),
    );
    let cat = src.catalog().await.unwrap();
    let names: Vec<&str> = cat.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["getPet", "fail", "away", "get_bin"]);
    let _ = src.call_tool("getPet", json!({"id": 3})).await.unwrap();
    let last = seen.hits.lock().unwrap().last().cloned().unwrap();
    assert!(last.starts_with("GET /pets/3?key=k-1234567 "), "{last}");
    let src = source(
        &h,
        json!({"spec": format!("{base}/openapi.json"), "include": ["pets"]}),
    );
    let names: Vec<String> = src
        .catalog()
        .await
        .unwrap()
        .tools
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["getPet", "addPet"]);
}

#[tokio::test]
async fn bad_documents_fail_with_their_pointer() {
    let dir = std::env::temp_dir().join(format!("wf-openapi-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let fail = |name: &str, text: String, extra: Value| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        let mut config = json!({"spec": path.to_str().unwrap()});
        config
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        source(&h, config)
    };
    let external = json!({"openapi": "3.0.3", "info": {"title": "x", "version": "1"}, "paths": {"/a": {"get": {
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "https://evil.example/s.json#/X"}}}}}}}}});
    let e = fail("ext.json", external.to_string(), json!({}))
        .catalog()
        .await
        .unwrap_err();
    assert!(
        e.message
            .contains("/paths/~1a/get/responses/200/content/application~1json/schema/$ref"),
        "{}",
        e.message
    );
    assert!(e.message.contains("external $ref"), "{}", e.message);
    assert_eq!(
        e.data.as_ref().unwrap()["pointer"],
        "/paths/~1a/get/responses/200/content/application~1json/schema/$ref"
    );

    let e = fail("v2.yaml", "swagger: '2.0'\npaths: {}\n".into(), json!({}))
        .catalog()
        .await
        .unwrap_err();
    assert!(
        e.message.contains("/swagger") && e.message.contains("Swagger 2.0"),
        "{}",
        e.message
    );
    let e = fail(
        "broken.yaml",
        "openapi: 3.1.0\npaths: [\n".into(),
        json!({}),
    )
    .catalog()
    .await
    .unwrap_err();
    assert!(e.message.contains("neither JSON nor YAML"), "{}", e.message);
    // A document over max_spec_bytes is refused before it is read.
    let big = format!(
        "{{\"openapi\": \"3.1.0\", \"x\": \"{}\"}}",
        "a".repeat(3 * 1024 * 1024)
    );
    let e = fail("big.json", big, json!({"max_spec_bytes": 1_048_576}))
        .catalog()
        .await
        .unwrap_err();
    assert!(e.message.contains("over max_spec_bytes"), "{}", e.message);
}

#[tokio::test]
async fn five_thousand_operations_are_served_and_filtered() {
    let mut paths = serde_json::Map::new();
    for i in 0..5000 {
        paths.insert(
            format!("/items{i}/{{id}}"),
            json!({"get": {"operationId": format!("item{i}"), "tags": [if i % 2 == 0 { "even" } else { "odd" }],
                "parameters": [{"$ref": "#/components/parameters/Id"}],
                "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Item"}}}}}}}),
        );
    }
    let doc = json!({"openapi": "3.0.3", "info": {"title": "many", "version": "1"}, "paths": paths,
    "components": {
        "parameters": {"Id": {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}},
        "schemas": {"Item": {"type": "object", "properties": {"id": {"type": "string"}, "note": {"type": "string", "nullable": true}}}},
    }});
    let path = std::env::temp_dir().join(format!("wf-openapi-many-{}.json", std::process::id()));
    std::fs::write(&path, doc.to_string()).unwrap();
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let src = source(
        &h,
        json!({"spec": path.to_str().unwrap(), "base_url": "http://127.0.0.1:9"}),
    );
    let cat = src.catalog().await.unwrap();
    assert_eq!(cat.tools.len(), 5000);
    assert!(schema_problems(&cat).is_empty());
    let src = source(
        &h,
        json!({"spec": path.to_str().unwrap(), "include": ["odd"], "exclude": ["item1*"]}),
    );
    let n = src.catalog().await.unwrap().tools.len();
    // 2500 odd ones, less item1, item11..item19, item101..item199, item1001..item1999 (odd ones).
    assert_eq!(n, 2500 - (1 + 5 + 50 + 500));
}

/// A token endpoint and an API that wants its token, or basic credentials.
async fn serve_oauth(tokens_issued: Arc<Mutex<u32>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let doc = json!({
        "openapi": "3.0.3", "info": {"title": "o", "version": "1"}, "servers": [{"url": base}],
        "paths": {"/me": {"get": {"operationId": "me", "responses": {"200": {"description": "ok",
            "content": {"application/json": {"schema": {"type": "object"}}}}}}}},
    });
    let app = axum::Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let (doc, issued) = (doc.clone(), tokens_issued.clone());
            async move {
                let auth = headers
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default();
                match (method.as_str(), uri.path()) {
                    (_, "/openapi.json") => axum::Json(doc).into_response(),
                    ("POST", "/token") => {
                        // client_id:client_secret, as HTTP basic.
                        let form = String::from_utf8_lossy(&body).to_string();
                        if auth != "Basic Y2xpZW50OmNsaWVudC1zZWNyZXQtOTk="
                            || !form.contains("grant_type=client_credentials")
                            || !form.contains("scope=read%20write")
                        {
                            return (StatusCode::UNAUTHORIZED, "bad client").into_response();
                        }
                        *issued.lock().unwrap() += 1;
                        axum::Json(json!({"access_token": "issued-token-abc", "token_type": "Bearer", "expires_in": 3600}))
                            .into_response()
                    }
                    (_, "/me") if auth == "Bearer issued-token-abc" => {
                        axum::Json(json!({"who": "oauth"})).into_response()
                    }
                    // alice:pw-alice-123
                    (_, "/me") if auth == "Basic YWxpY2U6cHctYWxpY2UtMTIz" => {
                        axum::Json(json!({"who": "alice"})).into_response()
                    }
                    _ => (StatusCode::UNAUTHORIZED, "who are you").into_response(),
                }
            }
        },
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

#[tokio::test]
async fn oauth_client_credentials_and_basic_auth() {
    let issued = Arc::new(Mutex::new(0));
    let base = serve_oauth(issued.clone()).await;
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let src = source(
        &h,
        json!({"spec": format!("{base}/openapi.json"), "auth": {"type": "oauth2_client_credentials",
            "token_url": format!("{base}/token"), "client_id": "client", "client_secret": "client-secret-99",
            "scopes": ["read", "write"]}}),
    );
    src.catalog().await.unwrap();
    for _ in 0..3 {
        let r = src.call_tool("me", json!({})).await.unwrap();
        assert_eq!(r.structured_content, Some(json!({"who": "oauth"})), "{r:?}");
    }
    // One token, kept for its lifetime.
    assert_eq!(*issued.lock().unwrap(), 1);
    // (Progress is reported only to a client that sent a progress token: tests/e2e/test_openapi.py.)

    let src = source(
        &h,
        json!({"spec": format!("{base}/openapi.json"), "auth": {"type": "basic", "username": "alice", "password": "pw-alice-123"}}),
    );
    src.catalog().await.unwrap();
    let r = src.call_tool("me", json!({})).await.unwrap();
    assert_eq!(r.structured_content, Some(json!({"who": "alice"})), "{r:?}");

    // A wrong client secret: a tool error saying the token endpoint refused.
    let src = source(
        &h,
        json!({"spec": format!("{base}/openapi.json"), "auth": {"type": "oauth2_client_credentials",
            "token_url": format!("{base}/token"), "client_id": "client", "client_secret": "wrong-secret-00"}}),
    );
    src.catalog().await.unwrap();
    let r = src.call_tool("me", json!({})).await.unwrap();
    let text = r.content[0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        r.is_error && text.contains("token endpoint answered 401"),
        "{r:?}"
    );
}
