//! Cedar policies as the call pipeline's `authorize` stage: argument,
//! annotation, group, prompt and resource rules; hiding what no call could
//! be permitted; load errors that name the line.

use serde_json::{Value, json};
use wf_host::pipeline::policy::{CatalogShape, Policies, PolicyError, PromptShape, ToolShape};
use wf_host::pipeline::{Authorize, Call, Capability, Entry, Kind, Principal, Transport};
fn catalog() -> CatalogShape {
    CatalogShape {
        tools: vec![
            ToolShape {
                name: "github__create_issue".into(),
                source: "github".into(),
                input_schema: json!({"type": "object", "properties": {
                    "repo": {"type": "string"}, "title": {"type": "string"},
                    "labels": {"type": "array", "items": {"type": "string"}}
                }, "required": ["repo", "title"]}),
            },
            ToolShape {
                name: "github__delete_repo".into(),
                source: "github".into(),
                input_schema: json!({"type": "object", "properties": {"repo": {"type": "string"}}}),
            },
        ],
        prompts: vec![PromptShape {
            name: "review".into(),
            arguments: vec![("code".into(), true)],
        }],
    }
}

const POLICIES: &str = r#"
@id("everyone-reads")
permit(principal, action, resource);

@id("support-acme-only")
@reason("support may create issues only in acme/*")
forbid(principal in wf::Group::"support", action == wf::Action::"github__create_issue", resource)
unless { context.arguments.repo like "acme/*" };

@id("no-deletes")
@reason("nobody deletes repositories")
forbid(principal, action, resource) when { resource.annotations.destructiveHint && resource.source == "github" && resource has tags && resource.tags.contains("destructive") };
"#;

fn load(text: &str) -> Result<Policies, PolicyError> {
    Policies::from_texts(&[("p.cedar".into(), text.into())], &catalog())
}

fn call<'a>(
    who: &'a Principal,
    tool: &'a str,
    args: &'a Value,
    annotations: Option<&'a Value>,
) -> Call<'a> {
    Call {
        entry: Entry::ToolsCall,
        principal: who,
        capability: Capability {
            kind: Kind::Tool,
            source: "github",
            name: tool,
            annotations,
        },
        arguments: args,
        client: Some("test"),
        client_version: None,
        endpoint: None,
        transport: Transport::Stdio,
    }
}

#[test]
fn an_argument_rule_allows_one_repository_and_denies_another() {
    let p = load(POLICIES).unwrap();
    let alice = Principal::with_groups("alice", vec!["support".into()]);
    // Not destructive (MCP's default is destructive, which `no-deletes` forbids).
    let a = json!({"destructiveHint": false});
    let ok = json!({"repo": "acme/web", "title": "t"});
    // An allowed call names the policy that permitted it (for its record).
    assert_eq!(
        p.authorize(&call(&alice, "github__create_issue", &ok, Some(&a)))
            .unwrap(),
        vec!["everyone-reads".to_string()]
    );
    let other = json!({"repo": "other/web", "title": "t"});
    let refused = p
        .authorize(&call(&alice, "github__create_issue", &other, Some(&a)))
        .unwrap_err();
    assert_eq!(refused.policy.as_deref(), Some("support-acme-only"));
    assert!(
        refused
            .message
            .contains("support may create issues only in acme/*"),
        "{}",
        refused.message
    );
    // Not in the group: the rule does not apply.
    let bob = Principal::with_groups("bob", vec!["dev".into()]);
    assert!(
        p.authorize(&call(&bob, "github__create_issue", &other, Some(&a)))
            .is_ok()
    );
    // The tool stays listed to support: some call could be permitted.
    let c = call(&alice, "github__create_issue", &other, Some(&a)).capability;
    assert!(p.may_list(&alice, &c));
}

#[test]
fn a_destructive_annotation_rule_denies_and_hides() {
    let p = load(POLICIES).unwrap();
    let who = Principal::named("ci");
    let destructive = json!({"destructiveHint": true});
    let args = json!({"repo": "acme/web"});
    let refused = p
        .authorize(&call(
            &who,
            "github__delete_repo",
            &args,
            Some(&destructive),
        ))
        .unwrap_err();
    assert_eq!(refused.policy.as_deref(), Some("no-deletes"));
    let c = call(&who, "github__delete_repo", &args, Some(&destructive)).capability;
    assert!(
        !p.may_list(&who, &c),
        "a tool every call is denied is hidden"
    );
    let safe = json!({"destructiveHint": false, "readOnlyHint": true});
    assert!(
        p.authorize(&call(&who, "github__delete_repo", &args, Some(&safe)))
            .is_ok()
    );
}

#[test]
fn nothing_permitted_is_denied_by_default_and_hidden() {
    let p = load(r#"permit(principal in wf::Group::"ops", action, resource);"#).unwrap();
    let who = Principal::named("x");
    let refused = p
        .authorize(&call(&who, "github__delete_repo", &Value::Null, None))
        .unwrap_err();
    assert_eq!(refused.policy.as_deref(), Some("default"));
    let c = call(&who, "github__delete_repo", &Value::Null, None).capability;
    assert!(!p.may_list(&who, &c));
    let ops = Principal::with_groups("y", vec!["ops".into()]);
    assert!(p.may_list(&ops, &c));
}

#[test]
fn an_unknown_tool_or_argument_is_a_load_error_with_its_line() {
    let typo_tool = "permit(principal, action, resource);\n\nforbid(principal, action == wf::Action::\"github__create_isue\", resource);\n";
    let e = load(typo_tool).unwrap_err().to_string();
    assert!(e.starts_with("p.cedar:3:"), "{e}");
    assert!(e.contains("github__create_isue"), "{e}");
    let typo_arg = "permit(principal, action, resource);\nforbid(principal, action == wf::Action::\"github__create_issue\", resource)\n  when { context.arguments.repository == \"x\" };\n";
    let e = load(typo_arg).unwrap_err().to_string();
    assert!(e.starts_with("p.cedar:3:"), "{e}");
    assert!(e.contains("repository"), "{e}");
    let e = load("permit(principal, action, resource)")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("p.cedar:1:"), "{e}");
}

#[test]
fn prompts_and_resources_are_governed() {
    let p = load(
        "permit(principal, action, resource);\n@id(\"no-secrets\")\nforbid(principal, action == wf::Action::\"read_resource\", resource) when { resource.uri like \"secret://*\" };\n@id(\"no-review\")\nforbid(principal, action == wf::Action::\"prompt:review\", resource);\n",
    )
    .unwrap();
    let who = Principal::named("x");
    let mut c = call(&who, "secret://a", &Value::Null, None);
    c.capability.kind = Kind::Resource;
    assert_eq!(
        p.authorize(&c).unwrap_err().policy.as_deref(),
        Some("no-secrets")
    );
    assert!(!p.may_list(&who, &c.capability));
    c.capability.name = "file:///a";
    assert!(p.authorize(&c).is_ok());
    c.capability.kind = Kind::Prompt;
    c.capability.name = "review";
    assert_eq!(
        p.authorize(&c).unwrap_err().policy.as_deref(),
        Some("no-review")
    );
}

#[test]
fn working_hours_read_the_time_in_context() {
    let p = load(
        "permit(principal, action, resource);\n@id(\"hours\")\nforbid(principal, action, resource) when { resource.annotations.destructiveHint && (context.time.hour < 0 || context.time.hour >= 0) };\n",
    )
    .unwrap();
    let who = Principal::named("x");
    let d = json!({"destructiveHint": true});
    let c = call(&who, "github__delete_repo", &Value::Null, Some(&d));
    assert_eq!(
        p.authorize(&c).unwrap_err().policy.as_deref(),
        Some("hours")
    );
    // A forbid that reads the context never hides a tool.
    assert!(p.may_list(&who, &c.capability));
}
