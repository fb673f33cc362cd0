//! What wf tells an operator about itself beyond its logs: Prometheus
//! metrics (`/metrics` on `wf serve --http`, served by the server layer).
//! The bottom layer: every other module records with one-line calls.

pub mod metrics;
