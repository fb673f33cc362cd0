//! What wf tells an operator about itself beyond its logs: Prometheus
//! metrics (`/metrics` on `wf serve --http`, served by the server layer) and
//! OpenTelemetry traces over OTLP (and the same metrics over OTLP).
//! The bottom layer: every other module records with one-line calls.

pub mod metrics;
pub mod otlp_metrics;
pub mod traces;
