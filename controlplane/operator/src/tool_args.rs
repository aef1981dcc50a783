//! The admission of a profile config's tool arguments: every `nsightToolArgs` is checked
//! against the nsys option table ([`nsight_contracts::nsys_args`], the one the agent splits
//! them with) in its tool config's mode, so that an option nsys would refuse shows on the
//! NsightOperatorProfileConfig (`Ready=False InvalidToolArgs`, and a Warning Event when it
//! turns so), not as a failed `nsys launch` when a workload starts.
//!
//! ```text
//! NsightOperatorProfileConfig ──ready()──> Ready: True ToolArgsValid | False InvalidToolArgs
//!                             ──event_due(previous status, Ready)──> Warning Event (once per change)
//! ```
//!
//! Pure: no client, no clock. The webhook still injects with such a config: the built-in
//! `nvtx` backend ignores nsys arguments, and the agent runs the program unprofiled when nsys
//! refuses them.

use nsight_api::{common::CONDITION_READY, NsightOperatorProfileConfigSpec, NsightStatus};
use nsight_contracts::nsys_args::{self, ArgsError};

use crate::conditions::{self, Cond};

/// `Ready` reason when every tool config's arguments are accepted.
pub const REASON_VALID: &str = "ToolArgsValid";
/// `Ready` reason (and the Event's) when one is not.
pub const REASON_INVALID: &str = "InvalidToolArgs";

/// One tool config whose arguments nsys (or the agent) would refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub tool: String,
    pub error: ArgsError,
}

/// The tool configs of `spec` whose `nsightToolArgs` would be refused, in order.
pub fn refusals(spec: &NsightOperatorProfileConfigSpec) -> Vec<Refusal> {
    spec.nsight_tool_configs
        .iter()
        .filter_map(|tool| {
            let args = nsys_args::words(tool.nsight_tool_args.as_deref().unwrap_or_default());
            nsys_args::check(&args, tool.coordinator_mode())
                .err()
                .map(|error| Refusal {
                    tool: tool.name.clone(),
                    error,
                })
        })
        .collect()
}

/// The profile config's `Ready` condition.
pub fn ready(spec: &NsightOperatorProfileConfigSpec) -> Cond {
    let refused = refusals(spec);
    if refused.is_empty() {
        let n = spec.nsight_tool_configs.len();
        return conditions::cond(
            CONDITION_READY,
            true,
            REASON_VALID,
            format!("nsys accepts the nsightToolArgs of all {n} tool configs"),
        );
    }
    let each: Vec<String> = refused
        .iter()
        .map(|r| format!("tool config {}: {}", r.tool, r.error))
        .collect();
    conditions::cond(
        CONDITION_READY,
        false,
        REASON_INVALID,
        format!(
            "{}. With the nsys backend, Pods injected with it run their programs unprofiled.",
            each.join("; ")
        ),
    )
}

/// Whether `ready` deserves a Warning Event: it refuses, and the status does not already say
/// exactly that (so one Event per change, not one per resync).
pub fn event_due(previous: Option<&NsightStatus>, ready: &Cond) -> bool {
    if ready.status {
        return false;
    }
    let already = previous.into_iter().flat_map(|s| &s.conditions).any(|c| {
        c.type_ == CONDITION_READY
            && c.status == "False"
            && c.reason == ready.reason
            && c.message == ready.message
    });
    !already
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use nsight_api::NsightToolConfig;

    use super::*;

    fn spec(tools: &[(&str, &str, bool)]) -> NsightOperatorProfileConfigSpec {
        NsightOperatorProfileConfigSpec {
            nsight_tool_configs: tools
                .iter()
                .map(|(name, args, coordinator)| NsightToolConfig {
                    name: (*name).into(),
                    nsight_tool_args: (!args.is_empty()).then(|| (*args).into()),
                    coordinator: Some(*coordinator),
                    ..NsightToolConfig::default()
                })
                .collect(),
            injection_rules: vec![],
        }
    }

    #[test]
    fn arguments_nsys_accepts_in_either_mode_make_the_config_ready() {
        let s = spec(&[
            ("split", "-t cuda,nvtx --sample=none --cpuctxsw=none", true),
            ("launch", "-t nvtx --duration=3", false),
            ("none", "", true),
        ]);
        assert!(refusals(&s).is_empty());
        let c = ready(&s);
        assert_eq!((c.status, c.reason), (true, REASON_VALID));
        assert!(c.message.contains("all 3 tool configs"), "{}", c.message);
        assert!(!event_due(None, &c));
    }

    #[test]
    fn each_refused_tool_config_is_named_with_what_to_change() {
        let s = spec(&[
            ("ok", "-t cuda", true),
            ("typo", "--trace=cuda --cpuctxs=none", true),
            ("window", "-t nvtx --duration=30", true),
            ("owned", "--output=/tmp/r", false),
        ]);
        let r = refusals(&s);
        assert_eq!(
            r.iter().map(|r| r.tool.as_str()).collect::<Vec<_>>(),
            ["typo", "window", "owned"]
        );
        let c = ready(&s);
        assert_eq!((c.status, c.reason), (false, REASON_INVALID));
        assert!(
            c.message
                .contains("tool config typo: --cpuctxs is not an option")
                && c.message
                    .contains("tool config window: --duration is accepted only by nsys profile")
                && c.message
                    .contains("tool config owned: --output is set by the Nsight agent")
                && c.message.contains("unprofiled"),
            "{}",
            c.message
        );
    }

    #[test]
    fn the_event_is_due_once_per_change() {
        let bad = ready(&spec(&[("typo", "--cpuctxs=none", true)]));
        assert!(event_due(None, &bad));
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let recorded = conditions::applied_with(None, 0, std::slice::from_ref(&bad), Some(1), &now);
        assert!(!event_due(Some(&recorded), &bad), "already in the status");
        let other = ready(&spec(&[("typo", "--bogus=1", true)]));
        assert!(event_due(Some(&recorded), &other), "a different refusal");
    }
}
