//! The host side of a call's context: progress goes back to whoever made the
//! call (e.g. an MCP client that sent a progress token).

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RString};
use serde_json::Value;
use tokio::sync::mpsc;
use wf_plugin_api::ffi::{CallContextBox, CallContextFfi, CallContextFfi_TO};

/// One progress report from a plugin.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Call context builder.
#[derive(Default)]
pub struct CallCtx {
    progress: Option<mpsc::UnboundedSender<Progress>>,
    info: Value,
}

impl CallCtx {
    pub fn new() -> Self {
        Self::default()
    }
    /// Progress reports of the call arrive on the returned receiver.
    pub fn with_progress(mut self) -> (Self, mpsc::UnboundedReceiver<Progress>) {
        let (tx, rx) = mpsc::unbounded_channel();
        self.progress = Some(tx);
        (self, rx)
    }
    pub fn with_info(mut self, info: Value) -> Self {
        self.info = info;
        self
    }
    pub(crate) fn into_ffi(self) -> CallContextBox {
        CallContextFfi_TO::from_value(
            FfiCall {
                progress: self.progress,
                info: self.info.to_string(),
            },
            TD_Opaque,
        )
    }
}

struct FfiCall {
    progress: Option<mpsc::UnboundedSender<Progress>>,
    info: String,
}

impl CallContextFfi for FfiCall {
    fn progress(&self, progress: f64, total: ROption<f64>, message: ROption<RString>) {
        if let Some(tx) = &self.progress {
            let _ = tx.send(Progress {
                progress,
                total: total.into_option(),
                message: message.into_option().map(Into::into),
            });
        }
    }
    fn info(&self) -> RString {
        RString::from(self.info.as_str())
    }
}
