//! The job model (pure: no I/O, no clock; times are passed in): what a job asks for, its
//! lifecycle, and the checks on a request. The REST layer renders [`Job`] as JSON as is.
//!
//! ```text
//!  create ──> queued ──start──> running ──succeed──> succeeded
//!               │                  │ ──fail─────> failed     (also: restart while running)
//!               │                  └─cancel──────> cancelled (after the run stopped)
//!               └──cancel / fail──────────────────> cancelled / failed
//! ```

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::inputs::{is_component, DEFAULT_TAG};
use crate::RecipeInfo;

/// Where a job is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum JobStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl JobStatus {
    pub const ALL: [Self; 5] = [
        Self::Queued,
        Self::Running,
        Self::Succeeded,
        Self::Failed,
        Self::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == raw)
    }

    /// Succeeded, failed or cancelled: nothing will change it any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
}

/// One file a job produced, as listed by `GET jobs/{id}/files`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputFile {
    pub name: String,
    pub size: u64,
    /// The object key in storage.
    pub key: String,
}

/// A job as stored and as served. Invariants: `started_at` is set once it left `queued` for
/// `running`; `finished_at` and (unless succeeded) `reason` are set exactly when the status is
/// terminal; `files` is non-empty only when succeeded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub id: Uuid,
    pub recipe: String,
    /// The arguments as given (`["--timeunit", "usec"]`).
    pub args: Vec<String>,
    pub tag: String,
    /// The first input's session and collection (every job has at least one input).
    pub session: String,
    pub collection: Option<String>,
    /// Where the reports come from, in order: one scope for the single form of the request,
    /// several for a job over several sessions or collections (e.g. `diff`). Records from
    /// before this field have none; [`Job::scopes`] falls back to `session`/`collection`.
    #[serde(default)]
    pub inputs: Vec<JobInput>,
    pub status: JobStatus,
    /// Unix milliseconds.
    pub created_at: u64,
    pub started_at: Option<u64>,
    pub finished_at: Option<u64>,
    /// Why it failed or was cancelled.
    pub reason: Option<String>,
    /// A cancel was asked for while running; the run is being stopped.
    pub cancel_requested: bool,
    /// The object keys of the reports the recipe ran on.
    pub reports: Vec<String>,
    pub files: Vec<OutputFile>,
    /// What the recipe said the reader must know (per report, prefixed with the report).
    pub notes: Vec<String>,
}

/// One scope of reports a job reads: every `.sqlite` report of a session, or of one collection
/// of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobInput {
    pub session: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collection: Option<String>,
}

/// Most inputs one job may name.
pub const MAX_INPUTS: usize = 16;

/// A validated request: what [`Job::new`] needs.
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

/// The body of `POST jobs`: `session` (and optionally `collection`) for the reports of one
/// session, or `inputs` for several scopes in order (a multi-report recipe such as `diff`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    pub recipe: String,
    #[serde(default)]
    pub args: Vec<String>,
    pub session: Option<String>,
    pub collection: Option<String>,
    pub inputs: Option<Vec<JobInput>>,
    pub tag: Option<String>,
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

impl JobRequest {
    /// Checks the request against the recipe's description.
    pub fn validate(self, info: &RecipeInfo) -> Result<JobSpec, JobError> {
        let tag = self.tag.unwrap_or_else(|| DEFAULT_TAG.to_owned());
        check_component("tag", &tag)?;
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
/// names the recipe does not declare.
pub fn parse_args(args: &[String], info: &RecipeInfo) -> Result<Vec<(String, String)>, JobError> {
    let known: Vec<&str> = info.arguments.iter().map(|a| a.name.as_str()).collect();
    let accepted = || {
        if known.is_empty() {
            format!("recipe {} takes no arguments", info.name)
        } else {
            format!(
                "recipe {} accepts: {}",
                info.name,
                known
                    .iter()
                    .map(|k| format!("--{k}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    };
    let mut pairs = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let Some(flag) = arg.strip_prefix("--") else {
            return Err(JobError::Invalid(format!(
                "argument `{arg}` is not `--name value` or `--name=value`; {}",
                accepted()
            )));
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n.to_owned(), v.to_owned()),
            None => {
                let value = rest.next().ok_or_else(|| {
                    JobError::Invalid(format!("argument `--{flag}` has no value"))
                })?;
                (flag.to_owned(), value.clone())
            }
        };
        if !known.contains(&name.as_str()) {
            return Err(JobError::Invalid(format!(
                "unknown argument `--{name}`; {}",
                accepted()
            )));
        }
        pairs.push((name, value));
    }
    Ok(pairs)
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

impl Job {
    pub fn new(id: Uuid, spec: JobSpec, now: u64) -> Self {
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

    /// The scopes whose reports the job reads, in order (at least one).
    pub fn scopes(&self) -> Vec<JobInput> {
        if self.inputs.is_empty() {
            vec![JobInput {
                session: self.session.clone(),
                collection: self.collection.clone(),
            }]
        } else {
            self.inputs.clone()
        }
    }

    fn conflict(&self, what: &'static str) -> JobError {
        JobError::Conflict {
            id: self.id,
            status: self.status,
            what,
        }
    }

    /// Queued → running.
    pub fn start(&mut self, now: u64) -> Result<(), JobError> {
        if self.status != JobStatus::Queued {
            return Err(self.conflict("only a queued job can start"));
        }
        self.status = JobStatus::Running;
        self.started_at = Some(now);
        Ok(())
    }

    /// Running → succeeded, with what it produced.
    pub fn succeed(
        &mut self,
        reports: Vec<String>,
        files: Vec<OutputFile>,
        notes: Vec<String>,
        now: u64,
    ) -> Result<(), JobError> {
        if self.status != JobStatus::Running {
            return Err(self.conflict("only a running job can succeed"));
        }
        self.status = JobStatus::Succeeded;
        self.reports = reports;
        self.files = files;
        self.notes = notes;
        self.finished_at = Some(now);
        Ok(())
    }

    /// Queued or running → failed.
    pub fn fail(&mut self, reason: String, now: u64) -> Result<(), JobError> {
        if self.status.is_terminal() {
            return Err(self.conflict("it has finished already"));
        }
        self.status = JobStatus::Failed;
        self.reason = Some(reason);
        self.finished_at = Some(now);
        Ok(())
    }

    /// A user asks to cancel.
    pub fn request_cancel(&mut self, now: u64) -> Result<CancelOutcome, JobError> {
        match self.status {
            JobStatus::Queued => {
                self.finish_cancelled(now);
                Ok(CancelOutcome::CancelledNow)
            }
            JobStatus::Running => {
                self.cancel_requested = true;
                Ok(CancelOutcome::StopRun)
            }
            JobStatus::Cancelled => Ok(CancelOutcome::AlreadyCancelled),
            JobStatus::Succeeded | JobStatus::Failed => {
                Err(self.conflict("only a queued or running job can be cancelled"))
            }
        }
    }

    /// Running → cancelled, once the run stopped.
    pub fn cancelled(&mut self, now: u64) -> Result<(), JobError> {
        if self.status != JobStatus::Running {
            return Err(self.conflict("only a running job is stopped by a cancel"));
        }
        self.finish_cancelled(now);
        Ok(())
    }

    fn finish_cancelled(&mut self, now: u64) {
        self.status = JobStatus::Cancelled;
        self.reason = Some("cancelled by request".into());
        self.finished_at = Some(now);
    }

    /// Whether it may be deleted (a queued or running job must be cancelled first).
    pub fn check_delete(&self) -> Result<(), JobError> {
        if self.status.is_terminal() {
            Ok(())
        } else {
            Err(self.conflict("cancel it first (POST jobs/{id}/cancel), then delete it"))
        }
    }

    /// After a restart: a job that was running failed with [`RESTART_REASON`]; a queued one
    /// stays queued (it runs again). Returns whether the record changed.
    pub fn restore(&mut self, now: u64) -> bool {
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
