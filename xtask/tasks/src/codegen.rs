//! `cargo xtask codegen`: writes the generated files that are committed (OpenAPI documents).
//! Their staleness is checked by tests that compare the committed file with the code's output.

use std::process::Command;

use anyhow::{Context, Result};

use crate::paths::Layout;

/// (package, binary, committed file) of every service that prints its OpenAPI document.
const DOCUMENTS: [(&str, &str, &str); 3] = [
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
    (
        "nsight-tenant",
        "nsight-tenant-operator",
        "docs/api/tenant.openapi.json",
    ),
];

pub fn write(layout: &Layout) -> Result<()> {
    for (package, bin, file) in DOCUMENTS {
        let out = run_workspace_bin(layout, package, bin, &["--print-openapi".as_ref()])
            .with_context(|| format!("{bin} could not print its OpenAPI document"))?;
        let path = layout.root.join(file);
        std::fs::write(&path, &out.stdout)?;
        eprintln!("wrote {}", path.display());
    }
    crate::codegen_crds::write(layout)?;
    Ok(())
}

/// `cargo run -p <package> --bin <bin> -- <args>` in the host target dir; its output, or an
/// error carrying its stderr when it fails.
pub fn run_workspace_bin(
    layout: &Layout,
    package: &str,
    bin: &str,
    args: &[&std::ffi::OsStr],
) -> Result<std::process::Output> {
    let out = Command::new("cargo")
        .current_dir(&layout.root)
        .env("CARGO_TARGET_DIR", layout.host_target())
        .args(["run", "--quiet", "-p", package, "--bin", bin, "--"])
        .args(args)
        .output()
        .with_context(|| format!("cannot run {bin}"))?;
    if !out.status.success() {
        anyhow::bail!("{}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(out)
}
