//! Reading the trail back, the same for `wf audit`, the admin `query_audit`
//! tool and the console: times as a user writes them, and records as a
//! table, JSON lines or CSV.

use chrono::{DateTime, NaiveDate, Utc};

use crate::store::AuditRecord;

/// A time as `wf audit --since` takes it: Unix milliseconds, an RFC 3339
/// time (`2026-12-01T09:00:00Z`), a UTC date (`2026-12-01`), or an age
/// before `now_ms` (`90s`, `15m`, `2h`, `7d`).
pub fn parse_time(text: &str, now_ms: i64) -> Result<i64, String> {
    let t = text.trim();
    if let Ok(ms) = t.parse::<i64>() {
        return Ok(ms);
    }
    if let Some((n, unit)) = t
        .char_indices()
        .last()
        .map(|(i, c)| (&t[..i], c))
        .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    {
        let per = match unit {
            's' => 1_000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            _ => 0,
        };
        if per > 0 {
            let n: i64 = n.parse().map_err(|_| format!("{text:?}: too large"))?;
            return Ok(now_ms - n.saturating_mul(per));
        }
    }
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Ok(dt.timestamp_millis());
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(d
            .and_hms_opt(0, 0, 0)
            .map(|dt| dt.and_utc().timestamp_millis())
            .unwrap_or(0));
    }
    Err(format!(
        "{text:?}: not a time (use 2026-12-01, 2026-12-01T09:00:00Z, Unix milliseconds, or an age such as 15m, 2h, 7d)"
    ))
}

/// `ms` as an RFC 3339 UTC time with milliseconds.
pub fn format_time(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|| ms.to_string())
}

/// The columns of the table and of CSV.
const HEADER: [&str; 10] = [
    "time",
    "principal",
    "kind",
    "capability",
    "decision",
    "policies",
    "outcome",
    "ms",
    "client",
    "run",
];

fn cells(r: &AuditRecord) -> [String; 10] {
    [
        format_time(r.at),
        r.principal.clone(),
        r.kind.clone(),
        r.capability.clone(),
        r.decision.clone(),
        r.policies.join(" "),
        r.outcome.clone(),
        format!("{:.1}", r.duration_us as f64 / 1000.0),
        r.client.clone().unwrap_or_default(),
        r.run_id.clone().unwrap_or_default(),
    ]
}

/// Aligned columns, a header line first.
pub fn table(records: &[AuditRecord]) -> String {
    let rows: Vec<[String; 10]> = records.iter().map(cells).collect();
    let mut widths = HEADER.map(str::len);
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cols: &[String]| {
        let mut l = String::new();
        for (i, (c, w)) in cols.iter().zip(widths).enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            l.push_str(c);
            if i + 1 < cols.len() {
                l.push_str(&" ".repeat(w.saturating_sub(c.chars().count())));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&HEADER.map(String::from));
    for row in &rows {
        line(row);
    }
    out
}

/// One JSON object a line.
pub fn json_lines(records: &[AuditRecord]) -> String {
    let mut out = String::new();
    for r in records {
        out.push_str(&serde_json::to_string(r).unwrap_or_default());
        out.push('\n');
    }
    out
}

/// RFC 4180 CSV with the table's columns.
pub fn csv(records: &[AuditRecord]) -> String {
    let field = |s: &str| {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    let mut out = HEADER.join(",");
    out.push_str("\r\n");
    for r in records {
        let row: Vec<String> = cells(r).iter().map(|c| field(c)).collect();
        out.push_str(&row.join(","));
        out.push_str("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_as_users_write_them() {
        let now = 1_764_892_800_000; // 2025-12-05T00:00:00Z
        assert_eq!(parse_time("1234", now), Ok(1234));
        assert_eq!(parse_time("2h", now), Ok(now - 7_200_000));
        assert_eq!(parse_time("7d", now), Ok(now - 7 * 86_400_000));
        assert_eq!(parse_time("2025-12-05", now), Ok(now));
        assert_eq!(parse_time("2025-12-05T01:00:00Z", now), Ok(now + 3_600_000));
        assert_eq!(
            parse_time("2025-12-05T02:00:00+01:00", now),
            Ok(now + 3_600_000)
        );
        let e = parse_time("yesterday", now).unwrap_err();
        assert!(e.contains("not a time"), "{e}");
        assert!(parse_time("5y", now).is_err());
        assert_eq!(format_time(now + 5), "2025-12-05T00:00:00.005Z");
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        let r = AuditRecord {
            at: 0,
            principal: "a,b".into(),
            capability: "say \"hi\"".into(),
            policies: vec!["p1".into(), "p2".into()],
            duration_us: 1500,
            ..AuditRecord::default()
        };
        let text = csv(&[r]);
        let lines: Vec<&str> = text.split("\r\n").collect();
        assert_eq!(lines[0], HEADER.join(","));
        assert_eq!(
            lines[1],
            "1970-01-01T00:00:00.000Z,\"a,b\",,\"say \"\"hi\"\"\",,p1 p2,,1.5,,"
        );
    }

    #[test]
    fn a_table_aligns_its_columns() {
        let r = |p: &str| AuditRecord {
            principal: p.into(),
            capability: "x".into(),
            ..AuditRecord::default()
        };
        let t = table(&[r("alice"), r("bo")]);
        let lines: Vec<&str> = t.lines().collect();
        let col = |l: &str| l.find('x');
        assert_eq!(col(lines[1]), col(lines[2]));
        assert!(lines[0].starts_with("time"));
    }
}
