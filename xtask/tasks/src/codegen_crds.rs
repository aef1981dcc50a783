//! `cargo xtask codegen` part: writes the CRDs of `nsight-api` into
//! `charts/nsight-operator/crds/` (one `<plural>.nvidia.com.yaml` each) and the chart's
//! `values.schema.json` by running its `nsight-crds` binary. Staleness is checked by
//! `controlplane/api/tests/crds_committed.rs` and `values_committed.rs`.

use anyhow::{Context, Result};

use crate::{codegen::run_workspace_bin, paths::Layout};

/// Must equal `nsight_api::crds::CHART_CRDS_DIR`.
const CHART_CRDS_DIR: &str = "charts/nsight-operator/crds";
/// Must equal `nsight_api::chart::VALUES_SCHEMA_PATH`.
const VALUES_SCHEMA: &str = "charts/nsight-operator/values.schema.json";

pub fn write(layout: &Layout) -> Result<()> {
    let dir = layout.root.join(CHART_CRDS_DIR);
    let out = run_workspace_bin(
        layout,
        "nsight-api",
        "nsight-crds",
        &["--write".as_ref(), dir.as_os_str()],
    )
    .context("nsight-crds could not write the CRDs")?;
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    let schema = layout.root.join(VALUES_SCHEMA);
    let out = run_workspace_bin(
        layout,
        "nsight-api",
        "nsight-crds",
        &["--write-values-schema".as_ref(), schema.as_os_str()],
    )
    .context("nsight-crds could not write the chart's values schema")?;
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}
