//! `cargo xtask codegen` part: writes the CRDs of `nsight-api` into
//! `charts/nsight-operator/crds/` (one `<plural>.nvidia.com.yaml` each) by running its
//! `nsight-crds` binary. Staleness is checked by `controlplane/api/tests/crds_committed.rs`.

use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::paths::Layout;

/// Must equal `nsight_api::crds::CHART_CRDS_DIR`.
const CHART_CRDS_DIR: &str = "charts/nsight-operator/crds";

pub fn write(layout: &Layout) -> Result<()> {
    let dir = layout.root.join(CHART_CRDS_DIR);
    let out = Command::new("cargo")
        .current_dir(&layout.root)
        .env("CARGO_TARGET_DIR", layout.host_target())
        .args([
            "run",
            "--quiet",
            "-p",
            "nsight-api",
            "--bin",
            "nsight-crds",
            "--",
        ])
        .arg("--write")
        .arg(&dir)
        .output()
        .context("cannot run nsight-crds")?;
    if !out.status.success() {
        bail!(
            "nsight-crds could not write the CRDs:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}
