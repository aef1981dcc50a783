//! A MOCK Nsight Systems image for the node test: no nsys can be installed on these machines.
//! It stands for the image an admin names in `nsight-injector.nsys.image`: the mock CLI of
//! `e2e/mock/nsys.c` where NVIDIA installs nsys, a real nsys export beside it (what its
//! `export` copies), and the C library the operator's copy (the agent) runs with.
//!
//! ```text
//! /opt/nvidia/nsight-systems/2025.3.1/target-linux-x64/nsys                (the MOCK, gcc -O2)
//! /opt/nvidia/nsight-systems/2025.3.1/target-linux-x64/mock-export.sqlite  (testdata nsys-ai/mock.sqlite)
//! /lib*/...                                                                  (their ldd closure)
//! ```

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};

use crate::oci::{self, Entry, ImageSpec};

/// The image's name (imported into the node's containerd, never pulled).
pub const NAME: &str = "nsight.test/mock-nsys:2025.3.1";
/// Where the image holds Nsight Systems (the chart's default `imageDir`).
pub const DIR: &str = "/opt/nvidia/nsight-systems";
/// The real export the mock's `export` copies: two kernels, `reduce_kernel` and
/// `vectorized_elementwise_kernel`.
pub const EXPORT: &str = "/work/shared/testdata/nsys/nsys-ai/mock.sqlite";

/// Builds the mock and writes the image's OCI archive under `work`; returns the archive.
pub fn write(work: &Path) -> Result<PathBuf> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("mock/nsys.c");
    let mock = work.join("mock-nsys");
    let status = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(&mock)
        .arg(&source)
        .status()
        .context("gcc runs (apt-get install gcc)")?;
    if !status.success() {
        bail!("gcc failed on {}", source.display());
    }
    let target = format!("{DIR}/2025.3.1/target-linux-x64");
    let agent = crate::bin("nsight-agent");
    let mut entries = vec![
        Entry::file(format!("{target}/nsys"), &mock, 0o755),
        Entry::file(format!("{target}/mock-export.sqlite"), EXPORT, 0o644),
    ];
    for lib in oci::library_closure(&[mock.as_path(), agent.as_path()])? {
        let real = std::fs::canonicalize(&lib)
            .with_context(|| format!("cannot resolve {}", lib.display()))?;
        entries.push(Entry::file(lib.display().to_string(), real, 0o755));
    }
    let archive = work.join("mock-nsys.oci.tar");
    oci::write_archive(
        &ImageSpec {
            name: NAME.into(),
            entries,
            user: "65532:65532".into(),
            ..ImageSpec::default()
        },
        &archive,
    )?;
    Ok(archive)
}
