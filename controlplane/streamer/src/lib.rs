//! A streamer Pod's reports: which objects of the storage listing belong to the session (or the
//! one report) a streamer was launched for, where each lands in the Pod's reports volume, and
//! the manifest the sync leaves beside them. Pure; the binaries do the I/O.
//!
//! ```text
//!  NsightStreamer {sessionId, report?}      (operator: init container + emptyDir /reports)
//!    init  nsight-report-sync: list storage -> plan -> get each -> /reports/<session dir>/<collection>/<file>
//!                                                          + /reports/.nsight-sync.json
//!    main  the Nsight Streamer (NVIDIA's image) or, in tests, nsight-streamer-standin
//! ```

use std::path::PathBuf;

use nsight_storage::{
    layout::{plan_download, ReportKey},
    ObjectInfo,
};
use serde::{Deserialize, Serialize};

/// The manifest's file name in the reports directory.
pub const MANIFEST: &str = ".nsight-sync.json";

/// One file to copy: its key, where it goes (relative to the reports directory), its size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncItem {
    pub key: String,
    pub path: PathBuf,
    pub bytes: u64,
}

/// What a sync copied, written last (its presence means every file is whole).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    pub files: Vec<SyncItem>,
}

/// Why nothing can be synced; says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the report {key} is not in storage (or is not a report key of session {session}); launch the streamer for an existing report, as listed by the coordinator's GET sessions/{session}/reports")]
    ReportMissing { key: String, session: String },
}

/// The reports of `session` in `listing` (or only `report`, with the `.sqlite` export beside it
/// when there is one), laid out as `nsight-cloud download` does: `<session dir>/<collection>/<file>`.
/// An empty plan is not an error: a session may have no report yet.
pub fn plan(
    listing: &[ObjectInfo],
    session: &str,
    report: Option<&str>,
) -> Result<Vec<SyncItem>, PlanError> {
    let wanted = |info: &ObjectInfo| -> bool {
        let Ok(key) = ReportKey::parse(&info.key) else {
            return false;
        };
        if key.session != session {
            return false;
        }
        match report.map(ReportKey::parse) {
            None => true,
            // The report, and its other file (the SQLite export analysis and the GUI read).
            Some(Ok(one)) => key.to_key() == one.to_key() || key == one.with_kind(key.kind),
            Some(Err(_)) => false,
        }
    };
    let chosen: Vec<ObjectInfo> = listing.iter().filter(|o| wanted(o)).cloned().collect();
    if let Some(key) = report {
        if !chosen.iter().any(|o| o.key == key) {
            return Err(PlanError::ReportMissing {
                key: key.to_owned(),
                session: session.to_owned(),
            });
        }
    }
    Ok(plan_download(&chosen, &[], false)
        .items
        .into_iter()
        .map(|item| SyncItem {
            key: item.key,
            path: item.path,
            bytes: item.size,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    const S: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";

    fn info(key: &str, size: u64) -> ObjectInfo {
        ObjectInfo {
            key: key.into(),
            size,
            last_modified: None,
            etag: None,
            checksum_sha256: None,
            sha256: None,
        }
    }

    fn listing() -> Vec<ObjectInfo> {
        vec![
            info(&format!("default/{S}/0/app_default_p1_1.nsys-rep"), 10),
            info(&format!("default/{S}/0/app_default_p1_1.sqlite"), 20),
            info(&format!("default/{S}/1/app_default_p2_1.nsys-rep"), 30),
            info(&format!("default/{S}/session.json"), 5),
            info("default/other-session/0/app_default_p1_1.nsys-rep", 40),
            info("not/a/report", 1),
        ]
    }

    #[test]
    fn a_session_brings_its_reports_only() {
        let items = plan(&listing(), S, None).unwrap();
        let keys: Vec<&str> = items.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys.len(), 3, "{keys:?}");
        assert!(keys
            .iter()
            .all(|k| k.contains(S) && !k.ends_with("session.json")));
        assert_eq!(items.iter().map(|i| i.bytes).sum::<u64>(), 60);
        for item in &items {
            let parts: Vec<_> = item.path.components().collect();
            assert_eq!(
                parts.len(),
                3,
                "<session dir>/<collection>/<file>: {:?}",
                item.path
            );
        }
        assert!(plan(&listing(), "no-such-session", None)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn one_report_brings_its_export_and_a_missing_one_is_named() {
        let key = format!("default/{S}/0/app_default_p1_1.nsys-rep");
        let items = plan(&listing(), S, Some(&key)).unwrap();
        let keys: Vec<&str> = items.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                key.as_str(),
                &format!("default/{S}/0/app_default_p1_1.sqlite")
            ]
        );
        let gone = format!("default/{S}/9/app_default_p1_1.nsys-rep");
        let err = plan(&listing(), S, Some(&gone)).unwrap_err();
        assert!(err.to_string().contains(&gone), "{err}");
        // A report of another session is not this streamer's.
        let other = "default/other-session/0/app_default_p1_1.nsys-rep";
        assert!(plan(&listing(), S, Some(other)).is_err());
    }
}
