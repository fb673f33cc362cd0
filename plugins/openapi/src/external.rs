//! External `$ref`s, resolved within the spec's own origin: a URL spec's
//! relative (or same scheme, host and port) references are fetched, a file
//! spec's relative paths are read when they stay under the spec's folder.
//! Anything else is refused with its place. Bounded: at most
//! [`MAX_DOCUMENTS`] documents, [`MAX_DEPTH`] references deep, and all of
//! them together within `max_spec_bytes`.
//!
//! The documents are bundled into the root under [`BUNDLE_KEY`] and every
//! reference is rewritten to a local one (`#/x-wf-external/<n>/...`), so
//! the schema resolver (refs.rs) stays one-document.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::api::SpecError;
use crate::auth::TokenCache;
use crate::http::Client;
use crate::load::{self, Loaded};
use crate::refs::escape;
use crate::settings::Settings;

/// The most documents one spec may pull in through references.
pub const MAX_DOCUMENTS: usize = 32;
/// The longest chain of documents referencing documents.
pub const MAX_DEPTH: usize = 8;
/// Where the referenced documents are kept in the bundled root.
pub const BUNDLE_KEY: &str = "x-wf-external";

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Place {
    Url(url::Url),
    File(PathBuf),
}

struct Bundler<'a> {
    settings: &'a Settings,
    client: &'a Client,
    tokens: &'a TokenCache,
    root: Place,
    /// A file spec's folder (canonical): references must stay under it.
    folder: Option<PathBuf>,
    index: HashMap<Place, usize>,
    /// Bytes read so far, the root included.
    bytes: usize,
}

/// Brings in the documents `loaded`'s references point at, and rewrites
/// every reference to a local one.
/// Whether `value`, a parsed document, refers to other documents.
pub fn refers_out(value: &Value) -> bool {
    value.is_object() && has_external(value)
}

pub async fn bundle(
    loaded: &mut Loaded,
    settings: &Settings,
    client: &Client,
    tokens: &TokenCache,
) -> Result<(), SpecError> {
    if !loaded.value.is_object() || !has_external(&loaded.value) {
        return Ok(());
    }
    let (root, folder) = match &loaded.url {
        Some(u) => {
            let mut u = u.clone();
            u.set_fragment(None);
            (Place::Url(u), None)
        }
        None => {
            let path = tokio::fs::canonicalize(&settings.spec)
                .await
                .map_err(|e| SpecError::new("", format!("{}: {e}", settings.spec)))?;
            let folder = path.parent().map(Path::to_path_buf).unwrap_or_default();
            (Place::File(path), Some(folder))
        }
    };
    let mut b = Bundler {
        settings,
        client,
        tokens,
        root: root.clone(),
        folder,
        index: HashMap::new(),
        bytes: loaded.text.len(),
    };
    let mut docs: Vec<Value> = Vec::new();
    // (document index, its place, its depth); the root is `None`.
    let mut queue: Vec<(usize, Place, usize, String)> = Vec::new();
    b.rewrite(&mut loaded.value, None, &root, 0, &mut queue, &mut docs)
        .await?;
    while let Some((i, place, depth, from)) = queue.pop() {
        let mut doc = b.read(&place, &from).await?;
        b.rewrite(&mut doc, Some(i), &place, depth, &mut queue, &mut docs)
            .await?;
        docs[i] = doc;
    }
    if let Value::Object(root) = &mut loaded.value {
        root.insert(BUNDLE_KEY.into(), Value::Array(docs));
    }
    Ok(())
}

fn has_external(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.iter().any(|(k, x)| {
            (k == "$ref" && x.as_str().is_some_and(|r| !r.starts_with('#'))) || has_external(x)
        }),
        Value::Array(a) => a.iter().any(has_external),
        _ => false,
    }
}

/// Every `$ref` string in `v`: the pointer of its object and its target.
fn references(v: &Value, at: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(o) => {
            if let Some(Value::String(r)) = o.get("$ref") {
                out.push((at.to_string(), r.clone()));
            }
            for (k, x) in o {
                references(x, &format!("{at}/{}", escape(k)), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                references(x, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

impl Bundler<'_> {
    /// How a place reads in an error: a URL as it is, a file from the spec's folder.
    fn show(&self, place: &Place) -> String {
        match place {
            Place::Url(u) => u.to_string(),
            Place::File(p) => self
                .folder
                .as_ref()
                .and_then(|f| p.strip_prefix(f).ok())
                .unwrap_or(p)
                .display()
                .to_string(),
        }
    }

    /// The pointer of `at` in the document `doc` (the root: a plain pointer).
    fn pointer(&self, doc: Option<usize>, place: &Place, at: &str) -> String {
        match doc {
            None => at.to_string(),
            Some(_) => format!("{}#{at}", self.show(place)),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn rewrite(
        &mut self,
        value: &mut Value,
        doc: Option<usize>,
        place: &Place,
        depth: usize,
        queue: &mut Vec<(usize, Place, usize, String)>,
        docs: &mut Vec<Value>,
    ) -> Result<(), SpecError> {
        let mut refs = Vec::new();
        references(value, "", &mut refs);
        let prefix = |i: usize| format!("#/{BUNDLE_KEY}/{i}");
        for (at, target) in refs {
            let ref_at = self.pointer(doc, place, &format!("{at}/$ref"));
            let refuse = |why: String| {
                SpecError::new(
                    ref_at.clone(),
                    format!("external $ref {target:?} refused: {why}"),
                )
            };
            let (path, fragment) = target.split_once('#').unwrap_or((target.as_str(), ""));
            if !fragment.is_empty() && !fragment.starts_with('/') {
                return Err(refuse(
                    "its fragment must be a JSON pointer (\"#/...\"); anchors are not resolved"
                        .into(),
                ));
            }
            let rewritten = if path.is_empty() {
                // Local to its own document.
                match doc {
                    None => continue,
                    Some(i) => format!("{}{fragment}", prefix(i)),
                }
            } else {
                let to = self.resolve(place, path).await.map_err(refuse)?;
                if to == self.root {
                    format!("#{fragment}")
                } else {
                    let i = match self.index.get(&to) {
                        Some(i) => *i,
                        None => {
                            if self.index.len() >= MAX_DOCUMENTS {
                                return Err(refuse(format!(
                                    "over {MAX_DOCUMENTS} referenced documents"
                                )));
                            }
                            if depth + 1 > MAX_DEPTH {
                                return Err(refuse(format!(
                                    "documents reference documents more than {MAX_DEPTH} deep"
                                )));
                            }
                            let i = docs.len();
                            docs.push(Value::Null);
                            self.index.insert(to.clone(), i);
                            queue.push((i, to, depth + 1, ref_at.clone()));
                            i
                        }
                    };
                    format!("{}{fragment}", prefix(i))
                }
            };
            if let Some(Value::Object(o)) = value.pointer_mut(&at) {
                o.insert("$ref".into(), Value::String(rewritten));
            }
        }
        Ok(())
    }

    /// Where a reference's document part points from `from`, if allowed.
    async fn resolve(&self, from: &Place, path: &str) -> Result<Place, String> {
        match (from, &self.root) {
            (Place::Url(base), Place::Url(root)) => {
                let to = base.join(path).map_err(|e| e.to_string())?;
                if to.origin() != root.origin() {
                    return Err(format!(
                        "{to} is on another origin; only the spec's own ({}) is fetched",
                        root.origin().ascii_serialization()
                    ));
                }
                let mut to = to;
                to.set_fragment(None);
                Ok(Place::Url(to))
            }
            (Place::File(file), _) => {
                if url::Url::parse(path).is_ok() {
                    return Err(
                        "a file spec's references are relative paths under its folder, not URLs"
                            .into(),
                    );
                }
                let decoded = percent_encoding::percent_decode_str(path).decode_utf8_lossy();
                let joined = file
                    .parent()
                    .unwrap_or(Path::new("/"))
                    .join(decoded.as_ref());
                let real = tokio::fs::canonicalize(&joined)
                    .await
                    .map_err(|e| format!("cannot read {}: {e}", joined.display()))?;
                let folder = self.folder.as_deref().unwrap_or(Path::new("/"));
                if !real.starts_with(folder) {
                    return Err(format!(
                        "{} is outside the spec's folder {}",
                        real.display(),
                        folder.display()
                    ));
                }
                Ok(Place::File(real))
            }
            (Place::Url(_), Place::File(_)) => Err("unreachable: a URL under a file".into()),
        }
    }

    /// Reads and parses one referenced document, within the byte budget.
    async fn read(&mut self, place: &Place, from: &str) -> Result<Value, SpecError> {
        let room = self.settings.max_spec_bytes.saturating_sub(self.bytes);
        let shown = self.show(place);
        let fail = |why: String| SpecError::new(from, format!("$ref document {shown}: {why}"));
        let bytes = match place {
            Place::Url(u) => crate::document::fetch(
                self.client,
                u.clone(),
                &self.settings.header_map,
                room,
                self.settings
                    .spec_auth
                    .then_some((&self.settings.auth, self.tokens)),
            )
            .await
            .map_err(|e| match e {
                crate::http::FetchError::TooLarge(_) => fail(format!(
                    "the documents together are over max_spec_bytes ({})",
                    self.settings.max_spec_bytes
                )),
                other => fail(other.to_string()),
            })?,
            Place::File(p) => load::read_file(&p.display().to_string(), room)
                .await
                .map_err(|e| match e {
                    load::LoadError::TooLarge { .. } => fail(format!(
                        "the documents together are over max_spec_bytes ({})",
                        self.settings.max_spec_bytes
                    )),
                    other => fail(other.to_string()),
                })?,
        };
        self.bytes += bytes.len();
        let text = String::from_utf8(bytes).map_err(|_| fail("not UTF-8 text".into()))?;
        let (value, _) = load::parse_text(&text).map_err(fail)?;
        Ok(value)
    }
}
