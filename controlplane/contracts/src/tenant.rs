//! The tenant API's REST contract (docs/tenant.md), paths below [`crate::routes::TENANT_V1`]:
//! the UI's "View trace" launches an Nsight Streamer for a session or for one report, lists the
//! caller's streamers, opens one and deletes it.
//!
//! ```text
//!  POST   /streamers        LaunchStreamer -> 201 Streamer | 429 CapReached
//!  GET    /streamers?all    StreamersQuery -> StreamerList (the caller's; all=true: everyone's)
//!  GET    /streamers/{name}                -> Streamer     (and marks it active)
//!  DELETE /streamers/{name}                -> 204          | 403 (another user's streamer)
//!  any other refusal                       -> Problem (application/problem+json)
//! ```
//!
//! Who the caller is comes from the gateway: the auth filter sets [`IDENTITY_HEADER`] (and
//! replaces whatever a client sent). The rules (the cap, who may delete, when an idle streamer
//! is reaped) are the tenant service's (`nsight_tenant::core`); here is only their shape and the
//! syntax checks a client can run before sending ([`LaunchStreamer::target`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{coordinator::Millis, Problem};

/// The request header carrying the caller's identity, set by the gateway's auth filter (a JWT
/// `sub`, `api-key`, `api-key:<tenant>`, or `anonymous` when the gateway has no auth).
pub const IDENTITY_HEADER: &str = "x-nsight-auth-identity";

/// The NsightStreamer annotation holding the one report (object key) it was launched for: the
/// tenant API writes it, the operator's render passes it to the Pod's report sync.
pub const REPORT_ANNOTATION: &str = "nsight.nvidia.com/report";

/// Longest identity accepted (the auth filter forwards at most 256 characters of a claim; a
/// list claim is joined with `,`, so this leaves room).
pub const MAX_IDENTITY_LEN: usize = 1024;

/// Longest report key accepted.
pub const MAX_REPORT_KEY_LEN: usize = 1024;

/// Launch a streamer: for a whole session's reports, or for one report (its object key). Exactly
/// one of the two; `null` is refused like any other non-string (the document says so, and a
/// request the document calls invalid is never accepted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("oneOf" = [{"required": ["sessionId"]}, {"required": ["report"]}]))
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LaunchStreamer {
    /// The session whose reports the streamer opens (a UUID, hyphenated).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(
            with = "String",
            extend("pattern" = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
        )
    )]
    pub session_id: Option<String>,
    /// One report's object key, `<tag>/<session>/<collection>/<file>` (as listed by the
    /// coordinator's `GET sessions/{id}/reports`): four parts, none empty, `.` or `..`, no
    /// control characters, the second a session ID, at most 1,024 characters.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    #[cfg_attr(
        feature = "schema",
        schemars(
            with = "String",
            length(max = 1024),
            extend("pattern" = "^(?!\\.\\.?/)[^/\\u0000-\\u001f\\u007f-\\u009f]+/[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}/(?!\\.\\.?/)[^/\\u0000-\\u001f\\u007f-\\u009f]+/(?!\\.\\.?$)[^/\\u0000-\\u001f\\u007f-\\u009f]+$")
        )
    )]
    pub report: Option<String>,
}

/// A field that, when present, must be a string (`null` is refused, not read as absent).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

/// What a launch asks for, checked: a session, or one report (and the session it belongs to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchTarget {
    Session { session_id: String },
    Report { session_id: String, key: String },
}

impl LaunchTarget {
    pub fn session_id(&self) -> &str {
        match self {
            Self::Session { session_id } | Self::Report { session_id, .. } => session_id,
        }
    }

    pub fn report(&self) -> Option<&str> {
        match self {
            Self::Session { .. } => None,
            Self::Report { key, .. } => Some(key),
        }
    }
}

/// Why a launch request was refused before anything was created. Each message says what is
/// expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    #[error("name either `sessionId` (a session's reports) or `report` (one report's object key)")]
    NoTarget,
    #[error("name either `sessionId` or `report`, not both (a report's key names its session)")]
    BothTargets,
    #[error("{input:?} is not a session ID; session IDs are UUIDs such as 67e55044-10b1-426f-9247-bb680e5fe0c8")]
    SessionId { input: String },
    #[error("{input:?} is not a report key; keys look like <tag>/<session>/<collection>/<file> (at most {MAX_REPORT_KEY_LEN} characters, no empty, `.` or `..` parts)")]
    ReportKey { input: String },
}

/// A refused launch request is the client's mistake: 400, with the message.
impl From<LaunchError> for Problem {
    fn from(e: LaunchError) -> Self {
        Problem::bad_request(e.to_string())
    }
}

/// A session ID as the coordinator writes it: a hyphenated UUID (36 characters).
fn session_id(raw: &str) -> Result<String, LaunchError> {
    uuid::Uuid::try_parse(raw)
        .ok()
        .filter(|_| raw.len() == 36)
        .map(|u| u.hyphenated().to_string())
        .ok_or_else(|| LaunchError::SessionId {
            input: raw.to_owned(),
        })
}

impl LaunchStreamer {
    /// The checked target: exactly one of `sessionId` and `report`; a session ID is a UUID; a
    /// report key has four `/`-separated parts, the second a session ID.
    pub fn target(&self) -> Result<LaunchTarget, LaunchError> {
        match (&self.session_id, &self.report) {
            (None, None) => Err(LaunchError::NoTarget),
            (Some(_), Some(_)) => Err(LaunchError::BothTargets),
            (Some(id), None) => Ok(LaunchTarget::Session {
                session_id: session_id(id)?,
            }),
            (None, Some(key)) => {
                let bad = || LaunchError::ReportKey { input: key.clone() };
                let parts: Vec<&str> = key.split('/').collect();
                let printable = key.chars().all(|c| !c.is_control());
                if key.chars().count() > MAX_REPORT_KEY_LEN
                    || !printable
                    || parts.len() != 4
                    || parts
                        .iter()
                        .any(|p| p.is_empty() || *p == "." || *p == "..")
                {
                    return Err(bad());
                }
                let session_id = session_id(parts[1]).map_err(|_| bad())?;
                Ok(LaunchTarget::Report {
                    session_id,
                    key: key.clone(),
                })
            }
        }
    }
}

/// Where a streamer is: its Pod is starting (or not ready), or it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum StreamerPhase {
    Pending,
    Ready,
}

impl fmt::Display for StreamerPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Pending => "pending",
            Self::Ready => "ready",
        })
    }
}

/// One streamer (an `NsightStreamer` resource the tenant API created), as served.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Streamer {
    /// The resource's name (generated, `streamer-xxxxx`).
    pub name: String,
    /// The identity that launched it; only it may delete it.
    pub owner: String,
    pub session_id: String,
    /// The one report it opens, when launched for a report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    pub phase: StreamerPhase,
    /// Where the browser opens it, once the operator has published it (`status.url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub created_at: Millis,
    /// Last launch or `GET` of it; it is reaped once idle for the tenant API's idle time.
    pub last_active_at: Millis,
    /// When it will be reaped unless opened again before.
    pub expires_at: Millis,
}

/// `GET streamers`: the caller's streamers (everyone's with `all=true`), oldest first, and the
/// cap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StreamerList {
    pub streamers: Vec<Streamer>,
    /// Streamers running in the namespace, everyone's.
    pub active: u32,
    /// At most this many at once (`streamerLaunch.maxActive`).
    pub max_active: u32,
}

/// The query of `GET streamers`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamersQuery {
    /// Everyone's streamers, not only the caller's.
    #[serde(default)]
    pub all: Option<bool>,
}

/// The refusal of a launch at the cap: a problem document (status 429) with how many run, the
/// cap, and the caller's own streamers (deleting one frees a slot).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct CapReached {
    #[serde(flatten)]
    pub problem: Problem,
    pub active: u32,
    pub max_active: u32,
    /// The caller's own streamers, oldest first: `DELETE streamers/{name}` frees a slot.
    pub yours: Vec<String>,
}

impl CapReached {
    /// The refusal, with a detail that says what to do.
    pub fn new(active: u32, max_active: u32, yours: Vec<String>) -> Self {
        let how = if yours.is_empty() {
            "none of them is yours: wait until one is deleted or reaped when idle".to_owned()
        } else {
            format!(
                "delete one of yours to free a slot: {} (DELETE {}/streamers/<name>)",
                yours.join(", "),
                crate::routes::TENANT_V1
            )
        };
        Self {
            problem: Problem::new(
                429,
                format!(
                    "{active} streamers run and at most {max_active} may run at once (streamerLaunch.maxActive); {how}"
                ),
            ),
            active,
            max_active,
            yours,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";

    fn launch(session: Option<&str>, report: Option<&str>) -> LaunchStreamer {
        LaunchStreamer {
            session_id: session.map(Into::into),
            report: report.map(Into::into),
        }
    }

    #[test]
    fn null_and_unhyphenated_ids_are_refused_as_the_document_says() {
        let parse = |body: &str| serde_json::from_str::<LaunchStreamer>(body);
        assert!(
            parse(r#"{"sessionId": null}"#).is_err(),
            "null is not absent"
        );
        assert!(parse(&format!(r#"{{"sessionId": "{ID}", "report": null}}"#)).is_err());
        assert_eq!(parse("{}").unwrap().target(), Err(LaunchError::NoTarget));
        let simple = ID.replace('-', "");
        assert!(matches!(
            launch(Some(&simple), None).target(),
            Err(LaunchError::SessionId { .. })
        ));
        let long = format!("t/{ID}/1/{}", "é".repeat(900));
        assert!(
            launch(None, Some(&long)).target().is_ok(),
            "941 characters (1,841 bytes) are within the documented 1,024"
        );
    }

    #[test]
    fn a_launch_names_a_session_or_one_report() {
        assert_eq!(
            launch(Some(ID), None).target(),
            Ok(LaunchTarget::Session {
                session_id: ID.into()
            })
        );
        let key = format!("default/{ID}/1/train_default_0_ab.nsys-rep");
        let target = launch(None, Some(&key)).target().unwrap();
        assert_eq!(target.session_id(), ID);
        assert_eq!(target.report(), Some(key.as_str()));
        assert_eq!(launch(None, None).target(), Err(LaunchError::NoTarget));
        assert_eq!(
            launch(Some(ID), Some(&key)).target(),
            Err(LaunchError::BothTargets)
        );
        assert!(matches!(
            launch(Some("nope"), None).target(),
            Err(LaunchError::SessionId { .. })
        ));
        for key in [
            "a/b/c/d".to_owned(),
            format!("default/{ID}/1"),
            format!("default/{ID}/../x"),
            format!("default/{ID}//x"),
            format!("default/{ID}/1/x\n"),
            format!("default/{ID}/1/{}", "x".repeat(MAX_REPORT_KEY_LEN)),
        ] {
            assert!(
                matches!(
                    launch(None, Some(&key)).target(),
                    Err(LaunchError::ReportKey { .. })
                ),
                "{key:?}"
            );
        }
        let p: Problem = LaunchError::NoTarget.into();
        assert_eq!(p.status, 400);
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(serde_json::from_str::<LaunchStreamer>(r#"{"session":"x"}"#).is_err());
    }

    #[test]
    fn the_cap_refusal_is_a_problem_document_with_the_counts() {
        let refusal = CapReached::new(10, 10, vec!["streamer-a".into()]);
        let body = serde_json::to_value(&refusal).unwrap();
        assert_eq!(body["status"], 429);
        assert_eq!(body["title"], "Too Many Requests");
        assert_eq!(body["type"], "about:blank");
        assert_eq!(body["active"], 10);
        assert_eq!(body["maxActive"], 10);
        assert_eq!(body["yours"][0], "streamer-a");
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains("10 streamers run"), "{detail}");
        assert!(detail.contains("streamer-a"), "{detail}");
        // Any client reads it as a problem too.
        let p = Problem::from_body(429, &body.to_string());
        assert_eq!(p.message(), detail);
        let none = CapReached::new(3, 3, vec![]);
        assert!(none.problem.detail.contains("none of them is yours"));
    }
}
