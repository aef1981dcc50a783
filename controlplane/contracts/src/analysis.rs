//! The analysis service's REST contract (docs/analysis.md), paths below
//! [`crate::routes::ANALYSIS_V1`]:
//!
//! ```text
//!  GET    /recipes                     -> RecipeList
//!  GET    /recipes/{name}              -> RecipeView
//!  POST   /jobs          JobRequest    -> 202 Job
//!  GET    /jobs?status&q&limit JobsQuery -> JobList
//!  GET    /jobs/{id}                   -> Job
//!  GET    /jobs/{id}/logs              -> JobLogs
//!  GET    /jobs/{id}/files             -> JobFiles
//!  GET    /jobs/{id}/files/{name}      -> the file (CSV, SVG, ipynb)
//!  GET    /jobs/{id}/notebook.html     -> the notebook as a page
//!  POST   /jobs/{id}/cancel            -> Job
//!  DELETE /jobs/{id}                   -> 204
//!  any refusal                         -> Problem (application/problem+json)
//! ```
//!
//! The job's lifecycle rules (which transitions are allowed, what a request must name) are the
//! service's (`nsight_analysis::service::job`); here is only its shape.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Most inputs one job may name.
pub const MAX_INPUTS: usize = 16;

/// What the analysis service sends a job's files as, by extension (`.csv`, `.ipynb`, `.html`,
/// `.svg`, anything else): [`file_content_type`].
pub const FILE_TYPES: [&str; 5] = [
    "text/csv; charset=utf-8",
    "application/x-ipynb+json",
    "text/html; charset=utf-8",
    "image/svg+xml",
    "application/octet-stream",
];

/// The `Content-Type` of a job's file named `name`.
pub fn file_content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("csv") => FILE_TYPES[0],
        Some("ipynb") => FILE_TYPES[1],
        Some("html") => FILE_TYPES[2],
        Some("svg") => FILE_TYPES[3],
        _ => FILE_TYPES[4],
    }
}

/// Where a job is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// before this field have none; the first scope is then `session`/`collection`.
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobInput {
    #[cfg_attr(feature = "schema", schemars(extend("pattern" = "^[A-Za-z0-9.-]{1,60}$")))]
    pub session: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "String", extend("pattern" = "^[A-Za-z0-9.-]{1,60}$")))]
    pub collection: Option<String>,
}

/// The body of `POST jobs`: `session` (and optionally `collection`) for the reports of one
/// session, or `inputs` for several scopes in order (a multi-report recipe such as `diff`).
/// `tag` defaults to `default`; `args` are command-line style (`--name value`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    pub recipe: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "String", extend("pattern" = "^[A-Za-z0-9.-]{1,60}$")))]
    pub session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "String", extend("pattern" = "^[A-Za-z0-9.-]{1,60}$")))]
    pub collection: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<JobInput>", extend("minItems" = 1, "maxItems" = 16)))]
    pub inputs: Option<Vec<JobInput>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "crate::coordinator::Tag"))]
    pub tag: Option<String>,
}

/// `GET jobs`: only the jobs in this status (`queued`, `running`, ...), whose ID, recipe,
/// status, session or collection hold every word of `q` (ignoring case:
/// [`crate::listing::matches`]), and of those only the newest `limit`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct JobsQuery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "JobStatus"))]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("maxLength" = 256)))]
    pub q: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// The longest `q` of [`JobsQuery`], in characters.
pub const MAX_JOBS_QUERY_CHARS: usize = 256;

impl Job {
    /// Whether the job matches the words `q` (its ID, recipe, status, session, collection).
    pub fn matches(&self, q: &str) -> bool {
        let id = self.id.to_string();
        let collection = self.collection.as_deref().unwrap_or_default();
        crate::listing::matches(
            q,
            &[
                &id,
                &self.recipe,
                self.status.as_str(),
                &self.session,
                collection,
            ],
        )
    }
}

/// `GET jobs`: oldest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct JobList {
    pub jobs: Vec<Job>,
    /// How many jobs matched the status and the words, before `limit` (absent from older
    /// services: then `jobs` is all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<usize>,
}

/// `GET jobs/{id}/files`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct JobFiles {
    pub files: Vec<OutputFile>,
}

/// One line of a job's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LogEntry {
    /// Unix milliseconds.
    pub time: u64,
    /// `debug`, `info`, `warn` or `error`.
    pub level: String,
    pub message: String,
}

/// `GET jobs/{id}/logs`: the job's log, oldest first (a long log keeps its first lines, a line
/// saying how many were left out, and the newest).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct JobLogs {
    pub lines: Vec<LogEntry>,
}

/// One argument a recipe declares.
// Fields in alphabetical order: the wire form predates this type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecipeArgument {
    /// The value used when the job does not give one.
    pub default: Option<String>,
    pub description: String,
    /// Given as `--<name> value`.
    pub name: String,
}

/// `GET recipes/{name}`: what a recipe is and the arguments it takes.
// Fields in alphabetical order: the wire form predates this type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RecipeView {
    pub arguments: Vec<RecipeArgument>,
    pub description: String,
    pub display_name: String,
    pub name: String,
}

/// `GET recipes`: every recipe the service offers, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RecipeList {
    pub recipes: Vec<RecipeView>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_by_name() {
        for status in JobStatus::ALL {
            assert_eq!(JobStatus::parse(status.as_str()), Some(status));
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
        }
        assert_eq!(JobStatus::parse("done"), None);
    }

    #[test]
    fn a_request_names_only_what_it_gives() {
        let request = JobRequest {
            recipe: "diff".into(),
            inputs: Some(vec![
                JobInput {
                    session: "a".into(),
                    collection: None,
                },
                JobInput {
                    session: "b".into(),
                    collection: Some("1".into()),
                },
            ]),
            tag: Some("default".into()),
            ..JobRequest::default()
        };
        assert_eq!(
            serde_json::to_string(&request).unwrap(),
            r#"{"recipe":"diff","args":[],"inputs":[{"session":"a"},{"session":"b","collection":"1"}],"tag":"default"}"#
        );
        let err = serde_json::from_str::<JobRequest>(r#"{"recipe":"x","sesion":"a"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }

    #[test]
    fn a_recipe_view_keeps_its_wire_order() {
        let view = RecipeView {
            arguments: vec![RecipeArgument {
                default: Some("nsec".into()),
                description: "unit".into(),
                name: "timeunit".into(),
            }],
            description: "d".into(),
            display_name: "NVTX Range Summary".into(),
            name: "nvtx_sum".into(),
        };
        assert_eq!(
            serde_json::to_string(&view).unwrap(),
            r#"{"arguments":[{"default":"nsec","description":"unit","name":"timeunit"}],"description":"d","displayName":"NVTX Range Summary","name":"nvtx_sum"}"#
        );
    }
}
