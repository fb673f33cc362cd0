//! Screening what the model reads about a tool (issue 54): every discovered
//! definition — its name, title, description and the descriptions inside its
//! input schema — is checked for the published tool-poisoning tricks. A
//! finding is a warning on the capability, never a rejection: the operator
//! decides (`screen = "hold"` holds flagged tools until approved).
//!
//! The rules are deliberately narrow phrases and characters rather than a
//! classifier, so each finding names its rule and the span it matched, and
//! the false-positive rate on real servers can be measured (docs/benchmarks.md,
//! "Screening tool definitions").

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::OnceLock;

use aho_corasick::AhoCorasick;

use serde::Serialize;
use serde_json::Value;
use wf_plugin_api::{Catalog, Tool};

/// One screening finding on one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The tool's name within its source.
    pub name: String,
    /// The rule that matched (see [`RULES`]).
    pub rule: &'static str,
    /// Where: `name`, `title`, `description` or a JSON pointer-ish path in
    /// the input schema (`inputSchema.properties.note.description`).
    pub field: String,
    /// Character offsets of the match in that field, end exclusive.
    pub span: [usize; 2],
    /// What matched (invisible characters shown as `U+XXXX`).
    pub excerpt: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tool {:?} flagged by screening: {} in {} [{}..{}]: {:?}",
            self.name, self.rule, self.field, self.span[0], self.span[1], self.excerpt
        )
    }
}

/// Every rule, with what it looks for (the operator manual lists the same).
pub const RULES: &[(&str, &str)] = &[
    (
        "invisible_unicode",
        "zero-width, tag, soft-hyphen and other invisible or control characters",
    ),
    (
        "bidi_control",
        "bidirectional overrides and isolates (U+202A-202E, U+2066-2069, U+061C)",
    ),
    (
        "homoglyph_name",
        "a name with non-ASCII letters, or one that looks like another tool's name",
    ),
    (
        "override_instructions",
        "\"ignore previous instructions\" and the like",
    ),
    ("conceal_from_user", "\"do not tell the user\" and the like"),
    (
        "hidden_block",
        "<IMPORTANT>, <system>, <instructions>-style blocks and chat-template markers",
    ),
    (
        "sensitive_read",
        "secret files (~/.ssh, id_rsa, .aws/credentials, .env, mcp.json...) or passing file contents along",
    ),
    (
        "names_other_source_tool",
        "a description that names another source's tool",
    ),
    (
        "prefers_over_other_tool",
        "a description telling the model to use it instead of other tools",
    ),
    (
        "long_description",
        "a description far longer than the source's norm",
    ),
];

/// What the other sources serve: their names and their tools' names.
#[derive(Debug, Default, Clone)]
pub struct Others {
    pub sources: BTreeSet<String>,
    pub tools: BTreeSet<String>,
}

/// Screens every tool of one source's catalog.
pub fn scan(catalog: &Catalog, others: &Others) -> Vec<Finding> {
    let own: BTreeSet<&str> = catalog.tools.iter().map(|t| t.name.as_str()).collect();
    let norm = norm_length(&catalog.tools);
    let skeletons: HashMap<String, &str> = own
        .iter()
        .copied()
        .chain(others.tools.iter().map(String::as_str))
        .map(|n| (skeleton(n), n))
        .collect();
    let names = OtherNames::new(&own, others);
    let mut out = Vec::new();
    for tool in &catalog.tools {
        let before = out.len();
        scan_name(tool, &skeletons, &mut out);
        if let Some(Value::String(t)) = tool.extra.get("title") {
            scan_text(&tool.name, &|| "title".into(), t, &names, &mut out);
        }
        if let Some(d) = &tool.description {
            scan_text(&tool.name, &|| "description".into(), d, &names, &mut out);
        }
        schema_texts(&tool.input_schema, &mut Vec::new(), 0, &mut |path, text| {
            scan_text(&tool.name, &|| field_of(path), text, &names, &mut out)
        });
        let len = tool.description.as_deref().map_or(0, |d| d.chars().count());
        if len > norm {
            out.push(Finding {
                name: tool.name.clone(),
                rule: "long_description",
                field: "description".into(),
                span: [0, len],
                excerpt: format!("{len} characters; this source's norm allows {norm}"),
            });
        }
        // One finding per rule and field is enough to act on.
        let mut seen = BTreeSet::new();
        let mut i = before;
        while i < out.len() {
            if seen.insert((out[i].rule, out[i].field.clone())) {
                i += 1;
            } else {
                out.remove(i);
            }
        }
    }
    out
}

/// The longest description that is still normal for a source: six times
/// its median, and never less than 4,000 characters (a small server's one
/// thorough tool is not an anomaly; real servers' longest run to 7,000).
fn norm_length(tools: &[Tool]) -> usize {
    let mut lens: Vec<usize> = tools
        .iter()
        .map(|t| t.description.as_deref().map_or(0, |d| d.chars().count()))
        .collect();
    lens.sort_unstable();
    let median = lens.get(lens.len() / 2).copied().unwrap_or(0);
    (median * 6).max(4000)
}

/// One step of a path into an input schema.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// A finding's field for a text at `path` in the input schema
/// (`inputSchema.properties.note.description`): only made for a finding,
/// not for every node walked.
fn field_of(path: &[Step<'_>]) -> String {
    let mut s = String::from("inputSchema");
    for step in path {
        match step {
            Step::Key(k) => {
                s.push('.');
                s.push_str(k);
            }
            Step::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// Every `description`/`title` string inside an input schema, with its path.
fn schema_texts<'a>(
    v: &'a Value,
    path: &mut Vec<Step<'a>>,
    depth: usize,
    each: &mut dyn FnMut(&[Step<'a>], &'a str),
) {
    if depth > 32 {
        return;
    }
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                path.push(Step::Key(k));
                match (k.as_str(), v) {
                    ("description" | "title", Value::String(s)) => each(path, s),
                    _ => schema_texts(v, path, depth + 1, each),
                }
                path.pop();
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                path.push(Step::Index(i));
                schema_texts(v, path, depth + 1, each);
                path.pop();
            }
        }
        _ => {}
    }
}

fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{061C}')
}

fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{200B}'..='\u{200F}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}' | '\u{00AD}'
        | '\u{180E}' | '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}'
        | '\u{E0000}'..='\u{E007F}' | '\u{E0100}'..='\u{E01EF}' | '\u{FFF9}'..='\u{FFFB}')
        || (c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
}

/// Latin look-alikes from Cyrillic and Greek, folded to the Latin letter.
fn fold(c: char) -> char {
    match c {
        'а' | 'α' => 'a',
        'в' | 'β' => 'b',
        'с' | 'ϲ' => 'c',
        'ԁ' => 'd',
        'е' | 'ε' => 'e',
        'һ' => 'h',
        'і' | 'ι' => 'i',
        'ј' => 'j',
        'к' | 'κ' => 'k',
        'м' => 'm',
        'о' | 'ο' | '0' => 'o',
        'р' | 'ρ' => 'p',
        'ԛ' => 'q',
        'ѕ' => 's',
        'т' | 'τ' => 't',
        'υ' => 'u',
        'ѵ' | 'ν' => 'v',
        'ԝ' => 'w',
        'х' | 'χ' => 'x',
        'у' | 'γ' => 'y',
        'l' | '1' | 'ӏ' => 'l',
        c => c.to_ascii_lowercase(),
    }
}

/// What a name looks like: look-alikes folded, case and separators dropped.
fn skeleton(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.' | ' ') && !is_invisible(*c))
        .map(fold)
        .collect()
}

fn scan_name(tool: &Tool, skeletons: &HashMap<String, &str>, out: &mut Vec<Finding>) {
    let name = &tool.name;
    if let Some((i, c)) = name.chars().enumerate().find(|(_, c)| !c.is_ascii()) {
        out.push(Finding {
            name: name.clone(),
            rule: "homoglyph_name",
            field: "name".into(),
            span: [i, i + 1],
            excerpt: format!("{c} (U+{:04X})", c as u32),
        });
        return;
    }
    // ASCII tricks: `rn` for `m`, `0` for `o`, `1`/`l`: the same skeleton as
    // a different name another tool has.
    if let Some(other) = skeletons.get(&skeleton(name))
        && *other != name
        && !other.eq_ignore_ascii_case(name)
        && other.replace(['-', '_'], "") != name.replace(['-', '_'], "")
    {
        out.push(Finding {
            name: name.clone(),
            rule: "homoglyph_name",
            field: "name".into(),
            span: [0, name.chars().count()],
            excerpt: format!("looks like {other:?}"),
        });
    }
}

/// Phrases, lowercased, with single spaces; matched on word boundaries.
const OVERRIDE: &[&str] = &[
    "ignore previous",
    "ignore all previous",
    "ignore any previous",
    "ignore the previous",
    "ignore prior instructions",
    "ignore all prior",
    "ignore the above",
    "ignore all above",
    "ignore your instructions",
    "ignore any other instructions",
    "ignore all other instructions",
    "disregard previous",
    "disregard all previous",
    "disregard prior",
    "disregard the above",
    "disregard your instructions",
    "disregard any other instructions",
    "forget previous instructions",
    "forget all previous",
    "forget your instructions",
    "override your instructions",
    "these instructions override",
    "this overrides all",
    "new system prompt",
    "your new instructions",
];

const CONCEAL: &[&str] = &[
    "do not tell the user",
    "don't tell the user",
    "dont tell the user",
    "never tell the user",
    "do not inform the user",
    "don't inform the user",
    "do not notify the user",
    "without telling the user",
    "without informing the user",
    "without notifying the user",
    "without the user knowing",
    "without the user's knowledge",
    "do not mention this",
    "don't mention this",
    "never mention this",
    "do not mention that you",
    "do not reveal this",
    "never reveal this",
    "do not disclose this",
    "hide this from the user",
    "the user must not know",
    "the user should not know",
    "the user does not need to know",
    "not visible to the user",
    "user will not see",
    "keep this secret",
    "this is a secret instruction",
];

/// Opening tags and chat-template markers that fence "instructions" off
/// from the visible description.
const BLOCKS: &[&str] = &[
    "<important>",
    "<system>",
    "<system_prompt>",
    "<system-prompt>",
    "<instructions>",
    "<instruction>",
    "<hidden>",
    "<secret>",
    "<admin>",
    "<critical>",
    "<assistant>",
    "<|im_start|>",
    "<|system|>",
    "[inst]",
    "<<sys>>",
];

/// Paths and files that hold secrets; a tool's description has no reason
/// to point the model at them.
const SECRET_PATHS: &[&str] = &[
    "~/.ssh",
    ".ssh/",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    "/etc/passwd",
    "/etc/shadow",
    ".aws/credentials",
    "~/.aws",
    ".netrc",
    ".npmrc",
    ".pgpass",
    ".git-credentials",
    ".docker/config.json",
    ".kube/config",
    "~/.env",
    "/.env",
    "mcp.json",
    "claude_desktop_config",
    "~/.cursor",
    "~/.config/gcloud",
    ".bash_history",
    ".zsh_history",
];

/// Verbs that make a secret path a request.
const SECRET_VERBS: &[&str] = &[
    "read", "open", "cat", "pass", "send", "include", "upload", "attach", "copy", "content",
    "contents", "provide", "print", "output", "forward", "share", "append", "load",
];

/// Asking the model to carry content somewhere, the exfiltration step.
const PASS_ALONG: &[&str] = &[
    "pass its content",
    "pass the content",
    "pass its contents",
    "pass the contents",
    "include its content",
    "include the content of",
    "include the contents of",
    "send its content",
    "send the content of",
    "send the contents of",
    "contents of the file as",
    "content of the file as",
    "provide the contents of",
    "append the contents of",
    "pass any api key",
    "pass the api key",
    "pass your api key",
    "include any api key",
    "include the api key",
    "include your api key",
    "pass any secret",
    "pass any credentials",
    "include any credentials",
    "include any secrets",
    "the conversation history",
    "the full conversation",
    "all previous messages",
];

/// A description that steers the model away from every other tool.
const STRONG_PREFER: &[&str] = &[
    "instead of any other tool",
    "instead of other tools",
    "rather than any other tool",
    "do not use any other tool",
    "don't use any other tool",
    "never use any other tool",
    "never use other tools",
    "never any other",
    "instead of any other",
    "rather than any other",
];

/// Weaker phrases: flagged only when another source's tool or name follows.
const WEAK_PREFER: &[&str] = &[
    "instead of",
    "rather than",
    "in place of",
    "do not use",
    "never use",
    "replaces",
    "supersedes",
    "better than",
    "prefer this tool over",
    "always use this tool",
];

/// Lowercased `text` with whitespace runs folded to one space, and for each
/// character of it the character offset it came from in `text`.
fn normalized(text: &str) -> (String, Vec<usize>) {
    let mut s = String::with_capacity(text.len());
    let mut at = Vec::with_capacity(text.len());
    let mut space = false;
    for (i, c) in text.chars().enumerate() {
        if c.is_whitespace() {
            if !space {
                s.push(' ');
                at.push(i);
            }
            space = true;
            continue;
        }
        space = false;
        // Typographic apostrophes: "don’t" is "don't".
        let c = if matches!(c, '\u{2019}' | '\u{2018}') {
            '\''
        } else {
            c
        };
        for l in c.to_lowercase() {
            s.push(l);
            at.push(i);
        }
    }
    (s, at)
}

fn word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Char offsets of the first occurrence of `needle` in `hay` that starts and
/// ends on a word boundary (where the needle itself starts/ends with a word
/// character).
fn find_word(hay: &str, needle: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(pos) = hay[from..].find(needle) {
        let start = from + pos;
        let end = start + needle.len();
        let before = hay[..start].chars().next_back();
        let after = hay[end..].chars().next();
        let first = needle.chars().next().is_some_and(word_char);
        let last = needle.chars().next_back().is_some_and(word_char);
        if (!first || !before.is_some_and(word_char)) && (!last || !after.is_some_and(word_char)) {
            return Some((hay[..start].chars().count(), hay[..end].chars().count()));
        }
        from = start + needle.len().max(1);
    }
    None
}

/// Many needles searched at once with [`find_word`]'s answer for each: one
/// pass of an Aho-Corasick automaton over a text rather than one search per
/// needle (issue #55: screening a catalog of thousands of tools, each text
/// against every phrase and every other source's tool name, held the host).
struct Needles {
    needles: Vec<String>,
    /// Whether each needle starts and ends with a word character.
    ends: Vec<(bool, bool)>,
    /// None when there are no needles, or the automaton could not be built
    /// (then each needle is searched on its own, as before).
    automaton: Option<AhoCorasick>,
}

impl Needles {
    fn new(needles: Vec<String>) -> Self {
        let ends = needles
            .iter()
            .map(|n| {
                (
                    n.chars().next().is_some_and(word_char),
                    n.chars().next_back().is_some_and(word_char),
                )
            })
            .collect();
        let automaton = if needles.is_empty() || needles.iter().any(String::is_empty) {
            None
        } else {
            // Standard semantics: the overlapping search reports every
            // occurrence of every needle, as a search per needle would.
            AhoCorasick::new(&needles).ok()
        };
        Self {
            needles,
            ends,
            automaton,
        }
    }

    /// `find_word(hay, needle)` for every needle that has an answer, as
    /// `(needle index, char span)`, by needle index.
    fn word_hits(&self, hay: &str) -> Vec<(usize, (usize, usize))> {
        let Some(automaton) = &self.automaton else {
            return self
                .needles
                .iter()
                .enumerate()
                .filter_map(|(i, n)| find_word(hay, n).map(|hit| (i, hit)))
                .collect();
        };
        // Per needle seen: where find_word would search next, and whether it
        // has its answer. A needle's occurrences arrive in order of start.
        let mut seen: Vec<(usize, usize, bool)> = Vec::new();
        let mut out = Vec::new();
        for m in automaton.find_overlapping_iter(hay) {
            let p = m.pattern().as_usize();
            let i = match seen.iter().position(|s| s.0 == p) {
                Some(i) => i,
                None => {
                    seen.push((p, 0, false));
                    seen.len() - 1
                }
            };
            let (_, from, found) = seen[i];
            if found || m.start() < from {
                continue;
            }
            let (first, last) = self.ends[p];
            if bounded(hay, m.start(), m.end(), first, last) {
                seen[i].2 = true;
                out.push((
                    p,
                    (
                        hay[..m.start()].chars().count(),
                        hay[..m.end()].chars().count(),
                    ),
                ));
            } else {
                seen[i].1 = m.end();
            }
        }
        out.sort_unstable_by_key(|h| h.0);
        out
    }
}

/// Whether `hay[start..end]` starts and ends on a word boundary where the
/// needle itself starts (`first`) and ends (`last`) with a word character.
fn bounded(hay: &str, start: usize, end: usize, first: bool, last: bool) -> bool {
    let before = hay[..start].chars().next_back();
    let after = hay[end..].chars().next();
    (!first || !before.is_some_and(word_char)) && (!last || !after.is_some_and(word_char))
}

/// The fixed phrase lists, in this order, as one set of needles.
const PHRASE_LISTS: [&[&str]; 7] = [
    OVERRIDE,
    CONCEAL,
    BLOCKS,
    SECRET_PATHS,
    PASS_ALONG,
    STRONG_PREFER,
    WEAK_PREFER,
];
const OVERRIDE_AT: usize = 0;
const CONCEAL_AT: usize = 1;
const BLOCKS_AT: usize = 2;
const SECRET_PATHS_AT: usize = 3;
const PASS_ALONG_AT: usize = 4;
const STRONG_PREFER_AT: usize = 5;
const WEAK_PREFER_AT: usize = 6;

/// Every fixed phrase, with each list's range of needle indexes.
struct Phrases {
    needles: Needles,
    lists: [Range<usize>; 7],
}

fn phrases() -> &'static Phrases {
    static PHRASES: OnceLock<Phrases> = OnceLock::new();
    PHRASES.get_or_init(|| {
        let mut at = 0;
        let lists = PHRASE_LISTS.map(|l| {
            at += l.len();
            at - l.len()..at
        });
        let needles = PHRASE_LISTS
            .iter()
            .flat_map(|l| l.iter().map(|p| p.to_string()))
            .collect();
        Phrases {
            needles: Needles::new(needles),
            lists,
        }
    })
}

/// The other sources' names a description may mention, lowercased:
/// distinctive tool names (not this source's own), in name order; and those
/// with the other sources' names of four characters or more.
struct OtherNames {
    tools: Needles,
    tools_and_sources: Needles,
}

impl OtherNames {
    fn new(own: &BTreeSet<&str>, others: &Others) -> Self {
        let tools: Vec<String> = others
            .tools
            .iter()
            .filter(|n| distinctive(n) && !own.contains(n.as_str()))
            .map(|n| n.to_lowercase())
            .collect();
        let mut both = tools.clone();
        both.extend(
            others
                .sources
                .iter()
                .filter(|s| s.len() >= 4)
                .map(|s| s.to_lowercase()),
        );
        Self {
            tools: Needles::new(tools),
            tools_and_sources: Needles::new(both),
        }
    }
}

fn scan_text(
    tool: &str,
    field: &dyn Fn() -> String,
    text: &str,
    names: &OtherNames,
    out: &mut Vec<Finding>,
) {
    let chars: Vec<char> = text.chars().collect();
    let mut push = |rule: &'static str, span: [usize; 2], excerpt: String| {
        out.push(Finding {
            name: tool.into(),
            rule,
            field: field(),
            span,
            excerpt,
        });
    };
    let show = |[a, b]: [usize; 2]| -> String {
        chars[a.min(chars.len())..b.min(chars.len())]
            .iter()
            .map(|c| {
                if is_invisible(*c) || is_bidi(*c) {
                    format!("U+{:04X}", *c as u32)
                } else {
                    c.to_string()
                }
            })
            .collect()
    };
    for (rule, test) in [
        ("invisible_unicode", is_invisible as fn(char) -> bool),
        ("bidi_control", is_bidi),
    ] {
        if let Some(start) = chars.iter().position(|c| test(*c)) {
            let end = chars[start..]
                .iter()
                .position(|c| !test(*c))
                .map_or(chars.len(), |n| start + n);
            push(rule, [start, end], show([start, end]));
        }
    }
    let (norm, at) = normalized(text);
    let span = |(a, b): (usize, usize)| -> [usize; 2] {
        let start = at.get(a).copied().unwrap_or(0);
        let end = b
            .checked_sub(1)
            .and_then(|i| at.get(i))
            .map_or(start, |e| e + 1);
        [start, end]
    };
    let phrases = phrases();
    let hits = phrases.needles.word_hits(&norm);
    // The first phrase of a list (in list order) found, with its first hit.
    let in_list = |list: usize| {
        let range = &phrases.lists[list];
        hits.iter().filter(move |(p, _)| range.contains(p))
    };
    let first_of = |list: usize| in_list(list).next().map(|(_, hit)| *hit);
    for (rule, list) in [
        ("override_instructions", OVERRIDE_AT),
        ("conceal_from_user", CONCEAL_AT),
        ("hidden_block", BLOCKS_AT),
    ] {
        if let Some(hit) = first_of(list) {
            let s = span(hit);
            push(rule, s, show(s));
        }
    }
    // A secret path counts when a verb asks for it nearby ("read ~/.ssh/id_rsa"),
    // not when a description says such paths are refused.
    let asked = |(a, b): (usize, usize)| {
        let window: String = norm
            .chars()
            .skip(a.saturating_sub(80))
            .take(b - a.saturating_sub(80) + 40)
            .collect();
        SECRET_VERBS.iter().any(|v| find_word(&window, v).is_some())
    };
    let secret = in_list(SECRET_PATHS_AT)
        .map(|(_, hit)| *hit)
        .find(|hit| asked(*hit))
        .or_else(|| first_of(PASS_ALONG_AT));
    if let Some(hit) = secret {
        let s = span(hit);
        push("sensitive_read", s, show(s));
    }
    // Another source's tool named in this description. Only distinctive
    // names count (`browser_navigate`, `send-email`), never a common word
    // like `search` that many servers use, nor one this source has itself.
    if let Some((_, hit)) = names.tools.word_hits(&norm).first() {
        let s = span(*hit);
        push("names_other_source_tool", s, show(s));
    }
    // Steering away from other tools: a strong phrase alone, or a weak one
    // ("instead of") followed closely by another source's tool or name.
    let strong = first_of(STRONG_PREFER_AT);
    let weak = || {
        // Only the weak phrases the text has at all are followed up.
        in_list(WEAK_PREFER_AT).find_map(|(p, _)| {
            let p = phrases.needles.needles[*p].as_str();
            let mut from = 0;
            while let Some((a, b)) = find_word(&norm[from..], p).map(|(a, b)| {
                let off = norm[..from].chars().count();
                (a + off, b + off)
            }) {
                let after: String = norm.chars().skip(b).take(48).collect();
                if !names.tools_and_sources.word_hits(&after).is_empty() {
                    return Some((a, b));
                }
                from = norm.char_indices().nth(b).map_or(norm.len(), |(i, _)| i);
            }
            None
        })
    };
    if let Some(hit) = strong.or_else(weak) {
        let s = span(hit);
        push("prefers_over_other_tool", s, show(s));
    }
}

/// A tool name specific enough that its mention is no accident.
fn distinctive(name: &str) -> bool {
    name.len() >= 6
        && (name.contains(['_', '-'])
            || name
                .chars()
                .zip(name.chars().skip(1))
                .any(|(a, b)| a.is_lowercase() && b.is_uppercase()))
}

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
