//! `cargo xtask gpu-check`: the one prepared check for a machine with an NVIDIA GPU, in two
//! halves, because that machine has CUDA, nsys and PyTorch but no Rust toolchain and little
//! time:
//!
//! ```text
//!  here:   cargo xtask gpu-check bundle      -> gpu-bundle/ (stripped release agent, coordinator,
//!                                               libnsight_nvtx.so, gpu-check.sh, workloads,
//!                                               libdw/libelf for nsys's importer)
//!  GPU:    bash gpu-bundle/gpu-check.sh gpu-bundle $OUT  -> $OUT/gpu-check.log, results.tar.gz
//!  here:   cargo xtask gpu-check fixtures $OUT/results.tar.gz
//!                                            -> controlplane/agent/tests/gpu-check/ (reports and
//!                                               nsys stats CSVs: tests/gpu_check_reports.rs)
//! ```

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context as _, Result};

use crate::{cmd::run as run_cmd, paths::Layout};

/// What the GPU machine needs from here, besides the script.
const BINARIES: &[&str] = &["nsight-agent", "nsight-coordinator", "libnsight_nvtx.so"];
const SCRIPTS: &[&str] = &[
    "xtask/gpu/gpu-check.sh",
    "xtask/gpu/coordinate.py",
    "xtask/gpu/torch_loop.py",
    "xtask/gpu/report_summary.py",
    "xtask/demo/cuda_sample.cu",
];
/// Debian packages whose libraries nsys's QdstrmImporter needs (libdw.so.1, libelf.so.1).
const IMPORTER_PACKAGES: &[&str] = &["libdw1", "libelf1"];

/// Where the tests find them (`controlplane/agent/tests/gpu_check_reports.rs`).
const FIXTURE_DIR: &str = "controlplane/agent/tests/gpu-check";

/// The files of a GPU run the tests read: reports and nsys's CSVs, small enough to commit.
const FIXTURE_FILES: &[&str] = &[
    "cuda_sample-cupti.sqlite",
    "cuda_sample-nsys.sqlite",
    "cuda_sample-nsys_cuda_gpu_kern_sum.csv",
    "cuda_sample-nsys_cuda_api_sum.csv",
    "cuda_sample-cupti-by-nsys_cuda_gpu_kern_sum.csv",
    "torch-cupti.sqlite",
    "torch-nsys.sqlite",
    "torch-nsys_cuda_gpu_kern_sum.csv",
    "torch-nsys_cuda_api_sum.csv",
    "torch-cupti-by-nsys_cuda_gpu_kern_sum.csv",
];

pub fn run(layout: &Layout, args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("bundle") => bundle(layout),
        Some("fixtures") => {
            let Some(tarball) = args.get(1) else {
                bail!("usage: cargo xtask gpu-check fixtures RESULTS.tar.gz");
            };
            fixtures(layout, Path::new(tarball))
        }
        _ => bail!("usage: cargo xtask gpu-check bundle | fixtures RESULTS.tar.gz"),
    }
}

/// The bundle directory (ignored by git, carried to the GPU machine).
pub fn bundle_dir(layout: &Layout) -> PathBuf {
    layout.root.join("gpu-bundle")
}

fn bundle(layout: &Layout) -> Result<()> {
    let dir = bundle_dir(layout);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("libs"))?;
    run_cmd(
        Command::new("cargo")
            .current_dir(&layout.root)
            .args([
                "build",
                "--release",
                "-p",
                "nsight-agent",
                "-p",
                "nsight-coordinator",
            ])
            .args(["-p", "nsight-agent-nvtx"]),
    )?;
    let release = layout.host_target().join("release");
    for bin in BINARIES {
        let to = dir.join(bin);
        fs::copy(release.join(bin), &to)
            .with_context(|| format!("copying {}", release.join(bin).display()))?;
        run_cmd(Command::new("strip").arg(&to))?;
    }
    for script in SCRIPTS {
        let from = layout.root.join(script);
        let name = from.file_name().context("script name")?;
        fs::copy(&from, dir.join(name)).with_context(|| format!("copying {}", from.display()))?;
    }
    let debs = dir.join("debs");
    fs::create_dir_all(&debs)?;
    run_cmd(
        Command::new("apt-get")
            .current_dir(&debs)
            .arg("download")
            .args(IMPORTER_PACKAGES),
    )?;
    for deb in fs::read_dir(&debs)? {
        let deb = deb?.path();
        let unpacked = debs.join("x");
        run_cmd(Command::new("dpkg").arg("-x").arg(&deb).arg(&unpacked))?;
    }
    for lib in walk(&debs.join("x"))? {
        let name = lib.file_name().map(|n| n.to_string_lossy().into_owned());
        if let Some(name) = name.filter(|n| n.contains(".so")) {
            // The real file under its soname: libdw-0.188.so -> libdw.so.1.
            let stem = name.split(['-', '.']).next().unwrap_or_default();
            let soname = format!("{stem}.so.1");
            fs::copy(&lib, dir.join("libs").join(&soname))?;
        }
    }
    fs::remove_dir_all(&debs)?;
    let size: u64 = walk(&dir)?
        .iter()
        .filter_map(|p| fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    eprintln!(
        "gpu-bundle: {} ({:.1} MiB); on the GPU machine: bash gpu-bundle/gpu-check.sh gpu-bundle \"$OUT\"",
        dir.display(),
        size as f64 / 1_048_576.0
    );
    Ok(())
}

fn walk(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let meta = fs::symlink_metadata(&path)?;
        if meta.is_dir() {
            out.extend(walk(&path)?);
        } else if meta.is_file() {
            out.push(path);
        }
    }
    Ok(out)
}

/// Unpacks the files the tests read into [`FIXTURE_DIR`].
fn fixtures(layout: &Layout, tarball: &Path) -> Result<()> {
    let to = layout.root.join(FIXTURE_DIR);
    let scratch = layout.host_target().join("tmp/gpu-check-results");
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch)?;
    run_cmd(
        Command::new("tar")
            .arg("xzf")
            .arg(tarball)
            .arg("-C")
            .arg(&scratch),
    )?;
    fs::create_dir_all(&to)?;
    let mut kept = 0;
    for file in walk(&scratch)? {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if FIXTURE_FILES.contains(&name.as_str()) {
            fs::copy(&file, to.join(&name))?;
            kept += 1;
        }
    }
    eprintln!("{kept} files into {}", to.display());
    Ok(())
}
