//! A frame's payload: the hot messages (a request, a reply) in a small
//! binary layout that carries their JSON as raw bytes (its codec is
//! `wf_plugin_api::lane`'s, which a 1.5 plugin serves itself), every other
//! message as JSON (`protocol`). Escaping a request's JSON into a string inside a
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

use wf_plugin_api::lane::{self, LaneError, REPLY_ERR, REPLY_OK, REQUEST};

use super::frame::FrameError;
use super::protocol::{ToChild, ToHost};

impl From<LaneError> for FrameError {
    fn from(e: LaneError) -> Self {
        match e {
            LaneError::TooLarge(n) => FrameError::TooLarge(n),
            LaneError::Binary(why) => FrameError::Binary(why),
        }
    }
}

/// One frame (length prefix included) of a message to the child.
pub fn encode_to_child(msg: &ToChild) -> Result<Vec<u8>, FrameError> {
    match msg {
        ToChild::Request {
            id,
            source,
            request,
            info,
        } => Ok(lane::encode_request(*id, *source, request, info)?),
        other => super::frame::encode(other),
    }
}

/// One frame (length prefix included) of a message to wf.
pub fn encode_to_host(msg: &ToHost) -> Result<Vec<u8>, FrameError> {
    match msg {
        ToHost::Reply { id, ok, err } => {
            let reply = match (ok, err) {
                (Some(ok), _) => Ok(ok.as_str()),
                (None, err) => Err(err.as_deref().unwrap_or_default()),
            };
            Ok(lane::encode_reply(*id, reply)?)
        }
        other => super::frame::encode(other),
    }
}

/// A message to the child, from a frame's payload.
pub fn decode_to_child(payload: &[u8]) -> Result<ToChild, FrameError> {
    let Some((&tag, rest)) = payload.split_first() else {
        return Err(FrameError::Binary("an empty frame"));
    };
    if tag != REQUEST {
        return Ok(serde_json::from_slice(payload)?);
    }
    let r = lane::decode_request(rest)?;
    Ok(ToChild::Request {
        id: r.id,
        source: r.source,
        request: r.request,
        info: r.info,
    })
}

/// A message to wf, from a frame's payload.
pub fn decode_to_host(payload: &[u8]) -> Result<ToHost, FrameError> {
    let Some((&tag, rest)) = payload.split_first() else {
        return Err(FrameError::Binary("an empty frame"));
    };
    if tag != REPLY_OK && tag != REPLY_ERR {
        return Ok(serde_json::from_slice(payload)?);
    }
    let (id, body) = lane::decode_reply(rest)?;
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

    /// The JSON a 1.5 plugin writes on its call lane (`wf_plugin_api::lane`,
    /// whose own test pins the same text) is the `ToHost` wf reads.
    #[test]
    fn a_plugins_lane_progress_and_log_read_as_to_host() {
        let progress = br#"{"t":"progress","id":1,"progress":0.5,"total":1.0,"message":"half"}"#;
        match decode_to_host(progress).unwrap() {
            ToHost::Progress {
                id,
                progress,
                total,
                message,
            } => assert_eq!(
                (id, progress, total, message.as_deref()),
                (1, 0.5, Some(1.0), Some("half"))
            ),
            other => panic!("{other:?}"),
        }
        let log = br#"{"t":"log","level":3,"target":"p","message":"m","call":2}"#;
        match decode_to_host(log).unwrap() {
            ToHost::Log {
                level,
                target,
                message,
                call,
            } => assert_eq!(
                (level, target.as_str(), message.as_str(), call),
                (3, "p", "m", Some(2))
            ),
            other => panic!("{other:?}"),
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
