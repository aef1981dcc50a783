//! From dumps to stored reports: one SQLite report per process per collection, named by the
//! storage layout (`<tag>/<session>/<collection>/<process>_<tag>_<instance>_pid<pid>.sqlite`),
//! spooled and uploaded through the storage crate's uploader (which retries and keeps what it
//! could not store for the next drain). With mirroring on, each dump's NVTX ranges are also
//! offered to the OTLP mirror (`mirror`, `mirror_export`) before the report is written.

use std::path::PathBuf;

use nsight_storage::{
    layout::{ReportKey, ReportKind},
    Store, Uploader,
};

use crate::{
    mirror::{self, Origin},
    mirror_export::Mirror,
    nvtx::ProcessDump,
    report::{self, ReportMeta},
};

/// Names and stores reports for one agent.
#[derive(Debug)]
pub struct Publisher {
    pub uploader: Uploader<Store>,
    /// Where reports are written before they are spooled.
    pub work_dir: PathBuf,
    pub tag: String,
    /// The pod (or host) the agent runs in.
    pub instance: String,
    /// NVTX mirroring as OTLP spans, when the tool config turns it on.
    pub mirror: Option<MirrorTo>,
}

/// Where mirrored spans go, and the resource attributes the publisher does not know.
#[derive(Debug)]
pub struct MirrorTo {
    pub mirror: Mirror,
    pub namespace: String,
    pub container: String,
}

/// The storage key of one process's report.
pub fn report_key(
    tag: &str,
    session: &str,
    collection: &str,
    process: &str,
    instance: &str,
    pid: u32,
    kind: ReportKind,
) -> ReportKey {
    ReportKey::new(
        tag,
        session,
        collection,
        process,
        instance,
        &format!("pid{pid}"),
        kind,
    )
}

impl Publisher {
    /// Writes one report per dump and uploads them; returns the stored keys. Fails only when
    /// nothing could be stored although there was something to store. Mirrors the dumps first
    /// (never waiting: `Mirror::offer`).
    pub async fn publish(
        &self,
        session: &str,
        collection: &str,
        dumps: &[ProcessDump],
    ) -> Result<Vec<String>, String> {
        if let Some(to) = &self.mirror {
            let origin = Origin {
                session: session.to_owned(),
                collection: collection.to_owned(),
                tag: self.tag.clone(),
                pod: self.instance.clone(),
                namespace: to.namespace.clone(),
                container: to.container.clone(),
            };
            for d in dumps {
                let ids = uuid::Uuid::new_v4().as_u128();
                to.mirror.offer(mirror::mirror(&d.dump, &origin, ids));
            }
        }
        std::fs::create_dir_all(&self.work_dir)
            .map_err(|e| format!("creating {}: {e}", self.work_dir.display()))?;
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or_default();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default();
        let mut errors = Vec::new();
        let mut spooled = 0;
        for d in dumps {
            let key = report_key(
                &self.tag,
                session,
                collection,
                &d.dump.process_name,
                &self.instance,
                d.dump.pid,
                ReportKind::Sqlite,
            );
            let path = self.work_dir.join(key.file_name());
            let meta = ReportMeta {
                export_time_utc: report::utc_text(now_ns),
                host: host.clone(),
                output_file: key.file_name(),
            };
            if let Err(e) = report::write_file(&d.dump, &meta, &path) {
                errors.push(chain(&e));
                continue;
            }
            match self.uploader.spool(&path, &key.to_key()).await {
                Ok(_) => spooled += 1,
                Err(e) => errors.push(chain(&e)),
            }
        }
        let report = self.uploader.drain().await.map_err(|e| chain(&e))?;
        for failed in &report.failed {
            errors.push(format!("{}: {}", failed.key, chain(&failed.error)));
        }
        let keys = report.keys();
        if keys.is_empty() && (spooled > 0 || !errors.is_empty()) {
            return Err(errors.join("; "));
        }
        for e in &errors {
            tracing::warn!(error = %e, "a report was not stored");
        }
        Ok(keys)
    }
}

impl Publisher {
    /// Uploads finished report files of one process (the nsys backend's `.nsys-rep` and its
    /// `.sqlite`), named by the layout; returns the stored keys. Fails only when none was
    /// stored.
    pub async fn publish_files(
        &self,
        at: (&str, &str),
        process: (&str, u32),
        files: &[(PathBuf, ReportKind)],
    ) -> Result<Vec<String>, String> {
        let (session, collection) = at;
        let mut errors = Vec::new();
        for (path, kind) in files {
            let key = report_key(
                &self.tag,
                session,
                collection,
                process.0,
                &self.instance,
                process.1,
                *kind,
            );
            if let Err(e) = self.uploader.spool(path, &key.to_key()).await {
                errors.push(chain(&e));
            }
        }
        let report = self.uploader.drain().await.map_err(|e| chain(&e))?;
        for failed in &report.failed {
            errors.push(format!("{}: {}", failed.key, chain(&failed.error)));
        }
        let keys = report.keys();
        if keys.is_empty() {
            return Err(if errors.is_empty() {
                "no report file to store".to_owned()
            } else {
                errors.join("; ")
            });
        }
        for e in &errors {
            tracing::warn!(error = %e, "a report was not stored");
        }
        Ok(keys)
    }
}

/// An error with its causes, `a: b: c`.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_storage_layout() {
        let key = report_key(
            "default",
            "0b5c",
            "3",
            "python3.11",
            "my_pod",
            42,
            ReportKind::Sqlite,
        );
        assert_eq!(
            key.to_key(),
            "default/0b5c/3/python3.11_default_my-pod_pid42.sqlite"
        );
        assert_eq!(ReportKey::parse(&key.to_key()).unwrap(), key);
    }
}
