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
