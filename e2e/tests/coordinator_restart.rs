//! The coordinator survives `kill -9` mid-collection: after a restart on the same state
//! directory the agents reconnect on their own, resume, and the collection finishes with every
//! agent's upload recorded. Also: the REST API's refusals for bad input and conflicting state,
//! the long poll of `/changes`, and schemathesis against the coordinator's and the analysis
//! service's OpenAPI documents.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::time::{Duration, Instant};

use nsight_e2e::{
    http,
    platform::{AnalysisProcess, CoordinatorProcess, SimAgents},
    wait_for, TempDir,
};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

fn post(c: &CoordinatorProcess, path: &str, body: &str) -> (u16, Value) {
    let r = http::post_json(c.http, path, body).unwrap();
    let v = serde_json::from_str(&r.body).unwrap_or(Value::Null);
    (r.status, v)
}

#[test]
fn kill9_mid_collection_then_restart_loses_nothing() {
    let dir = TempDir::new("coord-restart");
    let state = dir.path().join("state");
    let coordinator = CoordinatorProcess::start(&state, 3_000);
    let sims = SimAgents::start(dir.path(), &coordinator, 3, "default", "train");
    assert!(
        sims.wait_count("registered", 3, WAIT),
        "{:?}",
        sims.events()
    );

    let (status, started) = post(
        &coordinator,
        "/coordinator/v1/start",
        r#"{"tag":"default"}"#,
    );
    assert_eq!(status, 200, "{started}");
    assert_eq!(started["agents"], 3);
    assert_eq!(started["collection"], 1);
    let session = started["session"].as_str().unwrap().to_string();
    assert!(sims.wait_count("started", 3, WAIT));

    let (http, grpc, state) = coordinator.kill9();
    assert!(
        sims.wait_count("disconnected", 3, WAIT),
        "agents notice the loss"
    );
    let coordinator = CoordinatorProcess::start_on(http, grpc, &state, 3_000);

    // Agents come back by themselves, are recognised, and are told to resume collection 1.
    let resumed = wait_for(WAIT, || {
        let events = sims.events();
        let back = events
            .iter()
            .filter(|e| e["event"] == "registered" && e["reconnected"] == true)
            .count();
        (back >= 3 && sims.count("started") >= 6).then_some(())
    });
    assert!(
        resumed.is_some(),
        "agents did not resume: {:?}",
        sims.events()
    );

    let status = coordinator.get("/v1/status?tag=default");
    assert_eq!(status["activeSession"]["id"], session.as_str());
    assert_eq!(status["activeCollection"]["state"], "collecting");

    let (code, stopped) = post(&coordinator, "/v1/stop", r#"{"tag":"default"}"#);
    assert_eq!(code, 200, "{stopped}");
    let done = wait_for(WAIT, || {
        let s = coordinator.get(&format!("/v1/sessions/{session}"));
        (s["collections"][0]["state"] == "completed").then_some(s)
    })
    .unwrap_or_else(|| {
        panic!(
            "collection did not complete: {}",
            coordinator.get(&format!("/v1/sessions/{session}"))
        )
    });
    let agents = done["collections"][0]["agents"].as_object().unwrap();
    assert_eq!(agents.len(), 3);
    for (key, outcome) in agents {
        assert_eq!(outcome["state"], "uploaded", "{key}: {outcome}");
        let report = outcome["keys"][0].as_str().unwrap();
        assert!(
            report.starts_with(&format!("default/{session}/1/sim_default_train-")),
            "{report}"
        );
    }
}

#[test]
fn rest_refusals_are_problems_a_person_can_act_on() {
    let dir = TempDir::new("coord-refusals");
    let c = CoordinatorProcess::start(&dir.path().join("state"), 15_000);
    let problem = |code: u16, path: &str, body: &str| {
        let r = http::post_json(c.http, path, body).unwrap();
        assert_eq!(r.status, code, "{path} {body}: {r:?}");
        assert_eq!(r.header("content-type"), Some("application/problem+json"));
        let v: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(v["status"], code);
        v["detail"].as_str().unwrap().to_string()
    };
    assert!(problem(400, "/v1/start", "{not json").contains("invalid JSON"));
    assert!(problem(400, "/v1/start", r#"{"tag":"default","bogus":1}"#).contains("bogus"));
    assert!(problem(400, "/v1/start", r#"{"tag":"no spaces allowed"}"#).contains("tag"));
    let long = "x".repeat(257);
    problem(400, "/v1/sessions", &format!(r#"{{"title":"{long}"}}"#));
    problem(400, "/v1/sessions", r#"{"title":"bell\u0007"}"#);
    problem(400, "/v1/start", r#"{"session":"not-a-uuid"}"#);
    // Issue 22, item 7: only objects, no nulls, a size limit named, query errors as problems.
    assert!(problem(400, "/v1/end", r#"["default",null]"#).contains("must be an object"));
    assert!(problem(400, "/v1/sessions", r#"{"title":null}"#).contains("`title` is null"));
    let huge = format!(r#"{{"title":"{}"}}"#, "x".repeat(100 * 1024));
    assert!(problem(413, "/v1/sessions", &huge).contains("larger than 64 KiB"));
    let r = http::get(c.http, "/v1/status?limit=many", &[]).unwrap();
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert!(r.body.contains("invalid query string"), "{}", r.body);
    problem(
        404,
        "/v1/start",
        r#"{"session":"00000000-0000-4000-8000-000000000000"}"#,
    );

    let (code, s) = post(&c, "/v1/sessions", r#"{"tag":"a","title":"first run"}"#);
    assert_eq!(code, 201, "{s}");
    assert_eq!(s["title"], "first run");
    let id = s["id"].as_str().unwrap().to_string();
    problem(409, "/v1/sessions", r#"{"tag":"a"}"#); // one open session per tag
    problem(
        409,
        "/v1/start",
        &format!(r#"{{"tag":"b","session":"{id}"}}"#),
    ); // other tag
    let (code, _) = post(&c, "/v1/start", r#"{"tag":"a"}"#);
    assert_eq!(code, 200);
    problem(409, "/v1/start", r#"{"tag":"a"}"#); // already collecting
    let (code, _) = post(&c, "/v1/end", r#"{"tag":"a"}"#);
    assert_eq!(code, 200);
    problem(
        409,
        "/v1/end",
        &format!(r#"{{"tag":"a","session":"{id}"}}"#),
    ); // already ended

    let r = http::get(c.http, "/v1/sessions/zzz", &[]).unwrap();
    assert_eq!(r.status, 400);
    let r = http::get(c.http, "/v1/nope", &[]).unwrap();
    assert_eq!(r.status, 404);
    // Nothing above corrupted the state: the one session is listed, ended, with one collection.
    let list = c.get("/v1/sessions?tag=a");
    assert_eq!(list["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(list["sessions"][0]["state"], "ended");
    assert_eq!(list["sessions"][0]["collections"], 1);
    let openapi = c.get("/coordinator/v1/openapi.json");
    assert_eq!(openapi["openapi"], "3.0.3");
}

#[test]
fn the_changes_poll_answers_when_the_state_changes_and_not_before() {
    let dir = TempDir::new("coord-changes");
    let c = CoordinatorProcess::start(&dir.path().join("state"), 15_000);
    let version = |v: &Value| v["version"].as_u64().unwrap();
    let v0 = version(&c.get("/v1/changes"));
    // Nothing changes: the poll waits its whole `wait` and answers the same version.
    let t = Instant::now();
    let same = c.get(&format!("/v1/changes?since={v0}&wait=400"));
    assert_eq!(version(&same), v0);
    assert!(
        t.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t.elapsed()
    );
    // A session begun by another client while a poll waits: answered then, with another version.
    let addr = c.http;
    let waiter = std::thread::spawn(move || {
        let t = Instant::now();
        let r = http::get(addr, &format!("/v1/changes?since={v0}&wait=9000"), &[]).unwrap();
        (t.elapsed(), r)
    });
    std::thread::sleep(Duration::from_millis(500));
    let (code, _) = post(&c, "/v1/sessions", r#"{"tag":"live"}"#);
    assert_eq!(code, 201);
    let (took, r) = waiter.join().unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    let v1 = version(&serde_json::from_str(&r.body).unwrap());
    assert_ne!(v1, v0);
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(5),
        "answered after {took:?}"
    );
    // A refused action changes nothing; a version the coordinator never had answers at once.
    let (code, _) = post(&c, "/v1/sessions", r#"{"tag":"live"}"#);
    assert_eq!(code, 409);
    assert_eq!(version(&c.get("/v1/changes")), v1);
    let t = Instant::now();
    assert_eq!(version(&c.get("/v1/changes?since=1&wait=9000")), v1);
    assert!(t.elapsed() < Duration::from_secs(5));
    let r = http::get(c.http, "/v1/changes?since=soon", &[]).unwrap();
    assert_eq!(r.status, 400, "{r:?}");
    // The tag selector's list: the one tag, with its open session.
    let tags = c.get("/v1/tags");
    assert_eq!(
        tags,
        serde_json::json!({"tags": [{"tag": "live", "sessions": 1, "open": true}]})
    );
}

/// schemathesis (PyPI, in the setup venv) against the OpenAPI documents the coordinator and the
/// analysis service serve, on live servers: every check (no 5xx, status codes, content types
/// and bodies as documented, schema-valid requests accepted, schema-violating ones refused).
/// A fixed seed keeps CI repeatable; `--max-examples` bounds it to seconds.
#[test]
fn the_openapi_documents_hold_under_schemathesis() {
    let dir = TempDir::new("schemathesis");
    let coordinator =
        CoordinatorProcess::start_with_storage(&dir.path().join("c"), &dir.path().join("r"));
    let analysis = AnalysisProcess::start(
        &nsight_e2e::bin("nsight-analysis"),
        nsight_e2e::free_port(),
        (&dir.path().join("r"), None),
        &[],
        &dir.path().join("analysis.log"),
    );
    for (service, addr) in [
        ("coordinator", coordinator.http),
        ("analysis", analysis.http),
    ] {
        let checked = nsight_e2e::schemathesis::check(
            dir.path(),
            &format!("http://{addr}/v1/openapi.json"),
            &format!("http://{addr}/v1"),
            &[],
        );
        if let Err(report) = checked {
            panic!("schemathesis found failures in the {service} API:\n{report}");
        }
    }
}
