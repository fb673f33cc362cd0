//! The notes of one source: kept in memory behind a mutex and persisted as
//! one JSON file in the source's data directory.
//!
//! Every change is written to a temporary file in the same directory, flushed
//! to disk and renamed over the notes file, so a crash leaves either the old
//! or the new file, never a torn one. Memory is only updated once the new
//! file is in place, so memory and disk never disagree.

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};
use wf_plugin_api::PluginError;

/// The file a source keeps its notes in, inside its data directory.
pub const FILE_NAME: &str = "notes.json";

/// One note, as stored and as returned by the tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub id: String,
    pub title: String,
    pub body: String,
    #[serde(default)]
    pub tags: Vec<String>,
}

impl Note {
    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags.iter().any(|t| t == tag)
    }

    /// Case-insensitive substring match over title and body; `needle` is lowercase.
    pub fn matches(&self, needle: &str) -> bool {
        self.title.to_lowercase().contains(needle) || self.body.to_lowercase().contains(needle)
    }
}

/// The content of the notes file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Notebook {
    /// The number of the next id; ids are never reused, even after a delete.
    #[serde(default = "first_id")]
    next_id: u64,
    #[serde(default)]
    notes: Vec<Note>,
}

fn first_id() -> u64 {
    1
}

pub struct Store {
    path: PathBuf,
    book: Mutex<Notebook>,
}

impl Store {
    /// Loads the notes of `data_dir` (none yet when the file does not exist).
    /// A file that cannot be read or parsed is an error: it is never overwritten.
    pub fn open(data_dir: &Path) -> Result<Self, PluginError> {
        let path = data_dir.join(FILE_NAME);
        let mut book = match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<Notebook>(&bytes).map_err(|e| {
                PluginError::failed(format!("{} is not a valid notes file: {e}", path.display()))
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Notebook::default(),
            Err(e) => {
                return Err(PluginError::failed(format!(
                    "cannot read {}: {e}",
                    path.display()
                )));
            }
        };
        book.next_id = book.next_id.max(first_id());
        // A hand-edited file may hold ids at or past `next_id`: never hand them out again.
        for note in &book.notes {
            if let Some(n) = note
                .id
                .strip_prefix('n')
                .and_then(|n| n.parse::<u64>().ok())
            {
                book.next_id = book.next_id.max(n + 1);
            }
        }
        Ok(Self {
            path,
            book: Mutex::new(book),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Notebook> {
        // The lock is never held across a panic that leaves the notebook half
        // changed (changes are made on a copy), so a poisoned lock is still sound.
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn count(&self) -> usize {
        self.lock().notes.len()
    }

    pub fn get(&self, id: &str) -> Option<Note> {
        self.lock().notes.iter().find(|n| n.id == id).cloned()
    }

    /// The notes `keep` selects, oldest first.
    pub fn select(&self, keep: impl Fn(&Note) -> bool) -> Vec<Note> {
        self.lock()
            .notes
            .iter()
            .filter(|n| keep(n))
            .cloned()
            .collect()
    }

    /// Adds a note and returns it (with its new id).
    pub fn add(&self, title: String, body: String, tags: Vec<String>) -> Result<Note, PluginError> {
        let mut book = self.lock();
        let mut next = book.clone();
        let note = Note {
            id: format!("n{}", next.next_id),
            title,
            body,
            tags,
        };
        next.next_id += 1;
        next.notes.push(note.clone());
        self.save(&next)?;
        *book = next;
        Ok(note)
    }

    /// Deletes note `id`; false when there is no such note.
    pub fn delete(&self, id: &str) -> Result<bool, PluginError> {
        let mut book = self.lock();
        let Some(index) = book.notes.iter().position(|n| n.id == id) else {
            return Ok(false);
        };
        let mut next = book.clone();
        next.notes.remove(index);
        self.save(&next)?;
        *book = next;
        Ok(true)
    }

    /// Writes `book` atomically: temporary file, fsync, rename.
    fn save(&self, book: &Notebook) -> Result<(), PluginError> {
        static NEXT_TMP: AtomicU64 = AtomicU64::new(0);
        let tmp = self.path.with_file_name(format!(
            ".{FILE_NAME}.{}-{}.tmp",
            std::process::id(),
            NEXT_TMP.fetch_add(1, Ordering::Relaxed)
        ));
        let write = || -> io::Result<()> {
            let mut json = serde_json::to_vec_pretty(book)?;
            json.push(b'\n');
            let mut file = fs::File::create(&tmp)?;
            file.write_all(&json)?;
            file.sync_all()?;
            fs::rename(&tmp, &self.path)?;
            // Make the rename itself durable (best effort: not every platform
            // can open a directory).
            if let Some(dir) = self.path.parent()
                && let Ok(dir) = fs::File::open(dir)
            {
                let _ = dir.sync_all();
            }
            Ok(())
        };
        write().map_err(|e| {
            let _ = fs::remove_file(&tmp);
            PluginError::internal(format!("cannot save {}: {e}", self.path.display()))
        })
    }
}
