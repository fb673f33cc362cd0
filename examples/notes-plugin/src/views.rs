//! What a notes source shows besides its tools: the `summarize` prompt, the
//! `notes://all` resource and the `notes://note/{id}` resource template (for
//! the default source; see [`Uris`]).

use std::fmt::Write as _;

use wf_plugin_api::prelude::*;

use crate::store::Note;

pub const PROMPT: &str = "summarize";
const MARKDOWN: &str = "text/markdown";

/// The resource URIs of one source. The default source (`notes`) uses
/// `notes://all` and `notes://note/{id}`; any other source `S` uses
/// `notes://S/all` and `notes://S/note/{id}`, so that two notebooks served by
/// one wf never share a URI. (Source names are URI-safe: letters, digits,
/// `.`, `_` and `-`.)
pub struct Uris {
    /// The `all notes` resource.
    pub all: String,
    /// What a note's URI starts with: the literal part of the template.
    pub note_prefix: String,
}

impl Uris {
    pub fn for_source(name: &str) -> Self {
        let base = if name == crate::DEFAULT_SOURCE {
            "notes://".to_string()
        } else {
            format!("notes://{name}/")
        };
        Self {
            all: format!("{base}all"),
            note_prefix: format!("{base}note/"),
        }
    }

    pub fn note_template(&self) -> String {
        format!("{}{{id}}", self.note_prefix)
    }

    pub fn note(&self, id: &str) -> String {
        format!("{}{id}", self.note_prefix)
    }
}

pub fn prompt() -> Prompt {
    Prompt::new(
        PROMPT,
        "Asks for a summary of the notes: themes, open questions and action items.",
    )
    .argument("tag", "Only summarize the notes with this tag.", false)
}

pub fn all_resource(uris: &Uris) -> Resource {
    Resource::new(
        &uris.all,
        "all notes",
        "Every note, oldest first, as markdown.",
        MARKDOWN,
    )
}

pub fn note_template(uris: &Uris) -> ResourceTemplate {
    ResourceTemplate::new(
        uris.note_template(),
        "note",
        format!("One note by id, as markdown, e.g. `{}`.", uris.note("n1")),
        MARKDOWN,
    )
}

/// The `summarize` prompt over `notes` (already filtered by `tag`).
pub fn summarize(notes: &[Note], tag: Option<&str>) -> GetPromptResult {
    let tagged = tag.map(|t| format!(" tagged `{t}`")).unwrap_or_default();
    let mut text = String::new();
    if notes.is_empty() {
        let _ = write!(
            text,
            "I asked for a summary of my notes{tagged}, but there are none yet. \
             Tell me so in one sentence."
        );
    } else {
        let _ = writeln!(
            text,
            "Please summarize my notes{tagged}. Group related notes, name the main themes, \
             and list any open questions or action items they mention. Refer to notes by \
             their title.\n\nThere {} {}{tagged}:",
            if notes.len() == 1 { "is" } else { "are" },
            count(notes.len()),
        );
        for note in notes {
            let _ = write!(text, "\n{}", markdown(note));
        }
    }
    GetPromptResult::user_text(format!("Summarize the notes{tagged}"), text)
}

/// The `all notes` resource.
pub fn read_all(uris: &Uris, notes: &[Note]) -> ReadResourceResult {
    let mut text = format!("# Notes\n\n{}.\n", capitalize(&count(notes.len())));
    for note in notes {
        let _ = write!(text, "\n{}", markdown(note));
    }
    ReadResourceResult::text(&uris.all, MARKDOWN, text)
}

/// One note's resource, under the URI it was asked for.
pub fn read_note(uri: &str, note: &Note) -> ReadResourceResult {
    ReadResourceResult::text(uri, MARKDOWN, markdown(note))
}

/// Markdown of one note: a level-2 heading, its id and tags, its body.
fn markdown(note: &Note) -> String {
    let tags = if note.tags.is_empty() {
        String::from("none")
    } else {
        note.tags
            .iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "## {title}\n\nid: `{id}` · tags: {tags}\n\n{body}\n",
        title = note.title,
        id = note.id,
        body = note.body.trim_end(),
    )
}

fn count(n: usize) -> String {
    match n {
        0 => "no notes".into(),
        1 => "one note".into(),
        n => format!("{n} notes"),
    }
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
