//! Unknown keys are errors, with the nearest known key as a hint: wf's own
//! tables here (serde's `deny_unknown_fields` finds them), a source's
//! settings in `sources::settings` (the plugin's declared schema finds them).

/// Keys other MCP clients write in their `mcpServers` entries that change
/// nothing wf does (approval lists, client-side timeouts, UI hints). A
/// pasted entry keeps them; wf drops them before the plugin sees the entry.
/// Keys that would change how a server starts (`envFile`, `serverUrl`, …)
/// are not here: wf cannot honour them, so they stay errors.
///
/// Claude Desktop writes `command`/`args`/`env`; Claude Code, Cursor and
/// VS Code add `type` (read by the mcp plugin as the transport); Cline and
/// Roo Code add `disabled` (read by wf), `autoApprove`, `alwaysAllow`,
/// `timeout`, `networkTimeout`, `disabledTools`, `watchPaths`; Windsurf
/// `disabledTools`; Gemini CLI `timeout`, `trust`, `description`; VS Code `dev`.
pub const FOREIGN_MCP_SERVER_KEYS: &[&str] = &[
    "alwaysAllow",
    "autoApprove",
    "description",
    "dev",
    "disabledTools",
    "networkTimeout",
    "timeout",
    "trust",
    "watchPaths",
];

/// The known key closest to `key`, if one is close enough to be a typo:
/// at most one edit per four characters (at least two), or the same key in
/// another case or spelling of separators (`maxNameLen`, `max-name-len`).
pub fn did_you_mean<'a>(key: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let squash = |s: &str| s.to_ascii_lowercase().replace(['_', '-'], "");
    let allowed = (key.chars().count() / 4).max(2);
    known
        .into_iter()
        .filter(|k| *k != key)
        .map(|k| {
            let d = if squash(k) == squash(key) {
                0
            } else {
                strsim::levenshtein(key, k)
            };
            (d, k)
        })
        .filter(|(d, _)| *d <= allowed)
        .min()
        .map(|(_, k)| k)
}

/// `unknown key "comand" (did you mean "command"?)`.
pub fn unknown_key<'a>(key: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    match did_you_mean(key, known) {
        Some(k) => format!("unknown key {key:?} (did you mean {k:?}?)"),
        None => format!("unknown key {key:?}"),
    }
}

/// Rewrites serde's `unknown field `x`, expected one of `a`, `b`` (from
/// `deny_unknown_fields`, wrapped in whatever the format adds) as
/// [`unknown_key`]. serde offers this only as text: `Error::unknown_field`
/// is how every format builds the message, and its shape is serde's own.
pub fn unknown_field_message(message: &str) -> Option<String> {
    let rest = message.split_once("unknown field `")?.1;
    let (key, expected) = rest.split_once('`')?;
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    Some(unknown_key(key, known))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_the_nearest_key() {
        let known = ["command", "args", "env", "cwd"];
        assert_eq!(did_you_mean("comand", known), Some("command"));
        assert_eq!(did_you_mean("argz", known), Some("args"));
        assert_eq!(did_you_mean("zzzzzzzz", known), None);
        assert_eq!(
            did_you_mean("maxNameLen", ["max_name_len", "page_size"]),
            Some("max_name_len")
        );
        assert_eq!(
            unknown_key("comand", known),
            r#"unknown key "comand" (did you mean "command"?)"#
        );
        assert_eq!(unknown_key("zzzzzzzz", known), r#"unknown key "zzzzzzzz""#);
    }

    #[test]
    fn reads_serdes_unknown_field_message() {
        let m = "TOML parse error at line 2, column 1 | 2 | htp = 1 | ^^^ unknown field `htp`, expected one of `http`, `http_token`";
        assert_eq!(
            unknown_field_message(m).as_deref(),
            Some(r#"unknown key "htp" (did you mean "http"?)"#)
        );
        assert_eq!(
            unknown_field_message("unknown field `x`, there are no fields").as_deref(),
            Some(r#"unknown key "x""#)
        );
        assert_eq!(unknown_field_message("invalid type: string"), None);
    }
}
