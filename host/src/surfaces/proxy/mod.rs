//! The proxy surface: every source's tools, prompts, resources and resource
//! templates, under names valid for MCP hosts, routed back to their source.

mod results;

// The projection lives below the surfaces (crate::projection); the proxy
// serves it under these names.
pub use crate::projection::{
    NameRules, Naming, Projected, Projection, ResourceRoute, hash6, is_client_safe,
};
pub use results::{check_output, check_output_against};

/// One page of `items` starting at `cursor` (an offset we issued).
pub fn page<T: Clone>(
    items: &[T],
    cursor: Option<&str>,
    size: usize,
) -> Result<(Vec<T>, Option<String>), String> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .map_err(|_| format!("invalid cursor {c:?}"))?,
    };
    if start > items.len() {
        return Err(format!("invalid cursor {start:?}"));
    }
    let end = (start + size.max(1)).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((items[start..end].to_vec(), next))
}
