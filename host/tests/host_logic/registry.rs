//! The source registry: creation, discovery, and re-applying a config.

use wf_host::sources::SourceState;

use crate::support::TestHost;
use crate::support::block_on;

#[test]
fn configured_and_default_sources_are_created_and_discovered() {
    block_on(async {
        let h = TestHost::new("[sources.reg_a]\nkind = \"fake\"\n").await;
        let a = h.sources.get("reg_a").expect("configured source");
        let st = a.status();
        assert_eq!(st.state, SourceState::Ready, "{:?}", st.error);
        let catalog = a.catalog().expect("a catalog");
        assert!(catalog.node_specs.iter().any(|n| n.name == "echo"));
        assert_eq!(a.plugin.as_deref(), Some("fake"));
        // The std plugin's default source exists without configuration.
        let std = h.sources.get("wf.std").expect("default source");
        assert_eq!(std.status().state, SourceState::Ready);
    })
}

#[test]
fn reapplying_keeps_unchanged_sources_and_replaces_changed_ones() {
    block_on(async {
        let h = TestHost::new(
        "[sources.keep]\nkind = \"fake\"\n[sources.edit]\nkind = \"fake\"\n[sources.drop]\nkind = \"fake\"\n",
    )
    .await;
        let kept = h.sources.get("keep").unwrap();
        let report = h
        .apply("[sources.keep]\nkind = \"fake\"\n[sources.edit]\nkind = \"fake\"\nx = 1\n[sources.new]\nkind = \"fake\"\n")
        .await;
        assert_eq!(report.added, ["new"]);
        assert_eq!(report.changed, ["edit"]);
        assert_eq!(report.removed, ["drop"]);
        assert!(report.unchanged.contains(&"keep".to_string()));
        // Same instance, not a new one with the same name.
        assert!(std::sync::Arc::ptr_eq(
            &kept,
            &h.sources.get("keep").unwrap()
        ));
        assert!(h.sources.get("drop").is_none());
        assert_eq!(
            h.sources.get("new").unwrap().status().state,
            SourceState::Ready
        );
    })
}

#[test]
fn a_disabled_source_has_no_instance() {
    block_on(async {
        let h = TestHost::new("[sources.off]\nkind = \"fake\"\nenabled = false\n").await;
        let off = h.sources.get("off").unwrap();
        assert_eq!(off.status().state, SourceState::Disabled);
        assert!(off.handle.is_none());
    })
}

#[test]
fn a_source_that_cannot_be_created_fails_with_a_reason_and_others_run() {
    block_on(async {
        let h = TestHost::new(
        "[sources.nokind]\nkind = \"nosuchkind\"\n[sources.refused]\nkind = \"fake\"\nrefuse = true\n[sources.fine]\nkind = \"fake\"\n",
    )
    .await;
        let nokind = h.sources.get("nokind").unwrap().status();
        assert_eq!(nokind.state, SourceState::Failed);
        assert!(nokind.error.unwrap_or_default().contains("nosuchkind"));
        let refused = h.sources.get("refused").unwrap().status();
        assert_eq!(refused.state, SourceState::Failed);
        assert!(
            refused
                .error
                .unwrap_or_default()
                .contains("refused on request"),
            "the plugin's reason is kept"
        );
        assert_eq!(
            h.sources.get("fine").unwrap().status().state,
            SourceState::Ready
        );
    })
}

/// What an early call of a name no catalog holds waits for: the first
/// discovery of the sources it picks, not of the others; a snapshot does
/// not count as one.
#[test]
fn a_first_discovery_is_waited_for_only_for_the_sources_picked() {
    block_on(async {
        use std::sync::Arc;
        use std::time::{Duration, Instant};
        use wf_host::sources::{Sources, desired_sources};
        // An earlier run discovered `snap`: its snapshot is in the store.
        let h = crate::support::TestHost::new("[sources.snap]\nkind = \"fake\"\n").await;
        // This run: the same store, sources created but not discovered yet.
        let toml = "[sources.snap]\nkind = \"fake\"\n[sources.a]\nkind = \"fake\"\n[sources.b]\nkind = \"fake\"\n";
        let config = crate::support::write_config(h.dir.path(), toml);
        let sources = Arc::new(Sources::new(Some(h.store.clone())));
        let desired = desired_sources(config.sources().unwrap(), &h.plugins);
        sources.apply(desired, &config, &h.plugins, h.dir.path());
        let snap = sources.get("snap").unwrap();
        assert!(snap.status().from_snapshot && snap.catalog().is_some());
        let soon = || Instant::now() + Duration::from_millis(50);
        let far = Instant::now() + Duration::from_secs(60);
        let waits_out = async |pick: &str| {
            let t = Instant::now();
            sources.wait_first_discovery_of(|s| s == pick, soon()).await;
            t.elapsed() >= Duration::from_millis(50)
        };

        // Nothing discovered in this run: `a`, and `snap` despite its snapshot.
        assert!(waits_out("a").await);
        assert!(waits_out("snap").await);

        // Once `a` is discovered, waiting for it is over though `b` never was.
        let a = sources.get("a").unwrap();
        sources.discover(&a, Duration::from_secs(30)).await;
        let t = Instant::now();
        sources.wait_first_discovery_of(|s| s == "a", far).await;
        assert!(t.elapsed() < Duration::from_secs(30), "waited for b");
        assert!(waits_out("b").await);
        sources.shutdown(Duration::from_secs(5)).await;
    })
}
