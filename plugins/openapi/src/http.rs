//! The HTTP client of a source: reqwest with rustls, redirects followed only
//! within the origin that was asked (so credentials never reach another
//! host), and bodies read up to a bound.

use thiserror::Error;

pub use crate::body::Body;

/// How many same-origin redirects a request follows.
const MAX_REDIRECTS: usize = 10;

#[derive(Debug, Error)]
pub enum FetchError {
    #[error("{0}")]
    Http(String),
    #[error("HTTP status {}{}", .0, redirect_note(*.0))]
    Status(u16),
    #[error("the body is over {0} bytes")]
    TooLarge(u64),
}

fn redirect_note(status: u16) -> &'static str {
    if (300..400).contains(&status) {
        " (a redirect to another origin is not followed: credentials never reach another host)"
    } else {
        ""
    }
}

/// An error's text with its causes (reqwest's own Display stops at "error
/// sending request") and without its URL, whose query may hold an API key.
pub fn error_text(e: reqwest::Error) -> String {
    if e.is_timeout() {
        return "timed out".into();
    }
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[derive(Clone)]
pub struct Client {
    pub inner: reqwest::Client,
    /// Plain-HTTP/1 connections driven on the caller's thread (fast.rs).
    pub direct: std::sync::Arc<crate::fast::Pool>,
    /// Whether calls may take that path (no proxy in the environment).
    pub direct_allowed: bool,
}

impl Client {
    pub fn new() -> Result<Self, reqwest::Error> {
        let policy = reqwest::redirect::Policy::custom(|attempt| {
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if !same_origin {
                // Not followed: the caller gets the 3xx as it came, and the
                // other host never sees the request or its credentials.
                attempt.stop()
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(format!("exceeded {MAX_REDIRECTS} redirects"))
            } else {
                attempt.follow()
            }
        });
        let inner = reqwest::Client::builder().redirect(policy).build()?;
        crate::fast::keep_timer_armed();
        Ok(Self {
            inner,
            direct: Default::default(),
            direct_allowed: crate::fast::allowed(),
        })
    }
}

/// Reads a body up to `limit` bytes and stops there: a 10 GB answer costs
/// one limit's worth of memory and is then dropped (closing the connection).
pub async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Body, FetchError> {
    if let Some(len) = response.content_length()
        && len > limit as u64
    {
        return Ok(Body::Cut {
            head: Vec::new(),
            seen: len,
        });
    }
    let mut out = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| FetchError::Http(error_text(e)))?
    {
        if out.len() + chunk.len() > limit {
            let seen = (out.len() + chunk.len()) as u64;
            let room = limit - out.len();
            out.extend_from_slice(&chunk[..room]);
            return Ok(Body::Cut { head: out, seen });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(Body::Whole(out))
}
