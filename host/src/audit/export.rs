//! `[audit.export]`: records as JSON lines in a file, rotated by size
//! (`audit.jsonl` → `audit.jsonl.1` → … → `audit.jsonl.N`, the oldest gone).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::store::AuditRecord;

pub struct JsonLines {
    path: PathBuf,
    rotate_bytes: u64,
    keep: u32,
    file: Option<File>,
    size: u64,
}

impl JsonLines {
    pub fn new(path: PathBuf, rotate_mb: u64, keep: u32) -> Self {
        Self {
            path,
            rotate_bytes: rotate_mb.saturating_mul(1 << 20).max(1),
            keep,
            file: None,
            size: 0,
        }
    }

    /// Appends `records`, one line each; rotates first when the file is full.
    pub fn write(&mut self, records: &[AuditRecord]) -> io::Result<()> {
        let mut text = Vec::with_capacity(records.len() * 512);
        for r in records {
            serde_json::to_writer(&mut text, r).map_err(io::Error::other)?;
            text.push(b'\n');
        }
        if self.file.is_some() && self.size + text.len() as u64 > self.rotate_bytes {
            self.file = None;
            rotate(&self.path, self.keep)?;
        }
        if self.file.is_none() {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
            self.size = f.metadata()?.len();
            self.file = Some(f);
        }
        let f = self.file.as_mut().expect("opened above");
        f.write_all(&text)?;
        f.flush()?;
        self.size += text.len() as u64;
        Ok(())
    }
}

fn numbered(path: &Path, n: u32) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

fn rotate(path: &Path, keep: u32) -> io::Result<()> {
    if keep == 0 {
        return std::fs::remove_file(path).or_else(ignore_missing);
    }
    std::fs::remove_file(numbered(path, keep)).or_else(ignore_missing)?;
    for n in (1..keep).rev() {
        std::fs::rename(numbered(path, n), numbered(path, n + 1)).or_else(ignore_missing)?;
    }
    std::fs::rename(path, numbered(path, 1)).or_else(ignore_missing)
}

fn ignore_missing(e: io::Error) -> io::Result<()> {
    if e.kind() == io::ErrorKind::NotFound {
        Ok(())
    } else {
        Err(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotates_by_size_and_keeps_n_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let mut out = JsonLines::new(path.clone(), 1, 2);
        out.rotate_bytes = 600; // a few records a file
        let record = |i: i64| AuditRecord {
            id: format!("r{i}"),
            at: i,
            principal: "alice".into(),
            ..AuditRecord::default()
        };
        for i in 0..20 {
            out.write(&[record(i)]).unwrap();
        }
        let lines = |p: &Path| -> Vec<AuditRecord> {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        let newest = lines(&path);
        assert_eq!(newest.last().unwrap().id, "r19");
        let one = lines(&numbered(&path, 1));
        let two = lines(&numbered(&path, 2));
        assert!(!numbered(&path, 3).exists());
        // Consecutive, oldest in .2: nothing lost between the kept files.
        let ids: Vec<i64> = two
            .iter()
            .chain(&one)
            .chain(&newest)
            .map(|r| r.at)
            .collect();
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
        assert!(std::fs::metadata(&path).unwrap().len() <= 600);
    }
}
