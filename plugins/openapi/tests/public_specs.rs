//! Public real-world documents (tests/openapi/specs, from the MIT-licensed
//! npm package @readme/oas-examples 8.2.2; see the README there): each is
//! discovered whole, every operation with schemas the host accepts.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use serde_json::json;
use wf_plugin_api::testing::{Harness, schema_problems};
use wf_source_openapi::OpenApiPlugin;

fn specs_dir() -> PathBuf {
    std::env::var_os("WF_OPENAPI_SPECS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/openapi/specs")
        })
}

#[tokio::test]
async fn every_public_document_is_discovered_with_valid_schemas() {
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(specs_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("json" | "yaml")
            )
        })
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let mut failures = Vec::new();
    for file in &files {
        let src = h
            .source(
                "pub",
                "openapi",
                json!({"spec": file.to_str().unwrap(), "base_url": "http://127.0.0.1:9"}),
            )
            .unwrap();
        match src.catalog().await {
            Err(e) => failures.push(format!("{}: {}", file.display(), e.message)),
            Ok(cat) => {
                if cat.tools.is_empty() {
                    failures.push(format!("{}: no tools", file.display()));
                }
                for p in schema_problems(&cat) {
                    failures.push(format!("{}: {p}", file.display()));
                }
            }
        }
    }
    let _ = std::fs::write(
        std::env::temp_dir().join("wf-openapi-public-failures.txt"),
        failures.join("\n"),
    );
    assert!(
        failures.is_empty(),
        "{} of {} documents:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn the_petstore_reads_the_same_as_json_and_yaml() {
    let h = Harness::start::<OpenApiPlugin>().unwrap();
    let mut seen = Vec::new();
    for file in ["petstore-3.0.json", "petstore-3.0.yaml"] {
        let path = specs_dir().join(file);
        let src = h
            .source(
                "petstore",
                "openapi",
                json!({"spec": path.to_str().unwrap(), "strict_responses": true}),
            )
            .unwrap();
        let cat = src.catalog().await.unwrap();
        seen.push(cat.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>());
        let get = cat.tools.iter().find(|t| t.name == "getPetById").unwrap();
        assert_eq!(get.input_schema["required"], json!(["petId"]));
        assert!(get.output_schema.as_ref().unwrap()["properties"]["name"].is_object());
        let add = cat.node_specs.iter().find(|n| n.name == "addPet").unwrap();
        assert!(
            add.side_effects
                && add.input_schema["properties"]["body"]["properties"]["photoUrls"].is_object()
        );
    }
    assert_eq!(seen[0].len(), 20);
    assert_eq!(seen[0], seen[1]);
}
