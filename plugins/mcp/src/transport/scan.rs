//! A streaming look at one JSON-RPC line that is too large to keep: which
//! top-level members it has and the raw value of its `id`, found in O(1)
//! memory while the bytes go by. The `id` may come first (Python and Rust
//! SDKs) or last (the TypeScript SDK writes `{"result":…,"jsonrpc":"2.0","id":7}`).

use serde_json::Value;

/// The longest raw `id` value kept; a longer one is treated as unreadable.
const MAX_ID_LEN: usize = 256;
/// Member names longer than this are none of the ones we look for.
const MAX_KEY_LEN: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Id,
    Method,
    Result,
    Error,
    Other,
}

/// What an over-long line was, as far as a stream scan can tell.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A response (`result` or `error`) to our request `id`.
    Response(Value),
    /// A request or notification from the upstream (`method`).
    Message,
    /// Not a JSON-RPC object we can attribute to anything.
    Unknown,
}

#[derive(Debug, Default)]
#[cfg_attr(test, derive(PartialEq))]
pub struct LineScan {
    started: bool,
    not_object: bool,
    depth: u32,
    in_string: bool,
    escape: bool,
    /// At depth 1: the next string is a member name.
    expect_key: bool,
    reading_key: bool,
    key: Vec<u8>,
    current: Option<Key>,
    id: Vec<u8>,
    id_too_long: bool,
    has_id: bool,
    has_method: bool,
    has_result: bool,
}

impl LineScan {
    pub fn new() -> Self {
        Self::default()
    }

    /// Ready for the next line, keeping what was allocated for this one.
    pub fn reset(&mut self) {
        let (mut key, mut id) = (std::mem::take(&mut self.key), std::mem::take(&mut self.id));
        key.clear();
        id.clear();
        *self = Self {
            key,
            id,
            ..Self::default()
        };
    }

    /// Feeds the bytes of one line (without its newline).
    ///
    /// Every line an upstream sends goes by here, and most of a large one is
    /// the inside of strings (a tool's text): those runs are skipped to their
    /// next `"` or `\` with memchr, not looked at byte by byte (which cost
    /// about 24 instructions a byte of every reply).
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut i = 0;
        while i < bytes.len() {
            if self.not_object || (self.started && self.depth == 0) {
                return; // nothing after this changes what the line was
            }
            if self.skips_string() {
                match memchr::memchr2(b'"', b'\\', &bytes[i..]) {
                    Some(k) => i += k,
                    None => return,
                }
            }
            self.byte(bytes[i]);
            i += 1;
        }
    }

    /// Inside a string that is neither a member name nor part of the `id`,
    /// and not just after a backslash: only a quote or a backslash changes
    /// anything.
    fn skips_string(&self) -> bool {
        let in_id = self.current == Some(Key::Id) && self.depth == 1;
        self.in_string && !self.reading_key && !self.escape && !in_id
    }

    fn capture(&mut self, b: u8) {
        if self.current == Some(Key::Id) && self.depth == 1 {
            if self.id.len() < MAX_ID_LEN {
                self.id.push(b);
            } else {
                self.id_too_long = true;
            }
        }
    }

    fn byte(&mut self, b: u8) {
        if self.not_object {
            return;
        }
        if !self.started {
            match b {
                b' ' | b'\t' | b'\r' => {}
                b'{' => {
                    self.started = true;
                    self.depth = 1;
                    self.expect_key = true;
                }
                _ => self.not_object = true,
            }
            return;
        }
        if self.depth == 0 {
            return; // after the top-level object closed
        }
        if self.in_string {
            if self.reading_key {
                if self.escape {
                    self.escape = false;
                } else if b == b'\\' {
                    self.escape = true;
                } else if b == b'"' {
                    self.in_string = false;
                    self.reading_key = false;
                    self.current = Some(match self.key.as_slice() {
                        b"id" => Key::Id,
                        b"method" => Key::Method,
                        b"result" => Key::Result,
                        b"error" => Key::Error,
                        _ => Key::Other,
                    });
                    return;
                }
                if self.key.len() <= MAX_KEY_LEN {
                    self.key.push(b);
                }
                return;
            }
            self.capture(b);
            if self.escape {
                self.escape = false;
            } else if b == b'\\' {
                self.escape = true;
            } else if b == b'"' {
                self.in_string = false;
            }
            return;
        }
        match b {
            b'"' if self.depth == 1 && self.expect_key => {
                self.in_string = true;
                self.reading_key = true;
                self.key.clear();
            }
            b'"' => {
                self.capture(b);
                self.in_string = true;
            }
            b':' if self.depth == 1 => {
                self.expect_key = false;
                match self.current {
                    Some(Key::Id) => self.has_id = true,
                    Some(Key::Method) => self.has_method = true,
                    Some(Key::Result | Key::Error) => self.has_result = true,
                    _ => {}
                }
            }
            b',' if self.depth == 1 => {
                self.expect_key = true;
                self.current = None;
            }
            b'{' | b'[' => {
                self.capture(b);
                self.depth += 1;
            }
            b'}' | b']' => {
                self.depth -= 1;
                if self.depth >= 1 {
                    self.capture(b);
                }
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => self.capture(b),
        }
    }

    /// What the line was. Call after its last byte.
    pub fn finish(&self) -> Frame {
        if self.not_object || !self.started {
            return Frame::Unknown;
        }
        if self.has_method {
            return Frame::Message;
        }
        if self.has_result && self.has_id && !self.id_too_long {
            // Only a number or a string is a request id we could have sent.
            return match serde_json::from_slice::<Value>(&self.id) {
                Ok(id @ (Value::Number(_) | Value::String(_))) => Frame::Response(id),
                _ => Frame::Unknown,
            };
        }
        Frame::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn scan(line: &str) -> Frame {
        let mut s = LineScan::new();
        // Byte by byte and in one go must agree.
        let mut t = LineScan::new();
        for chunk in line.as_bytes().chunks(3) {
            t.feed(chunk);
        }
        s.feed(line.as_bytes());
        assert_eq!(s.finish(), t.finish());
        s.finish()
    }

    /// The reference: every byte through the state machine, one at a time.
    fn byte_by_byte(line: &[u8]) -> LineScan {
        let mut s = LineScan::new();
        for &b in line {
            s.byte(b);
        }
        s
    }

    /// Skipping the inside of strings leaves the scanner as looking at every
    /// byte leaves it, for every prefix of lines full of escapes, fed in chunks of every size
    /// up to 7 (so a chunk ends after a backslash, inside the id, inside a
    /// key), and a reset scanner reads the next line as a new one does.
    #[test]
    fn skipping_strings_agrees_with_every_byte() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":"a\"b\\","result":{"content":[{"type":"text","text":"x \"id\": 1 \\ {[ \u00e9"}]}}"#,
            r#"{"result":{"text":"he said \"id\":5} and {\"id\":6","x":"\\"},"id":8,"jsonrpc":"2.0"}"#,
            r#"{"method":"notifications/message","params":{"data":"\\\"\\"}}"#,
            r#"{"id":"\\","error":{"message":"\""}} trailing "x" {"#,
            r#"["id",1]"#,
        ];
        let mut reused = LineScan::new();
        for line in lines {
            let bytes = line.as_bytes();
            for end in 0..=bytes.len() {
                let expected = byte_by_byte(&bytes[..end]);
                for size in 1..=7 {
                    let mut s = LineScan::new();
                    for chunk in bytes[..end].chunks(size) {
                        s.feed(chunk);
                    }
                    assert_eq!(s, expected, "{line:?} cut at {end}, chunks of {size}");
                }
            }
            reused.reset();
            reused.feed(bytes);
            assert_eq!(reused, byte_by_byte(bytes), "{line:?} after a reset");
        }
    }

    #[test]
    fn id_first_or_last() {
        assert_eq!(
            scan(r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"id":1,"text":"x"}]}}"#),
            Frame::Response(json!(7))
        );
        assert_eq!(
            scan(r#"{"result":{"a":{"id":99},"b":[1,{"id":"no"}]},"jsonrpc":"2.0","id":"req-3"}"#),
            Frame::Response(json!("req-3"))
        );
        assert_eq!(
            scan(r#" { "id" : 12 , "error" : {"code":-1,"message":"m"} } "#),
            Frame::Response(json!(12))
        );
    }

    #[test]
    fn strings_with_quotes_braces_and_keys_do_not_confuse_it() {
        let line = r#"{"result":{"text":"he said \"id\":5} and {\"id\":6","x":"\\"},"id":8,"jsonrpc":"2.0"}"#;
        assert_eq!(scan(line), Frame::Response(json!(8)));
        let line = r#"{"jsonrpc":"2.0","result":{"s":"\"id\":1"},"id":"a\"b"}"#;
        assert_eq!(scan(line), Frame::Response(json!("a\"b")));
    }

    #[test]
    fn requests_notifications_and_garbage() {
        assert_eq!(
            scan(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"x"}}"#),
            Frame::Message
        );
        assert_eq!(
            scan(r#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}"#),
            Frame::Message
        );
        assert_eq!(scan("xxxxxxxx"), Frame::Unknown);
        assert_eq!(scan(r#"[{"id":1,"result":1}]"#), Frame::Unknown);
        // A response whose id is cut off (the line never ended) or absent.
        assert_eq!(
            scan(r#"{"jsonrpc":"2.0","result":{"t":"aaaa"#),
            Frame::Unknown
        );
        assert_eq!(
            scan(r#"{"jsonrpc":"2.0","id":null,"error":{}}"#),
            Frame::Unknown
        );
        let long_id = format!(r#"{{"id":"{}","result":1}}"#, "x".repeat(1000));
        assert_eq!(scan(&long_id), Frame::Unknown);
    }
}
