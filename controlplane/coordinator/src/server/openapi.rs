//! The OpenAPI 3 document of the REST API, served at `/v1/openapi.json` and committed as
//! docs/api/coordinator.openapi.json (a test fails when the two differ; `cargo xtask codegen`
//! rewrites the file).

use serde_json::{json, Value};

fn problem_responses() -> Value {
    let problem = json!({ "content": { "application/problem+json": { "schema": { "$ref": "#/components/schemas/Problem" } } } });
    json!({
        "400": { "description": "bad input (malformed JSON, unknown field, invalid tag, title or id)", "content": problem["content"] },
        "404": { "description": "unknown session", "content": problem["content"] },
        "409": { "description": "conflicting state (e.g. start while collecting, end an ended session)", "content": problem["content"] },
        "503": { "description": "the state could not be saved", "content": problem["content"] }
    })
}

fn ok(description: &str, schema: &str) -> Value {
    json!({ "description": description, "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } } })
}

fn with_problems(mut responses: Value) -> Value {
    if let (Some(map), Value::Object(problems)) = (responses.as_object_mut(), problem_responses()) {
        map.extend(problems);
    }
    responses
}

fn tag_action(summary: &str, result: &str) -> Value {
    json!({ "post": {
        "summary": summary,
        "requestBody": { "content": { "application/json": { "schema": { "$ref": "#/components/schemas/TagAction" } } } },
        "responses": with_problems(json!({ "200": ok(summary, result) }))
    }})
}

/// The whole document.
pub fn document() -> Value {
    let tag_param = json!({ "name": "tag", "in": "query", "required": false, "schema": { "type": "string", "default": "default" } });
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Nsight Coordinator API",
            "version": "v1",
            "description": "Sessions and collections of profiling agents. Behind the gateway at /coordinator/v1."
        },
        "servers": [{ "url": "/coordinator/v1" }, { "url": "/v1" }],
        "paths": {
            "/status": { "get": {
                "summary": "Agents, open session and active collection of a tag",
                "parameters": [tag_param, { "name": "limit", "in": "query", "required": false, "description": "agents listed (counts always cover all)", "schema": { "type": "integer", "default": 100 } }],
                "responses": with_problems(json!({ "200": ok("tag status", "TagStatus") }))
            }},
            "/sessions": {
                "get": {
                    "summary": "List sessions",
                    "parameters": [tag_param, { "name": "state", "in": "query", "required": false, "schema": { "type": "string", "enum": ["open", "ended"] } }],
                    "responses": with_problems(json!({ "200": { "description": "sessions, oldest first", "content": { "application/json": { "schema": {
                        "type": "object", "properties": { "sessions": { "type": "array", "items": { "$ref": "#/components/schemas/SessionSummary" } } } } } } } }))
                },
                "post": {
                    "summary": "Begin a session",
                    "requestBody": { "content": { "application/json": { "schema": { "$ref": "#/components/schemas/BeginSession" } } } },
                    "responses": with_problems(json!({ "201": ok("the new session", "SessionSummary") }))
                }
            },
            "/sessions/{id}": { "get": {
                "summary": "A session with its collections and per-agent outcomes (uploaded object keys)",
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string", "format": "uuid" } }],
                "responses": with_problems(json!({ "200": ok("the session", "Session") }))
            }},
            "/sessions/{id}/reports": { "get": {
                "summary": "The session's report files in storage, with their download paths and a download URL each (S3 presigned, or signed by the coordinator for a local store; valid for an hour, no other credentials needed). 501 when no storage is configured",
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string", "format": "uuid" } }],
                "responses": with_problems(json!({ "200": ok("the reports", "ReportListing") }))
            }},
            "/start": tag_action("Start a collection (opens a session if none is open)", "Started"),
            "/stop": tag_action("Stop the active collection", "Stopped"),
            "/end": tag_action("End the session", "Ended"),
        },
        "components": { "schemas": schemas() }
    })
}

fn schemas() -> Value {
    let ms = json!({ "type": "integer", "format": "int64", "description": "unix milliseconds" });
    let ms_or_null = json!({ "type": "integer", "format": "int64", "nullable": true });
    json!({
        "Problem": { "type": "object", "required": ["type", "title", "status", "detail"], "properties": {
            "type": { "type": "string" }, "title": { "type": "string" }, "status": { "type": "integer" }, "detail": { "type": "string" } } },
        "TagAction": { "type": "object", "additionalProperties": false, "properties": {
            "tag": { "type": "string", "default": "default" }, "session": { "type": "string", "format": "uuid" } } },
        "BeginSession": { "type": "object", "additionalProperties": false, "properties": {
            "tag": { "type": "string", "default": "default" }, "title": { "type": "string", "maxLength": 256 } } },
        "ReportListing": { "type": "object", "properties": {
            "session": { "type": "string" }, "tag": { "type": "string" },
            "directory": { "type": "string", "description": "<YYYYMMDDHHMMSS>-<title>, the session's download directory" },
            "reports": { "type": "array", "items": { "$ref": "#/components/schemas/ReportEntry" } },
            "urlError": { "type": "string", "description": "why reports have no URL, when they have none" } } },
        "ReportEntry": { "type": "object", "properties": {
            "key": { "type": "string" }, "collection": { "type": "string" }, "process": { "type": "string" },
            "instance": { "type": "string" }, "kind": { "type": "string", "enum": ["nsys-rep", "sqlite"] },
            "size": { "type": "integer", "format": "int64" }, "lastModified": { "type": "string", "format": "date-time", "nullable": true },
            "path": { "type": "string", "description": "relative download path: <directory>/<collection>/<file>" },
            "flatPath": { "type": "string", "description": "relative path with --flat" },
            "url": { "type": "string", "nullable": true }, "urlExpiresInS": { "type": "integer" },
            "sha256": { "type": "string", "description": "hex SHA-256 recorded at upload; absent when the store keeps none" } } },
        "SessionSummary": { "type": "object", "properties": {
            "id": { "type": "string", "format": "uuid" }, "tag": { "type": "string" }, "title": { "type": "string", "nullable": true },
            "state": { "type": "string", "enum": ["open", "ended"] }, "createdAt": ms, "endedAt": ms_or_null, "collections": { "type": "integer" } } },
        "Session": { "type": "object", "properties": {
            "id": { "type": "string", "format": "uuid" }, "tag": { "type": "string" }, "title": { "type": "string", "nullable": true },
            "state": { "type": "string", "enum": ["open", "ended"] }, "createdAt": ms, "endedAt": ms_or_null,
            "collections": { "type": "array", "items": { "$ref": "#/components/schemas/Collection" } } } },
        "Collection": { "type": "object", "properties": {
            "id": { "type": "integer" }, "startedAt": ms, "stopRequestedAt": ms_or_null, "completedAt": ms_or_null,
            "state": { "type": "string", "enum": ["collecting", "stopping", "completed", "incomplete"] },
            "agents": { "type": "object", "additionalProperties": { "$ref": "#/components/schemas/AgentOutcome" } } } },
        "AgentOutcome": { "type": "object", "required": ["state"], "properties": {
            "state": { "type": "string", "enum": ["pending", "started", "stopSent", "uploaded", "failed", "timedOut", "lost"] },
            "keys": { "type": "array", "items": { "type": "string" } }, "reason": { "type": "string" } } },
        "TagStatus": { "type": "object", "properties": {
            "tag": { "type": "string" },
            "agents": { "type": "array", "items": { "$ref": "#/components/schemas/AgentStatus" } },
            "agentCounts": { "type": "object", "properties": { "known": { "type": "integer" }, "connected": { "type": "integer" } } },
            "activeSession": { "allOf": [{ "$ref": "#/components/schemas/SessionSummary" }], "nullable": true },
            "activeCollection": { "type": "object", "nullable": true, "description": "Collection + session, outcomeCounts, agentsTotal" } } },
        "AgentStatus": { "type": "object", "properties": {
            "key": { "type": "string" }, "connected": { "type": "boolean" }, "lastSeen": ms,
            "info": { "type": "object", "properties": {
                "identity": { "type": "object", "properties": {
                    "namespace": { "type": "string" }, "pod": { "type": "string" }, "container": { "type": "string" },
                    "processName": { "type": "string" }, "pid": { "type": "integer" } } },
                "tag": { "type": "string" }, "node": { "type": "string" }, "backend": { "type": "string", "enum": ["nsys", "nvtx"] },
                "diagnostics": { "type": "array", "items": { "type": "string" } } } } } },
        "Started": { "type": "object", "properties": {
            "session": { "type": "string", "format": "uuid" }, "collection": { "type": "integer" },
            "sessionCreated": { "type": "boolean" }, "agents": { "type": "integer" } } },
        "Stopped": { "type": "object", "properties": {
            "session": { "type": "string", "format": "uuid" }, "collection": { "type": "integer" },
            "agents": { "type": "integer" }, "state": { "type": "string" } } },
        "Ended": { "type": "object", "properties": {
            "session": { "type": "string", "format": "uuid" },
            "stopped": { "allOf": [{ "$ref": "#/components/schemas/Stopped" }], "nullable": true } } }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed document must equal the served one: run `cargo xtask codegen` after a change.
    #[test]
    fn committed_openapi_is_current() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/api/coordinator.openapi.json"
        );
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        let current = serde_json::to_string_pretty(&document()).unwrap() + "\n";
        assert!(
            committed == current,
            "docs/api/coordinator.openapi.json is stale: run `cargo xtask codegen`"
        );
    }
}
