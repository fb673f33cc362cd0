//! `[audit]`: the audit trail (docs/operator-manual.md, "Audit trail"). On by
//! default, bounded by age and rows, shapes of arguments and results only
//! unless `[[audit.values]]` asks for values.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    /// `false`: nothing is recorded.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Records older than this many days are deleted.
    #[serde(default = "default_retention_days")]
    pub retention_days: u32,
    /// At most this many records are kept (the oldest go first).
    #[serde(default = "default_max_rows")]
    pub max_rows: u64,
    /// Records waiting to be written; past it a record is dropped and
    /// counted (`wf_audit_dropped_total`), never a call held up.
    #[serde(default = "default_buffer")]
    pub buffer: usize,
    /// Regular expressions whose matches are blanked in kept values (the
    /// config's `${VAR}` secrets always are).
    #[serde(default)]
    pub redact: Vec<String>,
    /// Which capabilities keep argument or result values.
    #[serde(default)]
    pub values: Vec<AuditValues>,
    /// JSON lines to a file as well.
    #[serde(default)]
    pub export: Option<AuditExport>,
    /// Each record as an OTLP log too, when traces go to an OTLP collector.
    #[serde(default = "default_true")]
    pub otlp_logs: bool,
}

/// `[[audit.values]]`: keep values for the capabilities a glob matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditValues {
    /// A glob over `source.name` (`github.*`) or a source name alone.
    pub capabilities: String,
    #[serde(default)]
    pub arguments: bool,
    #[serde(default)]
    pub results: bool,
    /// Each kept value is cut to this many bytes of JSON.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: usize,
}

/// `[audit.export]`: JSON lines, one record a line, rotated by size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditExport {
    /// The file written (relative to the config's folder).
    pub file: String,
    /// Rotate past this many MiB: `file` becomes `file.1`, `file.1` `file.2`…
    #[serde(default = "default_rotate_mb")]
    pub rotate_mb: u64,
    /// Rotated files kept.
    #[serde(default = "default_keep_files")]
    pub keep: u32,
}

fn default_true() -> bool {
    true
}
fn default_retention_days() -> u32 {
    30
}
fn default_max_rows() -> u64 {
    1_000_000
}
fn default_buffer() -> usize {
    10_000
}
fn default_max_bytes() -> usize {
    4096
}
fn default_rotate_mb() -> u64 {
    100
}
fn default_keep_files() -> u32 {
    5
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            retention_days: default_retention_days(),
            max_rows: default_max_rows(),
            buffer: default_buffer(),
            redact: Vec::new(),
            values: Vec::new(),
            export: None,
            otlp_logs: true,
        }
    }
}

impl AuditConfig {
    /// What is wrong with these settings, one line each.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (i, p) in self.redact.iter().enumerate() {
            if let Err(e) = regex::Regex::new(p) {
                out.push(format!(
                    "[audit] redact[{i}] {p:?}: not a regular expression: {e}"
                ));
            }
        }
        if self.buffer == 0 || self.buffer > 1_000_000 {
            out.push(format!(
                "[audit] buffer = {}: must be between 1 and 1000000",
                self.buffer
            ));
        }
        if self.max_rows == 0 {
            out.push("[audit] max_rows = 0: use enabled = false to keep nothing".into());
        }
        for (i, v) in self.values.iter().enumerate() {
            if v.max_bytes == 0 || v.max_bytes > 1 << 20 {
                out.push(format!(
                    "[[audit.values]] #{}: max_bytes = {} must be between 1 and 1048576",
                    i + 1,
                    v.max_bytes
                ));
            }
        }
        if let Some(e) = &self.export
            && (e.rotate_mb == 0 || e.file.trim().is_empty())
        {
            out.push("[audit.export]: file must be set and rotate_mb at least 1".into());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn defaults_and_problems_are_reported_at_load() {
        let c = super::super::parse("wf.toml", "", "toml").unwrap();
        assert!(c.audit.enabled);
        assert_eq!((c.audit.retention_days, c.audit.max_rows), (30, 1_000_000));
        let bad = "[audit]\nredact = [\"(unclosed\"]\n";
        let e = super::super::parse("wf.toml", bad, "toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("wf.toml: audit: [audit] redact[0]"), "{e}");
        let unknown = "[audit]\nretention = 3\n";
        let e = super::super::parse("wf.toml", unknown, "toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("retention"), "{e}");
        let values = "[[audit.values]]\ncapabilities = \"github.*\"\narguments = true\n";
        let c = super::super::parse("wf.toml", values, "toml").unwrap();
        assert_eq!(c.audit.values[0].max_bytes, 4096);
    }
}
