//! `cargo xtask bench ui [SESSIONS] [JOBS]`: the Cloud UI's budgets (docs/ui.md) in headless
//! Chromium against the real local platform (`nsight-controlplane local`, the services' debug
//! builds as the demo and the tests run them, through the Envoy gateway with the API key):
//!
//! - the Wasm after wasm-opt (budget 1.0 MB) and its gzip -9 size;
//! - the first render of the sessions page after navigation (budget 300 ms), the key already in
//!   the tab, on a tag with one session;
//! - a tag with SESSIONS sessions (default 1,000) and JOBS jobs (default 10,000): when each list
//!   is on screen after navigation, and each keystroke in its filter box until the next frame
//!   after the list changed (budget 100 ms). `performance.now()` in the page; the API answer's
//!   own time (Resource Timing) beside it.
//!
//! Seeding: the sessions are begun and ended through the gateway (`POST /sessions`, `/end`);
//! the jobs are real `POST /jobs` of `nvtx_sum` over those sessions, which have no reports, so
//! each fails at once ("no reports"): the list holds 10,000 real jobs without running 10,000
//! recipes. The browser part is `xtask/bench/ui.mjs`.

use std::{
    net::SocketAddr,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use nsight_e2e::{
    demo::{DemoOptions, DemoPaths, LocalPlatform},
    http, TempDir,
};
use serde_json::{json, Value};

use crate::{bench::load_average, paths::Layout};

/// The tag the seeded sessions are on.
const TAG: &str = "bench";

/// POSTs `body` to `path` through the gateway with the key; the JSON answer (2xx only).
fn post(gateway: SocketAddr, key: &str, path: &str, body: &Value) -> Result<Value> {
    let auth = format!("Bearer {key}");
    let r = http::request(
        gateway,
        "POST",
        path,
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/json"),
        ],
        Some(&body.to_string()),
    )?;
    if !(200..300).contains(&r.status) {
        bail!("POST {path}: {} {}", r.status, r.body);
    }
    Ok(serde_json::from_str(&r.body).unwrap_or(Value::Null))
}

fn get(gateway: SocketAddr, key: &str, path: &str) -> Result<Value> {
    let auth = format!("Bearer {key}");
    let r = http::get(gateway, path, &[("Authorization", &auth)])?;
    if r.status != 200 {
        bail!("GET {path}: {} {}", r.status, r.body);
    }
    Ok(serde_json::from_str(&r.body)?)
}

/// `sessions` ended sessions on [`TAG`] titled `run <n>`; their ids, oldest first.
fn seed_sessions(gateway: SocketAddr, key: &str, sessions: usize) -> Result<Vec<String>> {
    let mut ids = Vec::with_capacity(sessions);
    for n in 0..sessions {
        let s = post(
            gateway,
            key,
            "/coordinator/v1/sessions",
            &json!({"tag": TAG, "title": format!("run {n}")}),
        )?;
        ids.push(s["id"].as_str().unwrap_or_default().to_owned());
        post(gateway, key, "/coordinator/v1/end", &json!({"tag": TAG}))?;
    }
    Ok(ids)
}

/// `jobs` jobs over the first 50 sessions, from 4 clients at once; waits until all have ended.
fn seed_jobs(gateway: SocketAddr, key: &str, sessions: &[String], jobs: usize) -> Result<()> {
    let clients = 4;
    std::thread::scope(|scope| -> Result<()> {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                scope.spawn(move || -> Result<()> {
                    for n in (c..jobs).step_by(clients) {
                        let session = &sessions[n % sessions.len().min(50)];
                        post(
                            gateway,
                            key,
                            "/analysis/v1/jobs",
                            &json!({"recipe": "nvtx_sum", "tag": TAG, "session": session}),
                        )?;
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| anyhow::anyhow!("a seeding client panicked"))??;
        }
        Ok(())
    })?;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let left: usize = ["queued", "running"]
            .iter()
            .map(|s| {
                get(gateway, key, &format!("/analysis/v1/jobs?status={s}"))
                    .map(|l| l["jobs"].as_array().map_or(0, Vec::len))
            })
            .sum::<Result<usize>>()?;
        if left == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{left} jobs still queued or running after 10 minutes");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn gzip_size(path: &Path) -> Result<u64> {
    let out = Command::new("gzip")
        .args(["-9", "-c"])
        .arg(path)
        .output()
        .context("gzip")?;
    Ok(out.stdout.len() as u64)
}

fn ms(v: &Value, key: &str) -> String {
    v[key]
        .as_f64()
        .map_or_else(|| "-".into(), |x| format!("{x:.0} ms"))
}

fn keys(v: &Value) -> String {
    // `null`: the key changed nothing on screen (the same rows matched).
    let all: Vec<Option<f64>> = v["keystrokes"]
        .as_array()
        .map(|a| a.iter().map(Value::as_f64).collect())
        .unwrap_or_default();
    if all.is_empty() {
        return "-".into();
    }
    let max = all.iter().flatten().copied().fold(0.0, f64::max);
    let shown: Vec<String> = all
        .iter()
        .map(|x| x.map_or_else(|| "no change".into(), |x| format!("{x:.0}")))
        .collect();
    format!("{} ms (max {max:.0})", shown.join(", "))
}

pub fn ui(layout: &Layout, sessions: usize, jobs: usize) -> Result<()> {
    let dist = layout.dist();
    let wasm = dist.join("ui/nsight_ui_bg.wasm");
    let controlplane = layout.host_target().join("debug/nsight-controlplane");
    if !wasm.is_file() || !controlplane.is_file() {
        bail!(
            "build first: cargo xtask build-wasm && cargo build --workspace (missing {} or {})",
            wasm.display(),
            controlplane.display()
        );
    }
    let wasm_bytes = std::fs::metadata(&wasm)?.len();
    let wasm_gzip = gzip_size(&wasm)?;
    let dir = TempDir::new("bench-ui");
    let paths = DemoPaths {
        bin_dir: layout.host_target().join("debug"),
        wasm_dir: dist,
        envoy_bin: layout.envoy(),
        python: layout.venv().join("bin/python"),
        sample: std::path::PathBuf::new(),
        nsys: None,
    };
    let options = DemoOptions::for_tests(dir.path());
    let platform = LocalPlatform::start(&paths, &options).map_err(anyhow::Error::msg)?;
    let (gw, key) = (platform.gateway, platform.api_key.clone());
    // One session on the default tag: the first render of a page a person usually opens.
    post(
        gw,
        &key,
        "/coordinator/v1/sessions",
        &json!({"title": "one"}),
    )?;
    let started = Instant::now();
    let ids = seed_sessions(gw, &key, sessions)?;
    let sessions_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    seed_jobs(gw, &key, &ids, jobs)?;
    let jobs_s = started.elapsed().as_secs_f64();
    eprintln!("seeded {sessions} sessions in {sessions_s:.1} s, {jobs} jobs in {jobs_s:.1} s");

    let script = layout.root.join("xtask/bench/ui.mjs");
    let out = Command::new("node")
        .arg(&script)
        .env("PW_DIR", layout.playwright_core())
        .env("CHROMIUM", "/usr/bin/chromium")
        .env("URL", format!("{}/", platform.gateway_url))
        .env("API_KEY", &key)
        .env("TAG", TAG)
        .env("SESSION_PREFIX", ids.first().map_or("", |id| &id[..4]))
        .output()
        .context("run node")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "the browser part failed:\n{}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let found: Value = serde_json::from_str(stdout.lines().last().unwrap_or("{}"))?;
    platform.stop();

    let f = |k: &str| &found[k];
    println!(
        "\nCloud UI benchmark (headless Chromium 1280x900, local platform debug builds, loopback, \
         2 cores shared; load average {})",
        load_average()
    );
    println!("| what | figure | budget |");
    println!("|---|---|---|");
    println!(
        "| `nsight_ui_bg.wasm` after wasm-opt | {} KB (gzip -9: {} KB) | 1.0 MB |",
        wasm_bytes / 1000,
        wasm_gzip / 1000
    );
    let first = f("first");
    println!(
        "| first render of the sessions page (one session): first load, median of {} loads | {}, {} (first contentful paint {}; the sessions answer {}) | 300 ms |",
        first["loads"],
        ms(first, "cold"),
        ms(first, "drawn"),
        ms(first, "fcp"),
        ms(first, "api")
    );
    let s = f("sessions");
    println!(
        "| {sessions} sessions: the list on screen after navigation | {} (the sessions answer {}, {} KB) | 100 ms |",
        ms(s, "drawn"),
        ms(s, "api"),
        s["apiKb"]
    );
    println!(
        "| {sessions} sessions: each filter keystroke to the next frame | {} | 100 ms |",
        keys(s)
    );
    let j = f("jobs");
    println!(
        "| {jobs} jobs: the list on screen after navigation | {} (the jobs answer {}, {} KB) | 100 ms |",
        ms(j, "drawn"),
        ms(j, "api"),
        j["apiKb"]
    );
    println!(
        "| {jobs} jobs: each filter keystroke to the next frame | {} | 100 ms |",
        keys(j)
    );
    println!(
        "| seeding (not a budget) | {sessions} sessions {sessions_s:.1} s, {jobs} jobs {jobs_s:.1} s | |"
    );
    println!("\ncommand: cargo xtask bench ui {sessions} {jobs}");
    Ok(())
}
