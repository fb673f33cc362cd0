//! Tokens at rest: one file per source in its data directory
//! (`<state_dir>/sources/<name>/oauth-tokens`), owner-only (0600, checked
//! before use), encrypted with ChaCha20-Poly1305 under a random key kept in
//! `oauth.key` beside it (also 0600).
//!
//! Why a key file and not the OS keyring: wf runs headless (servers, CI,
//! containers) where no keyring daemon exists, and a keyring crate would add a
//! D-Bus stack. The key file keeps tokens out of anything that copies the token
//! file alone (backups, support bundles, `grep -r`); it does not protect against
//! a process running as the same user, which no local scheme can.

use std::io::Write;
#[cfg(unix)]
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};

use crate::OAuthError;

pub const TOKEN_FILE: &str = "oauth-tokens";
pub const KEY_FILE: &str = "oauth.key";
/// Binds the ciphertext to its purpose and format version.
const AAD: &[u8] = b"wf-oauth-tokens-v1";

/// The encrypted token file of one source.
#[derive(Debug, Clone)]
pub struct TokenFile {
    dir: PathBuf,
    /// Told of each token read from or written to the file (see
    /// [`TokenFile::on_secret`]).
    on_secret: Option<fn(&str)>,
}

impl TokenFile {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            on_secret: None,
        }
    }

    /// Calls `hook` with every access and refresh token this file reads or
    /// writes, including those rmcp saves after a refresh: the mcp plugin
    /// passes its log redaction, so no later log line can quote them.
    pub fn on_secret(mut self, hook: fn(&str)) -> Self {
        self.on_secret = Some(hook);
        self
    }

    fn announce(&self, creds: &StoredCredentials) {
        let Some(hook) = self.on_secret else { return };
        for secret in tokens_of(creds) {
            hook(&secret);
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(TOKEN_FILE)
    }

    /// The source's directory (tokens, key, notes).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The stored access and refresh tokens, to blank out of any text that
    /// quotes what a server said (see [`crate::redact`]). Empty when none
    /// can be read.
    pub fn secrets(&self) -> Vec<String> {
        let Ok(Some(creds)) = self.read() else {
            return Vec::new();
        };
        tokens_of(&creds)
    }

    fn key_path(&self) -> PathBuf {
        self.dir.join(KEY_FILE)
    }

    /// Refuses a token or key file that others can read or write: a clear
    /// one-line error with the fix, before any token is used.
    pub fn check_permissions(&self) -> Result<(), OAuthError> {
        for path in [self.path(), self.key_path()] {
            check_owner_only(&path)?;
        }
        Ok(())
    }

    pub fn exists(&self) -> bool {
        self.path().exists()
    }

    /// Reads and decrypts the stored credentials, if any.
    pub fn read(&self) -> Result<Option<StoredCredentials>, OAuthError> {
        self.check_permissions()?;
        let sealed = match std::fs::read(self.path()) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(OAuthError::store(&self.path(), e)),
        };
        let key = self.key(false)?;
        let plain = open(&key, sealed).ok_or_else(|| {
            OAuthError::Store(format!(
                "{} cannot be decrypted with {} (changed or from another key): run `wf auth logout` and log in again",
                self.path().display(),
                self.key_path().display()
            ))
        })?;
        let creds: StoredCredentials = serde_json::from_slice(&plain).map_err(|e| {
            OAuthError::Store(format!("{} is not valid: {e}", self.path().display()))
        })?;
        self.announce(&creds);
        Ok(Some(creds))
    }

    /// Encrypts and writes the credentials (0600, replaced atomically).
    pub fn write(&self, creds: &StoredCredentials) -> Result<(), OAuthError> {
        self.announce(creds);
        let key = self.key(true)?;
        let plain = serde_json::to_vec(creds)
            .map_err(|e| OAuthError::Store(format!("cannot encode the credentials: {e}")))?;
        let sealed = seal(&key, plain)?;
        let tmp = self.dir.join(format!("{TOKEN_FILE}.tmp"));
        write_owner_only(&tmp, &sealed)?;
        std::fs::rename(&tmp, self.path()).map_err(|e| OAuthError::store(&self.path(), e))
    }

    /// Deletes the token file (the key stays for the next login).
    pub fn delete(&self) -> Result<bool, OAuthError> {
        match std::fs::remove_file(self.path()) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(OAuthError::store(&self.path(), e)),
        }
    }

    fn key(&self, create: bool) -> Result<LessSafeKey, OAuthError> {
        let path = self.key_path();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                let mut b = vec![0u8; 32];
                SystemRandom::new()
                    .fill(&mut b)
                    .map_err(|_| OAuthError::Store("no system randomness for a key".into()))?;
                std::fs::create_dir_all(&self.dir).map_err(|e| OAuthError::store(&self.dir, e))?;
                write_owner_only(&path, &b)?;
                b
            }
            Err(e) => return Err(OAuthError::store(&path, e)),
        };
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, &bytes)
            .map_err(|_| OAuthError::Store(format!("{} is not a 32-byte key", path.display())))?;
        Ok(LessSafeKey::new(unbound))
    }
}

/// Unix: refuses a file others can read. Windows has no mode bits: a file
/// takes the ACL of its folder, and the state directory sits in the user's
/// profile, which only that user (and administrators) can read.
#[cfg(not(unix))]
fn check_owner_only(_path: &Path) -> Result<(), OAuthError> {
    Ok(())
}

#[cfg(unix)]
fn check_owner_only(path: &Path) -> Result<(), OAuthError> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(OAuthError::store(path, e)),
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(OAuthError::Store(format!(
            "{} has mode {mode:03o}: tokens must be readable by their owner only (run `chmod 600 {}`)",
            path.display(),
            path.display()
        )));
    }
    Ok(())
}

/// The access and refresh tokens in `creds`.
fn tokens_of(creds: &StoredCredentials) -> Vec<String> {
    let response = creds
        .token_response
        .as_ref()
        .and_then(|r| serde_json::to_value(r).ok())
        .unwrap_or_default();
    ["access_token", "refresh_token"]
        .iter()
        .filter_map(|k| response[k].as_str().map(str::to_string))
        .collect()
}

pub(crate) fn write_owner_only(path: &Path, bytes: &[u8]) -> Result<(), OAuthError> {
    let _ = std::fs::remove_file(path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut f = options.open(path).map_err(|e| OAuthError::store(path, e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| OAuthError::store(path, e))
}

fn seal(key: &LessSafeKey, mut plain: Vec<u8>) -> Result<Vec<u8>, OAuthError> {
    let mut nonce = [0u8; NONCE_LEN];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| OAuthError::Store("no system randomness for a nonce".into()))?;
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(AAD),
        &mut plain,
    )
    .map_err(|_| OAuthError::Store("cannot encrypt the credentials".into()))?;
    let mut out = nonce.to_vec();
    out.extend_from_slice(&plain);
    Ok(out)
}

fn open(key: &LessSafeKey, sealed: Vec<u8>) -> Option<Vec<u8>> {
    if sealed.len() < NONCE_LEN {
        return None;
    }
    let (nonce, rest) = sealed.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
    let mut rest = rest.to_vec();
    let plain = key.open_in_place(nonce, Aad::from(AAD), &mut rest).ok()?;
    Some(plain.to_vec())
}

/// rmcp's credential store over the file: what its refresh and login save
/// lands encrypted on disk.
#[async_trait::async_trait]
impl CredentialStore for TokenFile {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.read()
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.write(&credentials)
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.delete()
            .map(|_| ())
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))
    }

    /// One refresh at a time per token file in this process. A source's
    /// discovery and its session each hold an rmcp client on the same file;
    /// with a rotating refresh token, two refreshes at once sent the same
    /// refresh token twice, the upstream revoked it at the second, and the
    /// source fell to `needs_login`. Under the guard rmcp loads the file
    /// again, so the second refresh uses the token the first one saved.
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let lock = refresh_lock(&self.path());
        Ok(Some(CredentialRefreshGuard::new(lock.lock_owned().await)))
    }
}

/// The refresh lock of the token file at `path`, shared by every
/// [`TokenFile`] of this process on that path (one per source).
fn refresh_lock(path: &Path) -> std::sync::Arc<tokio::sync::Mutex<()>> {
    type Locks = std::collections::HashMap<PathBuf, std::sync::Arc<tokio::sync::Mutex<()>>>;
    static LOCKS: std::sync::OnceLock<std::sync::Mutex<Locks>> = std::sync::OnceLock::new();
    LOCKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(path.to_path_buf())
        .or_default()
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(token: &str) -> StoredCredentials {
        let response: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(
            serde_json::json!({"access_token": token, "token_type": "bearer", "expires_in": 60}),
        )
        .unwrap();
        StoredCredentials::new(
            "client".into(),
            Some(response),
            vec!["read".into()],
            Some(1),
        )
    }

    #[tokio::test]
    async fn refreshes_of_one_token_file_take_turns_and_others_do_not_wait() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let held = TokenFile::new(a.path())
            .acquire_refresh_guard()
            .await
            .unwrap();
        assert!(held.is_some());
        // Another TokenFile on the same folder (a source's other client) waits.
        let same = TokenFile::new(a.path());
        let waited = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            same.acquire_refresh_guard(),
        )
        .await;
        assert!(
            waited.is_err(),
            "a second refresh of the same file did not wait"
        );
        // Another source's file does not.
        let other = TokenFile::new(b.path())
            .acquire_refresh_guard()
            .await
            .unwrap();
        assert!(other.is_some());
        drop(held);
        let next = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            same.acquire_refresh_guard(),
        )
        .await
        .expect("the guard is free once the first refresh is done")
        .unwrap();
        assert!(next.is_some());
    }

    #[test]
    fn every_token_read_or_written_is_announced() {
        static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
        fn seen(s: &str) {
            SEEN.lock().unwrap().push(s.to_string());
        }
        let dir = tempfile::tempdir().unwrap();
        let f = TokenFile::new(dir.path()).on_secret(seen);
        let response = serde_json::from_value(serde_json::json!({
            "access_token": "at-announced-1", "token_type": "bearer", "refresh_token": "rt-announced-1"
        }))
        .unwrap();
        f.write(&StoredCredentials::new(
            "client".into(),
            Some(response),
            vec![],
            None,
        ))
        .unwrap();
        assert_eq!(*SEEN.lock().unwrap(), ["at-announced-1", "rt-announced-1"]);
        SEEN.lock().unwrap().clear();
        f.read().unwrap();
        assert_eq!(*SEEN.lock().unwrap(), ["at-announced-1", "rt-announced-1"]);
    }

    #[test]
    fn round_trips_encrypted_and_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let f = TokenFile::new(dir.path());
        assert!(f.read().unwrap().is_none());
        f.write(&creds("tok-SECRET-123")).unwrap();
        let raw = std::fs::read(f.path()).unwrap();
        assert!(!String::from_utf8_lossy(&raw).contains("tok-SECRET-123"));
        for p in [f.path(), f.key_path()] {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", p.display());
        }
        let back = f.read().unwrap().unwrap();
        let json = serde_json::to_value(&back.token_response).unwrap();
        assert_eq!(json["access_token"], "tok-SECRET-123");
    }

    #[test]
    fn a_token_file_others_can_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = TokenFile::new(dir.path());
        f.write(&creds("t")).unwrap();
        std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = f.read().unwrap_err().to_string();
        assert!(e.contains("mode 644") && e.contains("chmod 600"), "{e}");
        assert!(f.check_permissions().is_err());
    }

    #[test]
    fn a_tampered_file_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let f = TokenFile::new(dir.path());
        f.write(&creds("t")).unwrap();
        let mut raw = std::fs::read(f.path()).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        std::fs::write(f.path(), raw).unwrap();
        let e = f.read().unwrap_err().to_string();
        assert!(e.contains("cannot be decrypted"), "{e}");
    }
}
