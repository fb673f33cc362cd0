use super::*;
use serde_json::json;

fn write(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("wf-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn toml_sources_and_defaults() {
    let p = write(
        "a.toml",
        "[server]\nmax_name_len = 40\n[sources.fs]\ncommand = \"npx\"\nargs = [\"x\"]\n",
    );
    let c = LoadedConfig::load(&p).unwrap();
    assert_eq!(c.config.server.max_name_len, 40);
    let s = c.sources().unwrap();
    assert_eq!(s["fs"].kind, "mcp");
    assert!(s["fs"].enabled);
    assert_eq!(s["fs"].settings["command"], json!("npx"));
}

#[test]
fn claude_desktop_json_is_accepted() {
    let p = write(
        "claude.json",
        r#"{"mcpServers": {"everything": {"command": "npx", "args": ["-y", "x"], "env": {"A": "1"}},
            "remote": {"url": "http://127.0.0.1:1/mcp", "headers": {"X": "y"}, "disabled": true}}}"#,
    );
    let s = LoadedConfig::load(&p).unwrap().sources().unwrap();
    assert_eq!(s["everything"].kind, "mcp");
    assert_eq!(s["everything"].settings["env"], json!({"A": "1"}));
    assert!(!s["remote"].enabled);
    assert!(!s["remote"].settings.contains_key("disabled"));
}

#[test]
fn errors_name_file_key_and_reason() {
    let p = write("bad.toml", "[server]\nmax_name_len = \"long\"\n");
    let e = LoadedConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("bad.toml"), "{e}");
    assert!(e.contains("server.max_name_len"), "{e}");
    assert!(e.contains("expected"), "{e}");

    let p = write("bad2.toml", "[server]\nhttp_port = 1\n");
    let e = LoadedConfig::load(&p).unwrap_err().to_string();
    assert!(
        e.ends_with(r#"bad2.toml: server: unknown key "http_port""#),
        "{e}"
    );

    let p = write("bad3.json", "{\"sources\": {\"a\": {\"enabled\": 3}}}");
    let e = LoadedConfig::load(&p).unwrap_err().to_string();
    assert!(e.contains("bad3.json") && e.contains("sources.a"), "{e}");

    let p = write("bad4.yaml", "x: 1");
    assert!(
        LoadedConfig::load(&p)
            .unwrap_err()
            .to_string()
            .contains("unsupported config format")
    );
}

#[test]
fn bad_source_names_are_refused() {
    let p = write("names.toml", "[sources.\"a__b\"]\ncommand = \"x\"\n");
    let e = LoadedConfig::load(&p)
        .unwrap()
        .sources()
        .unwrap_err()
        .to_string();
    assert!(e.contains("sources.a__b") && e.contains("reserved"), "{e}");
    assert!(check_source_name("wf.std").is_ok());
    assert!(check_source_name("-x").is_err());
    assert!(check_source_name("a b").is_err());
}

#[test]
fn env_expansion() {
    let lookup = |k: &str| (k == "TOKEN").then(|| "s3cret".to_string());
    let v =
        json!({"env": {"A": "x-${TOKEN}-y", "B": "$${TOKEN}", "C": "$5"}, "args": ["${TOKEN}"]});
    let out = expand_env(&v, "sources.gh", &lookup).unwrap();
    assert_eq!(
        out,
        json!({"env": {"A": "x-s3cret-y", "B": "${TOKEN}", "C": "$5"}, "args": ["s3cret"]})
    );
    let e = expand_env(&json!({"h": "${NOPE}"}), "sources.gh", &lookup).unwrap_err();
    assert_eq!(
        e.to_string(),
        "sources.gh.h: environment variable NOPE is not set"
    );
}

#[test]
fn unknown_keys_in_wfs_tables_name_table_and_hint() {
    for (name, text, want) in [
        (
            "top.toml",
            "[sever]\nhttp = \"x\"\n",
            r#"top level: unknown key "sever" (did you mean "server"?)"#,
        ),
        (
            "adm.toml",
            "[admin]\ntokn = \"x\"\n",
            r#"admin: unknown key "tokn" (did you mean "token"?)"#,
        ),
        (
            "plg.toml",
            "[plugins]\ndir = [\"x\"]\n",
            r#"plugins: unknown key "dir" (did you mean "dirs"?)"#,
        ),
        (
            "top.json",
            r#"{"mcpservers": {}}"#,
            r#"top level: unknown key "mcpservers" (did you mean "mcpServers"?)"#,
        ),
    ] {
        let p = write(name, text);
        let e = LoadedConfig::load(&p).unwrap_err().to_string();
        assert!(e.ends_with(&format!("{name}: {want}")), "{e}");
    }
}

#[test]
fn host_keys_of_a_source_are_fields_not_settings() {
    let p = write(
        "hostkeys.toml",
        "[sources.a]\nkind = \"mcp\"\nprefix = \"a_\"\nsession = \"client\"\nsession_idle_ms = 5\nmax_sessions = 3\non_change = \"warn\"\nscreen = \"hold\"\ncommand = \"x\"\n",
    );
    let s = LoadedConfig::load(&p).unwrap().sources().unwrap();
    let a = &s["a"];
    assert_eq!(
        (
            a.prefix.as_deref(),
            a.session,
            a.session_idle_ms,
            a.max_sessions
        ),
        (Some("a_"), Some(SessionScope::Client), Some(5), Some(3))
    );
    assert_eq!(a.settings.keys().collect::<Vec<_>>(), ["command"]);
    // HOST_KEYS lists exactly the fields (a new field must be added there too).
    let all = SourceConfig {
        settings: Map::new(),
        ..a.clone()
    };
    let mut keys: Vec<String> = serde_json::to_value(&all)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let mut want: Vec<String> = SourceConfig::HOST_KEYS
        .iter()
        .map(|k| k.to_string())
        .collect();
    keys.sort();
    want.sort();
    assert_eq!(keys, want);
}

#[test]
fn mcp_servers_entries_accept_other_clients_keys() {
    let p = write(
        "foreign.json",
        r#"{"mcpServers": {"cline": {"command": "npx", "type": "stdio", "disabled": false, "timeout": 60,
            "autoApprove": ["a"], "alwaysAllow": [], "disabledTools": [], "trust": true, "prefix": "c_"}}}"#,
    );
    let s = LoadedConfig::load(&p).unwrap().sources().unwrap();
    let c = &s["cline"];
    assert!(c.enabled);
    assert_eq!(c.prefix.as_deref(), Some("c_"));
    let mut keys: Vec<&String> = c.settings.keys().collect();
    keys.sort();
    assert_eq!(keys, ["command", "type"]);
    let p = write(
        "foreign2.json",
        r#"{"mcpServers": {"x": {"command": "npx", "max_sessions": "many"}}}"#,
    );
    let e = LoadedConfig::load(&p)
        .unwrap()
        .sources()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mcpServers.x.max_sessions") && e.contains("invalid type"),
        "{e}"
    );
}

#[test]
fn a_key_with_control_characters_keeps_the_error_on_one_line() {
    // Found by the `config` fuzz target (fuzz/corpus/config/regress-control-char-key).
    let path = write("ctl.json", "{\n  \"mcp\\rserv.x\": 1\n}\n");
    let e = LoadedConfig::load(&path).unwrap_err().to_string();
    assert!(!e.contains('\r') && !e.contains('\n'), "{e:?}");
    assert!(e.contains("mcp\\rserv"), "{e}");
}

#[test]
fn plugin_tables_are_read_and_strict() {
    let p = write(
        "plugtables.toml",
        "[server]\nplugin_isolation = \"process\"\n[plugins]\ndirs = [\"p\"]\n[plugins.mcp]\nisolation = \"process\"\nsandbox = \"off\"\nmemory_mb = 512\ncpu_seconds = 60\n",
    );
    let c = LoadedConfig::load(&p).unwrap().config;
    assert_eq!(c.server.plugin_isolation, Some(Isolation::Process));
    assert_eq!(c.plugins.dirs, vec![PathBuf::from("p")]);
    let mcp = &c.plugins.plugin["mcp"];
    assert_eq!(mcp.isolation, Some(Isolation::Process));
    assert_eq!(mcp.sandbox, Some(Sandbox::Off));
    assert_eq!((mcp.memory_mb, mcp.cpu_seconds), (Some(512), Some(60)));
    for (name, text, want) in [
        (
            "pt1.toml",
            "[plugins.mcp]\nisolaton = \"process\"\n",
            "isolaton",
        ),
        (
            "pt2.toml",
            "[plugins.mcp]\nisolation = \"sandboxed\"\n",
            "sandboxed",
        ),
        ("pt3.toml", "[plugins.mcp]\nsandbox = \"loose\"\n", "loose"),
        (
            "pt4.toml",
            "[server]\nplugin_isolation = \"child\"\n",
            "child",
        ),
    ] {
        let e = LoadedConfig::load(&write(name, text))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{name}: {e}");
    }
    let bad = BTreeMap::from([(
        "x".to_string(),
        PluginSettings {
            memory_mb: Some(1),
            cpu_seconds: Some(0),
            ..Default::default()
        },
    )]);
    assert_eq!(plugin_table_problems("wf.toml", &bad).len(), 2);
}
