//! The OpenAPI document (or one it refers to) fetched over HTTP: bounded,
//! and with the source's credentials when `spec_auth` asks for them.

use reqwest::header::HeaderMap;

use crate::auth::TokenCache;
use crate::http::{Body, Client, FetchError, error_text, read_bounded};
use crate::settings::Auth;

/// GETs the OpenAPI document at `url`, bounded by `limit` bytes, with
/// the source's credentials when `credentials` is given (`spec_auth`).
pub async fn fetch(
    client: &Client,
    url: url::Url,
    headers: &HeaderMap,
    limit: usize,
    credentials: Option<(&Auth, &TokenCache)>,
) -> Result<Vec<u8>, FetchError> {
    let mut request = client
        .inner
        .get(url)
        .headers(headers.clone())
        .header(
            reqwest::header::ACCEPT,
            "application/json, application/yaml;q=0.9, */*;q=0.5",
        )
        .timeout(std::time::Duration::from_secs(60));
    let mut query = Vec::new();
    if let Some((auth, tokens)) = credentials {
        request = crate::auth::apply(auth, tokens, client, request, &mut query)
            .await
            .map_err(FetchError::Http)?;
    }
    let mut request = request
        .build()
        .map_err(|e| FetchError::Http(error_text(e)))?;
    crate::auth::append_query(request.url_mut(), &query);
    let response = client
        .inner
        .execute(request)
        .await
        .map_err(|e| FetchError::Http(error_text(e)))?;
    if !response.status().is_success() {
        return Err(FetchError::Status(response.status().as_u16()));
    }
    match read_bounded(response, limit).await? {
        Body::Whole(bytes) => Ok(bytes),
        Body::Cut { seen, .. } => Err(FetchError::TooLarge(seen)),
    }
}
