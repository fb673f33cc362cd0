//! Which prefix each source's tool and prompt names carry: `[server] prefix`
//! (`always` | `on_collision`) and each source's own `prefix` setting.

use std::collections::{BTreeMap, HashMap};

use crate::config::{LoadedConfig, PrefixMode};

/// How names are prefixed; built from the config in force.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Naming {
    pub mode: PrefixMode,
    /// Prefixes operators configured, by source (not yet made client-safe).
    pub configured: BTreeMap<String, String>,
}

impl Naming {
    pub fn from_config(config: &LoadedConfig) -> Self {
        Self {
            mode: config.config.server.prefix,
            configured: config
                .config
                .sources
                .iter()
                .filter_map(|(name, s)| Some((name.clone(), s.prefix.clone()?)))
                .chain(config.config.mcp_servers.iter().filter_map(|(name, s)| {
                    Some((name.clone(), s.get("prefix")?.as_str()?.to_string()))
                }))
                .collect(),
        }
    }
}

impl Naming {
    /// Whether source `source` could show a tool or prompt as `name`: false
    /// only when every name it shows must start with its prefix and `name`
    /// does not. Conservative: a prefix made unique (`<prefix>_abcd`) still
    /// starts with it, and a hashed long name keeps at least its first
    /// `max_len - 7` characters.
    pub fn could_name(&self, rules: &super::NameRules, source: &str, name: &str) -> bool {
        if self.mode != PrefixMode::Always {
            return true;
        }
        let prefix = match self.configured.get(source) {
            Some(p) => rules.clean_prefix(p),
            None => rules.source_prefix(source),
        };
        let keep = prefix.len().min(rules.max_len.saturating_sub(7));
        name.starts_with(prefix.get(..keep).unwrap_or(&prefix))
    }
}

/// One capability that wants a name: its source and the name it would
/// show without a prefix.
pub struct Wanted<'a> {
    pub source: &'a str,
    pub plain: String,
}

/// Whether each item (in order) shows its source's prefix: always, or under
/// `on_collision` only when another source has a capability of the same kind
/// whose name would look the same. The second value lists those shared names
/// (for the collision report).
pub fn prefixed(mode: PrefixMode, items: &[Wanted<'_>]) -> (Vec<bool>, Vec<String>) {
    if mode == PrefixMode::Always {
        return (vec![true; items.len()], Vec::new());
    }
    let mut sources: HashMap<String, Vec<&str>> = HashMap::new();
    for w in items {
        let users = sources.entry(w.plain.clone()).or_default();
        if !users.contains(&w.source) {
            users.push(w.source);
        }
    }
    let mut shared: Vec<String> = sources
        .iter()
        .filter(|(_, users)| users.len() > 1)
        .map(|(name, users)| format!("{name:?} (served by {})", users.join(", ")))
        .collect();
    shared.sort();
    let flags = items.iter().map(|w| sources[&w.plain].len() > 1).collect();
    (flags, shared)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::NameRules;

    #[test]
    fn a_source_could_name_only_what_starts_with_its_prefix() {
        let rules = NameRules { max_len: 64 };
        let mut naming = Naming::default();
        assert!(naming.could_name(&rules, "everything", "everything__echo"));
        assert!(!naming.could_name(&rules, "everything", "fs__read_file"));
        assert!(naming.could_name(&rules, "wf.std", "wf_std__sleep"));
        naming.configured.insert("everything".into(), "ev_".into());
        assert!(naming.could_name(&rules, "everything", "ev_echo"));
        assert!(!naming.could_name(&rules, "everything", "everything__echo"));
        // Unprefixed names may come from any source.
        naming.mode = PrefixMode::OnCollision;
        assert!(naming.could_name(&rules, "everything", "echo"));
    }

    #[test]
    fn a_prefix_longer_than_a_hashed_name_keeps_is_cut() {
        let rules = NameRules { max_len: 16 };
        let naming = Naming::default();
        // 16 - 7 = 9 characters of the plain form survive hashing.
        assert!(naming.could_name(&rules, "averylongsourcename", "averylong_1a2b3c"));
        assert!(!naming.could_name(&rules, "averylongsourcename", "other_1a2b3c"));
    }

    fn w<'a>(source: &'a str, plain: &str) -> Wanted<'a> {
        Wanted {
            source,
            plain: plain.into(),
        }
    }

    #[test]
    fn on_collision_prefixes_only_names_two_sources_share() {
        let items = [w("a", "x"), w("a", "y"), w("b", "x"), w("b", "z")];
        let (flags, shared) = prefixed(PrefixMode::OnCollision, &items);
        assert_eq!(flags, [true, false, true, false]);
        assert_eq!(shared, [r#""x" (served by a, b)"#]);
        let (flags, shared) = prefixed(PrefixMode::Always, &items);
        assert!(flags.iter().all(|f| *f) && shared.is_empty());
    }

    #[test]
    fn one_source_listing_a_name_twice_is_not_a_shared_name() {
        let (flags, _) = prefixed(PrefixMode::OnCollision, &[w("a", "x"), w("a", "x")]);
        assert_eq!(flags, [false, false]);
    }
}
