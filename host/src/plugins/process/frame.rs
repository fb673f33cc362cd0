//! The frame codec between wf and a plugin's child: a 4-byte big-endian
//! length, then that many bytes of JSON. A frame longer than [`MAX_FRAME`]
//! or JSON that is not a message is a protocol error: the peer is dropped,
//! never trusted further.

use std::io::{self, Read, Write};

use serde::{Serialize, de::DeserializeOwned};

/// The largest frame either side sends or accepts (a tool result with
/// images can be large; anything beyond is refused).
pub const MAX_FRAME: usize = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("the peer closed the connection")]
    Closed,
    #[error("frame of {0} bytes is larger than the limit ({MAX_FRAME} bytes)")]
    TooLarge(usize),
    #[error("malformed frame: {0}")]
    Malformed(#[from] serde_json::Error),
    #[error("malformed frame: {0}")]
    Binary(&'static str),
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
}

/// Encodes `msg` as one frame (length prefix included).
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, FrameError> {
    let mut buf = vec![0u8; 4];
    serde_json::to_writer(&mut buf, msg)?;
    let len = buf.len() - 4;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    buf[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(buf)
}

/// Writes one frame.
pub fn write<T: Serialize>(w: &mut impl Write, msg: &T) -> Result<(), FrameError> {
    w.write_all(&encode(msg)?)?;
    Ok(())
}

/// Reads one frame's bytes; `Closed` on a clean end between frames.
pub fn read_bytes(r: &mut impl Read) -> Result<Vec<u8>, FrameError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(FrameError::Closed),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf)?;
    Ok(buf)
}

/// Reads and decodes one frame.
pub fn read<T: DeserializeOwned>(r: &mut impl Read) -> Result<T, FrameError> {
    let bytes = read_bytes(r)?;
    Ok(serde_json::from_slice(&bytes)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::process::protocol::{ToChild, ToHost};

    #[test]
    fn round_trips() {
        let msg = ToChild::Cancel { id: 7 };
        let bytes = encode(&msg).unwrap();
        let back: ToChild = read(&mut &bytes[..]).unwrap();
        assert!(matches!(back, ToChild::Cancel { id: 7 }));
        // Two frames back to back, then a clean end.
        let mut two = encode(&ToHost::Done { id: 1 }).unwrap();
        two.extend(encode(&ToHost::Done { id: 2 }).unwrap());
        let mut r = &two[..];
        assert!(matches!(
            read::<ToHost>(&mut r).unwrap(),
            ToHost::Done { id: 1 }
        ));
        assert!(matches!(
            read::<ToHost>(&mut r).unwrap(),
            ToHost::Done { id: 2 }
        ));
        assert!(matches!(read::<ToHost>(&mut r), Err(FrameError::Closed)));
    }

    #[test]
    fn refuses_an_oversized_length_before_reading_it() {
        let mut bytes = ((MAX_FRAME + 1) as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(b"{}");
        assert!(matches!(
            read::<ToHost>(&mut &bytes[..]),
            Err(FrameError::TooLarge(n)) if n == MAX_FRAME + 1
        ));
        assert!(matches!(
            read_bytes(&mut &u32::MAX.to_be_bytes()[..]),
            Err(FrameError::TooLarge(_))
        ));
    }

    #[test]
    fn refuses_malformed_and_truncated_frames() {
        let mut bad = 5u32.to_be_bytes().to_vec();
        bad.extend_from_slice(b"{nope");
        assert!(matches!(
            read::<ToHost>(&mut &bad[..]),
            Err(FrameError::Malformed(_))
        ));
        // Valid JSON that is no message.
        let mut other = 2u32.to_be_bytes().to_vec();
        other.extend_from_slice(b"[]");
        assert!(matches!(
            read::<ToHost>(&mut &other[..]),
            Err(FrameError::Malformed(_))
        ));
        // A length promising more than arrives.
        let mut short = 10u32.to_be_bytes().to_vec();
        short.extend_from_slice(b"{}");
        assert!(matches!(
            read::<ToHost>(&mut &short[..]),
            Err(FrameError::Io(_))
        ));
        // A length cut short is a close, not garbage.
        assert!(matches!(
            read::<ToHost>(&mut &[0u8, 0][..]),
            Err(FrameError::Closed)
        ));
    }
}
