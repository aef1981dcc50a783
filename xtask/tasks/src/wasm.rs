//! `cargo xtask build-wasm`: every WebAssembly artifact, built with Debian's rustc-web 1.96.
//!
//! ```text
//! plugins/auth ──(wasm32-wasip1)── unused hooks unexported ───> dist/nsight_auth_filter.wasm
//!                                   └ also the response hook ──> dist/nsight_auth_filter_lean.wasm
//! plugins/routing ──(wasm32-wasip1)── unused hooks unexported > dist/nsight_routing_filter.wasm
//! plugins/recipes/* ──(wasm32-unknown-unknown)── wasm-tools ──> dist/recipes/<name>.wasm
//! plugins/test-recipes/* ──(same)──────────────── wasm-tools ──> dist/test-recipes/<name>.wasm
//! ui ──(wasm32-unknown-unknown)── wasm-bindgen ── wasm-opt ───> dist/ui/{index.html,*.js,*.wasm}
//! ```
//! Recipes are built for wasm32-unknown-unknown on purpose: the component then imports nothing
//! but the recipe world, so a recipe cannot reach files, clocks or the network.

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result};

use crate::{
    cmd::run,
    paths::{self, Layout},
    wasm_exports,
};

/// A proxy-wasm filter: crate name and the artifact name Envoy loads.
pub const FILTERS: &[(&str, &str)] = &[
    ("nsight-auth-filter", "nsight_auth_filter"),
    ("nsight-routing-filter", "nsight_routing_filter"),
];
/// A recipe component: crate name and recipe name.
pub const RECIPES: &[(&str, &str)] = &[
    ("nsight-recipe-nvtx-sum", "nvtx_sum"),
    ("nsight-recipe-cuda-gpu-kern-sum", "cuda_gpu_kern_sum"),
    ("nsight-recipe-cuda-api-sum", "cuda_api_sum"),
    ("nsight-recipe-sql", "sql"),
    (
        "nsight-recipe-cuda-gpu-mem-time-sum",
        "cuda_gpu_mem_time_sum",
    ),
    (
        "nsight-recipe-cuda-gpu-mem-size-sum",
        "cuda_gpu_mem_size_sum",
    ),
    ("nsight-recipe-osrt-sum", "osrt_sum"),
    ("nsight-recipe-cuda-gpu-kern-hist", "cuda_gpu_kern_hist"),
    ("nsight-recipe-gpu-time-util", "gpu_time_util"),
    ("nsight-recipe-gpu-gaps", "gpu_gaps"),
    ("nsight-recipe-diff", "diff"),
    ("nsight-recipe-cuda-kern-exec-sum", "cuda_kern_exec_sum"),
    ("nsight-recipe-nvtx-kern-sum", "nvtx_kern_sum"),
    ("nsight-recipe-cuda-memcpy-async", "cuda_memcpy_async"),
    ("nsight-recipe-cuda-gpu-trace", "cuda_gpu_trace"),
    ("nsight-recipe-nvtx-gpu-proj-sum", "nvtx_gpu_proj_sum"),
    ("nsight-recipe-um-sum", "um_sum"),
    ("nsight-recipe-cuda-api-gpu-sum", "cuda_api_gpu_sum"),
    ("nsight-recipe-cuda-memcpy-sync", "cuda_memcpy_sync"),
    ("nsight-recipe-cuda-gpu-kern-pace", "cuda_gpu_kern_pace"),
    ("nsight-recipe-nvtx-pace", "nvtx_pace"),
    ("nsight-recipe-nccl-sum", "nccl_sum"),
    (
        "nsight-recipe-nccl-gpu-time-util-map",
        "nccl_gpu_time_util_map",
    ),
];
/// Recipe components only the tests load (they break the rules on purpose): never in
/// `dist/recipes/`, so no service or CLI installs them.
pub const TEST_RECIPES: &[(&str, &str)] = &[("nsight-test-recipe-misbehave", "misbehave")];
pub const UI_CRATE: &str = "nsight-ui";
/// The REST contracts: a host crate that must also build for the browser (the UI's target).
pub const CONTRACTS_CRATE: &str = "nsight-contracts";

/// A `cargo` command on the Debian toolchain, whose sysroot has the wasm32 std.
pub fn wasm_cargo(layout: &Layout, subcommand: &str) -> Command {
    let mut c = Command::new(paths::WASM_CARGO);
    let path = env::var("PATH").unwrap_or_default();
    c.current_dir(&layout.root)
        .arg(subcommand)
        .env("RUSTC", paths::WASM_RUSTC)
        .env("CARGO_TARGET_DIR", layout.wasm_target())
        // /usr/bin first so that `cargo clippy` finds Debian's clippy, not rustup's proxy.
        .env("PATH", format!("/usr/bin:{path}"))
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("RUSTFLAGS");
    c
}

fn packages(c: &mut Command, crates: impl IntoIterator<Item = &'static str>) {
    for krate in crates {
        c.args(["-p", krate]);
    }
}

/// Clippy on the wasm targets, the same lints as the host.
pub fn clippy(layout: &Layout) -> Result<()> {
    let mut c = wasm_cargo(layout, "clippy");
    c.args(["--target", "wasm32-wasip1"]);
    packages(&mut c, FILTERS.iter().map(|f| f.0));
    c.args(["--", "-D", "warnings"]);
    run(&mut c)?;
    let mut c = wasm_cargo(layout, "clippy");
    c.args(["--target", "wasm32-unknown-unknown"]);
    packages(
        &mut c,
        RECIPES
            .iter()
            .chain(TEST_RECIPES)
            .map(|r| r.0)
            .chain([UI_CRATE, CONTRACTS_CRATE]),
    );
    c.args(["--", "-D", "warnings"]);
    run(&mut c)
}

pub fn build_all(layout: &Layout) -> Result<PathBuf> {
    let dist = layout.dist();
    fs::create_dir_all(dist.join("recipes"))?;
    fs::create_dir_all(dist.join("test-recipes"))?;
    build_filters(layout, &dist)?;
    build_recipes(layout, &dist)?;
    build_ui(layout, &dist.join("ui"))?;
    eprintln!("wasm artifacts in {}", dist.display());
    Ok(dist)
}

fn artifact(layout: &Layout, target: &str, krate: &str) -> PathBuf {
    artifact_of(layout, target, "wasm", krate)
}

/// The `.wasm` cargo writes for `krate` built with `--profile profile`.
fn artifact_of(layout: &Layout, target: &str, profile: &str, krate: &str) -> PathBuf {
    layout
        .wasm_target()
        .join(target)
        .join(profile)
        .join(format!("{}.wasm", krate.replace('-', "_")))
}

fn build_filters(layout: &Layout, dist: &Path) -> Result<()> {
    let target = "wasm32-wasip1";
    let mut c = wasm_cargo(layout, "build");
    c.args(["--profile", "wasm", "--target", target]);
    packages(&mut c, FILTERS.iter().map(|f| f.0));
    run(&mut c)?;
    for (krate, name) in FILTERS {
        let from = artifact(layout, target, krate);
        let module = fs::read(&from)
            .with_context(|| format!("filter artifact {} missing", from.display()))?;
        // Only the hooks the filter implements stay exported: Envoy skips the others. One
        // build may give several modules (the auth filter's lean one lacks a hook).
        for variant in wasm_exports::filter_variants(name)? {
            let (stripped, removed) = wasm_exports::strip_hooks(&module, variant.hooks)
                .with_context(|| format!("removing unused hooks from {}", from.display()))?;
            eprintln!(
                "{}: {} unused proxy-wasm hooks unexported",
                variant.name,
                removed.len()
            );
            fs::write(dist.join(format!("{}.wasm", variant.name)), stripped)?;
        }
    }
    Ok(())
}

fn build_recipes(layout: &Layout, dist: &Path) -> Result<()> {
    let target = "wasm32-unknown-unknown";
    let mut c = wasm_cargo(layout, "build");
    c.args(["--profile", "wasm", "--target", target]);
    packages(&mut c, RECIPES.iter().chain(TEST_RECIPES).map(|r| r.0));
    run(&mut c)?;
    let sets = [(RECIPES, "recipes"), (TEST_RECIPES, "test-recipes")];
    for (set, dir) in sets {
        for (krate, name) in set {
            let core = artifact(layout, target, krate);
            run(Command::new(layout.wasm_tools())
                .args(["component", "new"])
                .arg(&core)
                .arg("-o")
                .arg(dist.join(dir).join(format!("{name}.wasm"))))?;
        }
    }
    Ok(())
}

/// The UI's cargo profile (the root `Cargo.toml`: `wasm` at `opt-level = "z"`).
const UI_PROFILE: &str = "wasm-ui";

fn build_ui(layout: &Layout, out: &Path) -> Result<()> {
    let target = "wasm32-unknown-unknown";
    let mut c = wasm_cargo(layout, "build");
    c.args(["--profile", UI_PROFILE, "--target", target, "-p", UI_CRATE]);
    run(&mut c)?;
    let _ = fs::remove_dir_all(out);
    fs::create_dir_all(out)?;
    run(Command::new(layout.wasm_bindgen())
        .args([
            "--target",
            "web",
            "--no-typescript",
            "--out-name",
            "nsight_ui",
        ])
        .arg("--out-dir")
        .arg(out)
        .arg(artifact_of(layout, target, UI_PROFILE, UI_CRATE)))?;
    let wasm = out.join("nsight_ui_bg.wasm");
    run(Command::new(layout.wasm_opt())
        .args([
            "-Oz",
            "--enable-bulk-memory",
            "--enable-nontrapping-float-to-int",
        ])
        .arg(&wasm)
        .arg("-o")
        .arg(&wasm))?;
    fs::copy(layout.root.join("ui/index.html"), out.join("index.html"))
        .context("ui/index.html missing")?;
    Ok(())
}
