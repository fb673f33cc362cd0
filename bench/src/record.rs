//! `wf-bench --record FILE`: the run's tables appended to FILE as JSON lines,
//! one record per figure (bench/results/, read by bench/trend.py).
//!
//! The benchmarks print markdown as they go, so the run is made by a second
//! wf-bench (the same arguments but `--record`) whose stdout this one passes
//! through and keeps; the tables are parsed once it has exited.

use std::path::Path;
use std::process::{ExitCode, Stdio};

use anyhow::Context;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Runs wf-bench again with `args` (without `--record`), echoing its tables,
/// then appends their figures to `file`.
pub async fn run(file: &Path, args: Vec<String>) -> ExitCode {
    match record(file, args).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("wf-bench --record: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn record(file: &Path, args: Vec<String>) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("cannot find wf-bench's own path")?;
    let mut child = tokio::process::Command::new(exe)
        .args(&args)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot start the recorded run")?;
    // Ctrl-C reaches the child too (same process group): it stops and reaps
    // its own children, and this process records what was printed.
    tokio::spawn(async { while tokio::signal::ctrl_c().await.is_ok() {} });
    let mut lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
    let mut out = tokio::io::stdout();
    let mut text = String::new();
    while let Some(line) = lines.next_line().await? {
        out.write_all(line.as_bytes()).await?;
        out.write_all(b"\n").await?;
        text.push_str(&line);
        text.push('\n');
    }
    out.flush().await?;
    let status = child.wait().await?;
    let records = parse(&text);
    if !records.is_empty() {
        let mut body = String::new();
        for r in &records {
            body.push_str(&serde_json::to_string(r)?);
            body.push('\n');
        }
        use std::io::Write as _;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| f.write_all(body.as_bytes()))
            .with_context(|| format!("cannot append to {}", file.display()))?;
    }
    eprintln!(
        "wf-bench: {} figures appended to {}",
        records.len(),
        file.display()
    );
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1))
    })
}

const UNITS: &[&str] = &[
    "µs", "ms", "MiB", "KiB", "GiB", "MB", "KB", "calls/s", "%", "×", "s", "B",
];

/// The first number of a cell that starts with one ("+197 µs", "14,744",
/// "**missed** (88 %)" has none), and its unit.
fn number(cell: &str, header: &str) -> Option<(f64, Option<&'static str>)> {
    let c = cell.replace("**", "");
    let c = c.trim();
    let start = c.find(|ch: char| ch.is_ascii_digit())?;
    if !c[..start]
        .chars()
        .all(|ch| matches!(ch, '+' | '-' | '−' | '≈' | ' '))
    {
        return None;
    }
    let rest = &c[start..];
    let end = rest
        .find(|ch: char| !(ch.is_ascii_digit() || matches!(ch, '.' | ',' | '\u{202f}' | '\u{a0}')))
        .unwrap_or(rest.len());
    let digits: String = rest[..end]
        .chars()
        .filter(|ch| ch.is_ascii_digit() || *ch == '.')
        .collect();
    let mut value: f64 = digits.trim_end_matches('.').parse().ok()?;
    if c[..start].contains(['-', '−']) {
        value = -value;
    }
    let after = rest[end..].trim_start();
    let unit_at = |s: &str| {
        UNITS
            .iter()
            .copied()
            .find(|u| s.starts_with(u) && !s[u.len()..].starts_with(|ch: char| ch.is_alphabetic()))
    };
    let unit = unit_at(after).or_else(|| {
        // "+274 / +292 µs", "p50 µs": the unit said once, later in the cell or in the header.
        [c, header].into_iter().find_map(|s| {
            s.char_indices()
                .filter(|(i, _)| *i == 0 || s[..*i].ends_with([' ', '(', '/']))
                .find_map(|(i, _)| unit_at(&s[i..]))
        })
    });
    Some((value, unit))
}

fn cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

/// The figures of every table in a run's markdown.
pub fn parse(text: &str) -> Vec<Value> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("- {name}: ")))
            .unwrap_or("")
            .trim()
            .to_string()
    };
    // "2026-12-05 07:40 UTC" → "2026-12-05T07:40Z".
    let date = field("date").trim_end_matches(" UTC").replacen(' ', "T", 1) + "Z";
    let command = field("command").trim_matches('`').to_string();
    let machine = format!(
        "{}; load average at start {}",
        field("machine"),
        field("load average at start")
    );
    let mut question = String::new();
    let mut records = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(title) = line.strip_prefix("## ") {
            question = title.trim().to_string();
        }
        let is_table = line.starts_with('|')
            && lines.get(i + 1).is_some_and(|l| {
                l.starts_with("|-") || l.starts_with("|:") || l.starts_with("| -")
            });
        if !is_table {
            i += 1;
            continue;
        }
        let header = cells(line);
        i += 2;
        while i < lines.len() && lines[i].starts_with('|') {
            let row = cells(lines[i]);
            let mut label = vec![row[0].replace("**", "")];
            let mut j = 1;
            while j < row.len().min(header.len())
                && number(&row[j], &header[j]).is_none()
                && !matches!(row[j].as_str(), "" | "–" | "-" | "—")
            {
                label.push(row[j].replace("**", ""));
                j += 1;
            }
            for k in j..row.len().min(header.len()) {
                if let Some((value, unit)) = number(&row[k], &header[k]) {
                    records.push(json!({
                        "date": date,
                        "question": question,
                        "row": label.join(" / "),
                        "column": header[k].replace("**", ""),
                        "value": value,
                        "unit": unit,
                        "raw": row[k],
                        "command": command,
                        "machine": machine,
                    }));
                }
            }
            i += 1;
        }
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_units() {
        assert_eq!(number("+197 µs", "p50 added"), Some((197.0, Some("µs"))));
        assert_eq!(
            number("14,744", "calls/s at 16"),
            Some((14744.0, Some("calls/s")))
        );
        assert_eq!(number("−63 µs", ""), Some((-63.0, Some("µs"))));
        assert_eq!(number("+274 / +292 µs", ""), Some((274.0, Some("µs"))));
        assert_eq!(number("0.49%", ""), Some((0.49, Some("%"))));
        assert_eq!(number("**missed**", ""), None);
        assert_eq!(number("Rust fixture (stdio)", ""), None);
        assert_eq!(number("3.78", "p50 µs"), Some((3.78, Some("µs"))));
    }

    #[test]
    fn a_run_becomes_records() {
        let run = "# wf benchmark (quick)\n\n- date: 2026-12-05 07:40 UTC\n- command: `wf-bench --quick`\n\
                   - machine: 2 cores, Some CPU, Linux 6.18\n- load average at start: 1.0 2.0 3.0\n\n\
                   ## Memory\n\nVmRSS of wf.\n\n| state | wf VmRSS | upstream children |\n|---|---:|---:|\n\
                   | wf.std only | 34.8 MiB | 0 |\n| 10 sources | 42.1 MiB | – |\n\n## Other\n\ntext\n";
        let r = parse(run);
        assert_eq!(r.len(), 3, "{r:#?}");
        assert_eq!(r[0]["date"], "2026-12-05T07:40Z");
        assert_eq!(r[0]["question"], "Memory");
        assert_eq!(r[0]["row"], "wf.std only");
        assert_eq!(r[0]["column"], "wf VmRSS");
        assert_eq!(r[0]["value"], 34.8);
        assert_eq!(r[0]["unit"], "MiB");
        assert_eq!(r[0]["command"], "wf-bench --quick");
        assert_eq!(
            r[0]["machine"],
            "2 cores, Some CPU, Linux 6.18; load average at start 1.0 2.0 3.0"
        );
        assert_eq!(r[2]["row"], "10 sources");
    }
}
