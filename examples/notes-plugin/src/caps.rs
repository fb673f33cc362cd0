//! The capabilities of a notes source. [`Cap::spec`] is the one definition
//! of each capability's description and schemas: the catalog (node spec and
//! tool) and the argument check both come from it.

use wf_plugin_api::prelude::*;

use crate::args::Args;
use crate::store::Store;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    Add,
    Get,
    List,
    Search,
    Delete,
}

impl Cap {
    pub const ALL: [Cap; 5] = [Cap::Add, Cap::Get, Cap::List, Cap::Search, Cap::Delete];

    pub fn named(name: &str) -> Option<Cap> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Cap::Add => "add",
            Cap::Get => "get",
            Cap::List => "list",
            Cap::Search => "search",
            Cap::Delete => "delete",
        }
    }

    pub fn spec(self) -> NodeSpec {
        let (description, input, output) = match self {
            Cap::Add => (
                "Adds a note and returns it with its new id. Title and tags are trimmed; \
                 duplicate tags are dropped.",
                object(
                    json!({
                        "title": {"type": "string", "minLength": 1, "description": "The note's title (not empty)."},
                        "body": {"type": "string", "description": "The note's text."},
                        "tags": {
                            "type": "array",
                            "items": {"type": "string", "minLength": 1},
                            "description": "Tags to file the note under, e.g. [\"work\", \"ideas\"].",
                        },
                    }),
                    &["title", "body"],
                ),
                object(
                    json!({
                        "id": {"type": "string", "description": "The new note's id."},
                        "note": note_schema("The note as stored."),
                    }),
                    &["id", "note"],
                ),
            ),
            Cap::Get => (
                "Returns one note by id. Fails when there is no such note.",
                object(
                    json!({"id": {"type": "string", "minLength": 1, "description": "The note's id, e.g. `n1`."}}),
                    &["id"],
                ),
                object(json!({"note": note_schema("The note.")}), &["note"]),
            ),
            Cap::List => (
                "Lists the notes, oldest first; with `tag`, only the notes that have that tag.",
                object(
                    json!({"tag": {"type": "string", "minLength": 1, "description": "Only notes with this tag (exact match)."}}),
                    &[],
                ),
                notes_output("The notes, oldest first."),
            ),
            Cap::Search => (
                "Finds the notes whose title or body contains `query`, ignoring case, oldest first.",
                object(
                    json!({"query": {"type": "string", "minLength": 1, "description": "The text to look for (case-insensitive substring)."}}),
                    &["query"],
                ),
                notes_output("The matching notes, oldest first."),
            ),
            Cap::Delete => (
                "Deletes a note by id, after asking the user to confirm when the client can be \
                 asked (MCP elicitation). Deleting a note that does not exist is not an error: \
                 `deleted` is then false.",
                object(
                    json!({"id": {"type": "string", "minLength": 1, "description": "The id of the note to delete."}}),
                    &["id"],
                ),
                object(
                    json!({"deleted": {"type": "boolean", "description": "Whether a note was deleted (false: no note had that id)."}}),
                    &["deleted"],
                ),
            ),
        };
        NodeSpec::new(self.name(), description, input, output)
            .side_effects(matches!(self, Cap::Add | Cap::Delete))
            .stateful(false)
    }

    /// Runs the capability on `store`. A bad argument is `invalid_arguments`
    /// (naming it); a note that does not exist is `failed`.
    pub fn run(self, store: &Store, source: &str, input: &Value) -> Result<Value, PluginError> {
        let args = Args::parse(input, &self.spec().input_schema)?;
        match self {
            Cap::Add => {
                let title = args.text("title")?.to_string();
                let body = args.str("body")?.to_string();
                let tags = args.opt_tags("tags")?;
                let note = store.add(title, body, tags)?;
                tracing::info!(source, id = %note.id, title = %note.title, "note added");
                Ok(json!({"id": note.id, "note": note}))
            }
            Cap::Get => {
                let id = args.text("id")?;
                let note = store.get(id).ok_or_else(|| no_note(id))?;
                Ok(json!({"note": note}))
            }
            Cap::List => {
                let notes = match args.opt_text("tag")? {
                    Some(tag) => store.select(|n| n.has_tag(tag)),
                    None => store.select(|_| true),
                };
                Ok(json!({"notes": notes}))
            }
            Cap::Search => {
                let needle = args.text("query")?.to_lowercase();
                Ok(json!({"notes": store.select(|n| n.matches(&needle))}))
            }
            Cap::Delete => {
                let id = args.text("id")?;
                let deleted = store.delete(id)?;
                if deleted {
                    tracing::info!(source, id, "note deleted");
                }
                Ok(json!({"deleted": deleted}))
            }
        }
    }
}

/// The error for a note id that does not exist.
pub fn no_note(id: &str) -> PluginError {
    PluginError::failed(format!(
        "no note with id `{id}` (the `list` and `search` tools show the ids)"
    ))
}

/// A closed object schema: exactly `properties`, of which `required` must be present.
fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn note_schema(description: &str) -> Value {
    let mut schema = object(
        json!({
            "id": {"type": "string", "description": "The note's id, e.g. `n1`."},
            "title": {"type": "string", "description": "The note's title."},
            "body": {"type": "string", "description": "The note's text."},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "The note's tags."},
        }),
        &["id", "title", "body", "tags"],
    );
    schema["description"] = json!(description);
    schema
}

fn notes_output(description: &str) -> Value {
    object(
        json!({"notes": {"type": "array", "items": note_schema("A note."), "description": description}}),
        &["notes"],
    )
}
