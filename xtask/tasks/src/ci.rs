//! `cargo xtask ci`: the one test command. Every stage is timed; the first failure stops the run.
//!
//! On a new machine most of the run is compiling on two cores, and much of it is serial (one
//! fat-LTO link per Wasm artifact, Go's and cargo's last crates), so independent work overlaps:
//!
//! ```text
//! setup (apt, wasm std) ─┬─ fmt ── clippy host ─┬─ clippy wasm ──[tools]── build-wasm ─┬─ [late setup] ─ images ─ cluster up ─ tests ─ fuzz
//!                        ├─ setup: wasm tools ──────────────────┘                      │
//!                        ├─ setup: servers, Go node, npm, helm, venv ──────────────────┤
//!                        │                      └─ build host ─────────────────────────┘
//! ```
//! Background work writes to `<cache>/ci-logs/`; a failure prints the end of its log.

use std::process::Command;

use anyhow::Result;

use crate::{
    cmd::{run as run_cmd, stage, Background},
    paths::Layout,
    setup, wasm,
};

/// Setup steps the first stages need (packages and the Wasm std that clippy checks against).
const EARLY_STEPS: &[&str] = &["apt", "apt-test", "wasm-std"];
/// Setup steps only `build-wasm` needs (tools installed with `cargo install`).
const WASM_TOOL_STEPS: &[&str] = &["wasm-tools", "wasm-bindgen", "wasm-opt"];
/// Setup steps only the images, the cluster and the tests need; downloads first, the long
/// compiles (Go, s3s-fs) last.
const LATE_STEPS: &[&str] = &[
    "python",
    "oidc",
    "helm",
    "playwright",
    "kube",
    "node",
    "s3",
    "fuzz",
];

/// Crates that only make sense on wasm32 (recipes, test recipes, the UI); the host stages
/// skip them.
fn wasm_only() -> impl Iterator<Item = &'static str> {
    wasm::RECIPES
        .iter()
        .chain(wasm::TEST_RECIPES)
        .map(|r| r.0)
        .chain([wasm::UI_CRATE])
}

fn host_cargo(layout: &Layout, subcommand: &str) -> Command {
    let mut c = Command::new("cargo");
    // No incremental caches: each clone's path gets its own, and CI runs in fresh clones, so
    // they would only fill the disk (14 GB seen after one day).
    c.current_dir(&layout.root)
        .arg(subcommand)
        .env("CARGO_TARGET_DIR", layout.host_target())
        .env("CARGO_INCREMENTAL", "0");
    c
}

fn host_workspace(c: &mut Command) {
    c.arg("--workspace");
    for krate in wasm_only() {
        c.args(["--exclude", krate]);
    }
}

/// `cargo xtask setup STEPS...` as a child process with its output in a log.
fn setup_in_background(layout: &Layout, steps: &[&str], log: &str) -> Result<Background> {
    let mut c = Command::new(std::env::current_exe()?);
    c.current_dir(&layout.root).arg("setup").args(steps);
    Background::spawn(&mut c, &layout.cache.join("ci-logs").join(log))
}

pub fn run(layout: &Layout) -> Result<()> {
    let started = std::time::Instant::now();
    let mut times: Vec<(&str, f64)> = Vec::new();
    let mut timed = |name: &'static str, f: &mut dyn FnMut() -> Result<()>| -> Result<()> {
        let ((), secs) = stage(name, f)?;
        times.push((name, secs));
        Ok(())
    };
    let result = (|| -> Result<()> {
        let early: Vec<String> = EARLY_STEPS.iter().map(|s| s.to_string()).collect();
        timed("setup", &mut || setup::run(layout, &early))?;
        let mut wasm_tools = Some(setup_in_background(
            layout,
            WASM_TOOL_STEPS,
            "setup-wasm-tools.log",
        )?);
        let mut late_setup = Some(setup_in_background(layout, LATE_STEPS, "setup-late.log")?);
        timed("fmt --check", &mut || {
            run_cmd(host_cargo(layout, "fmt").args(["--all", "--check"]))
        })?;
        timed("clippy (host)", &mut || {
            let mut c = host_cargo(layout, "clippy");
            host_workspace(&mut c);
            run_cmd(c.args(["--all-targets", "--", "-D", "warnings"]))
        })?;
        // Binaries and cdylibs (the exec hook, the NVTX injection library) that the e2e tests
        // run, built beside the Wasm stages (their own target dir).
        let mut host_build = {
            let mut c = host_cargo(layout, "build");
            host_workspace(&mut c);
            Some(Background::spawn(
                &mut c,
                &layout.cache.join("ci-logs").join("build-host.log"),
            )?)
        };
        timed("clippy (wasm)", &mut || wasm::clippy(layout))?;
        timed("wait: wasm tools", &mut || {
            wasm_tools.take().map_or(Ok(()), Background::wait)
        })?;
        timed("build-wasm", &mut || wasm::build_all(layout).map(|_| ()))?;
        timed("wait: build (host)", &mut || {
            host_build.take().map_or(Ok(()), Background::wait)
        })?;
        timed("wait: late setup", &mut || {
            late_setup.take().map_or(Ok(()), Background::wait)
        })?;
        // Every component image from the binaries just built, and the one-node cluster the
        // in-cluster tests share (brought down below, whatever the tests did).
        timed("images", &mut || crate::image_oci::run(layout, &[]))?;
        timed("cluster up", &mut || nsight_e2e::cluster::up().map(|_| ()))?;
        timed("tests", &mut || {
            let mut c = host_cargo(layout, "test");
            host_workspace(&mut c);
            for (k, v) in layout.test_env() {
                c.env(k, v);
            }
            run_cmd(&mut c)
        })?;
        // Every fuzz target for a few seconds (`cargo xtask fuzz` runs them longer).
        timed("fuzz (bounded)", &mut || {
            let targets: Vec<String> = crate::fuzz::TARGETS
                .iter()
                .map(|t| (*t).to_owned())
                .collect();
            crate::fuzz::run_targets(layout, &targets, crate::fuzz::CI_SECONDS)
        })?;
        Ok(())
    })();
    let down = stage("cluster down", nsight_e2e::cluster::down);
    if let Ok(((), secs)) = &down {
        times.push(("cluster down", *secs));
    }
    eprintln!(
        "\nstage times (background work overlaps them; `wait:` is time spent waiting on it):"
    );
    for (name, secs) in &times {
        eprintln!("  {name:<20} {secs:>8.1}s");
    }
    eprintln!("  {:<20} {:>8.1}s", "wall", started.elapsed().as_secs_f64());
    result.and(down.map(|_| ()))
}
