//! The status every controller writes, computed from plain data: `Reconciled` (the desired
//! objects were applied, or why not) and `Ready` (the component's Deployment has its replicas
//! available), both stamped with the generation they were computed from.
//!
//! Pure: the clock comes in as an argument. A condition's `lastTransitionTime` only moves when
//! its status changes, as `metav1.Condition` requires.

use k8s_openapi::{
    api::apps::v1::Deployment,
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
};
use nsight_api::{common::CONDITION_READY, NsightStatus};

/// The condition saying whether the last reconcile applied everything.
pub const CONDITION_RECONCILED: &str = "Reconciled";

/// A condition without its timestamps and generation (filled in by [`merge`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cond {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
    pub message: String,
}

/// `previous` conditions updated with `new` ones: a condition whose status did not change keeps
/// its `lastTransitionTime`; conditions of other types are kept as they were.
pub fn merge(
    previous: &[Condition],
    new: &[Cond],
    generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = previous
        .iter()
        .filter(|c| !new.iter().any(|n| n.type_ == c.type_))
        .cloned()
        .collect();
    for n in new {
        let status = if n.status { "True" } else { "False" };
        let since = previous
            .iter()
            .find(|c| c.type_ == n.type_ && c.status == status)
            .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
        out.push(Condition {
            type_: n.type_.into(),
            status: status.into(),
            reason: n.reason.into(),
            message: n.message.clone(),
            observed_generation: generation,
            last_transition_time: since,
        });
    }
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}

/// The `Ready` condition from the component's Deployment as the server reports it.
pub fn ready(deployment: Option<&Deployment>) -> Cond {
    let want = deployment
        .and_then(|d| d.spec.as_ref())
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let available = deployment
        .and_then(|d| d.status.as_ref())
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    Cond {
        type_: CONDITION_READY,
        status: deployment.is_some() && available >= want,
        reason: match deployment {
            None => "DeploymentMissing",
            Some(_) if available >= want => "DeploymentAvailable",
            Some(_) => "DeploymentUnavailable",
        },
        message: format!("{available}/{want} replicas available"),
    }
}

/// The status after a successful apply of `objects` objects.
pub fn applied(
    previous: Option<&NsightStatus>,
    objects: usize,
    deployment: Option<&Deployment>,
    generation: Option<i64>,
    now: &Time,
) -> NsightStatus {
    let reconciled = Cond {
        type_: CONDITION_RECONCILED,
        status: true,
        reason: "Applied",
        message: format!("{objects} objects applied"),
    };
    NsightStatus {
        conditions: merge(
            previous.map_or(&[][..], |s| &s.conditions),
            &[reconciled, ready(deployment)],
            generation,
            now,
        ),
        observed_generation: generation,
    }
}

/// The status after a failed reconcile: `Reconciled=False` with the error; `Ready` unchanged.
pub fn failed(
    previous: Option<&NsightStatus>,
    reason: &'static str,
    message: String,
    generation: Option<i64>,
    now: &Time,
) -> NsightStatus {
    let reconciled = Cond {
        type_: CONDITION_RECONCILED,
        status: false,
        reason,
        message,
    };
    NsightStatus {
        conditions: merge(
            previous.map_or(&[][..], |s| &s.conditions),
            &[reconciled],
            generation,
            now,
        ),
        observed_generation: generation,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use k8s_openapi::{
        api::apps::v1::{DeploymentSpec, DeploymentStatus},
        jiff::Timestamp,
    };

    use super::*;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn deployment(available: i32) -> Deployment {
        Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(1),
                ..DeploymentSpec::default()
            }),
            status: Some(DeploymentStatus {
                available_replicas: Some(available),
                ..DeploymentStatus::default()
            }),
            ..Deployment::default()
        }
    }

    #[test]
    fn transition_time_moves_only_when_the_status_changes() {
        let first = applied(None, 3, Some(&deployment(0)), Some(1), &at(100));
        let ready = |s: &NsightStatus| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "Ready")
                .cloned()
                .unwrap()
        };
        assert_eq!(ready(&first).status, "False");
        assert_eq!(first.observed_generation, Some(1));

        let same = applied(Some(&first), 3, Some(&deployment(0)), Some(2), &at(200));
        assert_eq!(ready(&same).last_transition_time, at(100));
        assert_eq!(ready(&same).observed_generation, Some(2));

        let up = applied(Some(&same), 3, Some(&deployment(1)), Some(2), &at(300));
        assert_eq!(ready(&up).status, "True");
        assert_eq!(ready(&up).reason, "DeploymentAvailable");
        assert_eq!(ready(&up).last_transition_time, at(300));
    }

    #[test]
    fn a_failure_keeps_ready_and_flips_reconciled() {
        let ok = applied(None, 3, Some(&deployment(1)), Some(1), &at(100));
        let bad = failed(Some(&ok), "ApplyFailed", "boom".into(), Some(2), &at(200));
        let types: Vec<_> = bad
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(types, [("Ready", "True"), ("Reconciled", "False")]);
        assert_eq!(bad.observed_generation, Some(2));
    }

    #[test]
    fn no_deployment_is_not_ready() {
        let c = ready(None);
        assert!(!c.status);
        assert_eq!(c.reason, "DeploymentMissing");
    }
}
