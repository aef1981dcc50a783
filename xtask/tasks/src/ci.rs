//! `cargo xtask ci`: the one test command. Every stage is timed; the first failure stops the run.

use std::process::Command;

use anyhow::Result;

use crate::{
    cmd::{run as run_cmd, stage},
    paths::Layout,
    setup, wasm,
};

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

pub fn run(layout: &Layout) -> Result<()> {
    let mut times: Vec<(&str, f64)> = Vec::new();
    let mut timed = |name: &'static str, f: &dyn Fn() -> Result<()>| -> Result<()> {
        let ((), secs) = stage(name, f)?;
        times.push((name, secs));
        Ok(())
    };
    let result = (|| -> Result<()> {
        timed("setup", &|| setup::run(layout, &[]))?;
        timed("fmt --check", &|| {
            run_cmd(host_cargo(layout, "fmt").args(["--all", "--check"]))
        })?;
        timed("clippy (host)", &|| {
            let mut c = host_cargo(layout, "clippy");
            host_workspace(&mut c);
            run_cmd(c.args(["--all-targets", "--", "-D", "warnings"]))
        })?;
        timed("clippy (wasm)", &|| wasm::clippy(layout))?;
        timed("build-wasm", &|| wasm::build_all(layout).map(|_| ()))?;
        // Binaries and cdylibs (the exec hook, the NVTX injection library) that the e2e tests run.
        timed("build (host)", &|| {
            let mut c = host_cargo(layout, "build");
            host_workspace(&mut c);
            run_cmd(&mut c)
        })?;
        // Every component image from the binaries just built, and the one-node cluster the
        // in-cluster tests share (brought down below, whatever the tests did).
        timed("images", &|| crate::image_oci::run(layout, &[]))?;
        timed("cluster up", &|| nsight_e2e::cluster::up().map(|_| ()))?;
        timed("tests", &|| {
            let mut c = host_cargo(layout, "test");
            host_workspace(&mut c);
            for (k, v) in layout.test_env() {
                c.env(k, v);
            }
            run_cmd(&mut c)
        })?;
        Ok(())
    })();
    let down = stage("cluster down", nsight_e2e::cluster::down);
    if let Ok(((), secs)) = &down {
        times.push(("cluster down", *secs));
    }
    eprintln!("\nstage times:");
    for (name, secs) in &times {
        eprintln!("  {name:<16} {secs:>8.1}s");
    }
    eprintln!(
        "  {:<16} {:>8.1}s",
        "total",
        times.iter().map(|t| t.1).sum::<f64>()
    );
    result.and(down.map(|_| ()))
}
