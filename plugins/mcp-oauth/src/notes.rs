//! What serving learned that the next `wf auth login` must act on, kept
//! beside the source's tokens (`oauth-notes.json`, 0600, no secret in it):
//!
//! - `needs_login`: the upstream refused the stored token and a refresh did
//!   not fix it (or the refresh token was rejected). `wf auth status` shows
//!   the source as `needs_login` with why, though a token file still exists.
//! - `step_up_scopes`: scopes a 403 `insufficient_scope` asked for. The next
//!   login asks for these on top of what it would ask for anyway (the union),
//!   and a successful login clears the notes.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::OAuthError;

pub const NOTES_FILE: &str = "oauth-notes.json";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Notes {
    /// Why the stored tokens no longer work (never a token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs_login: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_up_scopes: Vec<String>,
}

fn path(dir: &Path) -> PathBuf {
    dir.join(NOTES_FILE)
}

impl Notes {
    /// The notes in `dir` (none when the file is missing or unreadable: a
    /// note is advice, never a reason to refuse to serve).
    pub fn load(dir: &Path) -> Self {
        std::fs::read(path(dir))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn save(&self, dir: &Path) -> Result<(), OAuthError> {
        let text = serde_json::to_vec(self)
            .map_err(|e| OAuthError::Store(format!("cannot encode the notes: {e}")))?;
        let tmp = dir.join(format!("{NOTES_FILE}.tmp"));
        crate::store::write_owner_only(&tmp, &text)?;
        std::fs::rename(&tmp, path(dir)).map_err(|e| OAuthError::store(&path(dir), e))
    }

    /// Notes that the stored tokens were refused, and why.
    pub fn note_needs_login(dir: &Path, why: &str) -> Result<(), OAuthError> {
        let mut notes = Self::load(dir);
        if notes.needs_login.as_deref() == Some(why) {
            return Ok(());
        }
        notes.needs_login = Some(why.to_string());
        notes.save(dir)
    }

    /// Adds the space-separated `scope` of a step-up challenge; returns every
    /// scope noted so far.
    pub fn note_step_up(dir: &Path, scope: &str) -> Result<Vec<String>, OAuthError> {
        let mut notes = Self::load(dir);
        let before = notes.step_up_scopes.len();
        union_into(&mut notes.step_up_scopes, scope.split_whitespace());
        if notes.step_up_scopes.len() != before {
            notes.save(dir)?;
        }
        Ok(notes.step_up_scopes)
    }

    /// Forgets everything (after a successful login).
    pub fn clear(dir: &Path) -> Result<(), OAuthError> {
        match std::fs::remove_file(path(dir)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(OAuthError::store(&path(dir), e)),
        }
    }
}

/// Appends each scope of `more` that `scopes` lacks, keeping the order.
pub fn union_into<'a>(scopes: &mut Vec<String>, more: impl IntoIterator<Item = &'a str>) {
    for s in more {
        if !s.is_empty() && !scopes.iter().any(|have| have == s) {
            scopes.push(s.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn step_up_scopes_accumulate_once_each_and_clear_after_login() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Notes::load(dir.path()), Notes::default());
        assert_eq!(
            Notes::note_step_up(dir.path(), "read admin").unwrap(),
            ["read", "admin"]
        );
        assert_eq!(
            Notes::note_step_up(dir.path(), "admin write").unwrap(),
            ["read", "admin", "write"]
        );
        Notes::note_needs_login(dir.path(), "refused").unwrap();
        let mode = std::fs::metadata(path(dir.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let notes = Notes::load(dir.path());
        assert_eq!(notes.needs_login.as_deref(), Some("refused"));
        assert_eq!(notes.step_up_scopes.len(), 3);
        Notes::clear(dir.path()).unwrap();
        Notes::clear(dir.path()).unwrap();
        assert_eq!(Notes::load(dir.path()), Notes::default());
    }

    #[test]
    fn an_unreadable_notes_file_is_no_notes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(path(dir.path()), b"not json").unwrap();
        assert_eq!(Notes::load(dir.path()), Notes::default());
    }
}
