//! Reading the OpenAPI document: from a file or an http(s) URL, bounded in
//! size, as JSON or YAML, into a `serde_json::Value`.

use std::path::Path;

use serde_json::Value;
use thiserror::Error;

use crate::auth::TokenCache;
use crate::http::{self, Client};
use crate::settings::Settings;

#[derive(Debug, Error)]
pub enum LoadError {
    #[error("cannot read {spec}: {reason}")]
    Read { spec: String, reason: String },
    #[error("{spec} is {size} bytes, over max_spec_bytes ({limit})")]
    TooLarge {
        spec: String,
        size: u64,
        limit: usize,
    },
    #[error("{spec} is neither JSON nor YAML: {reason}")]
    Syntax { spec: String, reason: String },
}

/// The document as read, before it is understood.
pub struct Loaded {
    /// The text, kept for the document resource.
    pub text: String,
    pub value: Value,
    /// `application/json` or `application/yaml`.
    pub mime: &'static str,
    /// The URL it came from, to resolve relative server URLs against.
    pub url: Option<url::Url>,
}

pub fn is_url(spec: &str) -> bool {
    spec.starts_with("http://") || spec.starts_with("https://")
}

pub async fn load(
    settings: &Settings,
    client: &Client,
    tokens: &TokenCache,
) -> Result<Loaded, LoadError> {
    let (text, url) = read(settings, client, tokens).await?;
    let spec = settings.spec.clone();
    crate::off_thread(move || parsed(text, url, &spec))
        .await
        .map_err(|e| LoadError::Read {
            spec: settings.spec.clone(),
            reason: e.message,
        })?
}

/// The document's text, read or fetched, and its URL when fetched.
pub async fn read(
    settings: &Settings,
    client: &Client,
    tokens: &TokenCache,
) -> Result<(String, Option<url::Url>), LoadError> {
    let spec = &settings.spec;
    let limit = settings.max_spec_bytes;
    let (bytes, url) = if is_url(spec) {
        let url = url::Url::parse(spec).map_err(|e| LoadError::Read {
            spec: spec.clone(),
            reason: e.to_string(),
        })?;
        let bytes = crate::document::fetch(
            client,
            url.clone(),
            &settings.header_map,
            limit,
            settings.spec_auth.then_some((&settings.auth, tokens)),
        )
        .await
        .map_err(|e| match e {
            http::FetchError::TooLarge(size) => LoadError::TooLarge {
                spec: spec.clone(),
                size,
                limit,
            },
            other => LoadError::Read {
                spec: spec.clone(),
                reason: other.to_string(),
            },
        })?;
        (bytes, Some(url))
    } else {
        (read_file(spec, limit).await?, None)
    };
    let text = String::from_utf8(bytes).map_err(|_| LoadError::Syntax {
        spec: spec.clone(),
        reason: "not UTF-8 text".into(),
    })?;
    Ok((text, url))
}

/// `text` (of document `spec`) parsed. Blocking: a large document takes a
/// while, and its tree is best freed on the thread that parsed it.
pub fn parsed(text: String, url: Option<url::Url>, spec: &str) -> Result<Loaded, LoadError> {
    let (value, mime) = parse_text(&text).map_err(|reason| LoadError::Syntax {
        spec: spec.to_string(),
        reason,
    })?;
    Ok(Loaded {
        text,
        value,
        mime,
        url,
    })
}

pub(crate) async fn read_file(spec: &str, limit: usize) -> Result<Vec<u8>, LoadError> {
    let read_err = |e: std::io::Error| LoadError::Read {
        spec: spec.to_string(),
        reason: e.to_string(),
    };
    let path = Path::new(spec);
    let size = tokio::fs::metadata(path).await.map_err(read_err)?.len();
    if size > limit as u64 {
        return Err(LoadError::TooLarge {
            spec: spec.to_string(),
            size,
            limit,
        });
    }
    tokio::fs::read(path).await.map_err(read_err)
}

/// JSON when it looks like JSON (its errors are then JSON's), YAML otherwise.
pub fn parse_text(text: &str) -> Result<(Value, &'static str), String> {
    if text.trim_start().starts_with('{') {
        serde_json::from_str(text)
            .map(|v| (v, "application/json"))
            .map_err(|e| format!("JSON: {e}"))
    } else {
        serde_yaml_ng::from_str::<Value>(text)
            .map(|v| (v, "application/yaml"))
            .map_err(|e| format!("YAML: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_yaml_parse_to_the_same_value() {
        let (j, m1) = parse_text(r#"{"openapi": "3.1.0", "paths": {"/a": {}}}"#).unwrap();
        let (y, m2) = parse_text("openapi: 3.1.0\npaths:\n  /a: {}\n").unwrap();
        assert_eq!(j, y);
        assert_eq!((m1, m2), ("application/json", "application/yaml"));
        assert!(parse_text("{\"a\": ").unwrap_err().starts_with("JSON:"));
        assert!(parse_text("a: [").unwrap_err().starts_with("YAML:"));
    }
}
