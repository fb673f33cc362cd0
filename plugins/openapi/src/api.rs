//! What a document offers: its operations, each with the input schema a
//! call's arguments follow and what is needed to turn them into a request.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value, json};
use wf_plugin_api::NodeSpec;

use crate::load::Loaded;
use crate::refs::{Defs, Listing, RefError, Resolver, deref, escape, materialize};
use crate::settings::{Auth, Settings};

pub use crate::param::{Location, Param};

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// Why a document cannot be served: the first problem and its JSON pointer.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    pub pointer: String,
    pub message: String,
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at {}: {}", self.pointer_text(), self.message)
    }
}

impl SpecError {
    pub(crate) fn new(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            pointer: pointer.into(),
            message: message.into(),
        }
    }
    fn pointer_text(&self) -> &str {
        if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        }
    }
}

impl From<RefError> for SpecError {
    fn from(e: RefError) -> Self {
        let at = match &e {
            RefError::External { at, .. } | RefError::Dangling { at, .. } => at.clone(),
        };
        let message = e.to_string();
        let message = message
            .strip_prefix(&format!("{at}: "))
            .unwrap_or(&message)
            .to_string();
        SpecError::new(at, message)
    }
}

#[derive(Debug, Clone)]
pub struct RequestBody {
    pub arg: String,
    pub media: String,
    /// multipart/form-data: the fields that are files (`format: binary`,
    /// `contentEncoding`, `contentMediaType`), given base64-encoded.
    pub files: Vec<String>,
    /// A binary body (`application/octet-stream`, an image...): given
    /// base64-encoded, sent as its bytes.
    pub binary: bool,
}

#[derive(Debug, Clone)]
pub struct Operation {
    pub name: String,
    pub method: String,
    pub path: String,
    pub tags: Vec<String>,
    pub summary: String,
    pub description: String,
    pub params: Vec<Param>,
    pub body: Option<RequestBody>,
    /// The input schema without its `$defs` (see `input_listing`).
    pub input_schema: Value,
    /// The components the listed input schema carries in its `$defs`.
    pub input_listing: Listing,
    /// The document's converted components, shared by its operations: what
    /// `$ref`s point at in the checks, and what listings are cut from.
    pub defs: Arc<Map<String, Value>>,
    /// The first 2xx response's JSON schema as the document gives it (without
    /// its `$defs`: `output_listing`); one
    /// that is not an object's is wrapped as `{"result": ...}` (MCP's
    /// structured content is an object). Listed as the tool's
    /// `outputSchema` only under `strict_responses`; answers are checked
    /// against it either way ([`Operation::node_spec`]).
    pub output_schema: Option<Value>,
    pub output_listing: Listing,
    /// The JSON answer is returned as `{"result": answer}`.
    pub wrapped: bool,
    /// `strict_responses`: an answer that departs from `output_schema` is a
    /// tool error; otherwise it is passed through with a warning.
    pub strict: bool,
    /// The media types the success responses declare, as written.
    pub declared: Vec<String>,
    /// The `Accept` a call sends: the declared JSON types first.
    pub accept: String,
    /// Whether the first drift of this operation's answers was logged (a
    /// warning once per operation and discovery, not per call).
    pub drift_logged: Arc<AtomicBool>,
    /// Whether a call sends the source's credentials: the operation (or the
    /// document) requires a security scheme, or the document declares none.
    pub credentials: bool,
    /// The security schemes the operation names (any alternative).
    pub schemes: Vec<String>,
    /// The operation's or its path's own `servers`, when it has them (and
    /// no `base_url` overrides them).
    pub base: Option<Result<url::Url, String>>,
}

impl Operation {
    /// The schema listed as the tool's `outputSchema`: the document's under
    /// `strict_responses`; by default one that every answer wf returns
    /// matches (an object; `{"result": ...}` when wrapped), so a client that
    /// validates structured content never fails a call over an answer that
    /// departs from the document (issue #55: real APIs do, in small ways).
    pub fn listed_output(&self) -> Value {
        match (&self.output_schema, self.strict, self.wrapped) {
            (None, ..) => json!({}),
            (Some(s), true, _) => materialize(s, &self.output_listing, &self.defs),
            (Some(_), false, true) => json!({
                "type": "object",
                "properties": {"result": {}},
            }),
            (Some(_), false, false) => json!({"type": "object"}),
        }
    }

    /// Whether the first drift was already logged; marks it logged.
    pub fn drift_seen(&self) -> bool {
        self.drift_logged.swap(true, Ordering::Relaxed)
    }

    pub fn node_spec(&self) -> NodeSpec {
        let output = self.listed_output();
        let safe = matches!(self.method.as_str(), "GET" | "HEAD" | "OPTIONS");
        NodeSpec::new(
            &self.name,
            &self.description,
            materialize(&self.input_schema, &self.input_listing, &self.defs),
            output,
        )
        .side_effects(!safe)
        .stateful(false)
    }
}

/// A document understood.
#[derive(Debug, Clone)]
pub struct Api {
    pub title: String,
    pub version: String,
    pub description: String,
    pub tags: Vec<(String, String)>,
    pub operations: Vec<Operation>,
    /// Where requests go: `base_url`, else the first server (resolved against
    /// the document's URL), else the document's origin. `None`: a file whose
    /// servers are relative and no `base_url`.
    pub base: Result<url::Url, String>,
    pub openapi: String,
    pub left_out: usize,
    /// Operations left out because the schemas reached `max_schema_nodes`,
    /// and the one-line reason.
    pub over_budget: Option<(usize, String)>,
    /// The JSON nodes all the tools' schemas hold together.
    pub schema_nodes: usize,
    /// The document's security schemes: name → type (`http bearer`, `apiKey`, ...).
    pub schemes: BTreeMap<String, String>,
    /// Operation name → its place in `operations`.
    index: HashMap<String, usize>,
}

impl Api {
    pub fn operation(&self, name: &str) -> Option<&Operation> {
        self.index.get(name).map(|i| &self.operations[*i])
    }
}

/// A document's security, shared by its operations.
struct Security<'a> {
    /// The document declares schemes or a top-level requirement.
    documented: bool,
    root: Option<&'a Value>,
    /// Its schemes, as [`schemes`] describes them.
    declared: &'a BTreeMap<String, String>,
    auth: &'a Auth,
}

/// Whether the configured credential is one a scheme of this kind takes.
fn fits(kind: &str, auth: &Auth) -> bool {
    match auth {
        Auth::None => false,
        Auth::Bearer(_) | Auth::ClientCredentials { .. } => {
            matches!(kind, "http bearer" | "oauth2" | "openIdConnect")
        }
        Auth::Basic { .. } => kind == "http basic",
        Auth::ApiKeyHeader { name, .. } => {
            kind.eq_ignore_ascii_case(&format!("apiKey (header {name})"))
        }
        Auth::ApiKeyQuery { name, .. } => kind == format!("apiKey (query {name})"),
    }
}

impl Security<'_> {
    /// Whether an operation sends credentials, and the schemes it names.
    fn of(&self, op: &Value, at: &str) -> Result<(bool, Vec<String>), SpecError> {
        let (effective, at) = match op.get("security") {
            Some(s) => (Some(s), format!("{at}/security")),
            None => (self.root, "/security".to_string()),
        };
        let Some(effective) = effective else {
            // No requirement: none needed, unless the document says nothing
            // about security at all (then it cannot tell; credentials go).
            return Ok((!self.documented, vec![]));
        };
        let Some(list) = effective.as_array() else {
            return Err(SpecError::new(at, "must be an array of requirements"));
        };
        let mut names = Vec::new();
        for requirement in list {
            if let Some(r) = requirement.as_object() {
                for name in r.keys() {
                    if !names.contains(name) {
                        names.push(name.clone());
                    }
                }
            }
        }
        // `security: []` (or only `{}`): anonymous. Otherwise the
        // credentials go when a scheme named takes them (or is not declared,
        // so wf cannot tell), also when `{}` (optional) is an alternative;
        // an operation that wants another kind of credential gets none.
        let send = names.iter().any(|n| {
            self.declared
                .get(n)
                .is_none_or(|kind| fits(kind, self.auth))
        });
        Ok((send, names))
    }
}

/// The document's security schemes as `name → type` (`http bearer`,
/// `apiKey (header X-Key)`, `oauth2`, ...).
fn schemes(doc: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(Value::Object(declared)) = doc.pointer("/components/securitySchemes") else {
        return out;
    };
    for (name, scheme) in declared {
        let at = format!("/components/securitySchemes/{}", escape(name));
        let scheme = deref(doc, scheme, &at).unwrap_or(scheme);
        let field = |k: &str| scheme.get(k).and_then(Value::as_str).unwrap_or("");
        let kind = match field("type") {
            "http" => format!("http {}", field("scheme").to_ascii_lowercase()),
            "apiKey" => format!("apiKey ({} {})", field("in"), field("name")),
            other => other.to_string(),
        };
        out.insert(name.clone(), kind);
    }
    out
}

/// Understands a loaded document under `settings`.
pub fn build(loaded: &Loaded, settings: &Settings) -> Result<Api, SpecError> {
    build_until(loaded, settings, &AtomicBool::new(false))
}

/// [`build`], which stops (failing) when `cancelled` is set: a discovery
/// past `discovery_timeout_ms`, which the host has given up on.
pub fn build_until(
    loaded: &Loaded,
    settings: &Settings,
    cancelled: &AtomicBool,
) -> Result<Api, SpecError> {
    let doc = &loaded.value;
    let Some(root) = doc.as_object() else {
        return Err(SpecError::new("", "the document is not an object"));
    };
    let openapi = match root.get("openapi") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return Err(SpecError::new("/openapi", "must be a version string")),
        None if root.contains_key("swagger") => {
            return Err(SpecError::new(
                "/swagger",
                "Swagger 2.0 is not supported: convert the document to OpenAPI 3",
            ));
        }
        None => {
            return Err(SpecError::new(
                "/openapi",
                "missing: not an OpenAPI 3 document",
            ));
        }
    };
    let v30 = openapi.starts_with("3.0");
    if !v30 && !openapi.starts_with("3.1") {
        return Err(SpecError::new(
            "/openapi",
            format!("version {openapi:?} is not supported (3.0.x or 3.1.x)"),
        ));
    }
    let info = root.get("info").cloned().unwrap_or(Value::Null);
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let paths = match root.get("paths") {
        None => &Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => return Err(SpecError::new("/paths", "must be an object")),
    };
    let mut operations = Vec::new();
    let mut names = HashSet::new();
    let mut left_out = 0;
    let declared = schemes(doc);
    let security = Security {
        documented: !declared.is_empty() || root.contains_key("security"),
        root: root.get("security"),
        declared: &declared,
        auth: &settings.auth,
    };
    let base = base_url(root, settings, loaded.url.as_ref());
    let mut defs = Defs::new(doc, v30);
    let mut schema_nodes = 0usize;
    let mut over = 0usize;
    for (path, item) in paths {
        if cancelled.load(Ordering::Relaxed) {
            return Err(SpecError::new(
                "",
                "discovery cancelled (past discovery_timeout_ms)",
            ));
        }
        let item_at = format!("/paths/{}", escape(path));
        let item = deref(doc, item, &item_at)?;
        let Some(item_obj) = item.as_object() else {
            return Err(SpecError::new(item_at, "a path item must be an object"));
        };
        let shared = item_obj.get("parameters");
        let item_servers = item_obj.get("servers");
        for method in METHODS {
            let Some(op) = item_obj.get(method) else {
                continue;
            };
            let at = format!("{item_at}/{method}");
            if !op.is_object() {
                return Err(SpecError::new(at, "an operation must be an object"));
            }
            let upper = method.to_ascii_uppercase();
            if settings.readonly && !matches!(method, "get" | "head") {
                left_out += 1;
                continue;
            }
            let tags: Vec<String> = op
                .get("tags")
                .and_then(Value::as_array)
                .map(|t| {
                    t.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let operation_id = op.get("operationId").and_then(Value::as_str);
            if !selected(settings, operation_id, &tags, path) {
                left_out += 1;
                continue;
            }
            if over > 0 {
                over += 1;
                continue;
            }
            let name = unique_name(
                &mut names,
                &operation_id
                    .map(safe_name)
                    .unwrap_or_else(|| fallback_name(method, path)),
            );
            let (mut operation, size) = operation(
                doc, &mut defs, op, shared, &item_at, &at, name, upper, path, tags, settings,
            )?;
            if schema_nodes + size > settings.max_schema_nodes {
                names.remove(&operation.name);
                over = 1;
                continue;
            }
            schema_nodes += size;
            (operation.credentials, operation.schemes) = security.of(op, &at)?;
            if settings.base_url.is_none() {
                operation.base = [
                    (op.get("servers"), format!("{at}/servers")),
                    (item_servers, format!("{item_at}/servers")),
                ]
                .into_iter()
                .find_map(|(servers, at)| {
                    let first = servers?.as_array()?.first()?;
                    Some(server_url(
                        first,
                        loaded.url.as_ref(),
                        base.as_ref().ok(),
                        &at,
                    ))
                });
            }
            operations.push(operation);
        }
    }
    let tags = root
        .get("tags")
        .and_then(Value::as_array)
        .map(|ts| {
            ts.iter()
                .filter_map(|t| {
                    Some((t.get("name")?.as_str()?.to_string(), text(t, "description")))
                })
                .collect()
        })
        .unwrap_or_default();
    let shared = Arc::new(defs.into_shared());
    for op in &mut operations {
        op.defs = shared.clone();
    }
    let over_budget = (over > 0).then(|| {
        (
            over,
            format!(
                "{over} of its {} operations left out: their schemas together reach past max_schema_nodes ({}); \
                 choose the operations to serve with include/exclude (operationId, tag or path globs) or raise max_schema_nodes",
                over + operations.len(),
                settings.max_schema_nodes
            ),
        )
    });
    Ok(Api {
        title: text(&info, "title"),
        version: text(&info, "version"),
        description: text(&info, "description"),
        tags,
        index: operations
            .iter()
            .enumerate()
            .map(|(i, o)| (o.name.clone(), i))
            .collect(),
        operations,
        base,
        openapi,
        left_out: left_out + over,
        over_budget,
        schema_nodes,
        schemes: declared,
    })
}

fn selected(settings: &Settings, id: Option<&str>, tags: &[String], path: &str) -> bool {
    let hit = |set: &globset::GlobSet| {
        id.is_some_and(|id| set.is_match(id))
            || tags.iter().any(|t| set.is_match(t))
            || set.is_match(path)
    };
    settings.include.as_ref().is_none_or(hit) && !settings.exclude.as_ref().is_some_and(hit)
}

/// Characters clients accept in names everywhere: the host's projection
/// would rewrite others anyway, and a dot would read as a ref separator.
fn safe_name(raw: &str) -> String {
    let s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let s = s.trim_matches('_').to_string();
    let s = if s.is_empty() { "op".to_string() } else { s };
    s.chars().take(100).collect()
}

fn fallback_name(method: &str, path: &str) -> String {
    let rest: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_start_matches('{').trim_end_matches('}').to_string())
        .collect();
    safe_name(&format!("{method}_{}", rest.join("_")))
}

fn unique_name(names: &mut HashSet<String>, name: &str) -> String {
    let mut candidate = name.to_string();
    let mut n = 2;
    while !names.insert(candidate.clone()) {
        candidate = format!("{name}_{n}");
        n += 1;
    }
    candidate
}

/// One operation, and the JSON nodes its schemas hold.
#[allow(clippy::too_many_arguments)]
fn operation(
    doc: &Value,
    defs: &mut Defs<'_>,
    op: &Value,
    shared: Option<&Value>,
    item_at: &str,
    at: &str,
    name: String,
    method: String,
    path: &str,
    tags: Vec<String>,
    settings: &Settings,
) -> Result<(Operation, usize), SpecError> {
    let mut resolver = Resolver::new(defs);
    // Operation-level parameters override path-level ones of the same name and place.
    let mut declared: BTreeMap<(String, String), (Value, String)> = BTreeMap::new();
    let mut order = Vec::new();
    for (list, list_at) in [
        (shared, format!("{item_at}/parameters")),
        (op.get("parameters"), format!("{at}/parameters")),
    ] {
        let Some(list) = list else { continue };
        let Some(list) = list.as_array() else {
            return Err(SpecError::new(list_at, "must be an array"));
        };
        for (i, p) in list.iter().enumerate() {
            let p_at = format!("{list_at}/{i}");
            let p = deref(doc, p, &p_at)?;
            let (Some(pname), Some(place)) = (
                p.get("name").and_then(Value::as_str),
                p.get("in").and_then(Value::as_str),
            ) else {
                return Err(SpecError::new(p_at, "a parameter needs `name` and `in`"));
            };
            let key = (place.to_string(), pname.to_string());
            if !declared.contains_key(&key) {
                order.push(key.clone());
            }
            declared.insert(key, (p.clone(), p_at));
        }
    }
    let mut properties = Map::new();
    let mut required = Vec::new();
    let mut params = Vec::new();
    let mut taken: HashSet<String> = HashSet::new();
    for key in order {
        let (p, p_at) = &declared[&key];
        let Some(location) = Location::parse(&key.0) else {
            return Err(SpecError::new(
                format!("{p_at}/in"),
                format!("{:?} is not a parameter location", key.0),
            ));
        };
        // Headers the client sets itself.
        if location == Location::Header
            && matches!(
                key.1.to_ascii_lowercase().as_str(),
                "accept" | "content-type" | "authorization"
            )
        {
            continue;
        }
        let (schema, json_content) = match (p.get("schema"), p.get("content")) {
            (Some(s), _) => (resolver.schema(s, &format!("{p_at}/schema"))?, false),
            (None, Some(Value::Object(c))) => match c.iter().next() {
                Some((media, m)) => (
                    match m.get("schema") {
                        Some(s) => resolver
                            .schema(s, &format!("{p_at}/content/{}/schema", escape(media)))?,
                        None => json!({}),
                    },
                    true,
                ),
                None => (json!({}), true),
            },
            _ => (json!({}), false),
        };
        let mut schema = schema;
        if let (Some(d), Value::Object(s)) =
            (p.get("description").and_then(Value::as_str), &mut schema)
            && !s.contains_key("description")
        {
            s.insert("description".into(), json!(d));
        }
        let arg = unique_arg(&mut taken, &key.1, location.name());
        if location == Location::Path || p.get("required").and_then(Value::as_bool) == Some(true) {
            required.push(json!(arg));
        }
        properties.insert(arg.clone(), schema);
        let style = p
            .get("style")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| match location {
                Location::Query | Location::Cookie => "form".into(),
                Location::Path | Location::Header => "simple".into(),
            });
        let explode = p
            .get("explode")
            .and_then(Value::as_bool)
            .unwrap_or(style == "form");
        params.push(Param {
            arg,
            name: key.1.clone(),
            location,
            style,
            explode,
            json: json_content,
            allow_reserved: p.get("allowReserved").and_then(Value::as_bool) == Some(true),
        });
    }
    let mut body = None;
    if let Some(rb) = op.get("requestBody") {
        let rb_at = format!("{at}/requestBody");
        let rb = deref(doc, rb, &rb_at)?;
        if let Some((media, schema)) = pick_media(rb.get("content")) {
            let binary = is_binary(&media);
            let schema = match schema {
                _ if binary => json!({"type": "string", "contentEncoding": "base64",
                    "description": format!("the body's bytes ({media}), base64-encoded")}),
                Some(s) => {
                    resolver.schema_top(s, &format!("{rb_at}/content/{}/schema", escape(&media)))?
                }
                None if is_json(&media) => json!({}),
                None => json!({"type": "string"}),
            };
            let mut schema = schema;
            if let (Some(d), Value::Object(s)) =
                (rb.get("description").and_then(Value::as_str), &mut schema)
                && !s.contains_key("description")
            {
                s.insert("description".into(), json!(d));
            }
            let arg = unique_arg(&mut taken, "body", "request");
            if rb.get("required").and_then(Value::as_bool) == Some(true) {
                required.push(json!(arg));
            }
            let files = if media.starts_with("multipart/form-data") {
                file_fields(&mut schema)
            } else {
                vec![]
            };
            properties.insert(arg.clone(), schema);
            body = Some(RequestBody {
                arg,
                media,
                files,
                binary,
            });
        }
    }
    let input_schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    let input_listing = resolver.finish(&input_schema)?;
    let mut size = input_listing.nodes;
    let mut notes = std::mem::take(&mut resolver.notes);
    drop(resolver);
    let mut output_schema = None;
    let mut output_listing = Listing::default();
    let mut wrapped = false;
    let mut declared: Vec<String> = Vec::new();
    if let Some(Value::Object(responses)) = op.get("responses") {
        let mut codes: Vec<&String> = responses.keys().filter(|c| c.starts_with('2')).collect();
        codes.sort();
        for code in &codes {
            let r_at = format!("{at}/responses/{}", escape(code));
            let r = deref(doc, &responses[code.as_str()], &r_at)?;
            if let Some(Value::Object(content)) = r.get("content") {
                for media in content.keys() {
                    if !declared.contains(media) {
                        declared.push(media.clone());
                    }
                }
            }
        }
        if let Some(code) = codes.first() {
            let r_at = format!("{at}/responses/{}", escape(code));
            let r = deref(doc, &responses[code.as_str()], &r_at)?;
            if let Some((media, Some(s))) = pick_media(r.get("content"))
                && is_json(&media)
            {
                let mut resolver = Resolver::new(defs);
                let s =
                    resolver.schema_top(s, &format!("{r_at}/content/{}/schema", escape(&media)))?;
                let mut out = None;
                if s.get("type").and_then(Value::as_str) == Some("object") {
                    out = Some(s);
                } else if s.get("type").is_some() || s.get("items").is_some() {
                    // An array (or a scalar): MCP's structured content is
                    // an object, so the answer is wrapped.
                    out = Some(json!({
                        "type": "object",
                        "properties": {"result": s},
                    }));
                    wrapped = true;
                }
                if let Some(o) = out {
                    output_listing = resolver.finish(&o)?;
                    // Listed (and so kept by the host) only when strict;
                    // the components stay in the shared `defs` either way.
                    size += if settings.strict_responses {
                        output_listing.nodes
                    } else {
                        crate::refs::nodes(&o)
                    };
                    if settings.strict_responses {
                        notes.append(&mut resolver.notes);
                    }
                    output_schema = Some(o);
                }
            }
        }
    }
    let summary = op
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string();
    let long = op
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim();
    let mut description = match (summary.is_empty(), long.is_empty()) {
        (false, false) if long.starts_with(&summary) => long.to_string(),
        (false, false) => format!("{summary}\n\n{long}"),
        (false, true) => summary.clone(),
        (true, false) => long.to_string(),
        (true, true) => format!("{method} {path}"),
    };
    description.push_str(&format!("\n\n{method} {path}"));
    if op.get("deprecated").and_then(Value::as_bool) == Some(true) {
        description.push_str(" (deprecated)");
    }
    if wrapped {
        description.push_str("\nThe JSON answer is returned as {\"result\": <answer>}.");
    }
    for note in &notes {
        description.push_str(&format!("\nNote: {note}."));
    }
    let accept = accept(&declared);
    let operation = Operation {
        name,
        method,
        path: path.to_string(),
        tags,
        summary,
        description,
        params,
        body,
        input_schema,
        input_listing,
        defs: Arc::default(),
        output_schema,
        output_listing,
        wrapped,
        strict: settings.strict_responses,
        declared,
        accept,
        drift_logged: Arc::new(AtomicBool::new(false)),
        credentials: true,
        schemes: vec![],
        base: None,
    };
    Ok((operation, size))
}

/// The `Accept` of a call: the JSON media types the success responses
/// declare, then the others they declare at a lower weight, then anything
/// at the lowest (an error page may be HTML). Without `*/*` a server picks
/// the first type its document lists (Petstore's is XML: issue #55).
pub fn accept(declared: &[String]) -> String {
    let json: Vec<&str> = declared
        .iter()
        .map(String::as_str)
        .filter(|m| is_json(m) && !m.contains('*'))
        .collect();
    let other: Vec<&str> = declared
        .iter()
        .map(String::as_str)
        .filter(|m| !is_json(m) && !m.contains('*'))
        .collect();
    let mut parts: Vec<String> = if json.is_empty() {
        vec!["application/json".into()]
    } else {
        json.iter().map(|m| m.to_string()).collect()
    };
    parts.extend(other.iter().map(|m| format!("{m};q=0.5")));
    parts.push("*/*;q=0.1".into());
    parts.join(", ")
}

/// A request body sent as raw bytes: not JSON, a form, multipart or text.
pub fn is_binary(media: &str) -> bool {
    let m = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    !(is_json(&m)
        || m.starts_with("text/")
        || m.starts_with("multipart/")
        || m == "application/x-www-form-urlencoded"
        || m.ends_with("+xml")
        || m.ends_with("/xml")
        || m.ends_with("yaml")
        || m == "application/javascript"
        || m == "application/graphql"
        || m.is_empty())
}

fn unique_arg(taken: &mut HashSet<String>, name: &str, suffix: &str) -> String {
    if taken.insert(name.to_string()) {
        return name.to_string();
    }
    let mut candidate = format!("{name}_{suffix}");
    let mut n = 2;
    while !taken.insert(candidate.clone()) {
        candidate = format!("{name}_{suffix}{n}");
        n += 1;
    }
    candidate
}

pub fn is_json(media: &str) -> bool {
    let m = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    m == "application/json" || m.ends_with("+json") || m == "*/*"
}

/// The file fields of a multipart body's object schema; each becomes a
/// base64 string in the tool's input (a model writes text, not bytes).
fn file_fields(schema: &mut Value) -> Vec<String> {
    let mut files = Vec::new();
    let Some(Value::Object(props)) = schema.get_mut("properties") else {
        return files;
    };
    for (name, p) in props.iter_mut() {
        let is_file = |s: &Value| {
            s.get("format").and_then(Value::as_str) == Some("binary")
                || s.get("contentEncoding").is_some()
                || s.get("contentMediaType").is_some()
        };
        let many = p.get("type").and_then(Value::as_str) == Some("array")
            && p.get("items").is_some_and(is_file);
        if !is_file(p) && !many {
            continue;
        }
        files.push(name.clone());
        let file = json!({"type": "string", "contentEncoding": "base64",
            "description": "the file's content, base64-encoded"});
        if many {
            if let Some(obj) = p.as_object_mut() {
                obj.insert("items".into(), file);
            }
        } else {
            let description = p.get("description").cloned();
            *p = file;
            if let (Some(d), Some(obj)) = (description, p.as_object_mut()) {
                obj.insert(
                    "description".into(),
                    json!(format!("{} (base64-encoded)", d.as_str().unwrap_or(""))),
                );
            }
        }
    }
    files
}

/// The media type a request or response is written in: JSON first, then a
/// form, then anything (sent as text).
fn pick_media(content: Option<&Value>) -> Option<(String, Option<&Value>)> {
    let content = content?.as_object()?;
    let pick = content
        .iter()
        .find(|(m, _)| is_json(m) && *m != "*/*")
        .or_else(|| {
            content.iter().find(|(m, _)| {
                m.starts_with("application/x-www-form-urlencoded")
                    || m.starts_with("multipart/form-data")
            })
        })
        .or_else(|| content.iter().next())?;
    Some((pick.0.clone(), pick.1.get("schema")))
}

fn base_url(
    root: &Map<String, Value>,
    settings: &Settings,
    spec_url: Option<&url::Url>,
) -> Result<url::Url, String> {
    if let Some(base) = &settings.base_url {
        return url::Url::parse(base).map_err(|e| format!("base_url: {e}"));
    }
    let server = root
        .get("servers")
        .and_then(Value::as_array)
        .and_then(|s| s.first())
        .cloned()
        .unwrap_or_else(|| json!({"url": "/"}));
    server_url(&server, spec_url, None, "/servers/0")
}

/// A Server Object's URL, its variables at their defaults; a relative one
/// is resolved against the document's URL, else against `fallback` (the
/// document's own server, for an operation's).
fn server_url(
    server: &Value,
    spec_url: Option<&url::Url>,
    fallback: Option<&url::Url>,
    at: &str,
) -> Result<url::Url, String> {
    let mut raw = server
        .get("url")
        .and_then(Value::as_str)
        .unwrap_or("/")
        .to_string();
    if let Some(Value::Object(vars)) = server.get("variables") {
        for (k, v) in vars {
            if let Some(d) = v.get("default").and_then(Value::as_str) {
                raw = raw.replace(&format!("{{{k}}}"), d);
            }
        }
    }
    match url::Url::parse(&raw) {
        Ok(u) => Ok(u),
        Err(url::ParseError::RelativeUrlWithoutBase) => match spec_url.or(fallback) {
            Some(against) => against.join(&raw).map_err(|e| format!("{at}/url: {e}")),
            None => Err(format!(
                "the document's server URL {raw:?} ({at}) is relative and the document is a file: set base_url"
            )),
        },
        Err(e) => Err(format!("{at}/url {raw:?}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(doc: Value) -> Loaded {
        Loaded {
            text: doc.to_string(),
            value: doc,
            mime: "application/json",
            url: None,
        }
    }

    /// 40 operations, each with a body of a distinct 100-node schema.
    fn many() -> Value {
        let mut paths = Map::new();
        let mut schemas = Map::new();
        for i in 0..40 {
            let props: Map<String, Value> = (0..48)
                .map(|f| (format!("f{f}"), json!({"type": "string"})))
                .collect();
            schemas.insert(
                format!("S{i}"),
                json!({"type": "object", "properties": props}),
            );
            paths.insert(
                format!("/t{i}"),
                json!({"post": {"operationId": format!("op{i}"),
                    "requestBody": {"content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/S{i}")}}}},
                    "responses": {"200": {"description": "ok"}}}}),
            );
        }
        json!({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": paths,
               "components": {"schemas": schemas}})
    }

    #[test]
    fn past_max_schema_nodes_the_rest_is_left_out_with_a_reason() {
        let settings = Settings::parse(
            "api",
            &json!({"spec": "x.json", "base_url": "http://127.0.0.1:9", "max_schema_nodes": 1500}),
        )
        .unwrap();
        let api = build(&loaded(many()), &settings).unwrap();
        let served = api.operations.len();
        assert!(served > 0 && served < 40, "{served}");
        assert!(api.schema_nodes <= 1500, "{}", api.schema_nodes);
        let (over, why) = api.over_budget.clone().unwrap();
        assert_eq!(over + served, 40);
        assert_eq!(api.left_out, over);
        assert!(
            why.contains("max_schema_nodes (1500)") && why.contains("include/exclude"),
            "{why}"
        );
        // The served ones are whole, in document order.
        assert_eq!(api.operations[0].name, "op0");
        let listed = api.operations[0].node_spec().input_schema;
        assert_eq!(
            listed["properties"]["body"]["properties"]
                .as_object()
                .unwrap()
                .len(),
            48
        );
        // A discovery the host gave up on stops.
        let e = build_until(&loaded(many()), &settings, &AtomicBool::new(true)).unwrap_err();
        assert!(e.message.contains("cancelled"), "{e}");
    }

    #[test]
    fn accept_prefers_the_declared_json_types() {
        let d = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            accept(&d(&["application/xml", "application/json"])),
            "application/json, application/xml;q=0.5, */*;q=0.1"
        );
        assert_eq!(
            accept(&d(&["application/vnd.github+json", "text/html"])),
            "application/vnd.github+json, text/html;q=0.5, */*;q=0.1"
        );
        assert_eq!(accept(&[]), "application/json, */*;q=0.1");
        assert!(is_binary("application/octet-stream") && is_binary("image/png"));
        assert!(
            !is_binary("text/plain")
                && !is_binary("application/xml")
                && !is_binary("application/json")
        );
    }
}
