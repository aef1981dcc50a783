//! `cargo xtask fuzz [--seconds N] [TARGET...]`: each fuzz target of `e2e/fuzz` (libFuzzer via
//! cargo-fuzz, installed by `cargo xtask setup fuzz`) for N seconds (default 60; CI runs
//! [`CI_SECONDS`]). `--sanitizer none` works on the stable toolchain: the targets look for
//! panics, failed assertions, hangs and memory blow-ups, which is what safe Rust turns a parser
//! bug into.
//!
//! ```text
//!  e2e/fuzz/seeds/<target>/  (committed, read)  ─┐
//!  <cache>/fuzz-corpus/<target>/ (grows, kept)   ─┴─> cargo fuzz run <target> -- -max_total_time=N
//!  a crash: e2e/fuzz/artifacts/<target>/crash-* (printed; reproduce with `cargo fuzz run <target> <file>`)
//! ```

use std::{fs, path::PathBuf, process::Command};

use anyhow::{bail, Context, Result};

use crate::{cmd::run as run_cmd, paths::Layout};

/// The targets (`e2e/fuzz/Cargo.toml`'s `[[bin]]`s), in the order they run.
pub const TARGETS: &[&str] = &[
    "auth_request",
    "auth_config",
    "jwks",
    "routing",
    "contracts",
];
/// Seconds per target in CI: enough to pass the seeds and the cheap mutations of each.
pub const CI_SECONDS: u64 = 15;
/// Seconds per target by default (`cargo xtask fuzz`).
const DEFAULT_SECONDS: u64 = 60;

pub fn run(layout: &Layout, args: &[String]) -> Result<()> {
    let mut seconds = DEFAULT_SECONDS;
    let mut targets = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seconds" => {
                seconds = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|s| *s > 0)
                    .context("--seconds needs a positive number")?;
            }
            name if TARGETS.contains(&name) => targets.push(name.to_owned()),
            other => bail!(
                "unknown fuzz target or flag `{other}`; targets are {}",
                TARGETS.join(", ")
            ),
        }
    }
    if targets.is_empty() {
        targets = TARGETS.iter().map(|t| (*t).to_owned()).collect();
    }
    run_targets(layout, &targets, seconds)
}

/// Builds once, then runs each target for `seconds`; the first crash fails with its input.
pub fn run_targets(layout: &Layout, targets: &[String], seconds: u64) -> Result<()> {
    let cargo_fuzz = layout.cargo_fuzz();
    if !cargo_fuzz.exists() {
        bail!(
            "{} is missing: run `cargo xtask setup fuzz`",
            cargo_fuzz.display()
        );
    }
    let fuzz_dir = layout.root.join("e2e/fuzz");
    let command = |sub: &str| {
        let mut c = Command::new(&cargo_fuzz);
        c.current_dir(&layout.root)
            .args(["fuzz", sub, "--fuzz-dir"])
            .arg(&fuzz_dir)
            .args(["--sanitizer", "none"])
            .env("CARGO_TARGET_DIR", layout.cache.join("target-fuzz"))
            // The filters' crates are built for the host here: no Wasm flags.
            .env_remove("RUSTFLAGS");
        c
    };
    run_cmd(&mut command("build"))?;
    for target in targets {
        let corpus = corpus_dir(layout, target);
        fs::create_dir_all(&corpus)
            .with_context(|| format!("cannot create {}", corpus.display()))?;
        let seeds = fuzz_dir.join("seeds").join(target);
        let mut c = command("run");
        c.arg(target).arg(&corpus);
        if seeds.is_dir() {
            c.arg(&seeds);
        }
        c.args([
            "--",
            &format!("-max_total_time={seconds}"),
            // A single input may take at most this long and this much memory.
            "-timeout=10",
            "-rss_limit_mb=2048",
            "-print_final_stats=1",
        ]);
        if let Err(e) = run_cmd(&mut c) {
            let artifacts = fuzz_dir.join("artifacts").join(target);
            bail!(
                "fuzz target {target} failed: {e}; the input is in {} (reproduce: {} fuzz run --fuzz-dir {} --sanitizer none {target} <file>)",
                artifacts.display(),
                cargo_fuzz.display(),
                fuzz_dir.display()
            );
        }
    }
    Ok(())
}

/// The growing corpus of `target`, kept in the cache between runs.
fn corpus_dir(layout: &Layout, target: &str) -> PathBuf {
    layout.cache.join("fuzz-corpus").join(target)
}
