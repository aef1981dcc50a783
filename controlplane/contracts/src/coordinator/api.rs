//! The coordinator's endpoints, one type per body and query (paths below
//! [`crate::routes::COORDINATOR_V1`]):
//!
//! ```text
//!  GET  /status?tag&limit           StatusQuery   -> TagStatus
//!  GET  /tags                                    -> TagList
//!  GET  /changes?since&wait         ChangesQuery  -> Changes (a long poll)
//!  GET  /sessions?tag&state         SessionsQuery -> SessionList
//!  POST /sessions                   BeginSession  -> 201 SessionSummary
//!  GET  /sessions/{id}                            -> Session
//!  GET  /sessions/{id}/reports                    -> ReportListing
//!  POST /start | /stop | /end       TagAction     -> Started | Stopped | Ended
//!  any refusal                                    -> Problem (application/problem+json)
//! ```
//!
//! Request bodies and queries carry raw strings: the coordinator parses them into [`Tag`],
//! [`Title`] and [`SessionId`] itself so that each refusal names the field and what is allowed.
//!
//! [`Tag`]: super::Tag
//! [`Title`]: super::Title

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::model::{CollectionId, CollectionState, SessionId, Tag};
use super::view::SessionSummary;

/// Agents `status` lists unless `limit` says otherwise; the counts cover all of them.
pub const DEFAULT_STATUS_LIMIT: usize = 100;

/// `GET /status`: the tag (default `default`) and how many agents to list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct StatusQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "super::Tag"))]
    pub tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `GET /sessions`: only the sessions of this tag, in this state (`open`, `ended`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SessionsQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "super::Tag"))]
    pub tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "super::SessionState"))]
    pub state: Option<String>,
}

/// `POST /sessions`: begin a session on a tag (default `default`), maybe titled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct BeginSession {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "super::Tag"))]
    pub tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "super::Title"))]
    pub title: Option<String>,
}

/// `POST /start`, `/stop` and `/end`: the tag (default `default`) and, to act on a session
/// other than the tag's open one, its ID.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct TagAction {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "super::Tag"))]
    pub tag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "SessionId"))]
    pub session: Option<String>,
}

/// `GET /sessions`: the matching sessions, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SessionList {
    pub sessions: Vec<SessionSummary>,
}

/// The longest a `GET /changes` waits for a change, in milliseconds (below the gateway's 60 s
/// route timeout, and short enough that a client behind a proxy with a 30 s idle limit keeps
/// its connection).
pub const MAX_CHANGES_WAIT_MS: u64 = 25_000;

/// `GET /changes`: answer when the coordinator's version differs from `since`, or after `wait`
/// milliseconds (default and at most [`MAX_CHANGES_WAIT_MS`]); without `since`, at once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ChangesQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<u64>,
}

/// The answer of `GET /changes`: a number that changes whenever a session, a collection, an
/// agent's outcome or an agent's registration does (not on heartbeats). Only equality means
/// anything: a client that sees another number than it sent fetches what it shows again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Changes {
    pub version: u64,
}

/// `GET /tags`: every tag that has sessions, in name order (what a tag selector lists without
/// reading every session).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TagList {
    pub tags: Vec<TagSummary>,
}

/// One tag of [`TagList`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct TagSummary {
    pub tag: Tag,
    /// How many sessions the tag has had (open and ended).
    pub sessions: usize,
    /// Whether one of them is open.
    pub open: bool,
}

/// `POST /start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Started {
    pub session: SessionId,
    pub collection: CollectionId,
    /// A new session was opened for this collection.
    pub session_created: bool,
    /// How many agents were sent START. Zero is allowed (the CLI warns): the collection
    /// completes on stop with no files.
    pub agents: usize,
}

/// `POST /stop`, and inside [`Ended`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Stopped {
    pub session: SessionId,
    pub collection: CollectionId,
    /// How many agents were told to stop.
    pub agents: usize,
    /// The collection's state after the stop: Stopping, or already Completed/Incomplete when no
    /// agent had anything left to upload.
    pub state: CollectionState,
}

/// `POST /end`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Ended {
    pub session: SessionId,
    /// The collection that was still collecting and has been stopped by ending the session.
    pub stopped: Option<Stopped>,
}

/// What a report file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum ReportKind {
    /// The Nsight Systems report (`.nsys-rep`).
    #[serde(rename = "nsys-rep")]
    NsysRep,
    /// Its SQLite export (`.sqlite`), what recipes read.
    #[serde(rename = "sqlite")]
    Sqlite,
}

impl ReportKind {
    /// The file extension, which is also the serialized name.
    pub fn extension(self) -> &'static str {
        match self {
            ReportKind::NsysRep => "nsys-rep",
            ReportKind::Sqlite => "sqlite",
        }
    }
}

/// One report of a session, as `GET /sessions/{id}/reports` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReportEntry {
    /// The object key in storage.
    pub key: String,
    pub collection: String,
    pub process: String,
    pub instance: String,
    pub kind: ReportKind,
    pub size: u64,
    /// When the object was last written (RFC 3339).
    #[serde(default, with = "time::serde::rfc3339::option")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    pub last_modified: Option<OffsetDateTime>,
    /// Where `download` puts it: `<YYYYMMDDHHMMSS>-<title>/<collection>/<file>`.
    pub path: String,
    /// Where `download --flat` puts it.
    pub flat_path: String,
    /// A GET anyone holding it can make until `url_expires_in_s` passes.
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub url_expires_in_s: u64,
    /// Hex SHA-256 of the report as the store recorded it at upload (S3 user metadata or a
    /// whole-object checksum); absent when the store keeps none (the local store). `download`
    /// verifies against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// `GET /sessions/{id}/reports`: a session's reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReportListing {
    pub session: String,
    pub tag: String,
    /// `<YYYYMMDDHHMMSS>-<title>`, the session's download directory.
    pub directory: String,
    pub reports: Vec<ReportEntry>,
    /// Why URLs are missing, when they are (e.g. a store that cannot sign).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_omit_what_is_not_given() {
        let body = serde_json::to_string(&TagAction {
            tag: Some("t".into()),
            session: None,
        })
        .unwrap();
        assert_eq!(body, r#"{"tag":"t"}"#);
        let body = serde_json::to_string(&BeginSession {
            tag: Some("t".into()),
            title: Some("run".into()),
        })
        .unwrap();
        assert_eq!(body, r#"{"tag":"t","title":"run"}"#);
        let refused = serde_json::from_str::<TagAction>(r#"{"tga":"t"}"#).unwrap_err();
        assert!(refused.to_string().contains("unknown field"), "{refused}");
    }

    #[test]
    fn answers_keep_their_wire_form() {
        let ended: Ended = serde_json::from_str(
            r#"{"session":"67e55044-10b1-426f-9247-bb680e5fe0c8","stopped":{"session":"67e55044-10b1-426f-9247-bb680e5fe0c8","collection":2,"agents":3,"state":"stopping"}}"#,
        )
        .unwrap();
        let stopped = ended.stopped.clone().unwrap();
        assert_eq!(stopped.collection, CollectionId(2));
        assert_eq!(stopped.state, CollectionState::Stopping);
        assert_eq!(
            serde_json::to_string(&ended).unwrap(),
            r#"{"session":"67e55044-10b1-426f-9247-bb680e5fe0c8","stopped":{"session":"67e55044-10b1-426f-9247-bb680e5fe0c8","collection":2,"agents":3,"state":"stopping"}}"#
        );
        let entry = r#"{"key":"k","collection":"1","process":"p","instance":"i","kind":"nsys-rep","size":3,"lastModified":"2024-05-01T12:00:00Z","path":"d/1/f","flatPath":"f","url":null,"urlExpiresInS":3600}"#;
        let parsed: ReportEntry = serde_json::from_str(entry).unwrap();
        assert_eq!(parsed.kind, ReportKind::NsysRep);
        assert_eq!(serde_json::to_string(&parsed).unwrap(), entry);
    }
}
