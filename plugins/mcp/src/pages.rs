//! Paginated listings from an upstream, bounded: rmcp's `list_all_*` follow
//! `nextCursor` for as long as the upstream gives one, so an upstream that
//! never stops (or repeats a cursor) would grow wf's list without end. Here a
//! listing stops with a clear error after [`MAX_PAGES`] pages, [`MAX_ITEMS`]
//! items, or a cursor seen before.

use std::collections::HashSet;

use wf_plugin_api::PluginError;

/// The most pages one listing follows.
pub const MAX_PAGES: usize = 1_000;
/// The most items one listing collects.
pub const MAX_ITEMS: usize = 100_000;

/// Why a listing stopped.
#[derive(Debug)]
pub enum ListError<E> {
    /// The upstream call failed.
    Upstream(E),
    /// The upstream went past a bound.
    Bound(PluginError),
}

/// Collects every page of `what` from `page(cursor)` → (items, next cursor).
pub async fn all_pages<T, E, F, Fut>(
    source: &str,
    what: &str,
    mut page: F,
) -> Result<Vec<T>, ListError<E>>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>), E>>,
{
    let mut items = Vec::new();
    let mut seen = HashSet::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let (mut page_items, next) = page(cursor.take()).await.map_err(ListError::Upstream)?;
        if items.len() + page_items.len() > MAX_ITEMS {
            return Err(bound(source, what, format!("more than {MAX_ITEMS} items")));
        }
        items.append(&mut page_items);
        match next {
            None => return Ok(items),
            Some(next) if !seen.insert(next.clone()) => {
                return Err(bound(
                    source,
                    what,
                    format!("the cursor {next:?} came back"),
                ));
            }
            Some(next) => cursor = Some(next),
        }
    }
    Err(bound(source, what, format!("more than {MAX_PAGES} pages")))
}

fn bound<E>(source: &str, what: &str, why: String) -> ListError<E> {
    tracing::warn!(source, what, "upstream listing stopped: {why}");
    ListError::Bound(PluginError::upstream(format!(
        "listing {what} of source {source:?} stopped: {why}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn list(pages: Vec<(Vec<u32>, Option<&str>)>) -> Result<Vec<u32>, String> {
        let pages: Vec<(Vec<u32>, Option<String>)> = pages
            .into_iter()
            .map(|(i, c)| (i, c.map(str::to_string)))
            .collect();
        let mut n = 0;
        all_pages::<u32, (), _, _>("s", "tools", |_| {
            let p = pages[n.min(pages.len() - 1)].clone();
            n += 1;
            async move { Ok(p) }
        })
        .await
        .map_err(|e| match e {
            ListError::Bound(e) => e.message,
            ListError::Upstream(()) => "upstream".into(),
        })
    }

    #[tokio::test]
    async fn pages_are_joined() {
        let got = list(vec![
            (vec![1, 2], Some("a")),
            (vec![3], Some("b")),
            (vec![4], None),
        ])
        .await;
        assert_eq!(got.unwrap(), vec![1, 2, 3, 4]);
    }

    #[tokio::test]
    async fn a_repeated_cursor_stops_the_listing() {
        let e = list(vec![(vec![1], Some("a")), (vec![2], Some("a"))])
            .await
            .unwrap_err();
        assert!(
            e.contains("listing tools of source \"s\"") && e.contains("came back"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn endless_pages_and_too_many_items_stop() {
        let mut n = 0u32;
        let e = all_pages::<u32, (), _, _>("s", "prompts", |_| {
            n += 1;
            let c = n.to_string();
            async move { Ok((vec![1], Some(c))) }
        })
        .await
        .err()
        .unwrap();
        let ListError::Bound(e) = e else { panic!() };
        assert!(e.message.contains("more than 1000 pages"), "{e}");
        let e = list(vec![(vec![0; MAX_ITEMS + 1], None)])
            .await
            .unwrap_err();
        assert!(e.contains("more than 100000 items"), "{e}");
    }
}
