//! `multipart/form-data` request bodies (RFC 7578), written by hand: a few
//! lines, where reqwest's `multipart` feature would add a dependency tree.
//! File fields arrive base64-encoded in the tool's arguments.

use std::hash::{BuildHasher, Hasher};

use base64::Engine as _;
use serde_json::Value;

#[derive(Debug)]
pub struct Multipart {
    /// `multipart/form-data; boundary=...`
    pub content_type: String,
    pub body: Vec<u8>,
}

/// A boundary no part contains: 128 random bits (std's per-process random
/// hash keys), checked against the body anyway.
fn boundary() -> String {
    let random = || {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    format!("wf-boundary-{:016x}{:016x}", random(), random())
}

/// A field name inside a quoted header parameter (RFC 7578 §4.2).
fn quoted(name: &str) -> String {
    name.replace('"', "%22")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// The body of an object's fields; `files` are the base64 file fields.
pub fn build(v: &Value, files: &[String]) -> Result<Multipart, String> {
    let Value::Object(fields) = v else {
        return Err("a multipart/form-data body must be an object of fields".into());
    };
    let mut parts: Vec<(String, Option<&'static str>, Vec<u8>, bool)> = Vec::new();
    for (name, value) in fields {
        let items: Vec<&Value> = match value {
            Value::Null => continue,
            Value::Array(a)
                if files.contains(name) || a.iter().all(|x| !x.is_object() && !x.is_array()) =>
            {
                a.iter().collect()
            }
            other => vec![other],
        };
        for item in items {
            if files.contains(name) {
                let text = item
                    .as_str()
                    .ok_or_else(|| format!("{name}: a file is a base64 string"))?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text.trim())
                    .map_err(|e| format!("{name}: not base64: {e}"))?;
                parts.push((name.clone(), Some("application/octet-stream"), bytes, true));
            } else {
                let (mime, text) = match item {
                    Value::String(s) => (None, s.clone()),
                    Value::Object(_) | Value::Array(_) => {
                        (Some("application/json"), item.to_string())
                    }
                    other => (None, other.to_string()),
                };
                parts.push((name.clone(), mime, text.into_bytes(), false));
            }
        }
    }
    let mut boundary = boundary();
    while parts
        .iter()
        .any(|(_, _, b, _)| b.windows(boundary.len()).any(|w| w == boundary.as_bytes()))
    {
        boundary = self::boundary();
    }
    let mut body = Vec::new();
    for (name, mime, bytes, file) in parts {
        body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
        let name = quoted(&name);
        let disposition = if file {
            format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"{name}\"\r\n")
        } else {
            format!("Content-Disposition: form-data; name=\"{name}\"\r\n")
        };
        body.extend_from_slice(disposition.as_bytes());
        if let Some(m) = mime {
            body.extend_from_slice(format!("Content-Type: {m}\r\n").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        body.extend_from_slice(&bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    Ok(Multipart {
        content_type: format!("multipart/form-data; boundary={boundary}"),
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_files_and_json_parts() {
        let m = build(
            &json!({"title": "a \"b\"", "n": 3, "tags": ["x", "y"], "meta": {"k": 1}, "skip": null,
                    "file": base64::engine::general_purpose::STANDARD.encode(b"\x00\x01bin")}),
            &["file".into()],
        )
        .unwrap();
        let boundary = m
            .content_type
            .strip_prefix("multipart/form-data; boundary=")
            .unwrap();
        let text = String::from_utf8_lossy(&m.body);
        assert_eq!(
            text.matches(&format!("--{boundary}\r\n")).count(),
            6,
            "{text}"
        );
        assert!(text.ends_with(&format!("--{boundary}--\r\n")));
        assert!(text.contains("name=\"title\"\r\n\r\na \"b\"\r\n"), "{text}");
        assert!(text.contains("name=\"n\"\r\n\r\n3\r\n"));
        assert!(
            text.contains("name=\"tags\"\r\n\r\nx\r\n")
                && text.contains("name=\"tags\"\r\n\r\ny\r\n")
        );
        assert!(
            text.contains("name=\"meta\"\r\nContent-Type: application/json\r\n\r\n{\"k\":1}\r\n")
        );
        assert!(!text.contains("skip"));
        assert!(m.body.windows(5).any(|w| w == b"\x00\x01bin"));
        assert!(text.contains(
            "name=\"file\"; filename=\"file\"\r\nContent-Type: application/octet-stream"
        ));
        assert!(
            build(&json!({"file": "%%%"}), &["file".into()])
                .unwrap_err()
                .contains("not base64")
        );
        assert!(build(&json!([1]), &[]).is_err());
    }
}
