//! The OpenAPI 3.0 documents of the coordinator's, the analysis service's and the tenant API's
//! REST APIs. The
//! schemas are derived from this crate's types (schemars, OpenAPI 3.0 settings, so doc comments
//! become descriptions and `deny_unknown_fields` becomes `additionalProperties: false`); what is
//! written here by hand is only each endpoint: path, method, parameters and which type each
//! answer carries. The services serve these at `<prefix>/openapi.json` and docs/api/ holds
//! committed copies (`cargo xtask codegen`; a test in each service fails when stale).
//!
//! ```text
//!  #[derive(JsonSchema)] types ──SchemaGenerator──> components.schemas ─┐
//!  endpoints (below) ─────────────── $ref ─────────────────────────────┴─> document (JSON)
//! ```

use std::cell::RefCell;

use schemars::{generate::SchemaSettings, JsonSchema, SchemaGenerator};
use serde_json::{json, Map, Value};

use crate::{analysis, coordinator, problem::MEDIA_TYPE, routes, tenant, Problem};

/// Collects the schemas an endpoint table refers to (a `RefCell` so the table's expressions can
/// all share it).
struct Schemas(RefCell<SchemaGenerator>);

impl Schemas {
    fn new() -> Self {
        Self(RefCell::new(SchemaSettings::openapi3().into_generator()))
    }

    /// A reference to `T`'s schema (or the schema itself for primitives).
    fn of<T: JsonSchema>(&self) -> Value {
        let schema = self.0.borrow_mut().subschema_for::<T>();
        serde_json::to_value(schema).unwrap_or_default()
    }

    /// An `application/json` answer carrying a `T`.
    fn ok<T: JsonSchema>(&self, description: &str) -> Value {
        json!({ "description": description, "content": { "application/json": { "schema": self.of::<T>() } } })
    }

    /// A problem-details answer.
    fn problem(&self, description: &str) -> Value {
        json!({ "description": description, "content": { MEDIA_TYPE: { "schema": self.of::<Problem>() } } })
    }

    /// A problem-details answer whose document is a `T` (a problem with extension members).
    fn problem_of<T: JsonSchema>(&self, description: &str) -> Value {
        json!({ "description": description, "content": { MEDIA_TYPE: { "schema": self.of::<T>() } } })
    }

    /// A JSON request body of `T`.
    fn body<T: JsonSchema>(&self) -> Value {
        json!({ "required": true, "content": { "application/json": { "schema": self.of::<T>() } } })
    }

    /// A JSON request body of `T` that may be left out (no body means `{}`: every field has a
    /// default).
    fn optional_body<T: JsonSchema>(&self) -> Value {
        json!({ "required": false, "content": { "application/json": { "schema": self.of::<T>() } } })
    }

    fn into_components(self) -> Value {
        Value::Object(self.0.into_inner().take_definitions(true))
    }
}

/// `responses` from (status, answer) pairs.
fn responses(pairs: Vec<(&str, Value)>) -> Value {
    Value::Object(
        pairs
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect::<Map<_, _>>(),
    )
}

fn document(title: &str, description: &str, prefix: &str, paths: Value, s: Schemas) -> Value {
    json!({
        "openapi": "3.0.3",
        "info": { "title": title, "version": "v1", "description": description },
        "servers": [{ "url": prefix }, { "url": routes::V1 }],
        "paths": paths,
        "components": { "schemas": s.into_components() }
    })
}

/// A `.sqlite` report's object key as the agents write it (`nsight_storage::layout::ReportKey`):
/// four components of `[A-Za-z0-9.-]` (at most 60, starting and ending with a letter or digit,
/// no `--`), the file `<process>_<tag>_<instance>_<stub>.sqlite` with the directory's tag.
pub const REPORT_KEY_PATTERN: &str = concat!(
    r"^(?!.*--)([A-Za-z0-9](?:[A-Za-z0-9.-]{0,58}[A-Za-z0-9])?)",
    r"/[A-Za-z0-9](?:[A-Za-z0-9.-]{0,58}[A-Za-z0-9])?",
    r"/[A-Za-z0-9](?:[A-Za-z0-9.-]{0,58}[A-Za-z0-9])?",
    r"/[A-Za-z0-9](?:[A-Za-z0-9.-]{0,58}[A-Za-z0-9])?_\1",
    r"_[A-Za-z0-9](?:[A-Za-z0-9.-]{0,58}[A-Za-z0-9])?",
    r"_[A-Za-z0-9](?:[A-Za-z0-9.-]{0,58}[A-Za-z0-9])?\.sqlite$",
);

/// The refusals every operation of a service behind the gateway may give: 403 for a request
/// that did not come through the gateway (`gateway_only`), and 413 for a body over `limit`.
fn behind_gateway(paths: &mut Value, s: &Schemas, limit: &str) {
    let operations = paths
        .as_object_mut()
        .into_iter()
        .flat_map(|all| all.values_mut())
        .filter_map(Value::as_object_mut)
        .flat_map(|methods| methods.values_mut());
    for op in operations {
        let has_body = op.get("requestBody").is_some();
        let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
            continue;
        };
        responses.insert(
            "403".into(),
            s.problem("the request did not come through the platform's gateway (the service runs with --gateway-token-file)"),
        );
        if has_body {
            responses.insert(
                "413".into(),
                s.problem(&format!("the request body is larger than {limit}")),
            );
        }
    }
}

fn query(name: &str, description: &str, schema: Value) -> Value {
    json!({ "name": name, "in": "query", "required": false, "description": description, "schema": schema })
}

fn path_param(name: &str, schema: Value) -> Value {
    json!({ "name": name, "in": "path", "required": true, "schema": schema })
}

/// The coordinator's API (docs/api/coordinator-rest.md).
pub fn coordinator() -> Value {
    use coordinator::*;
    let s = Schemas::new();
    let problems = |s: &Schemas| {
        vec![
            (
                "400",
                s.problem("bad input (malformed JSON, unknown field, invalid tag, title or id)"),
            ),
            ("404", s.problem("unknown session")),
            (
                "409",
                s.problem("conflicting state (e.g. start while collecting, end an ended session)"),
            ),
            ("503", s.problem("the state could not be saved")),
        ]
    };
    let with_problems = |s: &Schemas, mut ok: Vec<(&'static str, Value)>| {
        ok.extend(problems(s));
        responses(ok)
    };
    let tag = query("tag", "the tag (default `default`)", s.of::<Tag>());
    let session_id = path_param("id", json!({ "type": "string", "format": "uuid" }));
    let tag_action = |s: &Schemas, summary: &str, answer: Value| {
        json!({ "post": {
            "summary": summary,
            "requestBody": s.optional_body::<TagAction>(),
            "responses": with_problems(s, vec![("200", answer)])
        }})
    };
    let started = s.ok::<Started>("the collection started");
    let stopped = s.ok::<Stopped>("the collection stopping (or settled)");
    let ended = s.ok::<Ended>("the session ended");
    let mut paths = json!({
        "/status": { "get": {
            "summary": "Agents, open session and active collection of a tag",
            "parameters": [tag.clone(), query("limit", "agents listed (counts always cover all)", json!({ "type": "integer", "minimum": 0, "maximum": usize::MAX, "default": DEFAULT_STATUS_LIMIT }))],
            "responses": with_problems(&s, vec![("200", s.ok::<TagStatus>("tag status"))])
        }},
        "/changes": { "get": {
            "summary": "A long poll: answers when the coordinator's state changes (sessions, collections, agents' outcomes and registrations; not heartbeats) or after `wait` ms. Send the `version` of the previous answer as `since`; without `since` it answers at once",
            "parameters": [
                query("since", "the version of the previous answer", json!({ "type": "integer", "minimum": 0, "maximum": u64::MAX })),
                query("wait", "the longest wait in milliseconds", json!({ "type": "integer", "minimum": 0, "maximum": u64::MAX, "default": MAX_CHANGES_WAIT_MS })),
            ],
            "responses": with_problems(&s, vec![("200", s.ok::<Changes>("the version now"))])
        }},
        "/tags": { "get": {
            "summary": "Every tag that has sessions, in name order, with its session count and whether one is open",
            "responses": with_problems(&s, vec![("200", s.ok::<TagList>("the tags"))])
        }},
        "/sessions": {
            "get": {
                "summary": "List sessions",
                "parameters": [tag, query("state", "only sessions in this state", s.of::<SessionState>())],
                "responses": with_problems(&s, vec![("200", s.ok::<SessionList>("sessions, oldest first"))])
            },
            "post": {
                "summary": "Begin a session",
                "requestBody": s.optional_body::<BeginSession>(),
                "responses": with_problems(&s, vec![("201", s.ok::<SessionSummary>("the new session"))])
            }
        },
        "/sessions/{id}": { "get": {
            "summary": "A session with its collections and per-agent outcomes (uploaded object keys)",
            "parameters": [session_id.clone()],
            "responses": with_problems(&s, vec![("200", s.ok::<Session>("the session"))])
        }},
        "/sessions/{id}/reports": { "get": {
            "summary": "The session's report files in storage, with their download paths and a download URL each (S3 presigned, or signed by the coordinator for a local store; valid for an hour, no other credentials needed). 501 when no storage is configured",
            "parameters": [session_id],
            "responses": with_problems(&s, vec![
                ("200", s.ok::<ReportListing>("the reports")),
                ("501", s.problem("no report storage configured")),
            ])
        }},
        "/start": tag_action(&s, "Start a collection (opens a session if none is open)", started),
        "/stop": tag_action(&s, "Stop the active collection", stopped),
        "/end": tag_action(&s, "End the session", ended),
    });
    behind_gateway(&mut paths, &s, "64 KiB");
    document(
        "Nsight Coordinator API",
        &format!(
            "Sessions and collections of profiling agents. Behind the gateway at {}.",
            routes::COORDINATOR_V1
        ),
        routes::COORDINATOR_V1,
        paths,
        s,
    )
}

/// The analysis service's API (docs/analysis.md).
pub fn analysis() -> Value {
    use analysis::*;
    let s = Schemas::new();
    let job_id = path_param("id", json!({ "type": "string", "format": "uuid" }));
    let job_get = |s: &Schemas, summary: &str, ok: Value| {
        json!({ "get": {
            "summary": summary,
            "parameters": [job_id.clone()],
            "responses": responses(vec![
                ("200", ok),
                ("400", s.problem("the id is not a UUID")),
                ("404", s.problem("no such job")),
            ])
        }})
    };
    let file = |s: &Schemas, summary: &str, name: bool, types: &[&str]| {
        let mut parameters = vec![job_id.clone()];
        if name {
            parameters.push(path_param("name", json!({ "type": "string" })));
        }
        let content: Map<String, Value> = types
            .iter()
            .map(|t| {
                (
                    (*t).to_owned(),
                    json!({ "schema": { "type": "string", "format": "binary" } }),
                )
            })
            .collect();
        json!({ "get": {
            "summary": summary,
            "parameters": parameters,
            "responses": responses(vec![
                ("200", json!({ "description": "the file, streamed from storage (Content-Type by extension)",
                     "content": content })),
                ("400", s.problem("the id is not a UUID")),
                ("404", s.problem("no such job or file (files exist once the job succeeded)")),
                ("503", s.problem("storage could not be read")),
            ])
        }})
    };
    let job = job_get(&s, "A job", s.ok::<Job>("the job"));
    let paths = json!({
        "/recipes": { "get": {
            "summary": "List recipes",
            "responses": responses(vec![("200", s.ok::<RecipeList>("recipes, by name"))])
        }},
        "/recipes/{name}": { "get": {
            "summary": "One recipe and its arguments",
            "parameters": [path_param("name", json!({ "type": "string" }))],
            "responses": responses(vec![
                ("200", s.ok::<RecipeView>("the recipe")),
                ("404", s.problem("no such recipe")),
            ])
        }},
        "/jobs": {
            "get": {
                "summary": "List jobs, oldest first; `matched` counts those that match before `limit`",
                "parameters": [
                    query("status", "only jobs in this status", s.of::<JobStatus>()),
                    query("q", "only jobs whose ID, recipe, status, session or collection hold every word (case ignored)", json!({ "type": "string", "maxLength": MAX_JOBS_QUERY_CHARS })),
                    query("limit", "only the newest this many of those", json!({ "type": "integer", "minimum": 0, "maximum": usize::MAX })),
                ],
                "responses": responses(vec![
                    ("200", s.ok::<JobList>("jobs")),
                    ("400", s.problem("unknown status, or `q` too long")),
                ])
            },
            "post": {
                "summary": "Create a job (runs when a slot is free)",
                "requestBody": s.body::<JobRequest>(),
                "responses": responses(vec![
                    ("202", s.ok::<Job>("the queued job")),
                    ("400", s.problem("malformed body, unknown argument, or an id that is not a key component")),
                    ("404", s.problem("no such recipe")),
                    ("503", s.problem("the job could not be saved")),
                ])
            }
        },
        "/jobs/{id}": {
            "get": job["get"].clone(),
            "delete": {
                "summary": "Delete a finished job and its files in storage",
                "parameters": [job_id.clone()],
                "responses": responses(vec![
                    ("204", json!({ "description": "deleted" })),
                    ("400", s.problem("the id is not a UUID")),
                    ("404", s.problem("no such job")),
                    ("409", s.problem("the job is queued or running: cancel it first")),
                    ("503", s.problem("storage or the records failed")),
                ])
            }
        },
        "/jobs/{id}/logs": job_get(&s, "The job's log", s.ok::<JobLogs>("log lines, oldest first")),
        "/jobs/{id}/files": job_get(&s, "The job's output files", s.ok::<JobFiles>("files")),
        "/jobs/{id}/files/{name}": file(&s, "One output file", true, &FILE_TYPES),
        "/jobs/{id}/notebook.html": file(&s, "The HTML rendering of the job's tables and figures", false, &[file_content_type("notebook.html")]),
        "/jobs/{id}/cancel": { "post": {
            "summary": "Cancel a queued or running job (a running one is stopped within a second; the answer waits up to 2 s for it)",
            "parameters": [job_id],
            "responses": responses(vec![
                ("200", s.ok::<Job>("the job (status cancelled once stopped)")),
                ("400", s.problem("the id is not a UUID")),
                ("404", s.problem("no such job")),
                ("409", s.problem("the job has succeeded or failed already")),
            ])
        }}
    });
    let mut paths = paths;
    if let (Some(all), Value::Object(more)) = (paths.as_object_mut(), timeline_paths(&s)) {
        all.extend(more);
    }
    behind_gateway(&mut paths, &s, "1 MiB");
    document(
        "Nsight Analysis API",
        &format!("Recipes (sandboxed Wasm components) run as jobs over a session's reports in storage; outputs are CSVs, SVG figures, a Jupyter notebook and an HTML page. Behind the gateway at {}.", routes::ANALYSIS_V1),
        routes::ANALYSIS_V1,
        paths,
        s,
    )
}

/// The timeline routes of the analysis service (docs/timeline.md).
fn timeline_paths(s: &Schemas) -> Value {
    use crate::timeline::*;
    let required = |name: &str, description: &str, schema: Value| json!({ "name": name, "in": "query", "required": true, "description": description, "schema": schema });
    let report = required(
        "report",
        "the report's object key (<tag>/<session>/<collection>/<file>.sqlite)",
        json!({ "type": "string", "pattern": REPORT_KEY_PATTERN }),
    );
    let int = json!({ "type": "integer", "minimum": 0, "maximum": u32::MAX });
    let refusals = |s: &Schemas| {
        vec![
            ("400", s.problem("a parameter is missing or malformed, or the file is not an Nsight Systems SQLite export")),
            ("404", s.problem("no such report, track, tile or event")),
            ("503", s.problem("storage could not be read")),
        ]
    };
    let with = |s: &Schemas, ok: (&'static str, Value)| {
        let mut all = vec![ok];
        all.extend(refusals(s));
        responses(all)
    };
    json!({
        "/timeline": { "get": {
            "summary": "A report's track tree and time range (the report is indexed on first use)",
            "parameters": [report.clone()],
            "responses": with(s, ("200", s.ok::<Timeline>("the timeline")))
        }},
        "/timeline/tiles": { "get": {
            "summary": "One tile of one track: its events and bucket summaries, binary (nsight_contracts::timeline::Tile::encode). Carries an ETag; If-None-Match gives 304.",
            "parameters": [report.clone(),
                required("track", "a track id", int.clone()),
                required("level", "bucket width 2^level ns; at most the timeline's topLevel", json!({ "type": "integer", "minimum": 0, "maximum": u8::MAX })),
                required("index", "the tile's number from the timeline's start", int.clone())],
            "responses": with(s, ("200", json!({ "description": "the tile",
                "content": { "application/octet-stream": { "schema": { "type": "string", "format": "binary" } } } })))
        }},
        "/timeline/event": { "get": {
            "summary": "One event's row in the report and the events tied to it by the CUDA correlation id",
            "parameters": [report.clone(),
                required("track", "a track id", int.clone()),
                required("event", "the event's number on the track (by start)", int.clone())],
            "responses": with(s, ("200", s.ok::<EventDetail>("the event")))
        }},
        "/timeline/range": { "get": {
            "summary": "Per name, the events of the tracks that overlap [start, end): count, clipped total, busy time (union), p50 and p95",
            "parameters": [report.clone(),
                required("start", "ns, the report's clock", json!({ "type": "integer", "minimum": i64::MIN, "maximum": i64::MAX })),
                required("end", "ns, after start", json!({ "type": "integer", "minimum": i64::MIN, "maximum": i64::MAX })),
                query("tracks", "comma-separated track ids (default: every track with events)", json!({ "type": "string" }))],
            "responses": with(s, ("200", s.ok::<RangeSummary>("the aggregates, longest total first")))
        }},
        "/timeline/search": { "get": {
            "summary": "The next event (dir=prev: the previous) after the given one whose name contains q, ignoring case, in (start, track, event) order across every track; hit is null past the last",
            "parameters": [report.clone(),
                required("q", "the text a name contains (case-insensitive)", json!({ "type": "string", "minLength": 1, "maxLength": SEARCH_MAX })),
                query("from", "search from this event, `<track>.<event>` (default: the report's start, or its end with dir=prev)", json!({ "type": "string", "pattern": "^[0-9]{1,10}\\.[0-9]{1,10}$" })),
                query("dir", "next (default) or prev", json!({ "type": "string", "enum": ["next", "prev"] }))],
            "responses": with(s, ("200", s.ok::<SearchAnswer>("the match, or hit null")))
        }},
        "/timeline/perfetto": { "get": {
            "summary": "The whole report as a Perfetto trace (protobuf perfetto.protos.Trace), streamed as an attachment: the track tree as Perfetto tracks, every event a slice, CUDA launches as flows",
            "parameters": [report],
            "responses": with(s, ("200", json!({ "description": "the trace (<report>.perfetto-trace)",
                "content": { "application/octet-stream": { "schema": { "type": "string", "format": "binary" } } } })))
        }},
    })
}

/// The tenant API's (docs/tenant.md).
pub fn tenant() -> Value {
    use tenant::*;
    let s = Schemas::new();
    // What the API server accepts as an object name (a DNS-1123 label), as the service checks.
    let name = path_param(
        "name",
        json!({ "type": "string", "pattern": "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$" }),
    );
    let identity = json!({ "name": IDENTITY_HEADER, "in": "header", "required": true,
        "description": "the caller, set by the gateway's auth filter (never by the client)",
        "schema": { "type": "string" } });
    let no_identity = |s: &Schemas| s.problem("no identity header: call through the gateway");
    let unavailable = |s: &Schemas| s.problem("the Kubernetes API server failed or refused");
    let paths = json!({
        "/streamers": {
            "get": {
                "summary": "The caller's streamers (everyone's with all=true), oldest first, with the cap",
                "parameters": [identity.clone(), query("all", "everyone's streamers", json!({ "type": "boolean", "default": false }))],
                "responses": responses(vec![
                    ("200", s.ok::<StreamerList>("streamers")),
                    ("400", s.problem("bad query")),
                    ("401", no_identity(&s)),
                    ("503", unavailable(&s)),
                ])
            },
            "post": {
                "summary": "Launch a streamer for a session or one report (an NsightStreamer owned by the caller)",
                "parameters": [identity.clone()],
                "requestBody": s.body::<LaunchStreamer>(),
                "responses": responses(vec![
                    ("201", s.ok::<Streamer>("the new streamer (pending until its Pod is ready)")),
                    ("400", s.problem("malformed body, unknown field, neither or both of sessionId and report, a bad session ID or report key")),
                    ("401", no_identity(&s)),
                    ("429", s.problem_of::<CapReached>("streamerLaunch.maxActive streamers run already: the counts and the caller's own streamers")),
                    ("503", unavailable(&s)),
                ])
            }
        },
        "/streamers/{name}": {
            "get": {
                "summary": "One streamer; marks it active (postpones its reaping)",
                "parameters": [identity.clone(), name.clone()],
                "responses": responses(vec![
                    ("200", s.ok::<Streamer>("the streamer")),
                    ("400", s.problem("the name is not a resource name")),
                    ("401", no_identity(&s)),
                    ("404", s.problem("no such streamer")),
                    ("503", unavailable(&s)),
                ])
            },
            "delete": {
                "summary": "Delete one of the caller's streamers (frees a slot)",
                "parameters": [identity, name],
                "responses": responses(vec![
                    ("204", json!({ "description": "deleted" })),
                    ("400", s.problem("the name is not a resource name")),
                    ("401", no_identity(&s)),
                    ("403", s.problem("another user's streamer")),
                    ("404", s.problem("no such streamer")),
                    ("503", unavailable(&s)),
                ])
            }
        }
    });
    document(
        "Nsight Tenant API",
        &format!("Nsight Streamers for the Cloud UI's \"View trace\": at most streamerLaunch.maxActive at once, owned by the identity the gateway forwards, reaped when idle. Behind the gateway at {}.", routes::TENANT_V1),
        routes::TENANT_V1,
        paths,
        s,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `$ref` in `value` (recursively).
    fn refs(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("$ref", Value::String(r)) => out.push(r.clone()),
                        _ => refs(v, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    #[ignore = "prints the documents: cargo test -p nsight-contracts --features schema -- --ignored --nocapture"]
    fn print() {
        println!("{:#}\n{:#}\n{:#}", coordinator(), analysis(), tenant());
    }

    #[test]
    fn every_reference_resolves() {
        for doc in [coordinator(), analysis(), tenant()] {
            let mut found = Vec::new();
            refs(&doc, &mut found);
            assert!(!found.is_empty());
            for r in found {
                let name = r.strip_prefix("#/components/schemas/").unwrap();
                assert!(
                    doc["components"]["schemas"].get(name).is_some(),
                    "{r} is not in components"
                );
            }
        }
    }

    #[test]
    fn request_fields_carry_the_rules_the_services_check() {
        let doc = coordinator();
        let schemas = &doc["components"]["schemas"];
        assert_eq!(schemas["Tag"]["pattern"], "^[A-Za-z0-9_.-]{1,63}$");
        let begin = schemas["BeginSession"].to_string();
        assert!(begin.contains("#/components/schemas/Tag"), "{begin}");
        assert!(begin.contains("#/components/schemas/Title"), "{begin}");
        assert_eq!(schemas["Title"]["maxLength"], 256);
        assert!(schemas["Title"]["pattern"].as_str().unwrap().contains("/"));
        let action = schemas["TagAction"].to_string();
        assert!(
            action.contains("#/components/schemas/SessionId"),
            "{action}"
        );
        let status = &doc["paths"]["/status"]["get"];
        assert_eq!(status["parameters"][1]["schema"]["minimum"], 0);
        for (path, method) in [
            ("/status", "get"),
            ("/start", "post"),
            ("/sessions", "post"),
        ] {
            let answers = &doc["paths"][path][method]["responses"];
            assert!(answers.get("403").is_some(), "{path}: {answers}");
            assert_eq!(answers.get("413").is_some(), method == "post", "{path}");
        }
        let doc = analysis();
        let request = doc["components"]["schemas"]["JobRequest"].to_string();
        assert!(request.contains("^[A-Za-z0-9.-]{1,60}$"), "{request}");
        assert!(request.contains("\"maxItems\":16"), "{request}");
        let file = &doc["paths"]["/jobs/{id}/files/{name}"]["get"]["responses"]["200"]["content"];
        for t in analysis::FILE_TYPES {
            assert!(file.get(t).is_some(), "{t}: {file}");
        }
        assert!(doc["paths"]["/jobs"]["post"]["responses"]
            .get("413")
            .is_some());
        assert!(doc["paths"]["/jobs/{id}"]["get"]["responses"]
            .get("403")
            .is_some());
    }

    #[test]
    fn schemas_follow_the_serde_attributes() {
        let doc = coordinator();
        let schemas = &doc["components"]["schemas"];
        assert_eq!(schemas["TagAction"]["additionalProperties"], false);
        assert_eq!(
            schemas["SessionSummary"]["properties"]["createdAt"]["$ref"],
            "#/components/schemas/Millis"
        );
        assert_eq!(schemas["Millis"]["type"], "integer");
        assert!(schemas["AgentOutcome"].to_string().contains("stopSent"));
        assert_eq!(doc["servers"][0]["url"], "/coordinator/v1");
        let doc = analysis();
        assert_eq!(
            doc["components"]["schemas"]["JobStatus"]["enum"],
            json!(["queued", "running", "succeeded", "failed", "cancelled"])
        );
        let doc = tenant();
        let schemas = &doc["components"]["schemas"];
        assert_eq!(schemas["LaunchStreamer"]["additionalProperties"], false);
        let cap = schemas["CapReached"].to_string();
        assert!(cap.contains("maxActive") && cap.contains("detail"), "{cap}");
        assert_eq!(doc["servers"][0]["url"], "/tenant/v1");
    }
}
