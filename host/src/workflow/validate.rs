//! Validation against the live planner catalog, before anything runs. Every
//! problem is listed, each with its node and the path of the offending value.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::catalog::PlannerCatalog;
use super::graph;
use super::model::Workflow;
use super::refs::{Ref, collect};

pub use super::problem::{Problem, ProblemKind};

fn problem(node: Option<&str>, path: String, kind: ProblemKind, message: String) -> Problem {
    Problem::new(node, path, kind, message)
}

/// The names a JSON schema lists as `required`.
pub(super) fn required(schema: &Value) -> impl Iterator<Item = &str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// The sub-schema at `path`: `Ok(Some)` found, `Ok(None)` unknown (the schema
/// does not say), `Err(seg)` the schema says `seg` does not exist.
fn schema_at<'a>(schema: &'a Value, path: &[String]) -> Result<Option<&'a Value>, String> {
    let mut cur = schema;
    for seg in path {
        if let Some(p) = cur.get("properties").and_then(Value::as_object) {
            if let Some(next) = p.get(seg) {
                cur = next;
                continue;
            }
            match cur.get("additionalProperties") {
                Some(Value::Bool(true)) => return Ok(None),
                Some(extra @ Value::Object(_)) => {
                    cur = extra;
                    continue;
                }
                _ => return Err(seg.clone()),
            }
        }
        if let Some(items) = cur.get("items")
            && seg.parse::<usize>().is_ok()
        {
            cur = items;
            continue;
        }
        return Ok(None);
    }
    Ok(Some(cur))
}

fn types_of(schema: &Value) -> Option<Vec<String>> {
    match schema.get("type")? {
        Value::String(t) => Some(vec![t.clone()]),
        Value::Array(ts) => Some(
            ts.iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect(),
        ),
        _ => None,
    }
}

fn compatible(a: &[String], b: &[String]) -> bool {
    a.iter().any(|x| {
        b.iter().any(|y| {
            x == y || (x == "integer" && y == "number") || (x == "number" && y == "integer")
        })
    })
}

fn valid_id(id: &str) -> bool {
    crate::text::is_plain_name(id, usize::MAX)
}

/// Every problem of `wf` against `catalog`, in document order.
pub fn validate(wf: &Workflow, catalog: &PlannerCatalog) -> Vec<Problem> {
    let mut v = Validator::new(wf, catalog);
    v.check_ids();
    for i in 0..wf.nodes.len() {
        v.check_node(i);
    }
    v.check_cycles();
    v.check_outputs();
    v.check_sessions();
    v.problems
}

/// One validation: the workflow, the catalog, and what was found so far.
struct Validator<'a> {
    wf: &'a Workflow,
    catalog: &'a PlannerCatalog,
    /// Node index by id.
    ids: HashMap<&'a str, usize>,
    problems: Vec<Problem>,
}

impl<'a> Validator<'a> {
    fn new(wf: &'a Workflow, catalog: &'a PlannerCatalog) -> Self {
        Self {
            wf,
            catalog,
            ids: graph::index(wf),
            problems: Vec::new(),
        }
    }

    /// Node ids are valid and unique.
    fn check_ids(&mut self) {
        let mut seen = HashSet::new();
        for (i, n) in self.wf.nodes.iter().enumerate() {
            if !valid_id(&n.id) {
                self.problems.push(problem(
                    Some(&n.id),
                    format!("nodes[{i}].id"),
                    ProblemKind::InvalidId,
                    format!("node id {:?} must use letters, digits, '_' and '-'", n.id),
                ));
            }
            if !seen.insert(n.id.as_str()) {
                self.problems.push(problem(
                    Some(&n.id),
                    format!("nodes[{i}].id"),
                    ProblemKind::DuplicateNode,
                    format!("node id {:?} is used twice", n.id),
                ));
            }
        }
    }

    /// Node `i`: its capability, its arguments, its references and `after`.
    fn check_node(&mut self, i: usize) {
        let n = &self.wf.nodes[i];
        match self.catalog.get(&n.uses) {
            None => self.unknown_capability(i),
            Some(entry) => self.check_arguments(i, &entry.spec.input_schema),
        }
        self.check_references(i);
        self.check_after(i);
    }

    fn unknown_capability(&mut self, i: usize) {
        let n = &self.wf.nodes[i];
        if let Some(why) = self.catalog.held.get(&n.uses) {
            self.problems.push(problem(
                Some(&n.id),
                format!("nodes[{i}].use"),
                ProblemKind::HeldCapability,
                why.clone(),
            ));
            return;
        }
        let similar = near_misses(self.catalog, &n.uses);
        let hint = if similar.is_empty() {
            "call list_capabilities to find one".to_string()
        } else {
            format!("did you mean {}?", similar.join(", "))
        };
        self.problems.push(problem(
            Some(&n.id),
            format!("nodes[{i}].use"),
            ProblemKind::UnknownCapability,
            format!("no capability {:?}: {hint}", n.uses),
        ));
    }

    /// Required arguments are there, unknown ones are reported (unless the
    /// schema is open), and a whole-argument reference has a compatible type.
    fn check_arguments(&mut self, i: usize, schema: &Value) {
        let n = &self.wf.nodes[i];
        let node = Some(n.id.as_str());
        for req in required(schema) {
            if !n.args.contains_key(req) {
                self.problems.push(problem(
                    node,
                    format!("nodes[{i}].args.{req}"),
                    ProblemKind::MissingArgument,
                    format!("{} requires argument {req:?}", n.uses),
                ));
            }
        }
        let open = matches!(
            schema.get("additionalProperties"),
            Some(Value::Bool(true)) | Some(Value::Object(_))
        );
        let Some(props) = schema.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (k, v) in &n.args {
            match props.get(k) {
                Some(arg_schema) => self.check_argument_type(i, k, v, arg_schema),
                None if open => {}
                None => {
                    let known: Vec<&str> = props.keys().map(String::as_str).collect();
                    self.problems.push(problem(
                        node,
                        format!("nodes[{i}].args.{k}"),
                        ProblemKind::UnknownArgument,
                        format!(
                            "{} has no argument {k:?} (it takes: {})",
                            n.uses,
                            known.join(", ")
                        ),
                    ));
                }
            }
        }
    }

    /// Type check where a whole argument is one reference.
    fn check_argument_type(&mut self, i: usize, k: &str, v: &Value, arg_schema: &Value) {
        let n = &self.wf.nodes[i];
        let Some(text) = super::refs::as_ref_text(v) else {
            return;
        };
        let r = super::refs::parse(text);
        // A bad reference is reported by `check_references`.
        if let Ok(Some(src)) = self.resolve_ref(Some(&n.id), "", &r, None)
            && let (Some(want), Some(have)) = (types_of(arg_schema), types_of(&src))
            && !compatible(&want, &have)
        {
            self.problems.push(problem(
                Some(&n.id),
                format!("nodes[{i}].args.{k}"),
                ProblemKind::TypeConflict,
                format!(
                    "argument {k:?} of {} wants {}, but {text} is {}",
                    n.uses,
                    want.join("|"),
                    have.join("|")
                ),
            ));
        }
    }

    /// Every reference in the node's args and `when` resolves.
    fn check_references(&mut self, i: usize) {
        let n = &self.wf.nodes[i];
        let mut found = Vec::new();
        for (k, v) in &n.args {
            collect(v, &format!("nodes[{i}].args.{k}"), &mut found);
        }
        if let Some(w) = &n.when {
            collect(w, &format!("nodes[{i}].when"), &mut found);
        }
        for (path, r) in &found {
            if let Err(p) = self.resolve_ref(Some(&n.id), path, r, None) {
                self.problems.push(p);
            }
        }
    }

    /// Every node named in `after` exists.
    fn check_after(&mut self, i: usize) {
        let n = &self.wf.nodes[i];
        for (j, a) in n.after.iter().enumerate() {
            if !self.ids.contains_key(a.as_str()) {
                self.problems.push(problem(
                    Some(&n.id),
                    format!("nodes[{i}].after[{j}]"),
                    ProblemKind::UnknownNode,
                    format!("there is no node {a:?}"),
                ));
            }
        }
    }

    fn check_cycles(&mut self) {
        // A self-reference is reported as a cycle by the reference check.
        let Some(cycle) = graph::find_cycle(&graph::dependencies(self.wf)) else {
            return;
        };
        let names: Vec<&str> = cycle
            .iter()
            .map(|&i| self.wf.nodes[i].id.as_str())
            .collect();
        self.problems.push(problem(
            Some(names[0]),
            format!("nodes[{}]", cycle[0]),
            ProblemKind::Cycle,
            format!(
                "the nodes form a cycle: {} -> {}",
                names.join(" -> "),
                names[0]
            ),
        ));
    }

    /// The workflow's outputs refer to things that exist.
    fn check_outputs(&mut self) {
        for (name, expr) in &self.wf.outputs {
            let mut found = Vec::new();
            collect(expr, &format!("outputs.{name}"), &mut found);
            for (path, r) in &found {
                if let Err(p) = self.resolve_ref(None, path, r, Some(ProblemKind::DanglingOutput)) {
                    self.problems.push(p);
                }
            }
        }
    }

    /// A session mode is only given for a source that offers nodes.
    fn check_sessions(&mut self) {
        let sources: HashSet<&str> = self
            .catalog
            .nodes
            .values()
            .map(|e| e.source.as_str())
            .collect();
        for s in self.wf.sessions.keys() {
            if !sources.contains(s.as_str()) {
                self.problems.push(problem(
                    None,
                    format!("sessions.{s}"),
                    ProblemKind::UnknownSource,
                    format!("no source {s:?} offers workflow nodes"),
                ));
            }
        }
    }

    /// A reference's schema (`Ok(None)`: not known), or the problem with it.
    /// `kind_missing` overrides the kind of a reference to nothing.
    fn resolve_ref(
        &self,
        node: Option<&str>,
        path: &str,
        r: &Result<Ref, String>,
        kind_missing: Option<ProblemKind>,
    ) -> Result<Option<Value>, Problem> {
        let fail = |kind: ProblemKind, message: String| {
            Err(problem(node, path.to_string(), kind, message))
        };
        match r {
            Err(e) => fail(ProblemKind::MalformedReference, e.clone()),
            Ok(Ref::Input(p)) => match schema_at(&self.wf.inputs, p) {
                Ok(s) => Ok(s.cloned()),
                Err(seg) => fail(
                    kind_missing.unwrap_or(ProblemKind::UnknownInput),
                    format!("the workflow has no input {seg:?}"),
                ),
            },
            Ok(Ref::Node { id, path: p }) => {
                let Some(&target) = self.ids.get(id.as_str()) else {
                    return fail(
                        kind_missing.unwrap_or(ProblemKind::UnknownNode),
                        format!("there is no node {id:?}"),
                    );
                };
                if node == Some(id.as_str()) {
                    return fail(
                        ProblemKind::Cycle,
                        format!("node {id:?} refers to its own output"),
                    );
                }
                let uses = &self.wf.nodes[target].uses;
                let Some(spec) = self.catalog.get(uses) else {
                    return Ok(None);
                };
                match schema_at(&spec.spec.output_schema, p) {
                    Ok(s) => Ok(s.cloned()),
                    Err(seg) => fail(
                        kind_missing.unwrap_or(ProblemKind::UnknownOutput),
                        format!("the output of node {id:?} ({uses}) has no field {seg:?}"),
                    ),
                }
            }
        }
    }
}

/// Up to three refs of the catalog close to `wanted`, closest first: a
/// small edit distance (a typo: `counter.incremnt`), or the same name in
/// another source (`other.template` for `wf.std.template`).
fn near_misses<'a>(catalog: &'a PlannerCatalog, wanted: &str) -> Vec<&'a str> {
    let name = wanted.rsplit('.').next().unwrap_or(wanted);
    let same_name = format!(".{name}");
    // One typo per four characters, at least two.
    let allowed = (wanted.chars().count() / 4).max(2);
    let mut close: Vec<(usize, &str)> = catalog
        .nodes
        .keys()
        .filter_map(|k| {
            let d = strsim::levenshtein(wanted, k);
            (d <= allowed || k.ends_with(&same_name)).then_some((d, k.as_str()))
        })
        .collect();
    close.sort_unstable();
    close.into_iter().take(3).map(|(_, k)| k).collect()
}

#[cfg(test)]
mod tests;
