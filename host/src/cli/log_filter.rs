//! Keeps message payloads out of the logs. rmcp logs whole MCP messages
//! (tool arguments and results: anything an upstream returns) at debug and
//! trace, so its targets are held at info unless the operator asks for
//! payload logging (`--log-payloads`).

use std::str::FromStr;

use tracing::level_filters::LevelFilter;

/// Targets whose debug/trace events carry message payloads.
pub const PAYLOAD_TARGETS: &[&str] = &["rmcp"];

fn is_payload_target(target: &str) -> bool {
    let target = target.split('[').next().unwrap_or(target);
    PAYLOAD_TARGETS
        .iter()
        .any(|t| target == *t || target.strip_prefix(t).is_some_and(|r| r.starts_with("::")))
}

/// `filter` with every payload target held at info or quieter. Returns the
/// new filter and the directives it lowered.
pub fn without_payloads(filter: &str) -> (String, Vec<String>) {
    let mut out = Vec::new();
    let mut lowered = Vec::new();
    let mut default = LevelFilter::ERROR;
    let mut targeted: Vec<&str> = Vec::new();
    for d in filter.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        match d.rsplit_once('=') {
            Some((target, level)) if is_payload_target(target) => {
                targeted.push(target.split('[').next().unwrap_or(target));
                match LevelFilter::from_str(level) {
                    Ok(l) if l > LevelFilter::INFO => {
                        out.push(format!("{target}=info"));
                        lowered.push(d.to_string());
                    }
                    _ => out.push(d.to_string()),
                }
            }
            None => {
                match LevelFilter::from_str(d) {
                    Ok(l) => default = l,
                    // `rmcp` alone means "rmcp at trace".
                    Err(_) if is_payload_target(d) => {
                        out.push(format!("{d}=info"));
                        lowered.push(d.to_string());
                        targeted.push(d);
                        continue;
                    }
                    Err(_) => {}
                }
                out.push(d.to_string());
            }
            Some(_) => out.push(d.to_string()),
        }
    }
    if default > LevelFilter::INFO {
        for t in PAYLOAD_TARGETS {
            if !targeted.contains(t) {
                out.push(format!("{t}=info"));
            }
        }
    }
    (out.join(","), lowered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_targets_stay_at_info() {
        assert_eq!(without_payloads("info,rmcp=warn").0, "info,rmcp=warn");
        assert_eq!(without_payloads("warn").0, "warn");
        assert_eq!(without_payloads("debug").0, "debug,rmcp=info");
        assert_eq!(
            without_payloads("trace,wf_host=debug").0,
            "trace,wf_host=debug,rmcp=info"
        );
        let (f, lowered) = without_payloads("debug,rmcp=trace,rmcp::service=debug,rmcpx=debug");
        assert_eq!(f, "debug,rmcp=info,rmcp::service=info,rmcpx=debug");
        assert_eq!(lowered, vec!["rmcp=trace", "rmcp::service=debug"]);
        assert_eq!(without_payloads("info,rmcp").0, "info,rmcp=info");
        assert_eq!(without_payloads("rmcp=error,debug").0, "rmcp=error,debug");
    }
}
