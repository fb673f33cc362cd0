//! The statuses of workflow runs and their nodes: one type each, shared by
//! the store (which records them), the engine (which sets them), and the
//! planner, admin and CLI (which show them). The wire and database strings
//! are the snake_case names below, the same strings wf always wrote.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where a run is. `Pending` is only ever read from old databases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Pending,
    Running,
    Succeeded,
    Failed,
    Cancelled,
    /// The host stopped (or lost its lease) while the run was going.
    Interrupted,
}

/// Where one node of a run is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
    /// Not run: a dependency failed or its `when` was false.
    Skipped,
    Cancelled,
    Interrupted,
}

/// A status string that names no status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown status {0:?} (expected one of {1})")]
pub struct UnknownStatus(pub String, pub &'static str);

macro_rules! status_strings {
    ($ty:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl $ty {
            /// Every status, in the order a run goes through them.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The status as stored and shown.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $text),+
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = UnknownStatus;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($ty::$variant),)+
                    other => Err(UnknownStatus(
                        other.to_string(),
                        concat!($($text, " "),+),
                    )),
                }
            }
        }

        impl PartialEq<&str> for $ty {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

status_strings!(RunStatus {
    Pending => "pending",
    Running => "running",
    Succeeded => "succeeded",
    Failed => "failed",
    Cancelled => "cancelled",
    Interrupted => "interrupted",
});

status_strings!(NodeStatus {
    Pending => "pending",
    Running => "running",
    Succeeded => "succeeded",
    Failed => "failed",
    Skipped => "skipped",
    Cancelled => "cancelled",
    Interrupted => "interrupted",
});

impl RunStatus {
    /// Whether the run has ended (and will not change again).
    pub fn is_final(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }

    /// Whether a run that ended so is the caller's failure.
    pub fn is_failure(self) -> bool {
        matches!(self, Self::Failed | Self::Cancelled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_display_and_parse_agree_with_the_stored_strings() {
        for s in RunStatus::ALL {
            let wire = serde_json::to_value(s).expect("serializes");
            assert_eq!(wire, s.as_str());
            assert_eq!(s.to_string(), s.as_str());
            assert_eq!(s.as_str().parse::<RunStatus>(), Ok(*s));
        }
        for s in NodeStatus::ALL {
            let wire = serde_json::to_value(s).expect("serializes");
            assert_eq!(wire, s.as_str());
            assert_eq!(s.as_str().parse::<NodeStatus>(), Ok(*s));
        }
        assert_eq!(RunStatus::Cancelled.as_str(), "cancelled");
        assert_eq!(NodeStatus::Skipped.as_str(), "skipped");
    }

    #[test]
    fn an_unknown_status_is_refused_with_the_choices() {
        let e = "done".parse::<RunStatus>().expect_err("not a status");
        assert!(e.to_string().contains("\"done\""), "{e}");
        assert!(e.to_string().contains("succeeded"), "{e}");
        assert!("skipped".parse::<RunStatus>().is_err());
    }
}
