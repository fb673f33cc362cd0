//! A source's requests for input answered (the plugin's `AskCaller` event):
//! asked of the call's [`Asker`](super::Asker) found in `asks`, and the
//! answer sent back to the source as `SourceRequest::CallerAnswer`.

use abi_stable::std_types::RString;
use wf_plugin_api::{CallerRequest, PluginError, SourceRequest};

use super::asks;
use super::call::CallCtx;

/// Handles a plugin's `AskCaller` event: asks the call's asker (or refuses)
/// and sends the answer back to the source. A call that already ended is
/// ignored: its plugin-side future was dropped with it.
pub(crate) fn answer(call: u64, ask: u64, request: CallerRequest) {
    let Some(asks::Entry {
        asker,
        nobody,
        source,
        runtime,
    }) = asks::entry(call)
    else {
        tracing::debug!(call, ask, "a source asked about a call that already ended");
        return;
    };
    let Some(runtime) = runtime else { return };
    runtime.spawn(async move {
        let answer = match asker {
            Some(asker) => asker.ask(request).await,
            None => Err(PluginError::unsupported(format!(
                "cannot {} the caller: {nobody}",
                request.kind()
            ))),
        };
        let (ok, error) = match answer {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(e)),
        };
        let Some(source) = source.upgrade() else {
            return;
        };
        let reply = SourceRequest::CallerAnswer { ask, ok, error };
        let Ok(text) = serde_json::to_string(&reply) else {
            return;
        };
        let (ffi, _guard) = CallCtx::new().into_ffi(None, None);
        if let Err(e) = source.request(RString::from(text), ffi).await.into_result() {
            tracing::warn!(
                call,
                ask,
                "the source did not take the caller's answer: {e}"
            );
        }
    });
}
