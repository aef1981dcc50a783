//! The Cloud UI's browser flow (`tests/ui/flow.mjs`) against a real local platform with a real
//! agent, and the checks of what the page showed against the REST APIs; shared by the API-key
//! run (`ui_platform.rs`) and the OAuth2 run (`ui_oauth2.rs`), which differ only in how the
//! person signs in.
//!
//! Shared with `#[path = "support/ui_flow.rs"] mod ui_flow;`.

// Each test uses part of this module; helpers fail loudly like the tests that call them.
#![allow(dead_code, clippy::expect_used)]

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use nsight_e2e::{agent, bin, chromium_bin, demo::LocalPlatform, process::Running, required_path};
use serde_json::Value;

/// Where the screenshots go: beside the test binaries, in the target dir, below `run`.
pub fn screenshots_dir(run: &str) -> PathBuf {
    let bin_dir = required_path("NSIGHT_BIN_DIR", "cargo build --workspace");
    let mut dir = bin_dir.parent().unwrap_or(&bin_dir).join("ui-screenshots");
    if !run.is_empty() {
        dir = dir.join(run);
    }
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `nsight-agent run` of the demo's NVTX program, connected to the platform, mirroring its
/// ranges to the OTLP/gRPC endpoint `mirror`.
pub fn start_agent(platform: &LocalPlatform, state: &Path, mirror: &str) -> Running {
    let d = &platform.description;
    let text = |k: &str| d[k].as_str().unwrap().to_owned();
    let mut cmd = Command::new(bin("nsight-agent"));
    cmd.arg("run")
        .arg("--coordinator")
        .arg(text("agentChannel"))
        .arg("--tls-dir")
        .arg(text("tlsDir"))
        .arg("--storage-dir")
        .arg(text("reportsDir"))
        .arg("--spool-dir")
        .arg(state.join("agent-spool"))
        .arg("--pod")
        .arg("ui")
        .arg("--otlp-mirror")
        .arg(mirror)
        .arg("--")
        .arg(agent::python())
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../xtask/demo/nvtx_sample.py"))
        .arg("600");
    Running::spawn("nsight-agent", cmd, &state.join("agent.log"))
}

/// Requests through the platform's gateway (HTTP or HTTPS, trusting the platform's CA).
pub struct Gateway {
    url: String,
    api_key: String,
    http: reqwest::blocking::Client,
}

/// One answer, not followed.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
}

impl Gateway {
    pub fn new(platform: &LocalPlatform) -> Self {
        let mut builder = reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(std::time::Duration::from_secs(30));
        if let Some(ca) = platform.ca_cert() {
            let pem = std::fs::read(&ca).unwrap();
            builder = builder.add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap());
        }
        Self {
            url: platform.gateway_url.clone(),
            api_key: platform.api_key.clone(),
            http: builder.build().unwrap(),
        }
    }

    /// `GET url` (absolute), with the API key when `with_key`.
    pub fn fetch(&self, url: &str, with_key: bool) -> Answer {
        let mut req = self.http.get(url);
        if with_key {
            req = req.bearer_auth(&self.api_key);
        }
        let r = req.send().unwrap_or_else(|e| panic!("GET {url}: {e}"));
        Answer {
            status: r.status().as_u16(),
            location: r
                .headers()
                .get("location")
                .and_then(|l| l.to_str().ok())
                .map(str::to_owned),
            body: r.text().unwrap_or_default(),
        }
    }

    /// `GET path` through the gateway with the API key.
    pub fn get(&self, path: &str) -> Answer {
        self.fetch(&format!("{}{path}", self.url), true)
    }

    /// The JSON answer of `GET path` with the API key; it must be 200.
    pub fn json(&self, path: &str) -> Value {
        let r = self.get(path);
        assert_eq!(r.status, 200, "GET {path}: {r:?}");
        serde_json::from_str(&r.body).unwrap()
    }

    /// The bytes at `url` (a signed download link), without the API key.
    pub fn download(&self, url: &str) -> Vec<u8> {
        let r = self.http.get(url).send().unwrap();
        assert_eq!(r.status().as_u16(), 200, "GET {url}");
        r.bytes().unwrap().to_vec()
    }
}

/// What the UI writes for a byte count (format::bytes).
fn ui_bytes(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < 3 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", ["KiB", "MiB", "GiB", "TiB"][unit])
}

/// Runs `tests/ui/flow.mjs` against the platform with `env` added (how to sign in); what the
/// page showed.
pub fn run_flow(platform: &LocalPlatform, shots: &Path, env: &[(&str, &str)]) -> Value {
    let playwright = required_path("NSIGHT_PLAYWRIGHT_DIR", "cargo xtask setup playwright");
    let started = Instant::now();
    let out = Command::new("node")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/ui/flow.mjs"))
        .env("PW_DIR", &playwright)
        .env("CHROMIUM", chromium_bin())
        .env("URL", format!("{}/", platform.gateway_url))
        .env("SHOTS", shots)
        .envs(env.iter().copied())
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser flow failed (screenshot {}/failure.png):\n{}\n{stdout}",
        shots.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let found: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    eprintln!(
        "browser flow: {:.1} s; first render {:.0} ms after navigation",
        started.elapsed().as_secs_f64(),
        found["firstRenderMs"].as_f64().unwrap_or_default()
    );
    found
}

/// What the page showed, checked against the coordinator and the analysis service.
pub fn check_flow(gw: &Gateway, platform: &LocalPlatform, found: &Value, shots: &Path) {
    assert_eq!(found["pageErrors"], serde_json::json!([]), "{found:#}");
    // "View trace" (the session's and the .nsys-rep row's): no tenant API behind the local
    // gateway, said plainly with what enables one.
    let view_trace = found["viewTrace"].as_str().unwrap_or_default();
    assert!(
        view_trace.contains("No tenant API is deployed")
            && view_trace.contains("nsight-tenant-operator.enabled"),
        "{found:#}"
    );
    assert!(found["viewTraceButtons"].as_u64() >= Some(1), "{found:#}");
    assert!(
        found["streamersTab"]
            .as_str()
            .is_some_and(|t| t.contains("No tenant API is deployed")),
        "{found:#}"
    );

    // The session the page began, as the coordinator has it now: ended, one collection whose
    // agent uploaded, as the page said.
    let session = found["session"].as_str().unwrap();
    let s = gw.json(&format!("/coordinator/v1/sessions/{session}"));
    assert_eq!(s["title"], "ui e2e", "{s:#}");
    assert_eq!(s["state"], "ended", "{s:#}");
    assert_eq!(found["sessionRowState"], "ended");
    assert_eq!(found["agentStates"], serde_json::json!(["uploaded"]));
    // The mirroring counters the page showed are the coordinator's for the agent (as of a
    // heartbeat: the coordinator's may have grown since, with the later collection's spans).
    let status = gw.json("/coordinator/v1/status");
    let api_sent = status["agents"][0]["mirroring"]["sent"].as_u64();
    let shown = found["mirroring"].as_str().unwrap_or_default();
    // "N sent, 0 dropped" (", K not mirrored" too: ranges still open at a stop).
    let shown_sent = shown
        .split_once(" sent, 0 dropped")
        .and_then(|(n, _)| n.parse::<u64>().ok());
    assert!(
        shown_sent.is_some_and(|n| n > 0 && Some(n) <= api_sent),
        "the page showed {shown:?}; the coordinator says {status:#}"
    );
    let outcomes = s["collections"][0]["agents"].as_object().unwrap();
    assert!(outcomes.values().all(|o| o["state"] == "uploaded"), "{s:#}");

    // The report row: its name and size as listed, and its link downloads exactly that file.
    let listing = gw.json(&format!("/coordinator/v1/sessions/{session}/reports"));
    let report = &listing["reports"][0];
    let size = report["size"].as_u64().unwrap();
    assert_eq!(found["reportFile"], report["flatPath"], "{found:#}");
    assert_eq!(found["reportSize"].as_str().unwrap(), ui_bytes(size));
    let href = found["reportHref"].as_str().unwrap();
    let storage_url = platform.description["storageUrl"].as_str().unwrap();
    assert!(href.starts_with(storage_url), "{href}");
    let bytes = gw.download(href);
    assert_eq!(bytes.len() as u64, size, "the page's download link");
    assert!(bytes.starts_with(b"SQLite format 3"), "a SQLite export");

    // The generated form: choices from the declaration, messages for bad values.
    assert_eq!(
        found["timeunitChoices"],
        serde_json::json!(["", "nsec", "usec", "msec", "sec"])
    );
    assert_eq!(found["timeunitTag"], "SELECT");
    assert_eq!(found["binsError"], "\"ten\" is not a number");
    assert_eq!(found["binsInvalid"], "true");
    assert_eq!(found["binsRange"], "must be between 1 and 10000");

    // The job the form sent, as the analysis service has it.
    let job_id = found["job"].as_str().unwrap();
    let job = gw.json(&format!("/analysis/v1/jobs/{job_id}"));
    assert_eq!(job["recipe"], "nvtx_sum", "{job:#}");
    assert_eq!(
        job["args"],
        serde_json::json!(["--timeunit", "usec"]),
        "{job:#}"
    );
    assert_eq!(job["session"], session, "{job:#}");
    assert_eq!(
        job["collection"], "1",
        "the collection the link chose: {job:#}"
    );
    assert_eq!(job["status"], "succeeded", "{job:#}");
    assert_eq!(found["jobArgs"], "--timeunit usec");

    // The grid is the job's CSV, sorted by Instances, largest first.
    let csv_name = job["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .find(|n| n.ends_with(".csv"))
        .unwrap();
    let csv = gw
        .get(&format!("/analysis/v1/jobs/{job_id}/files/{csv_name}"))
        .body;
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(found["gridHeader"], serde_json::json!(header), "{csv}");
    let col = header.iter().position(|h| *h == "Instances").unwrap();
    let mut instances: Vec<u64> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(col).unwrap().parse().unwrap())
        .collect();
    instances.sort_unstable_by(|a, b| b.cmp(a));
    let shown: Vec<u64> = found["sortedInstances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(shown, instances, "{csv}");
    assert!(
        shown.len() >= 3 && shown[0] > 10,
        "the sample's ranges: {csv}"
    );
    assert_eq!(found["sortState"], "descending");
    assert_eq!(
        found["notebookSandbox"], "",
        "the notebook frame runs no script"
    );

    // The runaway job was cancelled from its page, then deleted.
    let runaway = found["runaway"].as_str().unwrap();
    assert!(
        found["cancelReason"].as_str().unwrap().contains("cancel"),
        "{found:#}"
    );
    let gone = gw.get(&format!("/analysis/v1/jobs/{runaway}"));
    assert_eq!(gone.status, 404, "deleted from the page: {gone:?}");
    assert_eq!(found["jobsAfterDelete"], serde_json::json!([job_id]));
    assert_eq!(found["filteredJobs"], serde_json::json!([runaway]));
    assert_eq!(
        found["focusAfterTitle"], "begin",
        "Tab from the title reaches Begin"
    );
    let open_filter = found["openFilterUrl"].as_str().unwrap();
    assert!(open_filter.contains("state=open"), "{open_filter}");
    // The words filters: the title in any case finds the session; other words find nothing;
    // typing added no history entry; "diff" finds only the diff job.
    assert_eq!(found["wordsCount"], "1 session", "{found:#}");
    assert!(
        found["wordsNoMatch"]
            .as_str()
            .is_some_and(|t| t.contains("“no such words”")),
        "{found:#}"
    );
    assert_eq!(found["historyGrew"], 0, "{found:#}");
    // The column sort: the second session ("sort check", open, no collection) is newest, so
    // first; by Collections (descending first) the profiled session leads; again, it trails;
    // the order survives a reload (it is in the URL) and added no history entry.
    let order = |key: &str| -> Vec<String> { serde_json::from_value(found[key].clone()).unwrap() };
    let default = order("sortDefault");
    assert_eq!(default.len(), 2, "{found:#}");
    assert_ne!(default[0], session, "newest first: {found:#}");
    let second = default[0].clone();
    assert_eq!(
        order("sortByCollections"),
        [session.to_owned(), second.clone()],
        "{found:#}"
    );
    assert_eq!(found["sortAria"], "descending", "{found:#}");
    assert_eq!(
        order("sortByCollectionsAscending"),
        [second.clone(), session.to_owned()],
        "{found:#}"
    );
    assert_eq!(
        order("sortAfterReload"),
        [second, session.to_owned()],
        "{found:#}"
    );
    assert_eq!(found["sortHistoryGrew"], 0, "{found:#}");
    assert_eq!(
        found["sortCaption"], "Sessions of this tag, by collections (ascending)",
        "{found:#}"
    );

    // "Compare with collection 1": a diff job over collections 1 and 2 of the session.
    let diff_id = found["diffJob"].as_str().unwrap();
    let diff = gw.json(&format!("/analysis/v1/jobs/{diff_id}"));
    assert_eq!(diff["recipe"], "diff", "{diff:#}");
    assert_eq!(
        diff["inputs"],
        serde_json::json!([
            {"session": session, "collection": "1"},
            {"session": session, "collection": "2"}
        ]),
        "{diff:#}"
    );
    assert_eq!(
        diff["status"], found["diffStatus"],
        "the page shows the job's status"
    );
    assert_eq!(diff["status"], "succeeded", "{diff:#}");
    assert_eq!(found["jobsMatchingDiff"], serde_json::json!([diff_id]));

    // The deep link reopened the job.
    let reloaded = found["reloadedUrl"].as_str().unwrap();
    assert!(reloaded.contains(&format!("job={job_id}")), "{reloaded}");
    assert!(reloaded.contains("tab=analysis"), "{reloaded}");
    assert_eq!(found["confirmGone"], true);
    assert_eq!(
        found["confirmFocus"], "end-confirm-no",
        "the confirmation takes the focus"
    );
    for shot in ["sessions", "job", "ended"] {
        assert!(shots.join(format!("{shot}.png")).is_file(), "{shot}.png");
    }
}
