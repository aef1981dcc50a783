//! The real `nsight-analysis` binary over a local directory store seeded with real nsys
//! exports (copied from shared/testdata into the store's key layout): jobs over REST, outputs
//! equal to what the recipe gives directly, the notebook valid for the `nbformat` package, bad
//! input refused with problem+json or failing the job clearly, cancel of a runaway job within
//! a second, and job records surviving `kill -9`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

mod common;

use std::time::{Duration, Instant};

use common::service::{nbformat_validate, problem, seed, testdata, Service};
use nsight_analysis::table_to_csv;
use nsight_e2e::{free_port, http, TempDir};
use serde_json::{json, Value};

/// Never ends on its own (SQLite counts forever); only the 60 s call limit or a cancel stops it.
const RUNAWAY: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                       SELECT max(x) FROM c";

#[test]
fn a_job_writes_the_recipes_csv_a_notebook_and_a_page() {
    let dir = TempDir::new("analysis-svc-ok");
    let report = testdata("extrap/con_kernel.sqlite");
    seed(dir.path(), "default/s1/1/app_default_0_a.sqlite", &report);
    seed(
        dir.path(),
        "default/s1/2/app_default_0_b.sqlite",
        &testdata("extrap/concurrent/profile1.sqlite"),
    );
    let svc = Service::start(dir.path(), None, &[]);

    let (status, recipes) = svc.get("/analysis/v1/recipes");
    assert_eq!(status, 200);
    let names: Vec<&str> = recipes["recipes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "cuda_api_gpu_sum",
            "cuda_api_sum",
            "cuda_gpu_kern_hist",
            "cuda_gpu_kern_pace",
            "cuda_gpu_kern_sum",
            "cuda_gpu_mem_size_sum",
            "cuda_gpu_mem_time_sum",
            "cuda_gpu_trace",
            "cuda_kern_exec_sum",
            "cuda_memcpy_async",
            "cuda_memcpy_sync",
            "diff",
            "gpu_gaps",
            "gpu_time_util",
            "nccl_gpu_time_util_map",
            "nccl_sum",
            "nvtx_gpu_proj_sum",
            "nvtx_kern_sum",
            "nvtx_pace",
            "nvtx_sum",
            "osrt_sum",
            "sql",
            "um_sum"
        ]
    );
    let (status, recipe) = svc.get("/v1/recipes/cuda_gpu_kern_sum");
    assert_eq!(status, 200);
    assert_eq!(recipe["arguments"][0]["name"], "timeunit");
    assert_eq!(recipe["arguments"][0]["default"], "nsec");

    let id = svc.create(json!({
        "recipe": "cuda_gpu_kern_sum", "args": ["--timeunit", "usec"],
        "session": "s1", "collection": "1"
    }));
    let job = svc.wait_status(&id, "succeeded");
    assert_eq!(
        job["reports"],
        json!(["default/s1/1/app_default_0_a.sqlite"])
    );
    let files: Vec<&str> = job["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    let csv_name = "1_app_default_0_a_cuda-gpu-kern-sum.csv";
    assert_eq!(files, [csv_name, "notebook.ipynb", "notebook.html"]);

    // The CSV is exactly what the recipe gives when run directly.
    let component = common::recipe("cuda_gpu_kern_sum");
    let direct = common::host()
        .run(&component, &report, &[("timeunit".into(), "usec".into())])
        .unwrap();
    let want = table_to_csv(&direct.tables[0]);
    assert!(direct.tables[0].rows.len() > 1);
    let csv = svc.raw(&format!("/v1/jobs/{id}/files/{csv_name}"));
    assert_eq!(csv.status, 200);
    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
    assert_eq!(csv.body, want);
    let stored = dir
        .path()
        .join(format!("store/default/s1/analysis/{id}/{csv_name}"));
    assert_eq!(std::fs::read_to_string(stored).unwrap(), want);
    let (_, listed) = svc.get(&format!("/analysis/v1/jobs/{id}/files"));
    assert_eq!(listed["files"][0]["size"], want.len());

    let notebook = svc.raw(&format!("/v1/jobs/{id}/files/notebook.ipynb"));
    assert_eq!(notebook.status, 200);
    let nb: Value = serde_json::from_str(&notebook.body).unwrap();
    assert_eq!(nb["nbformat"], 4);
    assert!(nb["cells"][3]["source"]
        .as_str()
        .unwrap()
        .contains(csv_name));
    nbformat_validate(dir.path(), &notebook.body);

    let page = svc.raw(&format!("/analysis/v1/jobs/{id}/notebook.html"));
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-security-policy")
        .unwrap()
        .contains("default-src 'none'"));
    assert!(
        page.body.contains("CUDA GPU Kernel Summary"),
        "{}",
        page.body
    );

    let (_, logs) = svc.get(&format!("/v1/jobs/{id}/logs"));
    let lines = logs["lines"].as_array().unwrap();
    assert!(lines
        .iter()
        .any(|l| l["message"].as_str().unwrap().starts_with("succeeded")));

    // Without a collection every report of the session is analysed.
    let all = svc.create(json!({ "recipe": "nvtx_sum", "session": "s1" }));
    let job = svc.wait_status(&all, "succeeded");
    assert_eq!(job["reports"].as_array().unwrap().len(), 2);
    let (_, succeeded) = svc.get("/v1/jobs?status=succeeded");
    assert_eq!(succeeded["jobs"].as_array().unwrap().len(), 2);
    assert_eq!(succeeded["matched"], 2);
    // Words and a limit: the newest matching job only, with how many matched in all.
    let (_, newest) = svc.get("/v1/jobs?q=NVTX%20s1&limit=1");
    assert_eq!(newest["matched"], 1, "{newest}");
    assert_eq!(newest["jobs"][0]["id"], all, "{newest}");
    let (_, one) = svc.get("/v1/jobs?q=succeeded&limit=1");
    assert_eq!(
        (one["matched"].as_u64(), one["jobs"][0]["id"].as_str()),
        (Some(2), Some(all.as_str()))
    );
    let (_, none) = svc.get("/v1/jobs?q=no%20such%20words");
    assert_eq!(
        (
            none["matched"].as_u64(),
            none["jobs"].as_array().map(Vec::len)
        ),
        (Some(0), Some(0))
    );
    let long = svc.raw(&format!("/v1/jobs?q={}", "x".repeat(300)));
    assert_eq!(long.status, 400, "{}", long.body);
}

#[test]
fn a_diff_job_runs_over_two_sessions_and_over_one_sessions_two_reports() {
    let dir = TempDir::new("analysis-svc-diff");
    let (a, b) = (
        testdata("nsys-ai/mfu_2gpu_before.sqlite"),
        testdata("nsys-ai/mfu_2gpu_after.sqlite"),
    );
    let key_a = "default/s1/1/app_default_0_a.sqlite";
    let key_b = "default/s2/1/app_default_0_b.sqlite";
    seed(dir.path(), key_a, &a);
    seed(dir.path(), key_b, &b);
    seed(dir.path(), "default/s3/1/app_default_0_a.sqlite", &a);
    seed(dir.path(), "default/s3/2/app_default_0_b.sqlite", &b);
    let svc = Service::start(dir.path(), None, &[]);
    let direct = common::host()
        .run_reports(&common::recipe("diff"), &[a.clone(), b.clone()], &[])
        .unwrap();
    let want = table_to_csv(direct.table("diff").unwrap());
    assert!(direct.table("diff").unwrap().rows.len() > 1);

    // Two inputs, in order: A is the first session's report, B the second's.
    let id = svc.create(json!({
        "recipe": "diff",
        "inputs": [{ "session": "s1" }, { "session": "s2", "collection": "1" }]
    }));
    let job = svc.wait_status(&id, "succeeded");
    assert_eq!(job["reports"], json!([key_a, key_b]));
    assert_eq!(
        job["inputs"],
        json!([{ "session": "s1" }, { "session": "s2", "collection": "1" }])
    );
    assert_eq!(job["session"], "s1");
    let files: Vec<&str> = job["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["diff.csv", "notebook.ipynb", "notebook.html"]);
    let csv = svc.raw(&format!("/v1/jobs/{id}/files/diff.csv"));
    assert_eq!(csv.status, 200);
    assert_eq!(csv.body, want);
    let notes = job["notes"].to_string();
    assert!(
        notes.contains(&format!("A is {key_a}, B is {key_b}")),
        "{notes}"
    );
    let notebook = svc.raw(&format!("/v1/jobs/{id}/files/notebook.ipynb"));
    nbformat_validate(dir.path(), &notebook.body);

    // The single form: a session holding two reports (one per collection) is A and B too.
    let one = svc.create(json!({ "recipe": "diff", "session": "s3" }));
    let job = svc.wait_status(&one, "succeeded");
    assert_eq!(job["reports"].as_array().unwrap().len(), 2);
    let csv = svc.raw(&format!("/v1/jobs/{one}/files/diff.csv"));
    assert_eq!(csv.body, want);

    // Three reports: the recipe's own message fails the job.
    let three = svc.create(json!({
        "recipe": "diff",
        "inputs": [{ "session": "s1" }, { "session": "s3" }]
    }));
    let job = svc.wait_status(&three, "failed");
    let reason = job["reason"].as_str().unwrap();
    assert!(
        reason.contains("diff compares exactly two reports"),
        "{reason}"
    );
    // An input without reports is named.
    let none = svc.create(json!({
        "recipe": "diff",
        "inputs": [{ "session": "s1" }, { "session": "s9" }]
    }));
    let job = svc.wait_status(&none, "failed");
    let reason = job["reason"].as_str().unwrap();
    assert!(
        reason.contains("session default/s9 has no .sqlite report"),
        "{reason}"
    );
    // Both forms at once are refused before a job exists.
    let r = http::post_json(
        svc.http,
        "/analysis/v1/jobs",
        &json!({ "recipe": "diff", "session": "s1", "inputs": [{ "session": "s2" }] }).to_string(),
    )
    .unwrap();
    problem(400, &r, "not both");
}

#[test]
fn bad_input_is_refused_or_fails_the_job_clearly() {
    let dir = TempDir::new("analysis-svc-bad");
    let plain = dir.path().join("plain.sqlite");
    rusqlite::Connection::open(&plain)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1);")
        .unwrap();
    seed(dir.path(), "default/plain/1/app_default_0_a.sqlite", &plain);
    let junk = dir.path().join("junk.sqlite");
    std::fs::write(&junk, b"this is not a database at all, just text").unwrap();
    seed(dir.path(), "default/junk/1/app_default_0_a.sqlite", &junk);
    seed(
        dir.path(),
        "default/ok/1/app_default_0_a.sqlite",
        &testdata("extrap/con_kernel.sqlite"),
    );
    let svc = Service::start(dir.path(), None, &[]);

    let post = |body: Value| http::post_json(svc.http, "/v1/jobs", &body.to_string()).unwrap();
    problem(
        404,
        &post(json!({ "recipe": "nope", "session": "ok" })),
        "no recipe `nope`; the recipes are: cuda_api_gpu_sum, cuda_api_sum",
    );
    problem(
        400,
        &post(json!({ "recipe": "nvtx_sum", "session": "ok", "args": ["--bogus", "1"] })),
        "unknown argument `--bogus`; recipe nvtx_sum accepts: --timeunit",
    );
    problem(
        400,
        &post(json!({ "recipe": "nvtx_sum", "session": "../../etc" })),
        "`session` `../../etc` is not a storage key component",
    );
    problem(
        400,
        &post(json!({ "recipe": "nvtx_sum", "session": "ok", "extra": 1 })),
        "invalid JSON body",
    );
    problem(
        400,
        &svc.raw("/v1/jobs?status=done"),
        "status `done` is not one of",
    );
    problem(400, &svc.raw("/v1/jobs/not-a-uuid"), "is not a job id");
    problem(
        404,
        &svc.raw("/v1/jobs/00000000-0000-0000-0000-000000000000"),
        "no job",
    );
    problem(404, &svc.raw("/v1/recipes/nope"), "no recipe `nope`");
    problem(404, &svc.raw("/v1/nothing-here"), "no such endpoint");

    let cases = [
        ("missing", "has no .sqlite report in local store"),
        ("plain", "is not an Nsight Systems SQLite export"),
        ("junk", "the file is not a SQLite database"),
    ];
    for (session, want) in cases {
        let id = svc.create(json!({ "recipe": "cuda_gpu_kern_sum", "session": session }));
        let job = svc.wait_finished(&id);
        assert_eq!(job["status"], "failed", "{session}: {job}");
        let reason = job["reason"].as_str().unwrap();
        assert!(reason.contains(want), "{session}: {reason}");
        assert!(job["files"].as_array().unwrap().is_empty());
        problem(
            404,
            &svc.raw(&format!("/v1/jobs/{id}/files/notebook.ipynb")),
            "has no file `notebook.ipynb`",
        );
    }

    // A finished job can be deleted, outputs included; a second delete is a 404.
    let id = svc.create(json!({ "recipe": "cuda_gpu_kern_sum", "session": "ok" }));
    svc.wait_status(&id, "succeeded");
    let outputs = dir.path().join(format!("store/default/ok/analysis/{id}"));
    assert!(outputs.join("notebook.ipynb").exists());
    let r = http::request(svc.http, "DELETE", &format!("/v1/jobs/{id}"), &[], None).unwrap();
    assert_eq!(r.status, 204, "{}", r.body);
    assert!(!outputs.exists());
    assert!(dir
        .path()
        .join("store/default/ok/1/app_default_0_a.sqlite")
        .exists());
    let r = http::request(svc.http, "DELETE", &format!("/v1/jobs/{id}"), &[], None).unwrap();
    problem(404, &r, "no job");
    let (_, cancelled) = svc.post(&format!("/v1/jobs/{id}/cancel"), &json!({}));
    assert_eq!(cancelled["status"], 404);
}

#[test]
fn cancel_stops_a_runaway_job_within_a_second() {
    let dir = TempDir::new("analysis-svc-cancel");
    seed(
        dir.path(),
        "default/s/1/app_default_0_a.sqlite",
        &testdata("extrap/con_kernel.sqlite"),
    );
    let svc = Service::start(dir.path(), None, &["--max-concurrent-jobs", "1"]);
    let runaway =
        svc.create(json!({ "recipe": "sql", "session": "s", "args": ["--query", RUNAWAY] }));
    // Queued behind the runaway one (one slot).
    let next = svc.create(json!({ "recipe": "cuda_gpu_kern_sum", "session": "s" }));
    svc.wait_status(&runaway, "running");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        svc.get(&format!("/v1/jobs/{next}")).1["status"],
        "queued",
        "the runaway job should still hold the only slot: {}\nits log: {}\n{}",
        svc.get(&format!("/v1/jobs/{runaway}")).1,
        svc.get(&format!("/v1/jobs/{runaway}/logs")).1,
        svc.process.log()
    );
    // A running job cannot be deleted.
    let r = http::request(
        svc.http,
        "DELETE",
        &format!("/v1/jobs/{runaway}"),
        &[],
        None,
    )
    .unwrap();
    problem(409, &r, "cancel it first");

    let t = Instant::now();
    let (status, job) = svc.post(&format!("/v1/jobs/{runaway}/cancel"), &json!({}));
    let took = t.elapsed();
    assert_eq!(status, 200, "{job}");
    assert_eq!(job["status"], "cancelled", "{job}");
    assert!(took < Duration::from_secs(1), "cancel took {took:?}");
    assert_eq!(job["reason"], "cancelled by request");

    // The slot is free again and the service still serves.
    let job = svc.wait_status(&next, "succeeded");
    assert_eq!(job["files"].as_array().unwrap().len(), 3);
    // Cancelling again is not an error; cancelling a finished job is a conflict.
    let (status, _) = svc.post(&format!("/v1/jobs/{runaway}/cancel"), &json!({}));
    assert_eq!(status, 200);
    let r = http::post_json(svc.http, &format!("/v1/jobs/{next}/cancel"), "{}").unwrap();
    problem(409, &r, "is succeeded");
}

#[test]
fn jobs_survive_kill_9_and_a_running_one_fails_with_the_reason() {
    let dir = TempDir::new("analysis-svc-restart");
    seed(
        dir.path(),
        "default/s/1/app_default_0_a.sqlite",
        &testdata("extrap/con_kernel.sqlite"),
    );
    let state = dir.path().join("state");
    let port = free_port();
    let mut svc = Service::start_on(
        port,
        dir.path(),
        Some(&state),
        &["--max-concurrent-jobs", "1"],
    );
    let done = svc.create(json!({ "recipe": "cuda_gpu_kern_sum", "session": "s" }));
    svc.wait_status(&done, "succeeded");
    let runaway =
        svc.create(json!({ "recipe": "sql", "session": "s", "args": ["--query", RUNAWAY] }));
    svc.wait_status(&runaway, "running");
    let queued = svc.create(json!({ "recipe": "nvtx_sum", "session": "s" }));
    svc.process.kill();

    let svc = Service::start_on(
        port,
        dir.path(),
        Some(&state),
        &["--max-concurrent-jobs", "1"],
    );
    let job = svc.get(&format!("/v1/jobs/{done}")).1;
    assert_eq!(job["status"], "succeeded");
    let csv = job["files"][0]["name"].as_str().unwrap().to_owned();
    assert_eq!(svc.raw(&format!("/v1/jobs/{done}/files/{csv}")).status, 200);
    let job = svc.get(&format!("/v1/jobs/{runaway}")).1;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["reason"], "service restarted");
    // The queued job runs after the restart.
    svc.wait_status(&queued, "succeeded");
    let (_, all) = svc.get("/v1/jobs");
    assert_eq!(all["jobs"].as_array().unwrap().len(), 3);
}
