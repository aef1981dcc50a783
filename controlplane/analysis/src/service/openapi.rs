//! The OpenAPI 3 document of the REST API, served at `/v1/openapi.json` and committed as
//! docs/api/analysis.openapi.json (a test fails when the two differ; regenerate with
//! `nsight-analysis --print-openapi > docs/api/analysis.openapi.json`).

use serde_json::{json, Value};

fn problem(description: &str) -> Value {
    json!({ "description": description, "content": { "application/problem+json": { "schema": { "$ref": "#/components/schemas/Problem" } } } })
}

fn ok(description: &str, schema: Value) -> Value {
    json!({ "description": description, "content": { "application/json": { "schema": schema } } })
}

fn schema(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn job_id() -> Value {
    json!({ "name": "id", "in": "path", "required": true, "schema": { "type": "string", "format": "uuid" } })
}

/// 200 with `schema`, 400 for a malformed id, 404 for an unknown job.
fn job_get(summary: &str, what: &str, schema: Value) -> Value {
    json!({ "get": {
        "summary": summary,
        "parameters": [job_id()],
        "responses": {
            "200": ok(what, schema),
            "400": problem("the id is not a UUID"),
            "404": problem("no such job")
        }
    }})
}

fn file_response(summary: &str, extra: Value) -> Value {
    let mut params = vec![job_id()];
    if !extra.is_null() {
        params.push(extra);
    }
    json!({ "get": {
        "summary": summary,
        "parameters": params,
        "responses": {
            "200": { "description": "the file, streamed from storage (Content-Type by extension: text/csv, application/x-ipynb+json, text/html)",
                     "content": { "application/octet-stream": { "schema": { "type": "string", "format": "binary" } } } },
            "400": problem("the id is not a UUID"),
            "404": problem("no such job or file (files exist once the job succeeded)"),
            "503": problem("storage could not be read")
        }
    }})
}

/// The whole document.
pub fn document() -> Value {
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Nsight Analysis API",
            "version": "v1",
            "description": "Recipes (sandboxed Wasm components) run as jobs over a session's reports in storage; outputs are CSVs, a Jupyter notebook and an HTML page. Behind the gateway at /analysis/v1."
        },
        "servers": [{ "url": "/analysis/v1" }, { "url": "/v1" }],
        "paths": {
            "/recipes": { "get": {
                "summary": "List recipes",
                "responses": { "200": ok("recipes, by name", json!({ "type": "object", "properties": { "recipes": { "type": "array", "items": schema("Recipe") } } })) }
            }},
            "/recipes/{name}": { "get": {
                "summary": "One recipe and its arguments",
                "parameters": [{ "name": "name", "in": "path", "required": true, "schema": { "type": "string" } }],
                "responses": { "200": ok("the recipe", schema("Recipe")), "404": problem("no such recipe") }
            }},
            "/jobs": {
                "get": {
                    "summary": "List jobs, oldest first",
                    "parameters": [{ "name": "status", "in": "query", "required": false, "schema": schema("JobStatus") }],
                    "responses": {
                        "200": ok("jobs", json!({ "type": "object", "properties": { "jobs": { "type": "array", "items": schema("Job") } } })),
                        "400": problem("unknown status")
                    }
                },
                "post": {
                    "summary": "Create a job (runs when a slot is free)",
                    "requestBody": { "required": true, "content": { "application/json": { "schema": schema("JobRequest") } } },
                    "responses": {
                        "202": ok("the queued job", schema("Job")),
                        "400": problem("malformed body, unknown argument, or an id that is not a key component"),
                        "404": problem("no such recipe"),
                        "503": problem("the job could not be saved")
                    }
                }
            },
            "/jobs/{id}": {
                "get": job_get("A job", "the job", schema("Job"))["get"].clone(),
                "delete": {
                    "summary": "Delete a finished job and its files in storage",
                    "parameters": [job_id()],
                    "responses": {
                        "204": { "description": "deleted" },
                        "400": problem("the id is not a UUID"),
                        "404": problem("no such job"),
                        "409": problem("the job is queued or running: cancel it first"),
                        "503": problem("storage or the records failed")
                    }
                }
            },
            "/jobs/{id}/logs": job_get("The job's log", "log lines, oldest first", json!({ "type": "object", "properties": { "lines": { "type": "array", "items": schema("LogLine") } } })),
            "/jobs/{id}/files": job_get("The job's output files", "files", json!({ "type": "object", "properties": { "files": { "type": "array", "items": schema("OutputFile") } } })),
            "/jobs/{id}/files/{name}": file_response("One output file", json!({ "name": "name", "in": "path", "required": true, "schema": { "type": "string" } })),
            "/jobs/{id}/notebook.html": file_response("The HTML rendering of the job's tables", Value::Null),
            "/jobs/{id}/cancel": { "post": {
                "summary": "Cancel a queued or running job (a running one is stopped within a second; the answer waits up to 2 s for it)",
                "parameters": [job_id()],
                "responses": {
                    "200": ok("the job (status cancelled once stopped)", schema("Job")),
                    "400": problem("the id is not a UUID"),
                    "404": problem("no such job"),
                    "409": problem("the job has succeeded or failed already")
                }
            }}
        },
        "components": { "schemas": schemas() }
    })
}

fn schemas() -> Value {
    let ms_or_null = json!({ "type": "integer", "format": "int64", "nullable": true, "description": "unix milliseconds" });
    json!({
        "Problem": { "type": "object", "required": ["type", "title", "status", "detail"], "properties": {
            "type": { "type": "string" }, "title": { "type": "string" }, "status": { "type": "integer" }, "detail": { "type": "string" } } },
        "Recipe": { "type": "object", "required": ["name", "displayName", "description", "arguments"], "properties": {
            "name": { "type": "string" }, "displayName": { "type": "string" }, "description": { "type": "string" },
            "arguments": { "type": "array", "items": { "type": "object", "required": ["name", "description"], "properties": {
                "name": { "type": "string", "description": "given as --name value or --name=value" },
                "description": { "type": "string" }, "default": { "type": "string", "nullable": true } } } } } },
        "JobStatus": { "type": "string", "enum": ["queued", "running", "succeeded", "failed", "cancelled"] },
        "JobInput": { "type": "object", "additionalProperties": false, "required": ["session"], "properties": {
            "session": { "type": "string", "description": "the session id, as in storage keys" },
            "collection": { "type": "string", "description": "only this collection's reports" } } },
        "JobRequest": { "type": "object", "additionalProperties": false, "required": ["recipe"],
            "description": "Name the reports with `session` (and optionally `collection`), or with `inputs` for several sessions or collections in order (e.g. A then B for `diff`); not both. A recipe of the `recipe` world runs once per report; a `multi-recipe` (e.g. `diff`) runs once over all the job's reports, in input order.",
            "properties": {
            "recipe": { "type": "string" },
            "args": { "type": "array", "items": { "type": "string" }, "description": "command-line style: [\"--timeunit\", \"usec\"]" },
            "session": { "type": "string", "description": "the session id, as in storage keys" },
            "collection": { "type": "string", "description": "only this collection's reports" },
            "inputs": { "type": "array", "minItems": 1, "maxItems": 16, "items": { "$ref": "#/components/schemas/JobInput" },
                "description": "several scopes, in order; their reports are analysed in this order (each scope's sorted by key)" },
            "tag": { "type": "string", "default": "default" } } },
        "OutputFile": { "type": "object", "required": ["name", "size", "key"], "properties": {
            "name": { "type": "string" }, "size": { "type": "integer", "format": "int64" },
            "key": { "type": "string", "description": "object key in storage: <tag>/<session>/analysis/<job>/<name>" } } },
        "LogLine": { "type": "object", "required": ["time", "level", "message"], "properties": {
            "time": { "type": "integer", "format": "int64" }, "level": { "type": "string", "enum": ["debug", "info", "warn", "error"] },
            "message": { "type": "string" } } },
        "Job": { "type": "object", "properties": {
            "id": { "type": "string", "format": "uuid" }, "recipe": { "type": "string" },
            "args": { "type": "array", "items": { "type": "string" } },
            "tag": { "type": "string" }, "session": { "type": "string", "description": "the first input's session" },
            "collection": { "type": "string", "nullable": true, "description": "the first input's collection" },
            "inputs": { "type": "array", "items": { "$ref": "#/components/schemas/JobInput" }, "description": "every input, in order" },
            "status": { "$ref": "#/components/schemas/JobStatus" },
            "createdAt": { "type": "integer", "format": "int64" }, "startedAt": ms_or_null, "finishedAt": ms_or_null,
            "reason": { "type": "string", "nullable": true, "description": "why it failed or was cancelled" },
            "cancelRequested": { "type": "boolean" },
            "reports": { "type": "array", "items": { "type": "string" }, "description": "object keys of the reports analysed" },
            "files": { "type": "array", "items": { "$ref": "#/components/schemas/OutputFile" } },
            "notes": { "type": "array", "items": { "type": "string" } } } }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed document must equal the served one.
    #[test]
    fn committed_openapi_is_current() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/api/analysis.openapi.json"
        );
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        let current = serde_json::to_string_pretty(&document()).unwrap() + "\n";
        assert!(
            committed == current,
            "docs/api/analysis.openapi.json is stale: run \
             `cargo run -p nsight-analysis -- --print-openapi > docs/api/analysis.openapi.json`"
        );
    }
}
