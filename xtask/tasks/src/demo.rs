//! `cargo xtask demo [--keep] [--tls] [--gateway-port N] [--storage-port N]`: the README's main
//! command.
//! Installs what is missing, builds, starts the local platform, profiles a Python program with
//! NVTX ranges under the agent, drives a real session through the gateway with the CLI, and
//! prints what a person needs. `--keep` leaves the platform running until Ctrl-C; `--tls` serves
//! the gateway over HTTPS with the local certificates (the CLI trusts their CA).

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::{anyhow, bail, Result};
use nsight_e2e::demo::{run_session, DemoOptions, DemoPaths, LocalPlatform, NsysSample};

use crate::{
    cmd::{run as run_cmd, stage, Background},
    paths::Layout,
    setup, wasm,
};

/// The host binaries (and libraries) the demo runs.
const PACKAGES: [&str; 7] = [
    "nsight-local",
    "nsight-coordinator",
    "nsight-analysis",
    "nsight-cli",
    "nsight-agent",
    "nsight-agent-nvtx",
    "nsight-agent-hook",
];

struct Flags {
    keep: bool,
    tls: bool,
    gateway_port: u16,
    storage_port: u16,
}

fn flags(args: &[String]) -> Result<Flags> {
    let mut flags = Flags {
        keep: false,
        tls: false,
        gateway_port: 8888,
        storage_port: 9000,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut port = |name: &str| -> Result<u16> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| anyhow!("{name} needs a port number"))
        };
        match arg.as_str() {
            "--keep" => flags.keep = true,
            "--tls" => flags.tls = true,
            "--gateway-port" => flags.gateway_port = port("--gateway-port")?,
            "--storage-port" => flags.storage_port = port("--storage-port")?,
            other => bail!(
                "unknown option `{other}`; usage: cargo xtask demo [--keep] [--tls] [--gateway-port N] [--storage-port N]"
            ),
        }
    }
    Ok(flags)
}

pub fn run(layout: &Layout, args: &[String]) -> Result<()> {
    let flags = flags(args)?;
    // Everything but what only the tests use: the Kubernetes API server (~32 min to build
    // cold), helm and the OpenID provider.
    // The S3 server too: the demo keeps reports in a local directory; and the browser driver.
    const TEST_ONLY: [&str; 6] = ["apt-test", "kube", "helm", "oidc", "s3", "playwright"];
    let steps: Vec<String> = setup::STEPS
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .filter(|name| !TEST_ONLY.contains(&name.as_str()))
        .collect();
    // Debian's packages first (protoc for the host build), then the host build runs in the
    // background while the rest of setup and the Wasm builds, which have long serial stretches
    // (one fat-LTO link per artifact), keep the other core busy.
    stage("setup apt", || setup::run(layout, &steps[..1]))?;
    let mut c = Command::new("cargo");
    c.current_dir(&layout.root)
        .env("CARGO_TARGET_DIR", layout.host_target())
        .arg("build");
    for p in PACKAGES {
        c.args(["-p", p]);
    }
    let host_build = Background::spawn(&mut c, &layout.cache.join("demo-build.log"))?;
    stage("setup", || setup::run(layout, &steps[1..]))?;
    stage("build-wasm", || wasm::build_all(layout).map(|_| ()))?;
    stage("build (host binaries)", || host_build.wait())?;
    let state_dir = layout.cache.join("demo");
    // A fresh platform state each run (the API key is kept: configured CLIs keep working).
    for stale in [
        "coordinator",
        "analysis",
        "reports",
        "out",
        "agent-spool-demo",
        "agent-spool-demo-nsys",
        "logs",
    ] {
        let _ = std::fs::remove_dir_all(state_dir.join(stale));
    }
    let paths = DemoPaths {
        bin_dir: layout.host_target().join("debug"),
        wasm_dir: layout.dist(),
        envoy_bin: layout.envoy(),
        python: layout.venv().join("bin/python"),
        sample: layout.root.join("xtask/demo/nvtx_sample.py"),
        nsys: nsys_sample(layout, &state_dir)?,
    };
    let options = DemoOptions {
        out_dir: state_dir.join("out"),
        state_dir,
        gateway_port: flags.gateway_port,
        storage_port: flags.storage_port,
        internal_ports_from: 18080,
        collect_for: Duration::from_secs(3),
        tls: flags.tls,
        extra_args: Vec::new(),
    };
    eprintln!(
        "==> starting the local platform (state in {})",
        options.state_dir.display()
    );
    let platform = LocalPlatform::start(&paths, &options).map_err(|e| anyhow!(e))?;
    eprintln!(
        "==> profiling {} under nsight-agent",
        paths.sample.display()
    );
    let outcome = run_session(&platform, &paths, &options).map_err(|e| anyhow!(e))?;
    for (command, output) in &outcome.transcript {
        println!("$ {command}\n{output}");
    }
    println!("nvtx_sum (CSV):\n{}", outcome.csv);
    println!("Downloaded reports:");
    for f in &outcome.downloaded {
        println!("  {}", f.display());
    }
    println!("Analysis outputs:");
    for f in &outcome.analysis_files {
        println!("  {}", f.display());
    }
    println!();
    println!("Gateway   {}", outcome.gateway_url);
    println!("UI        {}/", outcome.gateway_url);
    println!("API key   {}", outcome.api_key);
    println!("Notebook  {}", outcome.notebook_url);
    println!(
        "CLI       {}/nsight-cloud --config {} status",
        paths.bin_dir.display(),
        options.state_dir.join("nsight-cloud.conf").display()
    );
    match (&paths.nsys, &outcome.kernels_csv) {
        (Some(sample), Some(csv)) => println!(
            "\n{} under nsys ({}): cuda_gpu_kern_sum (CSV):\n{csv}",
            sample.argv.join(" "),
            sample.nsys.display()
        ),
        _ => println!("nsys is not on PATH: the CUDA sample under the nsys backend was skipped"),
    }
    if flags.keep {
        println!("\nThe platform keeps running; press Ctrl-C to stop it.");
        wait_for_ctrl_c();
    }
    platform.stop();
    Ok(())
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// With nsys on PATH, the program for the nsys backend: the CUDA sample when nvcc can build it,
/// else the Python sample (nsys then records its NVTX ranges and OS runtime calls, no kernels).
fn nsys_sample(layout: &Layout, state_dir: &Path) -> Result<Option<NsysSample>> {
    let Some(nsys) = which("nsys") else {
        return Ok(None);
    };
    let argv = match which("nvcc") {
        Some(nvcc) => {
            let bin = state_dir.join("cuda_sample");
            std::fs::create_dir_all(state_dir)?;
            run_cmd(
                Command::new(nvcc)
                    .arg("-O2")
                    .arg("-o")
                    .arg(&bin)
                    .arg(layout.root.join("xtask/demo/cuda_sample.cu")),
            )?;
            vec![bin.display().to_string(), "600".into()]
        }
        None => vec![
            layout.venv().join("bin/python").display().to_string(),
            layout
                .root
                .join("xtask/demo/nvtx_sample.py")
                .display()
                .to_string(),
            "600".into(),
        ],
    };
    Ok(Some(NsysSample { nsys, argv }))
}

/// Blocks until SIGINT: `sleep` in a child that the terminal's Ctrl-C also interrupts.
fn wait_for_ctrl_c() {
    while Command::new("sleep")
        .arg("3600")
        .status()
        .is_ok_and(|s| s.success())
    {}
}
