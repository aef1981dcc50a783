//! `cargo xtask <task>`: the project's automation, in Rust so that it runs wherever cargo does.
//!
//! Owns: installing the toolchains and real servers the project needs (`setup`), building the
//! WebAssembly artifacts (`build-wasm`) and the one test command (`ci`). It never edits sources
//! outside the generated files it is asked to write.

mod bench;
mod bench_auth;
mod bench_gateway;
mod bench_nvtx;
mod bench_operator;
mod bench_otlp;
mod bench_otlp_mirror;
mod bench_recipes;
mod bench_storage;
mod bench_timeline;
mod bench_ui;
mod bench_webhook;
mod cache_dir;
mod ci;
mod cluster;
mod cmd;
mod codegen;
mod codegen_crds;
mod demo;
mod fuzz;
mod gpu_check;
mod image;
mod image_oci;
mod paths;
mod runner_layout;
mod setup;
mod setup_kube;
mod setup_node;
mod wasm;
mod wasm_exports;

use anyhow::{bail, Result};

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  setup [STEP]  install everything the project needs (idempotent; caches under NSIGHT_CACHE_DIR);
               steps: apt, apt-test, wasm-std, wasm-tools, wasm-bindgen, wasm-opt, python, s3, kube, node,
               oidc, helm, playwright, fuzz
  build-wasm   build the proxy-wasm filters, recipe components and the UI into the dist dir
  codegen      regenerate committed generated files (OpenAPI documents)
  demo [--keep] the whole platform on this machine, profiling a sample program end to end
  bench NAME   benchmarks against real processes (coordinator [AGENTS], storage [SIZE_MIB],
               gateway, nvtx, recipes [ROWS] [--layout L], webhook, operator, auth)
  ci           the test command: setup, fmt, clippy (host + wasm), build-wasm, tests, fuzz (bounded)
  fuzz [--seconds N] [TARGET...]
               the fuzz targets of e2e/fuzz (cargo-fuzz, libFuzzer), N seconds each (60)
  image all [--release] [--tag T] [--repository R]
               an OCI archive per component (operator, coordinator, analysis, agent, CLI) into
               the cache's images/, imported into the cluster when one is up
  image operator [--tag T] [--repository R]
               the operator image (binary + /plugins filters); built when docker/podman answers
  cluster up|down|status|import
               a real one-node Kubernetes on this machine (root; images from `image all`)
  gpu-check bundle | fixtures RESULTS.tar.gz
               the GPU check: a bundle for a machine with an NVIDIA GPU (run its gpu-check.sh
               there), then its results as test fixtures (see docs/agent.md)
  env          print the environment the tests use (source it to run `cargo test` by hand)
";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(task) = args.first() else {
        eprint!("{USAGE}");
        bail!("no task given");
    };
    let layout = paths::Layout::discover()?;
    match task.as_str() {
        "setup" => setup::run(&layout, &args[1..]),
        "build-wasm" => wasm::build_all(&layout).map(|_| ()),
        "ci" => ci::run(&layout),
        "codegen" => codegen::write(&layout),
        "bench" => bench::run(&layout, &args[1..]),
        "demo" => demo::run(&layout, &args[1..]),
        "gpu-check" => gpu_check::run(&layout, &args[1..]),
        "fuzz" => fuzz::run(&layout, &args[1..]),
        "image" => image::run(&layout, &args[1..]),
        "cluster" => cluster::run(&args[1..]),
        "env" => {
            // Written without println!: a closed pipe (`| head`) ends the output, not a panic.
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            for (k, v) in layout.test_env() {
                if writeln!(out, "export {k}={}", v.display()).is_err() {
                    break;
                }
            }
            Ok(())
        }
        "-h" | "--help" | "help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => {
            eprint!("{USAGE}");
            bail!("unknown task `{other}`")
        }
    }
}
