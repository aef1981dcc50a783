//! The status every controller writes, computed from plain data: `Reconciled` (the desired
//! objects were applied, or why not) and `Ready` (the component's Deployment has its replicas
//! available), both stamped with the generation they were computed from.
//!
//! Pure: the clock comes in as an argument. A condition's `lastTransitionTime` only moves when
//! its status changes, as `metav1.Condition` requires.

use k8s_openapi::{
    api::apps::v1::{DaemonSet, Deployment, StatefulSet},
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

/// The `Ready` condition from a StatefulSet as the server reports it.
pub fn ready_stateful_set(set: Option<&StatefulSet>) -> Cond {
    let want = set
        .and_then(|d| d.spec.as_ref())
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let ready = set
        .and_then(|d| d.status.as_ref())
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    Cond {
        type_: CONDITION_READY,
        status: set.is_some() && ready >= want,
        reason: match set {
            None => "StatefulSetMissing",
            Some(_) if ready >= want => "StatefulSetReady",
            Some(_) => "StatefulSetUnavailable",
        },
        message: format!("{ready}/{want} replicas ready"),
    }
}

/// The `Ready` condition from a DaemonSet: its Pods are ready on every node it was scheduled
/// to (a DaemonSet the controller has not counted yet is not ready).
pub fn ready_daemon_set(set: Option<&DaemonSet>) -> Cond {
    let status = set.and_then(|d| d.status.as_ref());
    let observed = status.and_then(|s| s.observed_generation).is_some();
    let want = status.map_or(0, |s| s.desired_number_scheduled);
    let ready = status.map_or(0, |s| s.number_ready);
    let ok = observed && ready >= want;
    Cond {
        type_: CONDITION_READY,
        status: ok,
        reason: match set {
            None => "DaemonSetMissing",
            Some(_) if ok => "DaemonSetReady",
            Some(_) => "DaemonSetUnavailable",
        },
        message: format!("{ready}/{want} nodes ready"),
    }
}

/// A condition set from outside the workloads (a checked Secret, a referenced resource).
pub fn cond(type_: &'static str, status: bool, reason: &'static str, message: String) -> Cond {
    Cond {
        type_,
        status,
        reason,
        message,
    }
}

/// The status after a successful apply of `objects` objects, with `Ready` (and any other
/// conditions) computed by the caller.
pub fn applied_with(
    previous: Option<&NsightStatus>,
    objects: usize,
    extra: &[Cond],
    generation: Option<i64>,
    now: &Time,
) -> NsightStatus {
    let mut new = vec![Cond {
        type_: CONDITION_RECONCILED,
        status: true,
        reason: "Applied",
        message: format!("{objects} objects applied"),
    }];
    new.extend(extra.iter().cloned());
    NsightStatus {
        conditions: merge(
            previous.map_or(&[][..], |s| &s.conditions),
            &new,
            generation,
            now,
        ),
        observed_generation: generation,
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

    #[test]
    fn stateful_set_and_daemon_set_readiness() {
        use k8s_openapi::api::apps::v1::{DaemonSetStatus, StatefulSetSpec, StatefulSetStatus};
        let set = |ready| StatefulSet {
            spec: Some(StatefulSetSpec {
                replicas: Some(1),
                ..StatefulSetSpec::default()
            }),
            status: Some(StatefulSetStatus {
                ready_replicas: Some(ready),
                ..StatefulSetStatus::default()
            }),
            ..StatefulSet::default()
        };
        assert_eq!(ready_stateful_set(None).reason, "StatefulSetMissing");
        let c = ready_stateful_set(Some(&set(0)));
        assert_eq!((c.status, c.reason), (false, "StatefulSetUnavailable"));
        let c = ready_stateful_set(Some(&set(1)));
        assert_eq!((c.status, c.reason), (true, "StatefulSetReady"));

        let ds = |observed: Option<i64>, want, ready| DaemonSet {
            status: Some(DaemonSetStatus {
                observed_generation: observed,
                desired_number_scheduled: want,
                number_ready: ready,
                ..DaemonSetStatus::default()
            }),
            ..DaemonSet::default()
        };
        // Not yet counted by the DaemonSet controller: not ready, even with 0/0.
        let c = ready_daemon_set(Some(&ds(None, 0, 0)));
        assert_eq!((c.status, c.reason), (false, "DaemonSetUnavailable"));
        let c = ready_daemon_set(Some(&ds(Some(1), 3, 2)));
        assert_eq!((c.status, c.message.as_str()), (false, "2/3 nodes ready"));
        let c = ready_daemon_set(Some(&ds(Some(1), 3, 3)));
        assert_eq!((c.status, c.reason), (true, "DaemonSetReady"));
        assert_eq!(ready_daemon_set(None).reason, "DaemonSetMissing");
    }
}
