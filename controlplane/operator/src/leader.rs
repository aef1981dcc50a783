//! Leader election with a `coordination.k8s.io/v1` Lease, as client-go does it: the holder
//! renews `renewTime` every retry period; anyone may take a Lease whose `renewTime +
//! leaseDurationSeconds` has passed. Writes use the Lease's `resourceVersion`, so two
//! candidates racing for it cannot both win.
//!
//! ```text
//! follower ──(lease free or expired: take it)──> leader ──(renewal failed for a lease
//!    ^                                               duration, or another holder)──> stop work
//!    └── retry every `retry` ───────────────────────┘
//! ```
//!
//! [`step`] and [`next`] are pure (the clock is an argument); [`Elector`] is the client shell.
//! The manager runs its controllers only while [`Elector::lead`] says so.

use std::{future::Future, time::Duration};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{api::PostParams, Api, Client};

/// What a candidate does with the Lease it read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nobody holds it, or the holder let it expire: take it.
    Acquire,
    /// We hold it: renew.
    Renew,
    /// Someone else holds it and it has not expired.
    Follow { holder: String },
}

/// The decision for candidate `me` at `now`.
pub fn step(lease: Option<&LeaseSpec>, me: &str, now: Timestamp) -> Step {
    let Some(spec) = lease else {
        return Step::Acquire;
    };
    match spec.holder_identity.as_deref() {
        None | Some("") => Step::Acquire,
        Some(holder) if holder == me => Step::Renew,
        Some(holder) => {
            let duration = i64::from(spec.lease_duration_seconds.unwrap_or(0));
            let expired = spec.renew_time.as_ref().is_none_or(|renewed| {
                renewed.0.as_second().saturating_add(duration) < now.as_second()
            });
            if expired {
                Step::Acquire
            } else {
                Step::Follow {
                    holder: holder.into(),
                }
            }
        }
    }
}

/// The Lease spec to write after `step` (not for [`Step::Follow`]).
pub fn next(
    previous: Option<&LeaseSpec>,
    me: &str,
    now: Timestamp,
    duration: Duration,
) -> LeaseSpec {
    let secs = i32::try_from(duration.as_secs()).unwrap_or(i32::MAX).max(1);
    let held = previous.and_then(|p| p.holder_identity.as_deref()) == Some(me);
    let previous = previous.cloned().unwrap_or_default();
    LeaseSpec {
        holder_identity: Some(me.into()),
        lease_duration_seconds: Some(secs),
        renew_time: Some(MicroTime(now)),
        acquire_time: if held {
            previous.acquire_time
        } else {
            Some(MicroTime(now))
        },
        lease_transitions: Some(
            previous
                .lease_transitions
                .unwrap_or(0)
                .saturating_add(i32::from(!held && previous.holder_identity.is_some())),
        ),
        ..previous
    }
}

/// A candidate for one Lease.
#[derive(Clone)]
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    /// How long a Lease stays valid without renewal.
    pub duration: Duration,
    /// How often the holder renews and followers retry.
    pub retry: Duration,
}

impl std::fmt::Debug for Elector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("duration", &self.duration)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

/// Why [`Elector::lead`] stopped the work.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LeadError {
    #[error("lost the leader lease to {0}")]
    Lost(String),
    #[error("could not renew the leader lease for a whole lease duration")]
    Expired,
}

impl Elector {
    /// Defaults as controller-runtime's: 15 s lease, 2 s retry.
    pub fn new(client: Client, namespace: &str, name: &str, identity: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.into(),
            identity: identity.into(),
            duration: Duration::from_secs(15),
            retry: Duration::from_secs(2),
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// One attempt: reads the Lease and takes or renews it when [`step`] says so. `Ok(None)`
    /// means we hold it now; `Ok(Some(holder))` that someone else does (or won the race).
    pub async fn try_once(&self) -> Result<Option<String>, kube::Error> {
        let current = self.api.get_opt(&self.name).await?;
        let now = Timestamp::now();
        let spec = current.as_ref().and_then(|l| l.spec.as_ref());
        if let Step::Follow { holder } = step(spec, &self.identity, now) {
            return Ok(Some(holder));
        }
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                resource_version: current
                    .as_ref()
                    .and_then(|l| l.metadata.resource_version.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(next(spec, &self.identity, now, self.duration)),
        };
        let written = match current {
            None => self.api.create(&PostParams::default(), &lease).await,
            Some(_) => {
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match written {
            Ok(_) => Ok(None),
            // Someone else wrote first (create: exists; replace: stale resourceVersion).
            Err(kube::Error::Api(status)) if status.code == 409 => {
                Ok(Some("another candidate".into()))
            }
            Err(e) => Err(e),
        }
    }

    /// Waits until this candidate holds the Lease.
    pub async fn acquire(&self) {
        loop {
            match self.try_once().await {
                Ok(None) => {
                    tracing::info!(identity = %self.identity, lease = %self.name, "became the leader");
                    return;
                }
                Ok(Some(holder)) => tracing::debug!(%holder, "following"),
                Err(e) => tracing::warn!(error = %e, "cannot read or write the leader lease"),
            }
            tokio::time::sleep(self.retry).await;
        }
    }

    /// Keeps renewing; returns when the Lease is lost or could not be renewed in time.
    pub async fn keep(&self) -> LeadError {
        let mut last_renewed = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.retry).await;
            match self.try_once().await {
                Ok(None) => last_renewed = tokio::time::Instant::now(),
                Ok(Some(holder)) => return LeadError::Lost(holder),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot renew the leader lease");
                    // Stop before the Lease can expire under us (another leader may start).
                    if last_renewed.elapsed() + self.retry >= self.duration {
                        return LeadError::Expired;
                    }
                }
            }
        }
    }

    /// Runs `work` once this candidate leads, for as long as it leads. `on_change` is told
    /// when leadership starts and ends.
    pub async fn lead<F: Future<Output = ()>>(
        &self,
        work: F,
        on_change: impl Fn(bool),
    ) -> Result<(), LeadError> {
        self.acquire().await;
        on_change(true);
        let result = tokio::select! {
            () = work => Ok(()),
            lost = self.keep() => Err(lost),
        };
        on_change(false);
        result
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn held_by(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(t(renewed))),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_missing_or_empty_lease_is_taken() {
        assert_eq!(step(None, "a", t(100)), Step::Acquire);
        assert_eq!(
            step(Some(&LeaseSpec::default()), "a", t(100)),
            Step::Acquire
        );
    }

    #[test]
    fn a_live_lease_of_another_is_followed_until_it_expires() {
        let lease = held_by("b", 100);
        assert_eq!(
            step(Some(&lease), "a", t(110)),
            Step::Follow { holder: "b".into() }
        );
        assert_eq!(
            step(Some(&lease), "a", t(115)),
            Step::Follow { holder: "b".into() }
        );
        assert_eq!(step(Some(&lease), "a", t(116)), Step::Acquire);
        assert_eq!(step(Some(&lease), "b", t(500)), Step::Renew);
    }

    #[test]
    fn taking_over_counts_a_transition_and_renewing_keeps_the_acquire_time() {
        let taken = next(
            Some(&held_by("b", 100)),
            "a",
            t(200),
            Duration::from_secs(15),
        );
        assert_eq!(taken.holder_identity.as_deref(), Some("a"));
        assert_eq!(taken.lease_transitions, Some(1));
        assert_eq!(taken.acquire_time, Some(MicroTime(t(200))));
        let renewed = next(Some(&taken), "a", t(210), Duration::from_secs(15));
        assert_eq!(renewed.acquire_time, Some(MicroTime(t(200))));
        assert_eq!(renewed.renew_time, Some(MicroTime(t(210))));
        assert_eq!(renewed.lease_transitions, Some(1));
        let first = next(None, "a", t(1), Duration::from_secs(15));
        assert_eq!(first.lease_transitions, Some(0));
        assert_eq!(first.lease_duration_seconds, Some(15));
    }
}
