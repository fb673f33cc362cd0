//! The glue `export_plugin!` expands to: the plugin's own tokio runtime, the
//! adapters from the author traits to the ABI objects, and panic catching at
//! every entry point (a panic must never unwind into the host).

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RErr, ROk, RResult, RString};
use async_ffi::{FfiFuture, FutureExt as _};
use futures::FutureExt as _;
use futures::channel::oneshot;
use tokio_util::sync::CancellationToken;

use crate::author::{CallContext, Host, Plugin, Source};
use crate::error::{ErrorCode, PluginError};
use crate::ffi::*;
use crate::types::{PluginInit, SourceRequest, SourceSpec};

/// The name of the symbol abi_stable looks up (checked against abi_stable's
/// own constant in a test).
pub const ROOT_MODULE_SYMBOL: &str = "_1as_0lib_1header_0root_bmodule_bloader";

/// Exports `$plugin` (a type implementing [`crate::Plugin`]) as a wf plugin library.
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty) => {
        #[doc(hidden)]
        #[unsafe(export_name = "_1as_0lib_1header_0root_bmodule_bloader")]
        pub static __WF_PLUGIN_LIB_HEADER: $crate::__private::abi_stable::library::LibHeader = {
            extern "C" fn __wf_plugin_root_module()
            -> $crate::__private::abi_stable::library::RootModuleResult {
                $crate::__private::abi_stable::library::__call_root_module_loader(
                    $crate::export::module::<$plugin>,
                )
            }
            unsafe {
                $crate::__private::abi_stable::library::LibHeader::from_constructor::<
                    $crate::ffi::WfPluginModRef,
                >(
                    __wf_plugin_root_module,
                    $crate::__private::abi_stable::library::CheckTypeLayout::Yes,
                )
            }
        };
    };
}

/// This dylib's runtime. Each plugin library links its own copy of tokio, so
/// the host's runtime is invisible here; every plugin future runs on this one.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("wf-plugin")
            .enable_all()
            .build()
            .expect("plugin runtime")
    })
}

/// The root module of plugin `P`.
pub fn module<P: Plugin>() -> WfPluginModRef {
    WfPluginMod {
        manifest: manifest::<P>,
        instantiate: instantiate::<P>,
    }
    .leak_into_prefix()
}

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

fn panicked(payload: Box<dyn Any + Send>) -> PluginError {
    PluginError::new(
        ErrorCode::Panicked,
        format!("plugin panicked: {}", panic_message(&*payload)),
    )
}

fn err_json(e: PluginError) -> RString {
    RString::from(e.to_json())
}

extern "C" fn manifest<P: Plugin>() -> RString {
    match catch_unwind(|| serde_json::to_string(&P::manifest())) {
        Ok(Ok(json)) => RString::from(json),
        // The host refuses a plugin whose manifest is not JSON.
        _ => RString::from("manifest panicked or failed to serialize"),
    }
}

extern "C" fn instantiate<P: Plugin>(
    host: HostContextBox,
    init_json: RString,
) -> RResult<PluginBox, RString> {
    let result = catch_unwind(AssertUnwindSafe(move || {
        let init: PluginInit = serde_json::from_str(init_json.as_str()).unwrap_or_default();
        crate::logging::install(host.clone(), &init.log_level);
        let host = Host {
            inner: host,
            init: Arc::new(init),
        };
        P::new(host).map(|plugin| PluginFfi_TO::from_value(PluginAdapter { plugin }, TD_Opaque))
    }));
    match result {
        Ok(Ok(plugin)) => ROk(plugin),
        Ok(Err(e)) => RErr(err_json(e)),
        Err(payload) => RErr(err_json(panicked(payload))),
    }
}

struct PluginAdapter<P> {
    plugin: P,
}

impl<P: Plugin> PluginFfi for PluginAdapter<P> {
    fn create_source(&self, spec_json: RString) -> RResult<SourceBox, RString> {
        let result = catch_unwind(AssertUnwindSafe(|| {
            let spec: SourceSpec = serde_json::from_str(spec_json.as_str())
                .map_err(|e| PluginError::invalid_config(format!("bad source spec: {e}")))?;
            // Sources may spawn tasks while being created.
            let _enter = runtime().enter();
            self.plugin.create_source(spec)
        }));
        match result {
            Ok(Ok(source)) => ROk(SourceFfi_TO::from_value(
                SourceAdapter {
                    source: Arc::new(source),
                },
                TD_Opaque,
            )),
            Ok(Err(e)) => RErr(err_json(e)),
            Err(payload) => RErr(err_json(panicked(payload))),
        }
    }
}

struct SourceAdapter<S> {
    source: Arc<S>,
}

/// Runs `work` on the plugin runtime and hands the host a future that only
/// waits for its result. Dropping that future cancels `work`.
fn spawn_call<F>(cancel: CancellationToken, work: F) -> FfiFuture<RResult<RString, RString>>
where
    F: Future<Output = Result<String, PluginError>> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let token = cancel.clone();
    runtime().spawn(async move {
        let out = tokio::select! {
            r = AssertUnwindSafe(work).catch_unwind() => r.unwrap_or_else(|p| Err(panicked(p))),
            _ = token.cancelled() => Err(PluginError::cancelled()),
        };
        let _ = tx.send(out);
    });
    let guard = cancel.drop_guard();
    async move {
        let _guard = guard;
        match rx.await {
            Ok(Ok(v)) => ROk(RString::from(v)),
            Ok(Err(e)) => RErr(err_json(e)),
            Err(_) => RErr(err_json(PluginError::internal(
                "plugin task ended without a result",
            ))),
        }
    }
    .into_ffi()
}

impl<S: Source> SourceFfi for SourceAdapter<S> {
    fn request(
        &self,
        request: RString,
        ctx: CallContextBox,
    ) -> FfiFuture<RResult<RString, RString>> {
        let source = self.source.clone();
        let cancel = CancellationToken::new();
        let call = CallContext {
            inner: Arc::new(ctx),
            cancel: cancel.clone(),
        };
        let started = catch_unwind(AssertUnwindSafe(|| {
            spawn_call(cancel, async move {
                dispatch(&*source, request.as_str(), call).await
            })
        }));
        started.unwrap_or_else(|p| {
            let e = err_json(panicked(p));
            async move { RErr(e) }.into_ffi()
        })
    }

    fn shutdown(&self) -> FfiFuture<()> {
        let source = self.source.clone();
        let (tx, rx) = oneshot::channel::<()>();
        let spawned = catch_unwind(AssertUnwindSafe(|| {
            runtime().spawn(async move {
                let _ = AssertUnwindSafe(source.shutdown()).catch_unwind().await;
                let _ = tx.send(());
            });
        }));
        let _ = spawned;
        async move {
            let _ = rx.await;
        }
        .into_ffi()
    }
}

async fn dispatch<S: Source>(
    source: &S,
    request: &str,
    ctx: CallContext,
) -> Result<String, PluginError> {
    let request: SourceRequest = serde_json::from_str(request).map_err(|e| {
        // An operation this plugin predates is `unsupported`; a known one
        // with bad fields is the caller's mistake.
        if e.to_string().contains("unknown variant") {
            PluginError::unsupported(format!("unsupported operation: {e}"))
        } else {
            PluginError::invalid_arguments(format!("malformed request: {e}"))
        }
    })?;
    let json = match request {
        SourceRequest::Catalog => serde_json::to_string(&source.catalog().await?),
        SourceRequest::CallTool { name, arguments } => {
            serde_json::to_string(&source.call_tool(&name, arguments, ctx).await?)
        }
        SourceRequest::RunNode { name, input } => {
            serde_json::to_string(&source.run_node(&name, input, ctx).await?)
        }
        SourceRequest::ListResources => serde_json::to_string(&source.list_resources().await?),
        SourceRequest::ListResourceTemplates => {
            serde_json::to_string(&source.list_resource_templates().await?)
        }
        SourceRequest::ReadResource { uri } => {
            serde_json::to_string(&source.read_resource(&uri, ctx).await?)
        }
        SourceRequest::ListPrompts => serde_json::to_string(&source.list_prompts().await?),
        SourceRequest::GetPrompt { name, arguments } => {
            serde_json::to_string(&source.get_prompt(&name, arguments, ctx).await?)
        }
        SourceRequest::Status => serde_json::to_string(&source.status().await),
        SourceRequest::OpenSession { lease } => {
            serde_json::to_string(&source.open_session(lease.as_deref()).await?)
        }
        SourceRequest::OpenLease => serde_json::to_string(&source.open_lease().await?),
        SourceRequest::CloseLease { lease } => {
            serde_json::to_string(&source.close_lease(&lease).await?)
        }
    };
    json.map_err(|e| PluginError::internal(format!("result is not serializable: {e}")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn root_module_symbol_matches_abi_stable() {
        assert_eq!(
            super::ROOT_MODULE_SYMBOL,
            abi_stable::library::ROOT_MODULE_LOADER_NAME
        );
    }
}
