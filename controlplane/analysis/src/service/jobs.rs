//! The job table shared by the REST handlers and the runners: the records in memory (the
//! truth while the process lives), written through to [`Records`] on every change, the
//! concurrency limit and the cancel handles of running jobs. Locks are never held across an
//! `.await`.

use std::{
    collections::{BTreeMap, HashMap},
    path::PathBuf,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use nsight_storage::{ReportStore, Store};
use tokio::sync::Semaphore;
use uuid::Uuid;

use super::{
    catalog::Catalog,
    error_chain,
    inputs::output_prefix,
    job::{CancelOutcome, Job, JobError, JobRequest, JobStatus, Lifecycle, Validate},
    records::{JobRecord, LogEntry, Records},
    runner,
};
use crate::{CancelHandle, RecipeHost};

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// How long `POST jobs/{id}/cancel` waits for a running job to stop before answering.
const CANCEL_WAIT: Duration = Duration::from_secs(2);

/// Why a request was refused; each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Conflict(String),
    /// The job records or the storage failed; retrying later may help.
    #[error("{0}")]
    Unavailable(String),
}

impl From<JobError> for ServiceError {
    fn from(e: JobError) -> Self {
        match e {
            JobError::Invalid(m) => Self::Invalid(m),
            e @ JobError::Conflict { .. } => Self::Conflict(e.to_string()),
        }
    }
}

/// Everything a job needs, shared.
#[derive(Debug)]
pub struct Inner {
    pub catalog: Catalog,
    pub host: RecipeHost,
    pub store: Store,
    /// Reports are fetched below this directory, one subdirectory per running job.
    pub work_dir: PathBuf,
    pub permits: Arc<Semaphore>,
    /// Report timelines, indexed on first use.
    pub timelines: super::timelines::Timelines,
    jobs: Mutex<BTreeMap<Uuid, JobRecord>>,
    records: Mutex<Records>,
    cancels: Mutex<HashMap<Uuid, CancelHandle>>,
}

/// The service's state; cheap to clone.
#[derive(Debug, Clone)]
pub struct Service(pub Arc<Inner>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves the map itself valid.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Service {
    /// Loads the records; a job that was running is failed ("service restarted") and saved.
    /// Returns the service and the queued jobs to start again.
    pub fn restore(
        catalog: Catalog,
        host: RecipeHost,
        store: Store,
        records: Records,
        work_dir: PathBuf,
        timeline_dir: PathBuf,
        max_concurrent_jobs: usize,
    ) -> Result<(Self, Vec<Uuid>), super::records::RecordsError> {
        let mut records = records;
        let now = now_ms();
        let mut jobs = BTreeMap::new();
        let mut queued = Vec::new();
        for mut record in records.load()? {
            if record.job.restore(now) {
                record.log(now, "error", "the service restarted while the job ran");
                records.save(&record)?;
            }
            if record.job.status == JobStatus::Queued {
                queued.push(record.job.id);
            }
            jobs.insert(record.job.id, record);
        }
        queued.sort_by_key(|id| jobs.get(id).map(|r| r.job.created_at));
        let inner = Inner {
            catalog,
            host,
            store,
            timelines: super::timelines::Timelines::new(timeline_dir),
            work_dir,
            permits: Arc::new(Semaphore::new(max_concurrent_jobs.max(1))),
            jobs: Mutex::new(jobs),
            records: Mutex::new(records),
            cancels: Mutex::new(HashMap::new()),
        };
        Ok((Self(Arc::new(inner)), queued))
    }

    /// Applies `f` to the job's record and saves it.
    pub fn update<T>(
        &self,
        id: Uuid,
        f: impl FnOnce(&mut JobRecord) -> Result<T, JobError>,
    ) -> Result<T, ServiceError> {
        let mut jobs = lock(&self.0.jobs);
        let record = jobs.get_mut(&id).ok_or_else(|| no_job(id))?;
        let out = f(record)?;
        lock(&self.0.records).save(record).map_err(|e| {
            tracing::error!(error = %error_chain(&e), "saving a job failed");
            ServiceError::Unavailable(format!(
                "the job record could not be saved: {}",
                error_chain(&e)
            ))
        })?;
        Ok(out)
    }

    /// Appends to the job's log (kept in memory; saved with the next change of the job).
    pub fn log(&self, id: Uuid, level: &str, message: impl Into<String>) {
        if let Some(r) = lock(&self.0.jobs).get_mut(&id) {
            r.log(now_ms(), level, message);
        }
    }

    /// Validates and queues a job, then starts its runner.
    pub fn create(&self, request: JobRequest) -> Result<Job, ServiceError> {
        let recipe = self.0.catalog.get(&request.recipe).ok_or_else(|| {
            ServiceError::NotFound(format!(
                "no recipe `{}`; the recipes are: {}",
                request.recipe,
                self.0.catalog.names().join(", ")
            ))
        })?;
        let spec = request.validate(&recipe.info)?;
        let now = now_ms();
        let mut record = JobRecord {
            job: Job::new(Uuid::new_v4(), spec, now),
            log: Vec::new(),
            cut: 0,
        };
        record.log(now, "info", "queued");
        lock(&self.0.records).save(&record).map_err(|e| {
            ServiceError::Unavailable(format!("cannot save the job: {}", error_chain(&e)))
        })?;
        let job = record.job.clone();
        lock(&self.0.jobs).insert(job.id, record);
        self.spawn(job.id);
        Ok(job)
    }

    /// Starts the runner of a queued job (it waits for a permit).
    pub fn spawn(&self, id: Uuid) {
        tokio::spawn(runner::run(self.clone(), id));
    }

    pub fn get(&self, id: Uuid) -> Result<Job, ServiceError> {
        lock(&self.0.jobs)
            .get(&id)
            .map(|r| r.job.clone())
            .ok_or_else(|| no_job(id))
    }

    pub fn log_of(&self, id: Uuid) -> Result<Vec<LogEntry>, ServiceError> {
        lock(&self.0.jobs)
            .get(&id)
            .map(|r| r.log.clone())
            .ok_or_else(|| no_job(id))
    }

    /// Jobs, oldest first, optionally of one status.
    pub fn list(&self, status: Option<JobStatus>) -> Vec<Job> {
        let mut jobs: Vec<Job> = lock(&self.0.jobs)
            .values()
            .filter(|r| status.is_none_or(|s| r.job.status == s))
            .map(|r| r.job.clone())
            .collect();
        jobs.sort_by_key(|j| (j.created_at, j.id));
        jobs
    }

    /// Registers the cancel handle of a job that starts running.
    pub fn running(&self, id: Uuid, handle: CancelHandle) {
        lock(&self.0.cancels).insert(id, handle);
    }

    pub fn finished(&self, id: Uuid) {
        lock(&self.0.cancels).remove(&id);
    }

    /// Cancels a queued job at once, or stops a running one and waits (up to 2 s) for it.
    pub async fn cancel(&self, id: Uuid) -> Result<Job, ServiceError> {
        let now = now_ms();
        let outcome = self.update(id, |r| {
            let outcome = r.job.request_cancel(now)?;
            if outcome != CancelOutcome::AlreadyCancelled {
                r.log(now, "info", "cancel requested");
            }
            Ok(outcome)
        })?;
        if outcome == CancelOutcome::StopRun {
            if let Some(handle) = lock(&self.0.cancels).get(&id) {
                handle.cancel();
            }
            let deadline = Instant::now() + CANCEL_WAIT;
            while Instant::now() < deadline {
                if self.get(id)?.status.is_terminal() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        self.get(id)
    }

    /// Deletes a finished job: its outputs in storage, then its record.
    pub async fn delete(&self, id: Uuid) -> Result<(), ServiceError> {
        let job = self.get(id)?;
        job.check_delete()?;
        let prefix = output_prefix(&job.tag, &job.session, job.id);
        let unavailable = |e: nsight_storage::StorageError| {
            ServiceError::Unavailable(format!("cannot delete the job's outputs: {}", e.chain()))
        };
        for object in self.0.store.list(&prefix).await.map_err(unavailable)? {
            self.0
                .store
                .delete(&object.key)
                .await
                .map_err(unavailable)?;
        }
        let removed = lock(&self.0.jobs).remove(&id);
        if removed.is_some() {
            lock(&self.0.records).remove(id).map_err(|e| {
                ServiceError::Unavailable(format!(
                    "cannot delete the job record: {}",
                    error_chain(&e)
                ))
            })?;
        }
        Ok(())
    }
}

fn no_job(id: Uuid) -> ServiceError {
    ServiceError::NotFound(format!("no job {id}"))
}
