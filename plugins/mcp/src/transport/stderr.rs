//! An upstream's stderr, forwarded to wf's log in bounded lines.
//!
//! Lines are logged at debug, tagged with the source. A line longer than
//! [`MAX_LINE`] keeps its first [`MAX_LINE`] bytes; the rest is dropped and
//! counted, so an upstream that writes gigabytes without a newline costs wf
//! one small buffer. Truncations are reported at warn, at most once per
//! [`REPORT_EVERY`] per source, with the running counts.

use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};

/// The longest stderr line kept (bytes).
pub const MAX_LINE: usize = 8 * 1024;
/// The shortest interval between two truncation warnings of one source.
pub const REPORT_EVERY: Duration = Duration::from_secs(10);

/// Counts of what was cut, for the log.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Truncations {
    pub lines: u64,
    pub dropped_bytes: u64,
}

/// Splits a byte stream into lines of at most `max` bytes, counting the rest.
pub struct BoundedLines {
    max: usize,
    line: Vec<u8>,
    /// Bytes dropped from the current line.
    dropping: u64,
    pub totals: Truncations,
}

/// One finished (or, at truncation, started) line.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    /// A whole line, maybe cut; `dropped` bytes of it were not kept.
    Line { text: String, dropped: u64 },
    /// A line just went over the limit (its kept head is reported when it ends).
    TruncationStarted,
}

impl BoundedLines {
    pub fn new(max: usize) -> Self {
        Self {
            max,
            line: Vec::with_capacity(256),
            dropping: 0,
            totals: Truncations::default(),
        }
    }

    /// Feeds bytes; calls `emit` for each event.
    pub fn feed(&mut self, mut bytes: &[u8], mut emit: impl FnMut(Piece)) {
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|&b| b == b'\n');
            let part = &bytes[..newline.unwrap_or(bytes.len())];
            let room = self.max - self.line.len().min(self.max);
            let keep = part.len().min(room);
            self.line.extend_from_slice(&part[..keep]);
            let over = (part.len() - keep) as u64;
            if over > 0 {
                if self.dropping == 0 {
                    self.totals.lines += 1;
                    emit(Piece::TruncationStarted);
                }
                self.dropping += over;
                self.totals.dropped_bytes += over;
            }
            match newline {
                Some(i) => {
                    emit(self.take());
                    bytes = &bytes[i + 1..];
                }
                None => bytes = &[],
            }
        }
    }

    fn take(&mut self) -> Piece {
        let text = String::from_utf8_lossy(&self.line)
            .trim_end_matches('\r')
            .to_string();
        self.line.clear();
        let dropped = std::mem::take(&mut self.dropping);
        Piece::Line { text, dropped }
    }

    /// The unfinished last line at end of stream, if any.
    pub fn finish(&mut self) -> Option<Piece> {
        (!self.line.is_empty() || self.dropping > 0).then(|| self.take())
    }
}

/// Reads `stderr` to its end, logging bounded lines tagged with `source`.
pub async fn forward(source: String, mut stderr: impl AsyncRead + Unpin) {
    let mut lines = BoundedLines::new(MAX_LINE);
    let mut buf = vec![0u8; 16 * 1024];
    let mut last_report: Option<Instant> = None;
    let mut unreported = 0u64;
    let log = |piece: Piece,
               totals: Truncations,
               last_report: &mut Option<Instant>,
               unreported: &mut u64| match piece {
        Piece::Line { text, dropped: 0 } => {
            tracing::debug!(source = %source, "upstream stderr: {text}")
        }
        Piece::Line { text, dropped } => {
            tracing::debug!(source = %source, dropped, "upstream stderr (truncated): {text}")
        }
        Piece::TruncationStarted => {
            *unreported += 1;
            if last_report.is_none_or(|t| t.elapsed() >= REPORT_EVERY) {
                tracing::warn!(
                    source = %source, max_line = MAX_LINE, lines_truncated = totals.lines,
                    bytes_dropped = totals.dropped_bytes, since_last_report = *unreported,
                    "upstream stderr line over {MAX_LINE} bytes truncated"
                );
                *last_report = Some(Instant::now());
                *unreported = 0;
            }
        }
    };
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut pieces = Vec::new();
        lines.feed(&buf[..n], |p| pieces.push(p));
        for p in pieces {
            log(p, lines.totals, &mut last_report, &mut unreported);
        }
    }
    if let Some(p) = lines.finish() {
        log(p, lines.totals, &mut last_report, &mut unreported);
    }
    if lines.totals.lines > 0 {
        tracing::info!(
            source = %source, lines_truncated = lines.totals.lines,
            bytes_dropped = lines.totals.dropped_bytes,
            "upstream stderr closed; over-long lines were truncated"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&[u8]], max: usize) -> (Vec<Piece>, Truncations) {
        let mut l = BoundedLines::new(max);
        let mut out = Vec::new();
        for c in chunks {
            l.feed(c, |p| out.push(p));
        }
        out.extend(l.finish());
        (out, l.totals)
    }

    fn line(text: &str, dropped: u64) -> Piece {
        Piece::Line {
            text: text.into(),
            dropped,
        }
    }

    #[test]
    fn short_lines_pass_across_chunk_boundaries() {
        let (out, t) = run(&[b"ab", b"c\r\nde", b"f\n", b"tail"], 8);
        assert_eq!(out, vec![line("abc", 0), line("def", 0), line("tail", 0)]);
        assert_eq!(t, Truncations::default());
    }

    #[test]
    fn long_lines_are_cut_and_counted_once_each() {
        let (out, t) = run(&[b"0123456", b"789abc\nxy", b"z0123456789\nok\n"], 4);
        assert_eq!(
            out,
            vec![
                Piece::TruncationStarted,
                line("0123", 9),
                Piece::TruncationStarted,
                line("xyz0", 9),
                line("ok", 0)
            ]
        );
        assert_eq!(
            t,
            Truncations {
                lines: 2,
                dropped_bytes: 18
            }
        );
    }

    #[test]
    fn a_line_without_end_stays_bounded() {
        let mut l = BoundedLines::new(16);
        let chunk = vec![b'x'; 1 << 20];
        let mut events = 0;
        for _ in 0..64 {
            l.feed(&chunk, |_| events += 1);
        }
        assert_eq!(events, 1, "one truncation event, not one per chunk");
        assert!(l.line.capacity() <= 256, "{}", l.line.capacity());
        assert_eq!(l.totals.dropped_bytes, (64u64 << 20) - 16);
    }
}
