//! The environment a stdio upstream starts with.
//!
//! By default a child gets only a small allowlist of wf's variables — the
//! ones a program needs to find its tools, home, locale and temp folder, as
//! the official MCP SDKs' `get_default_environment` pass (plus locale and
//! `TMPDIR`) — then its source's own `env` and `auth.env` on top (auth wins).
//! wf's own settings (`WF_ADMIN_TOKEN`, `WF_HTTP_TOKEN`, …) and the secrets
//! other sources read through `${VAR}` live in wf's environment, so they never
//! reach a child this way.
//!
//! `inherit_env = true` is the explicit opt-out: the child inherits wf's
//! whole environment, except wf's own `WF_*` variables, which are stripped
//! even then.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

/// Variables passed from wf's environment by default (exact names).
#[cfg(not(windows))]
pub const ALLOWED: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LANGUAGE", "TMPDIR",
];

/// Variables passed from wf's environment by default (exact names; Windows
/// names are case-insensitive, compared in upper case).
#[cfg(windows)]
pub const ALLOWED: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "PROGRAMFILES",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
    "COMSPEC",
    "WINDIR",
];

/// Prefixes passed by default as well: the locale categories (`LC_ALL`, `LC_CTYPE`, …).
pub const ALLOWED_PREFIXES: &[&str] = &["LC_"];

/// wf's own variables: never passed on from wf's environment, not even with
/// `inherit_env` (a source's own `env` may still set such a name explicitly).
pub const WF_PREFIX: &str = "WF_";

fn normalized(name: &OsStr) -> Option<String> {
    let name = name.to_str()?;
    Some(if cfg!(windows) {
        name.to_ascii_uppercase()
    } else {
        name.to_string()
    })
}

/// Whether wf passes its variable `name` (with `value`) to a child by default.
pub fn allowed(name: &OsStr, value: &OsStr) -> bool {
    // A bash-exported function (`() { …`) is code, not a setting (as the SDKs do).
    if value.as_encoded_bytes().starts_with(b"()") {
        return false;
    }
    let Some(name) = normalized(name) else {
        return false;
    };
    ALLOWED.contains(&name.as_str()) || ALLOWED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Whether `name` is one of wf's own variables.
pub fn is_wf_own(name: &OsStr) -> bool {
    normalized(name).is_some_and(|n| n.starts_with(WF_PREFIX))
}

/// The complete environment of a stdio child: what it takes from wf's
/// environment `parent` (the allowlist, or everything but `WF_*` with
/// `inherit`), then the source's `own` env, then `auth` env (auth wins).
pub fn child_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    inherit: bool,
    own: &BTreeMap<String, String>,
    auth: &BTreeMap<String, String>,
) -> BTreeMap<OsString, OsString> {
    let mut env: BTreeMap<OsString, OsString> = parent
        .into_iter()
        .filter(|(k, v)| {
            if inherit {
                !is_wf_own(k)
            } else {
                allowed(k, v)
            }
        })
        .collect();
    for (k, v) in own.iter().chain(auth.iter()) {
        env.insert(k.into(), v.into());
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parent() -> Vec<(OsString, OsString)> {
        [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("USER", "u"),
            ("LANG", "C.UTF-8"),
            ("LC_ALL", "C"),
            ("TMPDIR", "/tmp/u"),
            ("WF_ADMIN_TOKEN", "admin-secret"),
            ("WF_HTTP_TOKEN", "http-secret"),
            ("GITHUB_TOKEN", "other-source-secret"),
            ("SHELL", "() { evil; }"),
            ("XDG_CONFIG_HOME", "/home/u/.config"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect()
    }

    fn strs(env: &BTreeMap<OsString, OsString>) -> BTreeMap<&str, &str> {
        env.iter()
            .map(|(k, v)| (k.to_str().unwrap(), v.to_str().unwrap()))
            .collect()
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[cfg(not(windows))]
    #[test]
    fn default_is_the_allowlist_plus_own_and_auth_env() {
        let env = child_env(
            parent(),
            false,
            &map(&[("API_URL", "u"), ("KEY", "conf")]),
            &map(&[("KEY", "auth")]),
        );
        assert_eq!(
            strs(&env),
            BTreeMap::from([
                ("PATH", "/usr/bin"),
                ("HOME", "/home/u"),
                ("USER", "u"),
                ("LANG", "C.UTF-8"),
                ("LC_ALL", "C"),
                ("TMPDIR", "/tmp/u"),
                ("API_URL", "u"),
                ("KEY", "auth"),
            ])
        );
    }

    #[test]
    fn inherit_keeps_everything_but_wf_own_variables() {
        let env = strs_owned(child_env(
            parent(),
            true,
            &BTreeMap::new(),
            &BTreeMap::new(),
        ));
        assert!(!env.contains_key("WF_ADMIN_TOKEN") && !env.contains_key("WF_HTTP_TOKEN"));
        assert_eq!(env["GITHUB_TOKEN"], "other-source-secret");
        assert_eq!(env["XDG_CONFIG_HOME"], "/home/u/.config");
        assert_eq!(env.len(), parent().len() - 2);
    }

    #[test]
    fn a_sources_own_env_may_set_any_name() {
        let env = child_env(
            parent(),
            false,
            &map(&[("WF_TEST_SECRET", "mine"), ("PATH", "/opt/bin")]),
            &BTreeMap::new(),
        );
        let env = strs(&env);
        assert_eq!(env["WF_TEST_SECRET"], "mine");
        assert_eq!(env["PATH"], "/opt/bin");
        assert!(!env.contains_key("WF_ADMIN_TOKEN"));
    }

    #[test]
    fn functions_and_non_unicode_names_are_never_allowed() {
        assert!(!allowed(OsStr::new("SHELL"), OsStr::new("() { x; }")));
        assert!(allowed(OsStr::new("PATH"), OsStr::new("/bin")));
        assert!(allowed(OsStr::new("LC_CTYPE"), OsStr::new("C")));
        assert!(!allowed(OsStr::new("LCX"), OsStr::new("C")));
        assert!(!allowed(OsStr::new("WF_HTTP_TOKEN"), OsStr::new("t")));
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            assert!(!allowed(OsStr::from_bytes(b"PA\xffTH"), OsStr::new("x")));
        }
    }

    fn strs_owned(env: BTreeMap<OsString, OsString>) -> BTreeMap<String, String> {
        env.into_iter()
            .map(|(k, v)| (k.into_string().unwrap(), v.into_string().unwrap()))
            .collect()
    }
}
