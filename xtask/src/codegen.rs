//! `cargo xtask codegen`: writes the generated files that are committed (OpenAPI documents).
//! Their staleness is checked by tests that compare the committed file with the code's output.

use std::process::Command;

use anyhow::{Context, Result};

use crate::paths::Layout;

/// (package, binary, committed file) of every service that prints its OpenAPI document.
const DOCUMENTS: [(&str, &str, &str); 2] = [
    (
        "nsight-coordinator",
        "nsight-coordinator",
        "docs/api/coordinator.openapi.json",
    ),
    (
        "nsight-analysis",
        "nsight-analysis",
        "docs/api/analysis.openapi.json",
    ),
];

pub fn write(layout: &Layout) -> Result<()> {
    for (package, bin, file) in DOCUMENTS {
        let out = Command::new("cargo")
            .current_dir(&layout.root)
            .env("CARGO_TARGET_DIR", layout.host_target())
            .args([
                "run",
                "--quiet",
                "-p",
                package,
                "--bin",
                bin,
                "--",
                "--print-openapi",
            ])
            .output()
            .with_context(|| format!("cannot run {bin}"))?;
        if !out.status.success() {
            anyhow::bail!(
                "{bin} could not print its OpenAPI document:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let path = layout.root.join(file);
        std::fs::write(&path, &out.stdout)?;
        eprintln!("wrote {}", path.display());
    }
    crate::codegen_crds::write(layout)?;
    Ok(())
}
