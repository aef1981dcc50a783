//! The job model (pure: no I/O, no clock; times are passed in): what a job asks for, its
//! lifecycle, and the checks on a request. [`Job`] and [`JobRequest`] are the REST contract's
//! types (`nsight_contracts::analysis`); the rules ([`Lifecycle`], [`Validate`]) are here. The
//! REST layer renders [`Job`] as JSON as is.
//!
//! ```text
//!  create ──> queued ──start──> running ──succeed──> succeeded
//!               │                  │ ──fail─────> failed     (also: restart while running)
//!               │                  └─cancel──────> cancelled (after the run stopped)
//!               └──cancel / fail──────────────────> cancelled / failed
//! ```

use uuid::Uuid;

use nsight_contracts::coordinator::Tag;

use super::inputs::{is_component, DEFAULT_TAG};
use crate::RecipeInfo;

pub use nsight_contracts::analysis::{
    Job, JobInput, JobRequest, JobStatus, OutputFile, MAX_INPUTS,
};

/// A validated request: what [`Lifecycle::new`] needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    pub recipe: String,
    pub args: Vec<String>,
    /// `args` as (name, value) pairs, names without `--`, for the recipe.
    pub pairs: Vec<(String, String)>,
    pub tag: String,
    pub session: String,
    pub collection: Option<String>,
    /// Every input in order, the first being `session`/`collection`; empty means just that
    /// one.
    pub inputs: Vec<JobInput>,
}

/// Why a request or a transition was refused; the message says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("{0}")]
    Invalid(String),
    #[error("job {id} is {status}: {what}", status = status.as_str())]
    Conflict {
        id: Uuid,
        status: JobStatus,
        what: &'static str,
    },
}

/// Checking a [`JobRequest`] (the contract's type) against the recipe it names.
pub trait Validate {
    /// Checks the request against the recipe's description.
    fn validate(self, info: &RecipeInfo) -> Result<JobSpec, JobError>;
}

impl Validate for JobRequest {
    fn validate(self, info: &RecipeInfo) -> Result<JobSpec, JobError> {
        let tag = self.tag.unwrap_or_else(|| DEFAULT_TAG.to_owned());
        // The coordinator's rule (`my_tag` is a tag); storage keys hold it sanitised.
        Tag::parse(&tag).map_err(|e| JobError::Invalid(e.to_string()))?;
        let inputs = match (self.session, self.collection, self.inputs) {
            (Some(session), collection, None) => vec![JobInput {
                session,
                collection,
            }],
            (None, None, Some(inputs)) if (1..=MAX_INPUTS).contains(&inputs.len()) => inputs,
            (None, None, Some(inputs)) => {
                return Err(JobError::Invalid(format!(
                    "`inputs` has {} entries: give 1 to {MAX_INPUTS} \
                     ({{\"session\": ..., \"collection\": ...}} each)",
                    inputs.len()
                )))
            }
            (None, Some(_), None) => {
                return Err(JobError::Invalid(
                    "`collection` needs a `session`: give `session` (and `collection`), or \
                     `inputs`"
                        .into(),
                ))
            }
            (None, None, None) => {
                return Err(JobError::Invalid(
                    "no reports named: give `session` (and optionally `collection`), or \
                     `inputs` (a list of {\"session\", \"collection\"}) for several"
                        .into(),
                ))
            }
            (_, _, Some(_)) => {
                return Err(JobError::Invalid(
                    "give either `session`/`collection` or `inputs`, not both".into(),
                ))
            }
        };
        for input in &inputs {
            check_component("session", &input.session)?;
            if let Some(c) = &input.collection {
                check_component("collection", c)?;
            }
        }
        let pairs = parse_args(&self.args, info)?;
        let first = inputs[0].clone();
        Ok(JobSpec {
            recipe: self.recipe,
            args: self.args,
            pairs,
            tag,
            session: first.session,
            collection: first.collection,
            inputs,
        })
    }
}

fn check_component(field: &str, value: &str) -> Result<(), JobError> {
    if is_component(value) {
        Ok(())
    } else {
        Err(JobError::Invalid(format!(
            "`{field}` `{value}` is not a storage key component (letters, digits, `.` and `-`; \
             at most 60 bytes): pass the id as the coordinator shows it"
        )))
    }
}

/// Parses command-line style arguments (`--name value` or `--name=value`) into pairs, refusing
/// names the recipe does not declare (the host's [`nsight_recipe_host::parse_args`]).
pub fn parse_args(args: &[String], info: &RecipeInfo) -> Result<Vec<(String, String)>, JobError> {
    nsight_recipe_host::parse_args(args, info).map_err(JobError::Invalid)
}

/// What a cancel request led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// It was queued: it is cancelled now.
    CancelledNow,
    /// It is running: stop the run; [`Job::cancelled`] follows once it stopped.
    StopRun,
    /// It was cancelled already (asking again is not an error).
    AlreadyCancelled,
}

pub const RESTART_REASON: &str = "service restarted";

/// The job's lifecycle (the diagram above): the transitions the service allows. A trait
/// because [`Job`] is the REST contract's type; the rules are the service's.
pub trait Lifecycle: Sized {
    /// A queued job for a validated request.
    fn new(id: Uuid, spec: JobSpec, now: u64) -> Self;
    /// The scopes whose reports the job reads, in order (at least one).
    fn scopes(&self) -> Vec<JobInput>;
    /// Queued → running.
    fn start(&mut self, now: u64) -> Result<(), JobError>;
    /// Running → succeeded, with what it produced.
    fn succeed(
        &mut self,
        reports: Vec<String>,
        files: Vec<OutputFile>,
        notes: Vec<String>,
        now: u64,
    ) -> Result<(), JobError>;
    /// Queued or running → failed.
    fn fail(&mut self, reason: String, now: u64) -> Result<(), JobError>;
    /// A user asks to cancel.
    fn request_cancel(&mut self, now: u64) -> Result<CancelOutcome, JobError>;
    /// Running → cancelled, once the run stopped.
    fn cancelled(&mut self, now: u64) -> Result<(), JobError>;
    /// Whether it may be deleted (a queued or running job must be cancelled first).
    fn check_delete(&self) -> Result<(), JobError>;
    /// After a restart: a job that was running failed with [`RESTART_REASON`]; a queued one
    /// stays queued (it runs again). Returns whether the record changed.
    fn restore(&mut self, now: u64) -> bool;
}

fn conflict(job: &Job, what: &'static str) -> JobError {
    JobError::Conflict {
        id: job.id,
        status: job.status,
        what,
    }
}

fn finish_cancelled(job: &mut Job, now: u64) {
    job.status = JobStatus::Cancelled;
    job.reason = Some("cancelled by request".into());
    job.finished_at = Some(now);
}

impl Lifecycle for Job {
    fn new(id: Uuid, spec: JobSpec, now: u64) -> Self {
        Self {
            id,
            recipe: spec.recipe,
            args: spec.args,
            tag: spec.tag,
            inputs: if spec.inputs.is_empty() {
                vec![JobInput {
                    session: spec.session.clone(),
                    collection: spec.collection.clone(),
                }]
            } else {
                spec.inputs
            },
            session: spec.session,
            collection: spec.collection,
            status: JobStatus::Queued,
            created_at: now,
            started_at: None,
            finished_at: None,
            reason: None,
            cancel_requested: false,
            reports: Vec::new(),
            files: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn scopes(&self) -> Vec<JobInput> {
        if self.inputs.is_empty() {
            vec![JobInput {
                session: self.session.clone(),
                collection: self.collection.clone(),
            }]
        } else {
            self.inputs.clone()
        }
    }

    fn start(&mut self, now: u64) -> Result<(), JobError> {
        if self.status != JobStatus::Queued {
            return Err(conflict(self, "only a queued job can start"));
        }
        self.status = JobStatus::Running;
        self.started_at = Some(now);
        Ok(())
    }

    fn succeed(
        &mut self,
        reports: Vec<String>,
        files: Vec<OutputFile>,
        notes: Vec<String>,
        now: u64,
    ) -> Result<(), JobError> {
        if self.status != JobStatus::Running {
            return Err(conflict(self, "only a running job can succeed"));
        }
        self.status = JobStatus::Succeeded;
        self.reports = reports;
        self.files = files;
        self.notes = notes;
        self.finished_at = Some(now);
        Ok(())
    }

    fn fail(&mut self, reason: String, now: u64) -> Result<(), JobError> {
        if self.status.is_terminal() {
            return Err(conflict(self, "it has finished already"));
        }
        self.status = JobStatus::Failed;
        self.reason = Some(reason);
        self.finished_at = Some(now);
        Ok(())
    }

    fn request_cancel(&mut self, now: u64) -> Result<CancelOutcome, JobError> {
        match self.status {
            JobStatus::Queued => {
                finish_cancelled(self, now);
                Ok(CancelOutcome::CancelledNow)
            }
            JobStatus::Running => {
                self.cancel_requested = true;
                Ok(CancelOutcome::StopRun)
            }
            JobStatus::Cancelled => Ok(CancelOutcome::AlreadyCancelled),
            JobStatus::Succeeded | JobStatus::Failed => Err(conflict(
                self,
                "only a queued or running job can be cancelled",
            )),
        }
    }

    fn cancelled(&mut self, now: u64) -> Result<(), JobError> {
        if self.status != JobStatus::Running {
            return Err(conflict(self, "only a running job is stopped by a cancel"));
        }
        finish_cancelled(self, now);
        Ok(())
    }

    fn check_delete(&self) -> Result<(), JobError> {
        if self.status.is_terminal() {
            Ok(())
        } else {
            Err(conflict(
                self,
                "cancel it first (POST jobs/{id}/cancel), then delete it",
            ))
        }
    }

    fn restore(&mut self, now: u64) -> bool {
        if self.status == JobStatus::Running {
            self.status = JobStatus::Failed;
            self.reason = Some(RESTART_REASON.into());
            self.finished_at = Some(now);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests;
