//! Handles that carry their replica: with several replicas (`[store] url`),
//! task ids and 2025-11-25 `Mcp-Session-Id`s name the replica that holds
//! them and are sealed (HMAC-SHA256 under `[store] handle_secret`, shared by
//! every replica), so a client can neither forge one nor move it to another
//! replica. A handle of another replica is answered with a retryable error
//! naming its owner, rather than "not found": the state it names lives in
//! that replica's memory, and the client (or its load balancer) can send the
//! request there.
//!
//! Form: `<inner>.<replica, hex>.<first 16 bytes of the MAC, hex>`: visible
//! ASCII only, as an HTTP header needs.

use sha2::{Digest, Sha256};

/// The HTTP header naming the replica that holds a misdirected session.
pub const REPLICA_HEADER: &str = "wf-replica";

/// The JSON-RPC error code of a handle held by another replica.
pub const WRONG_REPLICA: i32 = -32050;

/// What a handle says about where it belongs.
#[derive(Debug, PartialEq, Eq)]
pub enum Owner<'a> {
    /// Issued here (or unsealed, with one replica): the inner id.
    Here(&'a str),
    /// Sealed by another replica, which holds it.
    Elsewhere(String),
    /// Not a handle any replica issued (altered, or a guess).
    Forged,
}

/// This replica's sealing: its id and the shared key.
pub struct Seal {
    replica: String,
    key: Vec<u8>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

/// HMAC-SHA256 (RFC 2104).
fn hmac(key: &[u8], msg: &[u8]) -> [u8; 32] {
    let mut k = [0u8; 64];
    if key.len() > 64 {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |b: u8| k.iter().map(|x| x ^ b).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(msg)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

impl Seal {
    pub fn new(replica: &str, key: &str) -> Self {
        Self {
            replica: replica.to_string(),
            key: key.as_bytes().to_vec(),
        }
    }

    /// The seal of `app`'s replica, when it shares a PostgreSQL store (the
    /// config check makes `handle_secret` required there).
    pub fn for_app(app: &crate::app::App) -> Option<Self> {
        if app.store.backend() != "postgres" {
            return None;
        }
        let secret = app.config.config.store.handle_secret()?;
        Some(Self::new(app.store.replica(), &secret))
    }

    fn mac(&self, body: &str) -> String {
        hex(&hmac(&self.key, body.as_bytes())[..16])
    }

    /// `inner` sealed as this replica's.
    pub fn issue(&self, inner: &str) -> String {
        let body = format!("{inner}.{}", hex(self.replica.as_bytes()));
        let mac = self.mac(&body);
        format!("{body}.{mac}")
    }

    /// Where `handle` belongs.
    pub fn owner<'a>(&self, handle: &'a str) -> Owner<'a> {
        let mut parts = handle.rsplitn(3, '.');
        let (Some(mac), Some(replica), Some(inner)) = (parts.next(), parts.next(), parts.next())
        else {
            return Owner::Forged;
        };
        let body = &handle[..handle.len() - mac.len() - 1];
        let expected = self.mac(body);
        if !crate::secrets::constant_time_eq(expected.as_bytes(), mac.as_bytes()) {
            return Owner::Forged;
        }
        let Some(replica) = unhex(replica).and_then(|r| String::from_utf8(r).ok()) else {
            return Owner::Forged;
        };
        if replica == self.replica {
            Owner::Here(inner)
        } else {
            Owner::Elsewhere(replica)
        }
    }
}

/// The retryable error of a `what` (`task`, `session`) held by `owner`. The
/// handle is not echoed: some (session ids, session handles) are credentials.
pub fn wrong_replica(what: &str, owner: &str) -> rmcp::ErrorData {
    rmcp::ErrorData::new(
        rmcp::model::ErrorCode(WRONG_REPLICA),
        format!(
            "this {what} is held by replica {owner:?}, not this one: send the request to replica {owner:?} (retryable there; route by the handle's replica, or keep the client on one replica)"
        ),
        Some(serde_json::json!({"replica": owner, "retryable": true})),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_case_2() {
        let mac = hmac(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn a_handle_names_its_replica_and_cannot_be_forged_or_moved() {
        let a = Seal::new("wf-a:1", "shared");
        let b = Seal::new("wf-b", "shared");
        let h = a.issue("wft-123");
        assert_eq!(a.owner(&h), Owner::Here("wft-123"));
        assert_eq!(b.owner(&h), Owner::Elsewhere("wf-a:1".into()));
        // Moved: the same inner id claimed for B without B's key… is forged.
        let moved = h.replace(&hex(b"wf-a:1"), &hex(b"wf-b"));
        assert_eq!(b.owner(&moved), Owner::Forged);
        assert_eq!(Seal::new("wf-b", "other").owner(&h), Owner::Forged);
        assert_eq!(a.owner("wft-123"), Owner::Forged);
        assert_eq!(a.owner("x.y.z"), Owner::Forged);
    }
}
