//! The request headers the HTTP front reads itself: the session header, one
//! header's sole value, and whether `Accept` names what rmcp requires.

use axum::http::{HeaderMap, header};

pub const SESSION_HEADER: &str = "mcp-session-id";

/// The header's one value, when it has exactly one and it is text.
pub fn sole<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    values
        .next()
        .is_none()
        .then(|| first.to_str().ok())
        .flatten()
}

/// `Accept` names both media types rmcp requires, with no parameters (a
/// weight is rmcp's to read).
pub fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for item in value.split(',') {
            let item = item.trim();
            if item.contains(';') || item.contains('"') {
                return false;
            }
            json |= item.eq_ignore_ascii_case("application/json");
            sse |= item.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn accept_needs_both_types_and_leaves_weights_to_rmcp() {
        let ok = |v: &'static str| accepts_json_and_sse(&headers(&[("accept", v)]));
        assert!(ok("application/json, text/event-stream"));
        assert!(ok("text/event-stream,application/json"));
        assert!(!ok("application/json"));
        assert!(!ok("application/json;q=0, text/event-stream"));
        assert!(!ok("*/*"));
        let two = headers(&[
            ("accept", "application/json"),
            ("accept", "text/event-stream"),
        ]);
        assert!(accepts_json_and_sse(&two));
    }
}
