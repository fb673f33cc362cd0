//! Principals over HTTP: the tokens that name them (checked at start) and
//! the tools each one may see and call (`allow_tools` / `deny_tools`).

use std::collections::HashMap;

use globset::{Glob, GlobSet, GlobSetBuilder};
use rmcp::RoleServer;
use rmcp::service::RequestContext;
use sha2::{Digest, Sha256};

use super::guard::check_token;
use super::limits::Principal;
use crate::config::{ServerConfig, expand_env};

/// Who sent this request: the principal the HTTP guard checked it as, or
/// `local` (stdio).
pub fn principal_of(context: &RequestContext<RoleServer>) -> Principal {
    super::limits::principal_of_request(context.extensions.get::<http::request::Parts>())
}

/// The `[[server.tokens]]` entries with their `${VAR}`s expanded. Names are
/// checked here; the tokens themselves by [`check_tokens`].
pub fn named_tokens(
    server: &ServerConfig,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Vec<(Principal, String)>> {
    let mut out = Vec::new();
    for (i, t) in server.tokens.iter().enumerate() {
        check_name(&t.name).map_err(|e| anyhow::anyhow!("server.tokens[{i}].name: {e}"))?;
        let key = format!("server.tokens[{i}].token");
        let token = expand_env(&serde_json::Value::String(t.token.clone()), &key, lookup)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        out.push((
            Principal::named_in(&t.name, &t.groups),
            token.as_str().unwrap_or_default().to_string(),
        ));
    }
    Ok(out)
}

/// The single bearer token, if any, and the named ones with their principals.
pub type StaticTokens = (Option<String>, Vec<(Principal, String)>);

/// The static tokens a config gives: the single bearer token
/// (`WF_HTTP_TOKEN`, which wins, or `server.http_token`) and the named ones,
/// `${VAR}`s expanded. Read at start and at every reload.
pub fn static_tokens(server: &ServerConfig) -> anyhow::Result<StaticTokens> {
    let lookup = |k: &str| std::env::var(k).ok();
    // Set at all (even empty) means chosen: an empty token is refused, not ignored.
    let token = match std::env::var("WF_HTTP_TOKEN").ok() {
        Some(t) => Some(t),
        None => match &server.http_token {
            Some(t) => {
                let v = expand_env(
                    &serde_json::Value::String(t.clone()),
                    "server.http_token",
                    &lookup,
                )
                .map_err(|e| anyhow::anyhow!("{e}"))?;
                v.as_str().map(str::to_string)
            }
            None => None,
        },
    };
    Ok((token, named_tokens(server, &lookup)?))
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !ok {
        return Err(format!(
            "{name:?} is not a principal name: use 1-64 letters, digits, '.', '_' or '-'"
        ));
    }
    if name == Principal::LOCAL {
        return Err(format!(
            "{name:?} is reserved for stdio and token-less loopback clients"
        ));
    }
    Ok(())
}

/// Every token obeys the bearer token rules, and no name or token is used
/// twice (two principals with one token could not be told apart).
pub fn check_tokens(tokens: &[(Principal, String)]) -> anyhow::Result<()> {
    let what = |p: &Principal| {
        if p.name() == Principal::DEFAULT {
            "the HTTP bearer token (WF_HTTP_TOKEN or server.http_token)".to_string()
        } else {
            format!("the token of principal {:?} (server.tokens)", p.name())
        }
    };
    let mut names: HashMap<&str, ()> = HashMap::new();
    let mut hashes: HashMap<[u8; 32], &Principal> = HashMap::new();
    for (p, t) in tokens {
        check_token(t, &what(p))?;
        if names.insert(p.name(), ()).is_some() {
            anyhow::bail!(
                "server.tokens: principal name {:?} is used twice{}",
                p.name(),
                if p.name() == Principal::DEFAULT {
                    " (`default` is the name of server.http_token's principal)"
                } else {
                    ""
                }
            );
        }
        if let Some(other) = hashes.insert(Sha256::digest(t.as_bytes()).into(), p) {
            anyhow::bail!(
                "server.tokens: principals {:?} and {:?} have the same token; give each its own",
                other.name(),
                p.name()
            );
        }
    }
    Ok(())
}

/// Which tools a principal may see and call. Principals without lists (and
/// `local`, `default`) may use every tool; an OAuth principal may use what
/// its groups (`[[server.oauth.groups]]`) allow: the union of their allows
/// minus anything any of them denies, nothing when it is in none of them.
/// Replaced as a whole when the config is reloaded.
#[derive(Debug, Default)]
pub struct ToolAccess {
    rules: std::sync::RwLock<std::sync::Arc<AccessRules>>,
}

/// One config's lists, ready to swap in.
#[derive(Debug, Default)]
pub struct AccessRules {
    by_principal: HashMap<Principal, Rules>,
    /// In config order.
    groups: Vec<(String, Rules)>,
}

#[derive(Debug)]
struct Rules {
    allow: Option<GlobSet>,
    deny: GlobSet,
}

fn glob_set(patterns: &[String], key: &str) -> anyhow::Result<GlobSet> {
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(Glob::new(p).map_err(|e| anyhow::anyhow!("{key}: {p:?}: {e}"))?);
    }
    Ok(b.build()?)
}

fn rules(allow: &Option<Vec<String>>, deny: &[String], key: &str) -> anyhow::Result<Rules> {
    Ok(Rules {
        allow: match allow {
            Some(a) => Some(glob_set(a, &format!("{key}.allow_tools"))?),
            None => None,
        },
        deny: glob_set(deny, &format!("{key}.deny_tools"))?,
    })
}

impl AccessRules {
    /// Fails on a pattern that is not a glob.
    pub fn from_config(server: &ServerConfig) -> anyhow::Result<Self> {
        let mut by_principal = HashMap::new();
        for (i, t) in server.tokens.iter().enumerate() {
            if t.allow_tools.is_none() && t.deny_tools.is_empty() {
                continue;
            }
            let r = rules(
                &t.allow_tools,
                &t.deny_tools,
                &format!("server.tokens[{i}]"),
            )?;
            by_principal.insert(Principal::named(&t.name), r);
        }
        let mut groups = Vec::new();
        for (i, g) in server
            .oauth
            .iter()
            .flat_map(|o| o.groups.iter())
            .enumerate()
        {
            let r = rules(
                &g.allow_tools,
                &g.deny_tools,
                &format!("server.oauth.groups[{i}]"),
            )?;
            groups.push((g.name.clone(), r));
        }
        Ok(Self {
            by_principal,
            groups,
        })
    }

    fn permits(&self, principal: &Principal, tool: &str) -> bool {
        if let Some(theirs) = principal.groups() {
            let mut allowed = false;
            for (name, r) in &self.groups {
                if !theirs.iter().any(|g| **g == **name) {
                    continue;
                }
                if r.deny.is_match(tool) {
                    return false;
                }
                allowed |= r.allow.as_ref().is_none_or(|a| a.is_match(tool));
            }
            return allowed;
        }
        match self.by_principal.get(principal) {
            None => true,
            Some(r) => r.allow.as_ref().is_none_or(|a| a.is_match(tool)) && !r.deny.is_match(tool),
        }
    }
}

impl ToolAccess {
    /// Fails on a pattern that is not a glob.
    pub fn from_config(server: &ServerConfig) -> anyhow::Result<Self> {
        Ok(Self {
            rules: std::sync::RwLock::new(std::sync::Arc::new(AccessRules::from_config(server)?)),
        })
    }

    /// Puts a reloaded config's lists in force.
    pub fn replace(&self, rules: AccessRules) {
        *self
            .rules
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = std::sync::Arc::new(rules);
    }

    /// Whether `principal` may see and call the tool the client knows as `tool`.
    pub fn permits(&self, principal: &Principal, tool: &str) -> bool {
        self.rules
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .permits(principal, tool)
    }

    /// The error for a call `principal` may not make, if it may not.
    pub fn refusal(&self, principal: &Principal, tool: &str) -> Option<String> {
        (!self.permits(principal, tool)).then(|| {
            if principal.groups().is_some() {
                format!(
                    "tool {tool:?} is not available to principal {:?} (its groups' allow_tools / deny_tools in [[server.oauth.groups]])",
                    principal.name()
                )
            } else {
                format!(
                    "tool {tool:?} is not available to principal {:?} (its allow_tools / deny_tools in [[server.tokens]])",
                    principal.name()
                )
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TokenConfig;

    fn entry(name: &str, token: &str, allow: Option<&[&str]>, deny: &[&str]) -> TokenConfig {
        TokenConfig {
            name: name.into(),
            token: token.into(),
            allow_tools: allow.map(|a| a.iter().map(|s| s.to_string()).collect()),
            deny_tools: deny.iter().map(|s| s.to_string()).collect(),
            groups: Vec::new(),
            catalog: None,
        }
    }

    #[test]
    fn allow_and_deny_globs() {
        let server = ServerConfig {
            tokens: vec![
                entry(
                    "alice",
                    "x",
                    Some(&["wf_std__*", "fix__echo"]),
                    &["wf_std__sleep"],
                ),
                entry("bob", "y", None, &["wf_admin__*"]),
                entry("carol", "z", None, &[]),
            ],
            ..ServerConfig::default()
        };
        let a = ToolAccess::from_config(&server).unwrap();
        let (alice, bob, carol) = (
            Principal::named("alice"),
            Principal::named("bob"),
            Principal::named("carol"),
        );
        assert!(a.permits(&alice, "wf_std__echo"));
        assert!(a.permits(&alice, "fix__echo"));
        assert!(!a.permits(&alice, "fix__echo2"));
        assert!(!a.permits(&alice, "wf_std__sleep"));
        assert!(!a.permits(&bob, "wf_admin__add_source"));
        assert!(a.permits(&bob, "fix__echo"));
        assert!(a.permits(&carol, "wf_admin__add_source"));
        assert!(a.permits(&Principal::local(), "wf_admin__add_source"));
        assert!(a.refusal(&alice, "fix__echo2").unwrap().contains("alice"));
        let bad = ServerConfig {
            tokens: vec![entry("a", "x", Some(&["[unclosed"]), &[])],
            ..ServerConfig::default()
        };
        let e = ToolAccess::from_config(&bad).unwrap_err().to_string();
        assert!(e.contains("server.tokens[0].allow_tools"), "{e}");
    }

    #[test]
    fn groups_union_minus_deny() {
        let group =
            |name: &str, allow: Option<&[&str]>, deny: &[&str]| crate::config::GroupConfig {
                name: name.into(),
                allow_tools: allow.map(|a| a.iter().map(|s| s.to_string()).collect()),
                deny_tools: deny.iter().map(|s| s.to_string()).collect(),
                catalog: None,
            };
        let oauth: crate::config::OAuthConfig = serde_json::from_value(serde_json::json!({
            "issuer": "https://idp.example", "resource": "https://wf.example/mcp"
        }))
        .unwrap();
        let server = ServerConfig {
            oauth: Some(crate::config::OAuthConfig {
                groups: vec![
                    group("eng", Some(&["fix__*"]), &["fix__drop"]),
                    group("ops", Some(&["wf_admin__*", "fix__drop"]), &[]),
                    group("all", None, &["secret__*"]),
                ],
                ..oauth
            }),
            ..ServerConfig::default()
        };
        let a = ToolAccess::from_config(&server).unwrap();
        let p = |groups: &[&str]| {
            Principal::with_groups("x", groups.iter().map(|s| s.to_string()).collect())
        };
        assert!(a.permits(&p(&["eng"]), "fix__echo"));
        assert!(!a.permits(&p(&["eng"]), "fix__drop"));
        assert!(!a.permits(&p(&["eng"]), "wf_admin__reload"));
        assert!(a.permits(&p(&["eng", "ops"]), "wf_admin__reload"));
        // Either group's deny wins over the other's allow.
        assert!(!a.permits(&p(&["eng", "ops"]), "fix__drop"));
        assert!(a.permits(&p(&["all"]), "anything"));
        assert!(!a.permits(&p(&["all", "eng"]), "secret__key"));
        // In no listed group: nothing.
        assert!(!a.permits(&p(&[]), "fix__echo"));
        assert!(!a.permits(&p(&["nobody"]), "fix__echo"));
        assert!(
            a.refusal(&p(&["eng"]), "fix__drop")
                .unwrap()
                .contains("groups")
        );
        // A reload replaces the lists.
        a.replace(AccessRules::from_config(&ServerConfig::default()).unwrap());
        assert!(!a.permits(&p(&["eng"]), "fix__echo"));
    }

    #[test]
    fn names_and_tokens_are_checked() {
        let t = |n: &str, tok: &str| (Principal::named(n), tok.to_string());
        assert!(check_tokens(&[t("a", "0123456789abcdef"), t("b", "0123456789abcdeg")]).is_ok());
        let e = check_tokens(&[t("a", "0123456789abcdef"), t("a", "0123456789abcdeg")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"a\" is used twice"), "{e}");
        let e = check_tokens(&[t("a", "0123456789abcdef"), t("b", "0123456789abcdef")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("same token"), "{e}");
        assert!(!e.contains("0123456789abcdef"), "never the token: {e}");
        let e = check_tokens(&[t("a", "short")]).unwrap_err().to_string();
        assert!(e.contains("principal \"a\""), "{e}");
        let e = check_tokens(&[
            (Principal::bearer(), "0123456789abcdef".into()),
            t("default", "0123456789abcdeg"),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("server.http_token"), "{e}");
        for bad in ["", "local", "a b", "ä"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        let server = ServerConfig {
            tokens: vec![entry("alice", "${WF_TEST_ALICE}", None, &[])],
            ..ServerConfig::default()
        };
        let got = named_tokens(&server, &|k| {
            (k == "WF_TEST_ALICE").then(|| "alice-secret-0123456".to_string())
        })
        .unwrap();
        assert_eq!(
            got,
            vec![(Principal::named("alice"), "alice-secret-0123456".into())]
        );
        let e = named_tokens(&server, &|_| None).unwrap_err().to_string();
        assert!(e.contains("WF_TEST_ALICE"), "{e}");
    }
}
