//! `cargo xtask codegen`: writes the generated files that are committed (OpenAPI documents).
//! Their staleness is checked by tests that compare the committed file with the code's output.

use std::process::Command;

use anyhow::{Context, Result};

use crate::paths::Layout;

pub fn write(layout: &Layout) -> Result<()> {
    let out = Command::new("cargo")
        .current_dir(&layout.root)
        .env("CARGO_TARGET_DIR", layout.host_target())
        .args([
            "run",
            "--quiet",
            "-p",
            "nsight-coordinator",
            "--",
            "--print-openapi",
        ])
        .output()
        .context("cannot run the coordinator")?;
    if !out.status.success() {
        anyhow::bail!(
            "the coordinator could not print its OpenAPI document:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let path = layout.root.join("docs/api/coordinator.openapi.json");
    std::fs::write(&path, &out.stdout)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
