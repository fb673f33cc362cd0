//! A restarted child starts its sessions' epochs over (a plugin counts from
//! zero in a new process). So that a restart is never silent, wf adds the
//! child's generation (its restarts) in the high 32 bits of every epoch it
//! passes on, and checks it in every `expect_epoch` it sends: a call that
//! expects a session of an earlier child fails as state-lost, exactly as
//! after an upstream restart. Generation 0 changes nothing.

use serde_json::Value;
use wf_plugin_api::{ErrorCode, SESSION_EPOCH_META, STATE_LOST};

const SHIFT: u32 = 32;
const LOW: u64 = (1 << SHIFT) - 1;

/// The call info to send to a child of `generation`, or the state-lost
/// error when the call expects a session of another child.
pub fn outgoing(info: String, generation: u64) -> Result<String, String> {
    if generation == 0 || !info.contains("expect_epoch") {
        return Ok(info);
    }
    let Ok(mut v) = serde_json::from_str::<Value>(&info) else {
        return Ok(info);
    };
    let Some(expect) = v.pointer("/scope/expect_epoch").and_then(Value::as_u64) else {
        return Ok(info);
    };
    if expect >> SHIFT != generation {
        return Err(super::running::error_json(
            ErrorCode::StateLost,
            format!("{STATE_LOST} (the plugin's process restarted)"),
        ));
    }
    v["scope"]["expect_epoch"] = Value::from(expect & LOW);
    Ok(v.to_string())
}

/// A reply from a child of `generation` to a request of `op`, its epochs
/// lifted into that generation.
pub fn incoming(op: Option<&str>, reply: String, generation: u64) -> String {
    if generation == 0 {
        return reply;
    }
    let session = matches!(op, Some("open_session" | "open_lease" | "status"));
    if !(session && reply.contains("\"epoch\"") || reply.contains(SESSION_EPOCH_META)) {
        return reply;
    }
    let Ok(mut v) = serde_json::from_str::<Value>(&reply) else {
        return reply;
    };
    let lift = |e: &mut Value| {
        if let Some(n) = e.as_u64() {
            *e = Value::from((generation << SHIFT) | (n & LOW));
        }
    };
    if session && let Some(e) = v.get_mut("epoch") {
        lift(e);
    }
    if let Some(e) = v
        .get_mut("_meta")
        .and_then(|m| m.get_mut(SESSION_EPOCH_META))
    {
        lift(e);
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn generation_zero_is_untouched() {
        let info = json!({"scope": {"expect_epoch": 3}}).to_string();
        assert_eq!(outgoing(info.clone(), 0).unwrap(), info);
        let r = json!({"epoch": 3}).to_string();
        assert_eq!(incoming(Some("open_session"), r.clone(), 0), r);
    }

    #[test]
    fn a_restart_lifts_epochs_and_refuses_old_ones() {
        let r = incoming(
            Some("open_lease"),
            json!({"epoch": 1, "lease": "l"}).to_string(),
            2,
        );
        let epoch = serde_json::from_str::<Value>(&r).unwrap()["epoch"]
            .as_u64()
            .unwrap();
        assert_eq!(epoch, (2 << 32) | 1);
        // A call expecting it reaches the child with the child's own number.
        let info = json!({"scope": {"expect_epoch": epoch}}).to_string();
        let sent: Value = serde_json::from_str(&outgoing(info, 2).unwrap()).unwrap();
        assert_eq!(sent["scope"]["expect_epoch"], 1);
        // One from before the restart is state-lost.
        let old = json!({"scope": {"expect_epoch": 1}}).to_string();
        let e = wf_plugin_api::PluginError::from_json(&outgoing(old, 2).unwrap_err());
        assert_eq!(e.code, ErrorCode::StateLost);
        // A call result's epoch report.
        let r = json!({"content": [], "_meta": {SESSION_EPOCH_META: 4}}).to_string();
        let v: Value = serde_json::from_str(&incoming(Some("call_tool"), r, 1)).unwrap();
        assert_eq!(v["_meta"][SESSION_EPOCH_META], (1u64 << 32) | 4);
    }
}
