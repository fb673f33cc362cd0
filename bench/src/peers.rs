//! Peer proxies measured beside wf (`--peers`): where their programs live.

use std::path::PathBuf;

/// `FastMCP.as_proxy` on stdio over one upstream session (bench/peers/fastmcp_proxy.py).
pub fn fastmcp_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("peers/fastmcp_proxy.py")
}
