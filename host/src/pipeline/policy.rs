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

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use cedar_policy::{
    ActionConstraint, Authorizer, Context, Decision, Entities, Entity, EntityId, EntityTypeName,
    EntityUid, Policy, PolicyId, PolicySet, Request, ResourceConstraint, RestrictedExpression,
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
        "endpoint": {"type": "String"},
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

/// How many buckets, or principals' and capabilities' entities, one policy
/// set keeps; past it the cache starts over (a bound, not an eviction policy:
/// a catalog has far fewer capabilities).
const CACHE_BOUND: usize = 4096;

/// The entity types of the model, parsed once.
struct Types {
    principal: EntityTypeName,
    group: EntityTypeName,
    action: EntityTypeName,
    tool: EntityTypeName,
    prompt: EntityTypeName,
    resource: EntityTypeName,
}

impl Types {
    fn new() -> Self {
        let parse = |t: &str| EntityTypeName::from_str(t).expect("a constant type name parses");
        Self {
            principal: parse("wf::Principal"),
            group: parse("wf::Group"),
            action: parse("wf::Action"),
            tool: parse("wf::Tool"),
            prompt: parse("wf::Prompt"),
            resource: parse("wf::Resource"),
        }
    }

    fn uid(ty: &EntityTypeName, id: &str) -> EntityUid {
        EntityUid::from_type_name_and_id(ty.clone(), EntityId::new(id))
    }

    fn resource_type(&self, kind: Kind) -> &EntityTypeName {
        match kind {
            Kind::Tool => &self.tool,
            Kind::Prompt => &self.prompt,
            Kind::Resource => &self.resource,
        }
    }
}

/// An entity named in a policy's scope, as `(type, id)` text.
type Named = (String, String);

fn named(uid: &EntityUid) -> Named {
    (
        uid.type_name().to_string(),
        uid.id().unescaped().to_string(),
    )
}

/// What a policy's scope says about the action and resource: which calls
/// it could apply to at all.
struct Scoped {
    policy: Policy,
    /// The actions it names (`==` or `in`); `None`: any action.
    actions: Option<Vec<Named>>,
    /// The one resource it names (`==`, `in`, `is … in`); `None`: any.
    resource: Option<Named>,
    /// Whether its conditions read `context`.
    reads_context: bool,
}

/// Whether a policy's conditions read `context` (then a decision needs the
/// call's context built; else an empty one decides the same).
fn reads_context(policy: &Policy) -> bool {
    policy.to_json().map_or(true, |json| {
        json.get("conditions")
            .is_some_and(|c| c.to_string().contains(r#""Var":"context""#))
    })
}

impl Scoped {
    fn new(policy: Policy) -> Self {
        let actions = match policy.action_constraint() {
            ActionConstraint::Any => None,
            ActionConstraint::Eq(a) => Some(vec![named(&a)]),
            ActionConstraint::In(list) => Some(list.iter().map(named).collect()),
        };
        let resource = match policy.resource_constraint() {
            ResourceConstraint::Any | ResourceConstraint::Is(_) => None,
            ResourceConstraint::Eq(r)
            | ResourceConstraint::In(r)
            | ResourceConstraint::IsIn(_, r) => Some(named(&r)),
        };
        let reads_context = reads_context(&policy);
        Self {
            policy,
            actions,
            resource,
            reads_context,
        }
    }

    /// Whether its scope could match `action` (in `group`) on `resource`.
    /// Exact for the model's entities: an action's only parent is its group
    /// and a capability has none, so `in` a capability is `==`; when in
    /// doubt it says yes (evaluating one policy more decides the same).
    fn could_apply(&self, action: &Named, group: &Named, resource: &Named) -> bool {
        let action_ok = self
            .actions
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == action || n == group));
        action_ok && self.resource.as_ref().is_none_or(|r| r == resource)
    }
}

/// The policies that could apply to one capability, ready to evaluate.
struct Bucket {
    set: PolicySet,
    reads_context: bool,
}

/// A policy set split by action and resource: a decision evaluates only the
/// policies whose scope could match its call (evaluating one that cannot
/// decides nothing: its scope is false before its conditions run). Each
/// capability's bucket is built on its first decision and kept.
struct Indexed {
    set: PolicySet,
    scoped: Vec<Scoped>,
    /// Per kind, the capabilities some policy's scope names: each gets its
    /// own bucket; every other one of that kind shares its action's.
    named: [HashSet<String>; 3],
    buckets: [RwLock<HashMap<String, Arc<Bucket>>>; 3],
}

fn kind_index(kind: Kind) -> usize {
    match kind {
        Kind::Tool => 0,
        Kind::Prompt => 1,
        Kind::Resource => 2,
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Indexed {
    fn new(set: PolicySet) -> Self {
        let scoped: Vec<Scoped> = set.policies().cloned().map(Scoped::new).collect();
        let mut named: [HashSet<String>; 3] = Default::default();
        for s in &scoped {
            if let Some((ty, id)) = &s.resource {
                let kind = match ty.as_str() {
                    "wf::Tool" => Kind::Tool,
                    "wf::Prompt" => Kind::Prompt,
                    "wf::Resource" => Kind::Resource,
                    _ => continue,
                };
                named[kind_index(kind)].insert(id.clone());
            }
        }
        Self {
            set,
            scoped,
            named,
            buckets: Default::default(),
        }
    }

    /// The bucket of `capability`: the policies that could apply to a call to it.
    fn bucket(&self, capability: &Capability<'_>) -> Arc<Bucket> {
        let k = kind_index(capability.kind);
        // A tool or a prompt is its own action, so its own bucket; every
        // resource is read by one action, so those no scope names share one.
        let own = capability.kind != Kind::Resource || self.named[k].contains(capability.name);
        let key = if own { capability.name } else { "\0" };
        if let Some(b) = read(&self.buckets[k]).get(key) {
            return b.clone();
        }
        let (action, group, resource_type) = names(capability);
        let action = ("wf::Action".to_string(), action);
        let group = ("wf::Action".to_string(), group.to_string());
        // Outside the named ones, a resource matches no policy that names one.
        let resource = if own {
            (resource_type.to_string(), capability.name.to_string())
        } else {
            (String::new(), String::new())
        };
        let mut set = PolicySet::new();
        let mut reads_context = false;
        for s in &self.scoped {
            if s.could_apply(&action, &group, &resource) {
                reads_context |= s.reads_context;
                // Ids are unique in `self.set`, so adding cannot fail.
                let _ = set.add(s.policy.clone());
            }
        }
        let bucket = Arc::new(Bucket { set, reads_context });
        let mut buckets = write(&self.buckets[k]);
        if buckets.len() >= CACHE_BOUND {
            buckets.clear();
        }
        buckets.insert(key.to_string(), bucket.clone());
        bucket
    }
}

/// The entities and request ids of one principal using one capability,
/// kept while neither changes.
struct Subject {
    groups: Vec<String>,
    source: String,
    annotations: Option<Value>,
    principal: EntityUid,
    action: EntityUid,
    resource: EntityUid,
    entities: Entities,
}

impl Subject {
    fn is_for(&self, principal: &Principal, capability: &Capability<'_>) -> bool {
        let groups = principal.member_groups();
        self.groups.len() == groups.len()
            && self.groups.iter().zip(groups).all(|(a, b)| a == &**b)
            && self.source == capability.source
            && self.annotations.as_ref() == capability.annotations
    }
}

/// One loaded policy set: the one calls are decided by, and the one lists
/// are (see `listing_policy`).
pub struct Policies {
    calls: Indexed,
    listing: Indexed,
    types: Types,
    /// Subjects by (kind, principal, capability name).
    subjects: RwLock<HashMap<(Kind, String, String), Arc<Subject>>>,
    authorizer: Authorizer,
}

impl std::fmt::Debug for Policies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policies")
            .field("policies", &self.calls.scoped.len())
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

/// The context lists are decided in: no arguments, no client, time zero.
fn listing_context() -> Result<Context, String> {
    context_of(&Map::new(), "", "", "", 0)
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
            calls: Indexed::new(set),
            listing: Indexed::new(listing),
            types: Types::new(),
            subjects: RwLock::default(),
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
        self.calls.scoped.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The reason annotation of policy `id`, if it has one.
    pub fn reason(&self, id: &str) -> Option<&str> {
        self.calls.set.annotation(&PolicyId::new(id), "reason")
    }

    /// Decides `call`: allowed or not, with the ids of the policies that
    /// decided (and of those that failed to evaluate, which deny).
    pub fn decide(&self, call: &Call<'_>) -> Decided {
        self.decide_in(&self.calls, call.principal, &call.capability, || {
            call_context(call)
        })
    }

    /// The entities of `principal` using `capability`, from the cache when
    /// they are still what it was built from.
    fn subject(
        &self,
        principal: &Principal,
        capability: &Capability<'_>,
    ) -> Result<Arc<Subject>, String> {
        let key = (
            capability.kind,
            principal.name().to_string(),
            capability.name.to_string(),
        );
        if let Some(s) = read(&self.subjects).get(&key)
            && s.is_for(principal, capability)
        {
            return Ok(s.clone());
        }
        let subject = Arc::new(self.build_subject(principal, capability)?);
        let mut subjects = write(&self.subjects);
        if subjects.len() >= CACHE_BOUND {
            subjects.clear();
        }
        subjects.insert(key, subject.clone());
        Ok(subject)
    }

    fn build_subject(
        &self,
        principal: &Principal,
        capability: &Capability<'_>,
    ) -> Result<Subject, String> {
        let t = &self.types;
        let (action, group, _) = names(capability);
        let groups: Vec<String> = principal
            .member_groups()
            .iter()
            .map(|g| g.to_string())
            .collect();
        let principal_uid = Types::uid(&t.principal, principal.name());
        let action_uid = Types::uid(&t.action, &action);
        let group_uid = Types::uid(&t.action, group);
        let resource_uid = Types::uid(t.resource_type(capability.kind), capability.name);
        let string = |s: &str| RestrictedExpression::new_string(s.to_string());
        let who = Entity::new(
            principal_uid.clone(),
            HashMap::from([("name".to_string(), string(principal.name()))]),
            groups.iter().map(|g| Types::uid(&t.group, g)).collect(),
        )
        .map_err(|e| e.to_string())?;
        let what = Entity::new(
            resource_uid.clone(),
            capability_attrs(capability)?,
            HashSet::new(),
        )
        .map_err(|e| e.to_string())?;
        let entities = Entities::from_entities(
            [
                who,
                what,
                Entity::new_no_attrs(action_uid.clone(), HashSet::from([group_uid.clone()])),
                Entity::new_no_attrs(group_uid, HashSet::new()),
            ],
            None,
        )
        .map_err(|e| e.to_string())?;
        Ok(Subject {
            groups,
            source: capability.source.to_string(),
            annotations: capability.annotations.cloned(),
            principal: principal_uid,
            action: action_uid,
            resource: resource_uid,
            entities,
        })
    }

    /// Decides in `index`: only the policies whose scope could match are
    /// evaluated, none at all when there are none (nothing permits: denied),
    /// and the context is built only when one of them reads it.
    fn decide_in(
        &self,
        index: &Indexed,
        principal: &Principal,
        capability: &Capability<'_>,
        context: impl FnOnce() -> Result<Context, String>,
    ) -> Decided {
        let failed = |e: String| Decided {
            allowed: false,
            policies: Vec::new(),
            failed: vec![e],
        };
        let bucket = index.bucket(capability);
        if bucket.set.is_empty() {
            return Decided {
                allowed: false,
                policies: Vec::new(),
                failed: Vec::new(),
            };
        }
        let subject = match self.subject(principal, capability) {
            Ok(s) => s,
            Err(e) => return failed(e),
        };
        let context = if bucket.reads_context {
            match context() {
                Ok(c) => c,
                Err(e) => return failed(e),
            }
        } else {
            Context::empty()
        };
        let request = match Request::new(
            subject.principal.clone(),
            subject.action.clone(),
            subject.resource.clone(),
            context,
            None,
        ) {
            Ok(r) => r,
            Err(e) => return failed(e.to_string()),
        };
        let response = self
            .authorizer
            .is_authorized(&request, &bucket.set, &subject.entities);
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

/// The action, its group and the resource type for a capability.
fn names(capability: &Capability<'_>) -> (String, &'static str, &'static str) {
    match capability.kind {
        Kind::Tool => (capability.name.to_string(), "tool", "wf::Tool"),
        Kind::Prompt => (prompt_action(capability.name), "prompt", "wf::Prompt"),
        Kind::Resource => (READ_RESOURCE.to_string(), "resource", "wf::Resource"),
    }
}

/// A capability's attributes: source, kind, URI, tags and annotations (with
/// the spec's defaults; a prompt or a resource only reads).
fn capability_attrs(
    capability: &Capability<'_>,
) -> Result<HashMap<String, RestrictedExpression>, String> {
    let read = json!({"readOnlyHint": true, "destructiveHint": false,
        "idempotentHint": true, "openWorldHint": false});
    let a = match capability.kind {
        Kind::Tool => capability.annotations,
        Kind::Prompt | Kind::Resource => Some(&read),
    };
    let given = |h: &str| a.and_then(|a| a.get(h)).and_then(Value::as_bool);
    // The spec's `destructiveHint` (default true) "is meaningful only when
    // readOnlyHint is false": a tool that only reads destroys nothing, so a
    // rule on destructive tools must not catch it (server-filesystem marks
    // its reads `readOnlyHint: true` and says nothing more).
    let read_only = given("readOnlyHint").unwrap_or(false);
    let hints: Vec<(&str, bool)> = HINTS
        .iter()
        .map(|(h, d)| match *h {
            "destructiveHint" if read_only => (*h, false),
            _ => (*h, given(h).unwrap_or(*d)),
        })
        .collect();
    let tags = TAGS
        .iter()
        .filter(|(h, _)| hints.iter().any(|(n, v)| n == h && *v))
        .map(|(_, t)| RestrictedExpression::new_string(t.to_string()));
    let annotations = RestrictedExpression::new_record(
        hints
            .iter()
            .map(|(h, v)| (h.to_string(), RestrictedExpression::new_bool(*v))),
    )
    .map_err(|e| e.to_string())?;
    let uri = if capability.kind == Kind::Resource {
        capability.name
    } else {
        ""
    };
    let string = |s: &str| RestrictedExpression::new_string(s.to_string());
    Ok(HashMap::from([
        ("source".to_string(), string(capability.source)),
        ("kind".to_string(), string(capability.kind.name())),
        ("uri".to_string(), string(uri)),
        ("tags".to_string(), RestrictedExpression::new_set(tags)),
        ("annotations".to_string(), annotations),
    ]))
}

/// A JSON value as Cedar can hold it: numbers that are integers, strings,
/// booleans, and sets of those.
fn cedar_value(v: &Value) -> Option<RestrictedExpression> {
    match v {
        Value::String(s) => Some(RestrictedExpression::new_string(s.clone())),
        Value::Bool(b) => Some(RestrictedExpression::new_bool(*b)),
        Value::Number(n) => n.as_i64().map(RestrictedExpression::new_long),
        Value::Array(items) => items
            .iter()
            .map(cedar_value)
            .collect::<Option<Vec<_>>>()
            .map(RestrictedExpression::new_set),
        Value::Object(_) | Value::Null => None,
    }
}

/// A context: `arguments`, `client`, `transport`, `endpoint` (`""` on
/// `/mcp`) and `time` at `epoch` (UTC).
fn context_of(
    arguments: &Map<String, Value>,
    client: &str,
    transport: &str,
    endpoint: &str,
    epoch: i64,
) -> Result<Context, String> {
    let arguments = RestrictedExpression::new_record(
        arguments
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), cedar_value(v)?))),
    )
    .map_err(|e| e.to_string())?;
    let long = RestrictedExpression::new_long;
    let time = RestrictedExpression::new_record([
        ("hour".to_string(), long((epoch / 3600) % 24)),
        ("minute".to_string(), long((epoch / 60) % 60)),
        // 1970-01-01 was a Thursday (4); 0 is Sunday.
        ("weekday".to_string(), long((epoch / 86_400 + 4) % 7)),
        ("epoch".to_string(), long(epoch)),
    ])
    .map_err(|e| e.to_string())?;
    Context::from_pairs([
        ("arguments".to_string(), arguments),
        (
            "client".to_string(),
            RestrictedExpression::new_string(client.to_string()),
        ),
        (
            "transport".to_string(),
            RestrictedExpression::new_string(transport.to_string()),
        ),
        (
            "endpoint".to_string(),
            RestrictedExpression::new_string(endpoint.to_string()),
        ),
        ("time".to_string(), time),
    ])
    .map_err(|e| e.to_string())
}

/// The context of a call: its arguments, client, transport and time (now, UTC).
fn call_context(call: &Call<'_>) -> Result<Context, String> {
    let epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let none = Map::new();
    context_of(
        call.arguments.as_object().unwrap_or(&none),
        call.client.unwrap_or(""),
        call.transport.name(),
        call.endpoint.unwrap_or(""),
        epoch,
    )
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
        self.decide_in(&self.listing, principal, capability, listing_context)
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
                endpoint: None,
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

#[cfg(test)]
mod tests {
    //! The split evaluation decides as Cedar does over the whole set, with
    //! the request built from JSON (the straightforward way), on random
    //! policies and requests.

    use super::*;
    use crate::pipeline::{Entry, Transport};

    /// A small deterministic generator (xorshift), so a failure reproduces.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }
    }

    const TOOLS: [&str; 4] = ["t0", "t1", "t2", "t3"];

    fn catalog() -> CatalogShape {
        let schema = json!({"type": "object", "properties": {
            "repo": {"type": "string"}, "n": {"type": "integer"}}, "required": ["repo"]});
        CatalogShape {
            tools: TOOLS
                .iter()
                .map(|t| ToolShape {
                    name: t.to_string(),
                    source: "s".into(),
                    input_schema: schema.clone(),
                })
                .collect(),
            prompts: vec![PromptShape {
                name: "review".into(),
                arguments: vec![("code".into(), false)],
            }],
        }
    }

    fn random_policy(r: &mut Rng) -> String {
        let effect = r.pick(&["permit", "permit", "forbid"]);
        let principal = r.pick(&[
            "principal",
            "principal == wf::Principal::\"alice\"",
            "principal == wf::Principal::\"bob\"",
            "principal in wf::Group::\"support\"",
            "principal in wf::Group::\"ci\"",
        ]);
        let tool = r.pick(&TOOLS);
        let other = r.pick(&TOOLS);
        let action = match r.below(7) {
            0 => "action".to_string(),
            1 | 2 => format!("action == wf::Action::\"{tool}\""),
            3 => format!("action in [wf::Action::\"{tool}\", wf::Action::\"{other}\"]"),
            4 => "action in wf::Action::\"tool\"".to_string(),
            5 => "action == wf::Action::\"prompt:review\"".to_string(),
            _ => "action == wf::Action::\"read_resource\"".to_string(),
        };
        let resource = match r.below(6) {
            0..=2 => "resource".to_string(),
            3 => format!("resource == wf::Tool::\"{}\"", r.pick(&TOOLS)),
            4 => format!(
                "resource == wf::Resource::\"{}\"",
                r.pick(&["file:///a", "file:///b"])
            ),
            _ => "resource is wf::Tool".to_string(),
        };
        let condition = r.pick(&[
            "",
            "when { context.transport == \"http\" }",
            "unless { context.arguments.repo like \"acme/*\" }",
            "when { context.arguments has n && context.arguments.n > 3 }",
            "when { resource.annotations.destructiveHint }",
            "when { resource.tags.contains(\"read_only\") }",
            "when { principal.name == \"carol\" }",
            "when { context.time.hour < 24 }",
        ]);
        format!("{effect}({principal}, {action}, {resource}) {condition};\n")
    }

    /// The straightforward request: entities and context from JSON.
    fn plain_request(call: &Call<'_>) -> (Request, Entities) {
        let c = &call.capability;
        let (action, group, resource_type) = names(c);
        let uid = |ty: &str, id: &str| json!({"type": ty, "id": id});
        let groups: Vec<Value> = call
            .principal
            .member_groups()
            .iter()
            .map(|g| uid("wf::Group", g))
            .collect();
        let read = json!({"readOnlyHint": true, "destructiveHint": false,
            "idempotentHint": true, "openWorldHint": false});
        let a = match c.kind {
            Kind::Tool => c.annotations,
            _ => Some(&read),
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
        let uri = if c.kind == Kind::Resource { c.name } else { "" };
        let attrs = json!({"source": c.source, "kind": c.kind.name(), "uri": uri,
            "tags": tags, "annotations": hints});
        let name = call.principal.name();
        let entities = Entities::from_json_value(
            json!([
                {"uid": uid("wf::Principal", name), "attrs": {"name": name}, "parents": groups},
                {"uid": uid(resource_type, c.name), "attrs": attrs, "parents": []},
                {"uid": uid("wf::Action", &action), "attrs": {}, "parents": [uid("wf::Action", group)]},
                {"uid": uid("wf::Action", group), "attrs": {}, "parents": []}
            ]),
            None,
        )
        .unwrap();
        let arguments: Map<String, Value> = call
            .arguments
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, v)| cedar_value(v).is_some())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let context = Context::from_json_value(
            json!({"arguments": arguments, "client": call.client.unwrap_or(""),
                "transport": call.transport.name(), "endpoint": call.endpoint.unwrap_or(""),
                "time": {"hour": (epoch / 3600) % 24, "minute": (epoch / 60) % 60,
                    "weekday": (epoch / 86_400 + 4) % 7, "epoch": epoch}}),
            None,
        )
        .unwrap();
        let parse = |v: Value| EntityUid::from_json(v).unwrap();
        let request = Request::new(
            parse(uid("wf::Principal", name)),
            parse(uid("wf::Action", &action)),
            parse(uid(resource_type, c.name)),
            context,
            None,
        )
        .unwrap();
        (request, entities)
    }

    fn plain(policies: &Policies, call: &Call<'_>) -> (bool, Vec<String>, bool) {
        let (request, entities) = plain_request(call);
        let response = Authorizer::new().is_authorized(&request, &policies.calls.set, &entities);
        let mut ids: Vec<String> = response
            .diagnostics()
            .reason()
            .map(ToString::to_string)
            .collect();
        ids.sort();
        let failed = response.diagnostics().errors().next().is_some();
        (
            response.decision() == Decision::Allow && !failed,
            ids,
            failed,
        )
    }

    #[test]
    fn split_evaluation_decides_as_the_whole_set_on_random_requests() {
        let mut r = Rng(0x5eed_1234_abcd_0042);
        let catalog = catalog();
        let (mut checked, mut allowed, mut evaluated, mut all) = (0, 0, 0, 0);
        for round in 0..40 {
            let mut text = String::new();
            let mut n = 0;
            let want = 1 + r.below(30);
            while n < want {
                let p = random_policy(&mut r);
                // Keep only what validates (some scopes are impossible).
                if Policies::from_texts(&[("f".into(), p.clone())], &catalog).is_ok() {
                    text.push_str(&format!("@id(\"r{round}p{n}\")\n{p}"));
                    n += 1;
                }
            }
            let policies = Policies::from_texts(&[("f".into(), text.clone())], &catalog).unwrap();
            for _ in 0..60 {
                let groups: Vec<String> = match r.below(3) {
                    0 => Vec::new(),
                    1 => vec!["support".into()],
                    _ => vec!["ci".into(), "support".into()],
                };
                let who = Principal::with_groups(r.pick(&["alice", "bob", "carol"]), groups);
                let annotations = match r.below(3) {
                    0 => None,
                    1 => Some(json!({"destructiveHint": false, "readOnlyHint": true})),
                    _ => Some(json!({"destructiveHint": true})),
                };
                let (kind, name) = match r.below(6) {
                    0 => (Kind::Prompt, "review"),
                    1 => (
                        Kind::Resource,
                        r.pick(&["file:///a", "file:///b", "file:///c"]),
                    ),
                    _ => (Kind::Tool, r.pick(&TOOLS)),
                };
                let arguments = match r.below(4) {
                    0 => json!({"repo": "acme/web"}),
                    1 => json!({"repo": "other/x", "n": 5}),
                    2 => json!({"repo": "acme/y", "n": 1, "extra": {"nested": true}}),
                    _ => json!({"repo": "z"}),
                };
                let call = Call {
                    entry: Entry::ToolsCall,
                    principal: &who,
                    capability: Capability {
                        kind,
                        source: "s",
                        name,
                        annotations: annotations.as_ref(),
                    },
                    arguments: &arguments,
                    client: Some("c"),
                    client_version: None,
                    endpoint: None,
                    transport: if r.below(2) == 0 {
                        Transport::Http
                    } else {
                        Transport::Stdio
                    },
                };
                let expected = plain(&policies, &call);
                // Twice: the second decision comes from the caches.
                for _ in 0..2 {
                    let fast = policies.decide(&call);
                    let mut ids = fast.policies.clone();
                    ids.sort();
                    assert_eq!(
                        (fast.allowed, ids, !fast.failed.is_empty()),
                        expected.clone(),
                        "policies:\n{text}\ncall: {call:?}"
                    );
                }
                allowed += usize::from(expected.0);
                evaluated += policies
                    .calls
                    .bucket(&call.capability)
                    .set
                    .policies()
                    .count();
                all += policies.len();
                checked += 1;
            }
        }
        assert_eq!(checked, 40 * 60);
        // Not a degenerate mix: both outcomes, and the split leaves policies out.
        assert!(
            allowed > checked / 10 && allowed < checked * 9 / 10,
            "{allowed}"
        );
        assert!(evaluated < all / 2, "{evaluated} of {all}");
    }

    #[test]
    fn a_static_tokens_groups_are_its_groups_for_policies() {
        let text = "@id(\"ci-only\")\npermit(principal in wf::Group::\"ci\", action, resource);\n";
        let policies = Policies::from_texts(&[("f".into(), text.into())], &catalog()).unwrap();
        let cap = Capability {
            kind: Kind::Tool,
            source: "s",
            name: "t0",
            annotations: None,
        };
        assert!(policies.may_list(&Principal::named_in("bot", &["ci".into()]), &cap));
        // The same name without the group: its cached entities are not reused.
        assert!(!policies.may_list(&Principal::named("bot"), &cap));
    }

    #[test]
    fn a_capability_no_policy_names_is_denied_without_evaluation() {
        let text = "@id(\"only-t1\")\npermit(principal, action == wf::Action::\"t1\", resource);\n";
        let policies = Policies::from_texts(&[("f".into(), text.into())], &catalog()).unwrap();
        let who = Principal::named("alice");
        let cap = |name| Capability {
            kind: Kind::Tool,
            source: "s",
            name,
            annotations: None,
        };
        assert!(policies.calls.bucket(&cap("t0")).set.is_empty());
        assert!(!policies.may_list(&who, &cap("t0")));
        assert!(policies.may_list(&who, &cap("t1")));
    }
}
