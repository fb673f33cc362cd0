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
        e.contains("unknown field") && e.contains("http_port"),
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
    assert_eq!(e, "sources.gh.h: environment variable NOPE is not set");
}
