//! Words that stand for one another in the vocabulary of tools, for
//! `wf_find`'s query expansion (catalog/search.rs).
//!
//! Where it came from: written by hand for issue 56 from the misses the
//! issue lists (folder/directory, picture/image, remark/comment,
//! owe/billing, popup/dialog, row/record, PR/pull request…) and the verbs
//! and nouns MCP servers' tools are named with (create/add/new,
//! delete/remove, list/show, navigate/open…), with WordNet's synsets for
//! the same words (Debian's `wordnet-base`) as a check on what counts as
//! a synonym. It is not tuned on either benchmark query set
//! (docs/benchmarks.md says how the sets were used).
//!
//! Each group is a set of words (or short phrases) any of which may stand
//! for any other; a word in several groups takes all of them. A query word
//! brings its group's words in at a lower weight than its own.

/// Groups of interchangeable words; phrases are split into their words.
pub const GROUPS: &[&[&str]] = &[
    // Verbs.
    &["create", "add", "new", "make", "insert"],
    &[
        "delete", "remove", "drop", "erase", "destroy", "forget", "purge",
    ],
    &["update", "edit", "modify", "change", "patch", "alter"],
    &["get", "fetch", "retrieve", "read", "view", "show"],
    &["list", "show", "enumerate"],
    &["search", "find", "query", "lookup", "look up"],
    &["run", "execute", "invoke", "launch", "trigger"],
    &[
        "stop",
        "terminate",
        "kill",
        "end",
        "halt",
        "cancel",
        "abort",
    ],
    &["restart", "reboot", "rollout", "recycle"],
    &["navigate", "open", "visit", "browse", "go to", "goto"],
    &["click", "press", "tap"],
    &["type", "fill", "enter", "input"],
    &["remember", "memorize", "store", "observation", "note"],
    &["copy", "fork", "duplicate", "clone"],
    &["rename", "move"],
    &["wait", "sleep", "pause", "delay"],
    &["echo", "repeat", "say back", "print back"],
    &["scrape", "extract"],
    &["think", "reason", "reasoning", "step by step"],
    &["upload", "attach", "attachment"],
    // Nouns.
    &["folder", "directory", "dir"],
    &["image", "picture", "screenshot", "photo", "screen capture"],
    &["pr", "pull request", "merge request", "mr"],
    &["comment", "remark", "reply"],
    &[
        "billing", "bill", "invoice", "owe", "balance", "spend", "spent", "cost", "charge",
    ],
    &["dialog", "popup", "modal", "alert", "confirm"],
    &["row", "record", "entry"],
    &["column", "field", "property", "attribute"],
    &["message", "post", "chat"],
    &["user", "member", "people", "person", "contact"],
    &["repository", "repo"],
    &[
        "error",
        "exception",
        "failure",
        "crash",
        "bug",
        "issue",
        "fail",
    ],
    &["log", "logs", "output"],
    &["web", "internet", "online"],
    &["page", "site", "website", "webpage", "tab", "url"],
    &["browser", "chrome", "chromium"],
    &[
        "location",
        "address",
        "place",
        "coordinates",
        "latitude",
        "longitude",
        "geocode",
    ],
    &["directions", "route", "drive", "driving", "walk", "walking"],
    &["distance", "far", "travel time"],
    &["elevation", "altitude", "height", "sea level"],
    &["nearby", "near", "local", "around"],
    &["database", "db"],
    &["postgres", "postgresql", "sql"],
    &["pod", "container"],
    &["scale", "replicas", "resize"],
    &["server", "droplet", "machine", "vm", "instance"],
    &["firewall", "allow", "inbound", "port"],
    &["key", "ssh", "credential"],
    &["dns", "domain"],
    &["snapshot", "backup"],
    &["docs", "documentation", "reference", "manual"],
    &["feature flag", "toggle", "flag"],
    &["sum", "add", "total", "plus"],
    &["javascript", "js", "script"],
    &["console", "devtools"],
    &["company", "organization", "org"],
    &["process", "program"],
    &["terminal", "shell", "command"],
    &["knowledge base", "kb"],
    &["generate", "draw", "art"],
];
