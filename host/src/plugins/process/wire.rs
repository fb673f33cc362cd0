//! A frame's payload: the hot messages (a request, a reply) in a small
//! binary layout that carries their JSON as raw bytes, every other message
//! as JSON (`protocol`). Escaping a request's JSON into a string inside a
//! JSON envelope and parsing it back out on the other side cost each call
//! four passes over its text; raw bytes cost a copy.
//!
//! A JSON payload starts with `{`; a binary one with its tag byte:
//!
//! - `0x01` request: id (u64), source (u64), request length (u32), the
//!   request JSON, then the call's info JSON (the rest);
//! - `0x02` reply ok / `0x03` reply err: id (u64), then the result or the
//!   `PluginError` JSON (the rest).
//!
//! Integers are big-endian; the texts must be UTF-8.

use super::frame::{FrameError, MAX_FRAME};
use super::protocol::{ToChild, ToHost};

const REQUEST: u8 = 0x01;
const REPLY_OK: u8 = 0x02;
const REPLY_ERR: u8 = 0x03;

/// Starts a frame: the length prefix (filled by [`finish`]) and the tag.
fn begin(tag: u8, capacity: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(4 + 1 + capacity);
    buf.extend_from_slice(&[0, 0, 0, 0, tag]);
    buf
}

fn finish(mut buf: Vec<u8>) -> Result<Vec<u8>, FrameError> {
    let len = buf.len() - 4;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    buf[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(buf)
}

/// One frame (length prefix included) of a message to the child.
pub fn encode_to_child(msg: &ToChild) -> Result<Vec<u8>, FrameError> {
    match msg {
        ToChild::Request {
            id,
            source,
            request,
            info,
        } => {
            let mut buf = begin(REQUEST, 20 + request.len() + info.len());
            buf.extend_from_slice(&id.to_be_bytes());
            buf.extend_from_slice(&source.to_be_bytes());
            buf.extend_from_slice(&(request.len() as u32).to_be_bytes());
            buf.extend_from_slice(request.as_bytes());
            buf.extend_from_slice(info.as_bytes());
            finish(buf)
        }
        other => super::frame::encode(other),
    }
}

/// One frame (length prefix included) of a message to wf.
pub fn encode_to_host(msg: &ToHost) -> Result<Vec<u8>, FrameError> {
    match msg {
        ToHost::Reply { id, ok, err } => {
            let (tag, text) = match (ok, err) {
                (Some(ok), _) => (REPLY_OK, ok.as_str()),
                (None, err) => (REPLY_ERR, err.as_deref().unwrap_or_default()),
            };
            let mut buf = begin(tag, 8 + text.len());
            buf.extend_from_slice(&id.to_be_bytes());
            buf.extend_from_slice(text.as_bytes());
            finish(buf)
        }
        other => super::frame::encode(other),
    }
}

/// Reads `n` bytes off the front of `b`.
fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8], FrameError> {
    if b.len() < n {
        return Err(FrameError::Binary("a binary frame ends early"));
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Ok(head)
}

fn u64_at(b: &mut &[u8]) -> Result<u64, FrameError> {
    let bytes = take(b, 8)?;
    Ok(u64::from_be_bytes(bytes.try_into().unwrap_or_default()))
}

fn text(b: &[u8]) -> Result<String, FrameError> {
    String::from_utf8(b.to_vec()).map_err(|_| FrameError::Binary("a text that is not UTF-8"))
}

/// A message to the child, from a frame's payload.
pub fn decode_to_child(payload: &[u8]) -> Result<ToChild, FrameError> {
    let Some((&tag, mut rest)) = payload.split_first() else {
        return Err(FrameError::Binary("an empty frame"));
    };
    if tag != REQUEST {
        return Ok(serde_json::from_slice(payload)?);
    }
    let id = u64_at(&mut rest)?;
    let source = u64_at(&mut rest)?;
    let len = u32::from_be_bytes(take(&mut rest, 4)?.try_into().unwrap_or_default()) as usize;
    let request = text(take(&mut rest, len)?)?;
    let info = text(rest)?;
    Ok(ToChild::Request {
        id,
        source,
        request,
        info,
    })
}

/// A message to wf, from a frame's payload.
pub fn decode_to_host(payload: &[u8]) -> Result<ToHost, FrameError> {
    let Some((&tag, mut rest)) = payload.split_first() else {
        return Err(FrameError::Binary("an empty frame"));
    };
    if tag != REPLY_OK && tag != REPLY_ERR {
        return Ok(serde_json::from_slice(payload)?);
    }
    let id = u64_at(&mut rest)?;
    let body = text(rest)?;
    Ok(match tag {
        REPLY_OK => ToHost::Reply {
            id,
            ok: Some(body),
            err: None,
        },
        _ => ToHost::Reply {
            id,
            ok: None,
            err: Some(body),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(frame: &[u8]) -> &[u8] {
        let len = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(len, frame.len() - 4);
        &frame[4..]
    }

    #[test]
    fn requests_and_replies_cross_as_raw_bytes() {
        let request = r#"{"op":"call_tool","name":"echo","arguments":{"text":"a \"quoted\" é"}}"#;
        let info = r#"{"trace":"00-ab"}"#;
        let frame = encode_to_child(&ToChild::Request {
            id: 7,
            source: 3,
            request: request.into(),
            info: info.into(),
        })
        .unwrap();
        // The JSON is in the frame as it is: nothing escaped.
        assert!(
            frame
                .windows(request.len())
                .any(|w| w == request.as_bytes())
        );
        match decode_to_child(payload(&frame)).unwrap() {
            ToChild::Request {
                id,
                source,
                request: r,
                info: i,
            } => assert_eq!((id, source, r.as_str(), i.as_str()), (7, 3, request, info)),
            other => panic!("{other:?}"),
        }
        for (ok, err) in [
            (Some("{\"x\":1}"), None),
            (None, Some("{\"code\":\"internal\"}")),
        ] {
            let frame = encode_to_host(&ToHost::Reply {
                id: 9,
                ok: ok.map(str::to_string),
                err: err.map(str::to_string),
            })
            .unwrap();
            match decode_to_host(payload(&frame)).unwrap() {
                ToHost::Reply { id, ok: o, err: e } => {
                    assert_eq!((id, o.as_deref(), e.as_deref()), (9, ok, err))
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn other_messages_stay_json() {
        let frame = encode_to_child(&ToChild::Cancel { id: 4 }).unwrap();
        assert_eq!(payload(&frame)[0], b'{');
        assert!(matches!(
            decode_to_child(payload(&frame)).unwrap(),
            ToChild::Cancel { id: 4 }
        ));
        let frame = encode_to_host(&ToHost::Done { id: 5 }).unwrap();
        assert!(matches!(
            decode_to_host(payload(&frame)).unwrap(),
            ToHost::Done { id: 5 }
        ));
    }

    #[test]
    fn refuses_short_and_non_utf8_binary_frames() {
        assert!(matches!(
            decode_to_child(&[REQUEST, 0, 0]),
            Err(FrameError::Binary(_))
        ));
        let mut bad = vec![REQUEST];
        bad.extend_from_slice(&1u64.to_be_bytes());
        bad.extend_from_slice(&2u64.to_be_bytes());
        bad.extend_from_slice(&100u32.to_be_bytes());
        bad.extend_from_slice(b"{}");
        assert!(matches!(decode_to_child(&bad), Err(FrameError::Binary(_))));
        let mut latin = vec![REPLY_OK];
        latin.extend_from_slice(&1u64.to_be_bytes());
        latin.push(0xff);
        assert!(matches!(decode_to_host(&latin), Err(FrameError::Binary(_))));
        assert!(matches!(decode_to_host(&[]), Err(FrameError::Binary(_))));
        // A JSON payload that is no message is still refused.
        assert!(matches!(
            decode_to_host(b"[]"),
            Err(FrameError::Malformed(_))
        ));
    }
}
