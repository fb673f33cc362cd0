//! Text rules more than one module applies: one-line messages and the
//! `[A-Za-z0-9_-]` names clients and the planner accept.

/// `s` on one line: every run of whitespace (newlines included) becomes one
/// space, so an error from a library fits a `file: key: reason` line.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `s` with its control characters escaped (`\r` → `\\r`): text taken from
/// input (a config key, a path) that a one-line message quotes as it is.
pub fn escape_controls(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The first non-blank line of `s`, as [`one_line`].
pub fn first_line(s: &str) -> String {
    one_line(s.lines().find(|l| !l.trim().is_empty()).unwrap_or(s))
}

/// True when `name` has 1 to `max_len` characters, each an ASCII letter or
/// digit, `_` or `-`: what every MCP client accepts as a tool name, and what
/// workflow node ids and deployment names use.
pub fn is_plain_name(name: &str, max_len: usize) -> bool {
    (1..=max_len).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_and_plain_names() {
        assert_eq!(one_line("a\n  b\tc "), "a b c");
        assert_eq!(first_line("\n  x  1 \ny"), "x 1");
        assert!(is_plain_name("a_b-1", 5));
        assert!(!is_plain_name("a_b-12", 5));
        assert!(!is_plain_name("", 5));
        assert!(!is_plain_name("a.b", 5));
        assert_eq!(escape_controls("a\rb\nc\u{1}d é"), "a\\rb\\nc\\u{1}d é");
    }
}
