//! The admin surface: status and sources, and a reload that refuses a bad
//! file without changing what runs.

use serde_json::{Value, json};
use wf_host::server::Principal;
use wf_host::surfaces::admin::{Admin, Caller};
use wf_plugin_api::CallResult;

use crate::support::block_on;
use crate::support::{app, write_config};

fn body(r: &CallResult) -> &Value {
    r.structured_content.as_ref().expect("structured content")
}

#[test]
fn list_sources_shows_each_source_with_its_state() {
    block_on(async {
        let (app, _dir) = app("[sources.adm]\nkind = \"fake\"\n").await;
        let admin = Admin::new(app).expect("admin is on by default");
        let r = admin.call("list_sources", json!({}), &Caller::Stdio).await;
        assert!(!r.is_error, "{r:?}");
        let text = body(&r).to_string();
        assert!(text.contains("\"adm\"") && text.contains("ready"), "{text}");
        let s = admin.call("status", json!({}), &Caller::Stdio).await;
        assert!(body(&s).get("uptime_ms").is_some(), "{s:?}");
    })
}

#[test]
fn a_reload_of_a_broken_file_is_refused_and_changes_nothing() {
    block_on(async {
        let (app, dir) = app("[sources.stay]\nkind = \"fake\"\n").await;
        let admin = Admin::new(app.clone()).unwrap();
        std::fs::write(dir.path().join("wf.toml"), "[sources.stay\nkind = ").unwrap();
        let r = admin.call("reload", json!({}), &Caller::Stdio).await;
        assert!(r.is_error);
        assert!(body(&r)["error"].is_string(), "{r:?}");
        assert!(
            app.sources.get("stay").is_some(),
            "the running config stays"
        );
        assert!(
            app.live_config
                .last_reload()
                .and_then(|o| o.error)
                .is_some()
        );

        write_config(
            dir.path(),
            "[sources.stay]\nkind = \"fake\"\n[sources.more]\nkind = \"fake\"\n",
        );
        let r = admin.call("reload", json!({}), &Caller::Stdio).await;
        assert!(!r.is_error, "{r:?}");
        assert_eq!(body(&r)["sources"]["added"], json!(["more"]));
        assert!(
            app.live_config
                .current()
                .config
                .sources
                .contains_key("more")
        );
    })
}

#[test]
fn over_http_without_the_token_admin_calls_are_refused() {
    block_on(async {
        let (app, _dir) =
            app("[admin]\nover_http = \"token\"\ntoken = \"0123456789abcdef-secret\"\n").await;
        let admin = Admin::new(app).unwrap();
        let refused = admin
            .call(
                "status",
                json!({}),
                &Caller::Http {
                    admin_token: Some("wrong".into()),
                    principal: Principal::local(),
                },
            )
            .await;
        assert!(refused.is_error);
        let ok = admin
            .call(
                "status",
                json!({}),
                &Caller::Http {
                    admin_token: Some("0123456789abcdef-secret".into()),
                    principal: Principal::local(),
                },
            )
            .await;
        assert!(!ok.is_error, "{ok:?}");
    })
}
