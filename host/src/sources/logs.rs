//! Log messages sources send outside any call (an upstream's
//! `notifications/message` while nothing was in flight): broadcast to the MCP
//! front, which hands each to the clients whose log level lets it through.

use serde_json::Value;
use tokio::sync::broadcast;

/// One log message of a source.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceLog {
    pub source: String,
    /// MCP level name (debug … emergency).
    pub level: String,
    pub logger: Option<String>,
    pub data: Value,
}

/// The broadcast channel; a slow client misses old messages, never blocks a source.
pub struct SourceLogs(broadcast::Sender<SourceLog>);

impl Default for SourceLogs {
    fn default() -> Self {
        Self(broadcast::channel(256).0)
    }
}

impl SourceLogs {
    pub fn send(&self, log: SourceLog) {
        // No receiver (no client connected) is not an error.
        let _ = self.0.send(log);
    }
    pub fn subscribe(&self) -> broadcast::Receiver<SourceLog> {
        self.0.subscribe()
    }
}

impl SourceLog {
    /// Broadcasts a plugin's [`wf_plugin_api::Event::Log`]; other events are ignored.
    pub fn forward(event: wf_plugin_api::Event, to: &SourceLogs) {
        if let wf_plugin_api::Event::Log {
            source,
            level,
            logger,
            data,
        } = event
        {
            to.send(SourceLog {
                source,
                level,
                logger,
                data,
            });
        }
    }
}
