//! How a planner or admin tool call fails: one shape for both surfaces,
//! `{"error": …, "hint": …}` (plus `"detail"`: the problems of an invalid
//! workflow), returned as a tool result with `isError` set.

use serde_json::{Value, json};
use wf_plugin_api::CallResult;

use crate::workflow::Problem;

#[derive(Debug)]
pub enum Failure {
    /// The call could not be served; `hint` says what to do instead.
    Refused { error: String, hint: &'static str },
    /// The workflow the call names has problems (they go out as `detail`).
    Invalid {
        error: &'static str,
        hint: &'static str,
        problems: Vec<Problem>,
    },
}

impl Failure {
    pub fn refused(error: impl Into<String>, hint: &'static str) -> Self {
        Self::Refused {
            error: error.into(),
            hint,
        }
    }

    /// The failure's JSON shape.
    pub fn to_value(&self) -> Value {
        match self {
            Self::Refused { error, hint } => json!({"error": error, "hint": hint}),
            Self::Invalid {
                error,
                hint,
                problems,
            } => json!({"error": error, "hint": hint, "detail": problems}),
        }
    }

    pub fn into_result(self) -> CallResult {
        CallResult {
            is_error: true,
            ..CallResult::structured(self.to_value())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::ProblemKind;

    #[test]
    fn a_failure_is_an_error_result_with_error_hint_and_problems() {
        let r = Failure::refused("no run \"x\"", "see list_runs").into_result();
        assert!(r.is_error);
        assert_eq!(
            r.structured_content,
            Some(json!({"error": "no run \"x\"", "hint": "see list_runs"}))
        );
        let p = Problem::new(None, "outputs.a".into(), ProblemKind::Cycle, "m".into());
        let v = Failure::Invalid {
            error: "bad",
            hint: "fix",
            problems: vec![p],
        }
        .to_value();
        assert_eq!(v["detail"][0]["kind"], "cycle");
        assert_eq!(v["error"], "bad");
    }
}
