//! Cedar policies (`[policy] files`) as an `authorize` stage.
//!
//! The model: principals are `wf::Principal::"<name>"` in their groups
//! (`wf::Group::"<group>"`); each tool is an action `wf::Action::"<tool
//! name>"` (in the group `wf::Action::"tool"`) on a `wf::Tool` resource that
//! carries its source, kind, tags and MCP annotations; a prompt is the action
//! `wf::Action::"prompt:<name>"` on a `wf::Prompt`; reading or subscribing to
//! a resource is `wf::Action::"read_resource"` on a `wf::Resource`. The
//! context is the call's `arguments` (typed from the tool's input schema),
//! `client`, `transport` and `time` (UTC `hour`, `minute`, `weekday` with
//! 0 = Sunday, and `epoch` seconds).
//!
//! The schema is generated from the live catalog, so a policy naming an
//! unknown tool or argument fails validation at load, with its file and line.
//! Cedar's semantics hold: forbid wins over permit, and nothing is permitted
//! that no policy permits. A call whose policies fail to evaluate is denied.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use cedar_policy::{
    Authorizer, Context, Decision, Entities, EntityUid, Policy, PolicyId, PolicySet, Request,
    Schema, ValidationMode, Validator,
};
use serde_json::{Map, Value, json};

use super::{Authorize, Call, Capability, Kind, Principal, Refusal, Stage};

/// A tool as the schema sees it.
#[derive(Debug, Clone)]
pub struct ToolShape {
    /// The name clients know it by (the action's id).
    pub name: String,
    pub source: String,
    pub input_schema: Value,
}

/// A prompt as the schema sees it: its arguments and whether each is required.
#[derive(Debug, Clone)]
pub struct PromptShape {
    pub name: String,
    pub arguments: Vec<(String, bool)>,
}

/// The live catalog, as much of it as the schema needs.
#[derive(Debug, Clone, Default)]
pub struct CatalogShape {
    pub tools: Vec<ToolShape>,
    pub prompts: Vec<PromptShape>,
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{file}: cannot read the policy file: {error}")]
    Read { file: String, error: String },
    #[error("{file}:{line}: {message}")]
    Parse {
        file: String,
        line: usize,
        message: String,
    },
    #[error("{file}:{line}: {message}")]
    Invalid {
        file: String,
        line: usize,
        message: String,
    },
    #[error("policy id {id:?} is used twice ({file}); give each policy its own @id")]
    Duplicate { id: String, file: String },
    #[error("the policy schema wf generated is not valid: {0}")]
    Schema(String),
}

/// The MCP annotations a tool carries in the model, with the spec's defaults.
const HINTS: [(&str, bool); 4] = [
    ("readOnlyHint", false),
    ("destructiveHint", true),
    ("idempotentHint", false),
    ("openWorldHint", true),
];

/// Tags of a tool: the hints its annotations set true (as `wf_find` names them).
const TAGS: [(&str, &str); 4] = [
    ("readOnlyHint", "read_only"),
    ("destructiveHint", "destructive"),
    ("idempotentHint", "idempotent"),
    ("openWorldHint", "open_world"),
];

/// The Cedar type of a JSON-schema property, when policies can use it.
fn cedar_type(property: &Value) -> Option<Value> {
    match property.get("type").and_then(Value::as_str)? {
        "string" => Some(json!({"type": "String"})),
        "integer" => Some(json!({"type": "Long"})),
        "boolean" => Some(json!({"type": "Boolean"})),
        "array" => {
            let element = cedar_type(property.get("items")?)?;
            Some(json!({"type": "Set", "element": element}))
        }
        _ => None,
    }
}

/// The typed arguments of a tool's input schema.
fn argument_types(schema: &Value) -> Map<String, Value> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Map::new();
    for (name, property) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(mut ty) = cedar_type(property) {
            ty["required"] = json!(required.contains(&name.as_str()));
            out.insert(name.clone(), ty);
        }
    }
    out
}

fn context_type(arguments: Map<String, Value>) -> Value {
    json!({"type": "Record", "attributes": {
        "arguments": {"type": "Record", "attributes": arguments},
        "client": {"type": "String"},
        "transport": {"type": "String"},
        "time": {"type": "Record", "attributes": {
            "hour": {"type": "Long"}, "minute": {"type": "Long"},
            "weekday": {"type": "Long"}, "epoch": {"type": "Long"}
        }}
    }})
}

/// The action id of a prompt.
fn prompt_action(name: &str) -> String {
    format!("prompt:{name}")
}

const READ_RESOURCE: &str = "read_resource";

/// The Cedar schema (JSON form) of the catalog: what policies are checked against.
pub fn schema_json(catalog: &CatalogShape) -> Value {
    let string = json!({"type": "String"});
    let boolean = json!({"type": "Boolean"});
    let hints: Map<String, Value> = HINTS
        .iter()
        .map(|(h, _)| (h.to_string(), boolean.clone()))
        .collect();
    let mut actions = Map::new();
    for group in ["tool", "prompt", "resource"] {
        actions.insert(group.into(), json!({}));
    }
    for t in &catalog.tools {
        actions.insert(
            t.name.clone(),
            json!({"memberOf": [{"id": "tool"}], "appliesTo": {
                "principalTypes": ["Principal"], "resourceTypes": ["Tool"],
                "context": context_type(argument_types(&t.input_schema))
            }}),
        );
    }
    for p in &catalog.prompts {
        let arguments: Map<String, Value> = p
            .arguments
            .iter()
            .map(|(n, required)| (n.clone(), json!({"type": "String", "required": required})))
            .collect();
        actions.insert(
            prompt_action(&p.name),
            json!({"memberOf": [{"id": "prompt"}], "appliesTo": {
                "principalTypes": ["Principal"], "resourceTypes": ["Prompt"],
                "context": context_type(arguments)
            }}),
        );
    }
    actions.insert(
        READ_RESOURCE.into(),
        json!({"memberOf": [{"id": "resource"}], "appliesTo": {
            "principalTypes": ["Principal"], "resourceTypes": ["Resource"],
            "context": context_type(Map::new())
        }}),
    );
    // One shape for the three kinds, so a rule over every resource checks.
    let capability = json!({"shape": {"type": "Record", "attributes": {
        "source": string, "kind": string, "uri": string,
        "tags": {"type": "Set", "element": string},
        "annotations": {"type": "Record", "attributes": hints}
    }}});
    json!({"wf": {
        "entityTypes": {
            "Group": {},
            "Principal": {"memberOfTypes": ["Group"], "shape": {"type": "Record", "attributes": {"name": string}}},
            "Tool": capability,
            "Prompt": capability,
            "Resource": capability
        },
        "actions": actions
    }})
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The first labelled offset of a diagnostic, and its message with help.
fn located(d: &dyn miette::Diagnostic, text: &str) -> (usize, String) {
    let line = d
        .labels()
        .and_then(|mut l| l.next())
        .map_or(1, |l| line_of(text, l.offset()));
    let mut message = d.to_string();
    if let Some(help) = d.help() {
        message = format!("{message} ({help})");
    }
    (line, message)
}

/// One loaded policy set: the one calls are decided by, and the one lists
/// are (see `listing_policy`).
pub struct Policies {
    set: PolicySet,
    listing: PolicySet,
    authorizer: Authorizer,
}

impl std::fmt::Debug for Policies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policies")
            .field("policies", &self.set.policies().count())
            .finish()
    }
}

/// The policy's user-facing id: its `@id`, else `<file>#<n>` (1-based).
fn policy_id(policy: &Policy, file: &str, n: usize) -> String {
    policy
        .annotation("id")
        .map(str::to_string)
        .unwrap_or_else(|| format!("{file}#{n}"))
}

/// For lists (whether any call could be permitted, whatever the context): a
/// policy that reads `context` can neither be trusted to forbid (a forbid is
/// dropped) nor to fail to permit (a permit loses its conditions). What is
/// hidden then is hidden for every call.
fn listing_policy(policy: &Policy) -> Option<Policy> {
    let mut json = policy.to_json().ok()?;
    let reads_context = json
        .get("conditions")
        .is_some_and(|c| c.to_string().contains(r#""Var":"context""#));
    if !reads_context {
        return Some(policy.clone());
    }
    if json.get("effect").and_then(Value::as_str) == Some("forbid") {
        return None;
    }
    json["conditions"] = json!([]);
    Policy::from_json(Some(policy.id().clone()), json).ok()
}

impl Policies {
    /// Parses `files` (name, text) and validates them against the schema of
    /// `catalog`. Every problem names its file and line.
    pub fn from_texts(
        files: &[(String, String)],
        catalog: &CatalogShape,
    ) -> Result<Self, PolicyError> {
        let schema = Schema::from_json_value(schema_json(catalog))
            .map_err(|e| PolicyError::Schema(e.to_string()))?;
        let validator = Validator::new(schema);
        let mut set = PolicySet::new();
        let mut listing = PolicySet::new();
        for (file, text) in files {
            let parsed = PolicySet::from_str(text).map_err(|e| {
                let (line, message) = located(&e, text);
                PolicyError::Parse {
                    file: file.clone(),
                    line,
                    message,
                }
            })?;
            let checked = validator.validate(&parsed, ValidationMode::Strict);
            if let Some(e) = checked.validation_errors().next() {
                let (line, message) = located(e, text);
                return Err(PolicyError::Invalid {
                    file: file.clone(),
                    line,
                    message,
                });
            }
            // Parsed ids are `policy0`, `policy1`… in the file's order.
            let mut ordered: Vec<(usize, &Policy)> = parsed
                .policies()
                .map(|p| {
                    let n = p
                        .id()
                        .to_string()
                        .trim_start_matches("policy")
                        .parse::<usize>()
                        .unwrap_or(0);
                    (n, p)
                })
                .collect();
            ordered.sort_by_key(|(n, _)| *n);
            for (n, p) in ordered {
                let id = policy_id(p, file, n + 1);
                let p = p.new_id(PolicyId::new(&id));
                if let Some(l) = listing_policy(&p) {
                    listing.add(l).map_err(|_| PolicyError::Duplicate {
                        id: id.clone(),
                        file: file.clone(),
                    })?;
                }
                set.add(p).map_err(|_| PolicyError::Duplicate {
                    id,
                    file: file.clone(),
                })?;
            }
        }
        Ok(Self {
            set,
            listing,
            authorizer: Authorizer::new(),
        })
    }

    /// Reads `files` (relative to `base`) and loads them.
    pub fn load(
        files: &[PathBuf],
        base: Option<&Path>,
        catalog: &CatalogShape,
    ) -> Result<Self, PolicyError> {
        let mut texts = Vec::new();
        for f in files {
            let path = match base {
                Some(b) if f.is_relative() => b.join(f),
                _ => f.clone(),
            };
            let text = std::fs::read_to_string(&path).map_err(|e| PolicyError::Read {
                file: path.display().to_string(),
                error: e.to_string(),
            })?;
            texts.push((f.display().to_string(), text));
        }
        Self::from_texts(&texts, catalog)
    }

    pub fn len(&self) -> usize {
        self.set.policies().count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The reason annotation of policy `id`, if it has one.
    pub fn reason(&self, id: &str) -> Option<&str> {
        self.set.annotation(&PolicyId::new(id), "reason")
    }

    /// Decides `call`: allowed or not, with the ids of the policies that
    /// decided (and of those that failed to evaluate, which deny).
    pub fn decide(&self, call: &Call<'_>) -> Decided {
        let context = context_json(call);
        self.decide_with(&self.set, call.principal, &call.capability, context)
    }

    fn decide_with(
        &self,
        set: &PolicySet,
        principal: &Principal,
        capability: &Capability<'_>,
        context: Value,
    ) -> Decided {
        let (request, entities) = match request(principal, capability, context) {
            Ok(r) => r,
            Err(e) => {
                return Decided {
                    allowed: false,
                    policies: Vec::new(),
                    failed: vec![e],
                };
            }
        };
        let response = self.authorizer.is_authorized(&request, set, &entities);
        let policies: Vec<String> = response
            .diagnostics()
            .reason()
            .map(ToString::to_string)
            .collect();
        let failed: Vec<String> = response
            .diagnostics()
            .errors()
            .map(ToString::to_string)
            .collect();
        Decided {
            allowed: response.decision() == Decision::Allow && failed.is_empty(),
            policies,
            failed,
        }
    }
}

/// One decision: the outcome and what decided it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided {
    pub allowed: bool,
    /// The policies that decided (permits when allowed, forbids when not).
    pub policies: Vec<String>,
    /// Policies that failed to evaluate (each denies).
    pub failed: Vec<String>,
}

/// The action, resource and their types for a capability.
fn names(capability: &Capability<'_>) -> (String, &'static str, &'static str) {
    match capability.kind {
        Kind::Tool => (capability.name.to_string(), "tool", "wf::Tool"),
        Kind::Prompt => (prompt_action(capability.name), "prompt", "wf::Prompt"),
        Kind::Resource => (READ_RESOURCE.to_string(), "resource", "wf::Resource"),
    }
}

fn uid(ty: &str, id: &str) -> Value {
    json!({"type": ty, "id": id})
}

fn parse_uid(ty: &str, id: &str) -> Result<EntityUid, String> {
    EntityUid::from_json(uid(ty, id)).map_err(|e| e.to_string())
}

/// The request and entities of one decision.
fn request(
    principal: &Principal,
    capability: &Capability<'_>,
    context: Value,
) -> Result<(Request, Entities), String> {
    let (action, group, resource_type) = names(capability);
    let groups: Vec<Value> = principal
        .groups()
        .into_iter()
        .flatten()
        .map(|g| uid("wf::Group", g))
        .collect();
    let uri = if capability.kind == Kind::Resource {
        capability.name
    } else {
        ""
    };
    // Getting a prompt or reading a resource only reads.
    let read = json!({"readOnlyHint": true, "destructiveHint": false,
        "idempotentHint": true, "openWorldHint": false});
    let a = match capability.kind {
        Kind::Tool => capability.annotations,
        Kind::Prompt | Kind::Resource => Some(&read),
    };
    let hints: Map<String, Value> = HINTS
        .iter()
        .map(|(h, d)| {
            let v = a.and_then(|a| a.get(*h)).and_then(Value::as_bool);
            (h.to_string(), json!(v.unwrap_or(*d)))
        })
        .collect();
    let tags: Vec<&str> = TAGS
        .iter()
        .filter(|(h, _)| hints.get(*h) == Some(&Value::Bool(true)))
        .map(|(_, t)| *t)
        .collect();
    let attrs = json!({"source": capability.source, "kind": capability.kind.name(),
        "uri": uri, "tags": tags, "annotations": hints});
    let entities = json!([
        {"uid": uid("wf::Principal", principal.name()), "attrs": {"name": principal.name()}, "parents": groups},
        {"uid": uid(resource_type, capability.name), "attrs": attrs, "parents": []},
        {"uid": uid("wf::Action", &action), "attrs": {}, "parents": [uid("wf::Action", group)]},
        {"uid": uid("wf::Action", group), "attrs": {}, "parents": []}
    ]);
    let entities = Entities::from_json_value(entities, None).map_err(|e| e.to_string())?;
    let context = Context::from_json_value(context, None).map_err(|e| e.to_string())?;
    let request = Request::new(
        parse_uid("wf::Principal", principal.name())?,
        parse_uid("wf::Action", &action)?,
        parse_uid(resource_type, capability.name)?,
        context,
        None,
    )
    .map_err(|e| e.to_string())?;
    Ok((request, entities))
}

/// A JSON value as Cedar can hold it: numbers that are integers, strings,
/// booleans, and sets and records of those.
fn cedar_value(v: &Value) -> Option<Value> {
    match v {
        Value::String(_) | Value::Bool(_) => Some(v.clone()),
        Value::Number(n) => n.as_i64().map(|i| json!(i)),
        Value::Array(items) => items
            .iter()
            .map(cedar_value)
            .collect::<Option<Vec<_>>>()
            .map(Value::Array),
        Value::Object(_) | Value::Null => None,
    }
}

/// The context of a call: its arguments, client, transport and time (UTC).
fn context_json(call: &Call<'_>) -> Value {
    let arguments: Map<String, Value> = call
        .arguments
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), cedar_value(v)?)))
        .collect();
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    json!({
        "arguments": arguments,
        "client": call.client.unwrap_or(""),
        "transport": call.transport.name(),
        "time": {
            "hour": (epoch / 3600) % 24,
            "minute": (epoch / 60) % 60,
            // 1970-01-01 was a Thursday (4); 0 is Sunday.
            "weekday": (epoch / 86_400 + 4) % 7,
            "epoch": epoch
        }
    })
}

/// The refusal for a denied call: the deciding policy's id and its `@reason`.
fn refusal(policies: &Policies, call: &Call<'_>, decided: &Decided) -> Refusal {
    let what = format!("{} {:?}", call.capability.kind.name(), call.capability.name);
    let who = call.principal.name();
    let (policy, message) = if let Some(id) = decided.policies.first() {
        let why = policies
            .reason(id)
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        (
            id.clone(),
            format!("{what} is denied to principal {who:?} by policy {id:?}{why}"),
        )
    } else if let Some(e) = decided.failed.first() {
        (
            "error".to_string(),
            format!("{what} is denied to principal {who:?}: a policy failed to evaluate ({e})"),
        )
    } else {
        (
            "default".to_string(),
            format!("{what} is denied to principal {who:?}: no policy permits it"),
        )
    };
    Refusal {
        stage: Stage::Authorize,
        message,
        policy: Some(policy),
        retry_after: None,
    }
}

impl Authorize for Policies {
    fn authorize(&self, call: &Call<'_>) -> Result<Vec<String>, Refusal> {
        let decided = self.decide(call);
        tracing::debug!(
            principal = call.principal.name(),
            capability = call.capability.name,
            allowed = decided.allowed,
            policies = ?decided.policies,
            failed = ?decided.failed,
            "policy decision"
        );
        if decided.policies.is_empty() {
            let label = if decided.failed.is_empty() {
                "default"
            } else {
                "error"
            };
            crate::telemetry::metrics::policy_decision(label, decided.allowed);
        }
        for id in &decided.policies {
            crate::telemetry::metrics::policy_decision(id, decided.allowed);
        }
        if decided.allowed {
            return Ok(decided.policies);
        }
        Err(refusal(self, call, &decided))
    }

    fn may_list(&self, principal: &Principal, capability: &Capability<'_>) -> bool {
        let context = json!({"arguments": {}, "client": "", "transport": "",
            "time": {"hour": 0, "minute": 0, "weekday": 0, "epoch": 0}});
        self.decide_with(&self.listing, principal, capability, context)
            .allowed
    }
}

/// Example requests for `wf policy test`: each decided, with the policies
/// that decided it.
pub fn test_requests(policies: &Policies, requests: &[Value]) -> Vec<Value> {
    requests
        .iter()
        .map(|r| {
            let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
            let groups: Vec<String> = r
                .get("groups")
                .and_then(Value::as_array)
                .map(|g| {
                    g.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let principal = if groups.is_empty() {
                Principal::named(text("principal"))
            } else {
                Principal::with_groups(text("principal"), groups)
            };
            let kind = match text("kind") {
                "prompt" => Kind::Prompt,
                "resource" => Kind::Resource,
                _ => Kind::Tool,
            };
            let name = if kind == Kind::Tool {
                text("tool")
            } else {
                text("name")
            };
            let arguments = r.get("arguments").cloned().unwrap_or(json!({}));
            let call = Call {
                entry: super::Entry::ToolsCall,
                principal: &principal,
                capability: Capability {
                    kind,
                    source: text("source"),
                    name,
                    annotations: r.get("annotations"),
                },
                arguments: &arguments,
                client: r.get("client").and_then(Value::as_str),
                client_version: None,
                transport: super::Transport::Http,
            };
            let decided = policies.decide(&call);
            let mut out = json!({
                "request": r,
                "decision": if decided.allowed { "allow" } else { "deny" },
                "policies": decided.policies,
            });
            if !decided.failed.is_empty() {
                out["errors"] = json!(decided.failed);
            }
            if !decided.allowed {
                out["message"] = json!(refusal(policies, &call, &decided).message);
            }
            out
        })
        .collect()
}
