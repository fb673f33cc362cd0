//! Names shown to MCP clients. Many hosts accept only `^[a-zA-Z0-9_-]{1,64}$`
//! and add their own prefix (`mcp__<server>__`), so a projected name is
//! `<source>__<name>`, sanitized and kept under a length that leaves room.
//! The mapping is deterministic (a function of the refs alone, plus the
//! sorted set when two refs collide), stable across reloads, and reversible
//! through the projection table.

/// FNV-1a, hex, 6 digits: a short stable suffix that disambiguates.
pub fn hash6(s: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{:06x}", h & 0xff_ffff)
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
pub struct NameRules {
    pub max_len: usize,
}

impl NameRules {
    /// The part of a name that stands for a source: `wf.std` → `wf_std`.
    pub fn source_prefix(&self, source: &str) -> String {
        sanitize(source)
    }

    /// A configured prefix, made client-safe.
    pub fn clean_prefix(&self, prefix: &str) -> String {
        sanitize(prefix)
    }

    /// The projected name of capability `name` shown after `prefix` (which
    /// ends in its separator, e.g. `wf_std__`, or is empty). `dotted_ref`
    /// (`source.name`) seeds the hash when the plain form is lossy or too long.
    pub fn project(&self, prefix: &str, name: &str, dotted_ref: &str) -> String {
        let clean = sanitize(name);
        let plain = format!("{prefix}{clean}");
        if clean == name && !name.is_empty() && plain.len() <= self.max_len {
            plain
        } else {
            self.hashed(&plain, dotted_ref)
        }
    }

    /// `base` cut to fit, then `_` and a hash of `seed`.
    pub fn hashed(&self, base: &str, seed: &str) -> String {
        let keep = self.max_len.saturating_sub(7).max(1);
        let cut = &base[..base.len().min(keep)];
        format!("{cut}_{}", hash6(seed))
    }
}

/// True when `name` is acceptable to hosts with the strictest rules.
pub fn is_client_safe(name: &str) -> bool {
    crate::text::is_plain_name(name, 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_stay_readable() {
        let r = NameRules { max_len: 48 };
        assert_eq!(
            r.project(
                &format!("{}__", r.source_prefix("wf.std")),
                "passthrough",
                "wf.std.passthrough"
            ),
            "wf_std__passthrough"
        );
        assert_eq!(
            r.project(
                "playwright__",
                "browser_navigate",
                "playwright.browser_navigate"
            ),
            "playwright__browser_navigate"
        );
    }

    #[test]
    fn lossy_or_long_names_get_a_stable_hash() {
        let r = NameRules { max_len: 48 };
        let a = r.project("s__", "get.thing", "s.get.thing");
        let b = r.project("s__", "get/thing", "s.get/thing");
        assert_ne!(a, b, "two lossy names that sanitize alike must differ");
        assert_eq!(
            a,
            r.project("s__", "get.thing", "s.get.thing"),
            "deterministic"
        );
        assert!(is_client_safe(&a) && is_client_safe(&b));
        let long = "x".repeat(100);
        let p = r.project("src__", &long, &format!("src.{long}"));
        assert!(p.len() <= 48 && is_client_safe(&p), "{p}");
        // No prefix: the name as it is, or hashed when it is not client-safe.
        assert_eq!(r.project("", "navigate", "s.navigate"), "navigate");
        assert!(is_client_safe(&r.project("", "a.b", "s.a.b")));
    }

    #[test]
    fn safety_check() {
        assert!(is_client_safe("a-b_c9"));
        assert!(!is_client_safe("a.b"));
        assert!(!is_client_safe(""));
        assert!(!is_client_safe(&"a".repeat(65)));
    }
}
