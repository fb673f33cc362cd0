//! A plugin built against wf-plugin-api 1.1.0, using what 1.1 added:
//! sessions and leases. Its default source `compat11` keeps a counter per
//! session: the shared one, and one per lease (`open_lease`/`close_lease`,
//! a workflow with `sessions: {compat11: run}`). The node and tool `count`
//! bumps the counter of the session the call's scope names and returns
//! `{count, lease, epoch}`; `leases` tells how many leases are open.
//! `lost` fails with 1.1's STATE_LOST words, which today's host reads as
//! the typed `state_lost`.

use std::collections::HashMap;
use std::sync::Mutex;

use wf_plugin_api::prelude::*;

pub struct Compat;

#[derive(Default)]
pub struct CompatSource {
    shared: Mutex<u64>,
    leases: Mutex<HashMap<String, u64>>,
    next: Mutex<u64>,
}

impl Plugin for Compat {
    type Source = CompatSource;
    fn manifest() -> Manifest {
        Manifest::new("compat-v1-1", env!("CARGO_PKG_VERSION"))
            .kind("compat11")
            .description("Built against wf-plugin-api 1.1.0 (sessions and leases)")
            .default_source("compat11", "compat11")
    }
    fn new(_host: Host) -> Result<Self, PluginError> {
        Ok(Compat)
    }
    fn create_source(&self, _spec: SourceSpec) -> Result<CompatSource, PluginError> {
        Ok(CompatSource::default())
    }
}

const EPOCH: u64 = 1;

impl Source for CompatSource {
    async fn catalog(&self) -> Result<Catalog, PluginError> {
        let after = json!({"type": "object", "properties": {"after": {}}});
        let output = json!({"type": "object", "properties": {"count": {"type": "integer"}, "lease": {}, "epoch": {"type": "integer"}}, "required": ["count"]});
        Ok(Catalog::default()
            .node(NodeSpec::new("count", "Counts calls on the call's session", after, output))
            .node(NodeSpec::new("leases", "How many leases are open", json!({"type": "object"}), json!({})))
            .node(NodeSpec::new("lost", "Fails the way a 1.1 source reported a lost session", json!({"type": "object"}), json!({}))))
    }
    async fn call_tool(&self, name: &str, _args: Value, ctx: CallContext) -> Result<CallResult, PluginError> {
        match name {
            "count" => {
                let scope = ctx.scope();
                if scope.expect_epoch.is_some_and(|e| e != EPOCH) {
                    return Err(PluginError::upstream(wf_plugin_api::STATE_LOST));
                }
                let count = match &scope.lease {
                    Some(lease) => {
                        let mut leases = self.leases.lock().unwrap_or_else(|e| e.into_inner());
                        let Some(n) = leases.get_mut(lease) else {
                            return Err(PluginError::invalid_arguments(format!("no open lease {lease}")));
                        };
                        *n += 1;
                        *n
                    }
                    None => {
                        let mut n = self.shared.lock().unwrap_or_else(|e| e.into_inner());
                        *n += 1;
                        *n
                    }
                };
                Ok(CallResult::structured(json!({"count": count, "lease": scope.lease, "epoch": EPOCH})))
            }
            "leases" => {
                let open = self.leases.lock().unwrap_or_else(|e| e.into_inner()).len();
                Ok(CallResult::structured(json!({"open": open})))
            }
            "lost" => Err(PluginError::upstream(wf_plugin_api::STATE_LOST)),
            _ => Err(PluginError::not_found(format!("no tool {name}"))),
        }
    }
    async fn open_session(&self, lease: Option<&str>) -> Result<SessionInfo, PluginError> {
        Ok(SessionInfo { epoch: EPOCH, lease: lease.map(str::to_string) })
    }
    async fn open_lease(&self) -> Result<SessionInfo, PluginError> {
        let id = {
            let mut next = self.next.lock().unwrap_or_else(|e| e.into_inner());
            *next += 1;
            format!("lease-{next}")
        };
        self.leases.lock().unwrap_or_else(|e| e.into_inner()).insert(id.clone(), 0);
        Ok(SessionInfo { epoch: EPOCH, lease: Some(id) })
    }
    async fn close_lease(&self, lease: &str) -> Result<(), PluginError> {
        self.leases.lock().unwrap_or_else(|e| e.into_inner()).remove(lease);
        Ok(())
    }
}

wf_plugin_api::export_plugin!(Compat);
