//! `cargo xtask setup node`: what a real one-node Kubernetes needs on this machine, beside the
//! API server of `setup kube`.
//!
//! ```text
//! apt: containerd runc containernetworking-plugins nftables conntrack
//! <cache>/tools/kube-node-v1.N.P/build/go.mod   (the same go.mod and Go caches as kube-apiserver)
//!     go build kubelet kube-controller-manager kube-scheduler kube-proxy -> .../bin/
//! <cache>/go/mod/k8s.io/kubernetes@v1.N.P/build/pause/linux/pause.c
//!     gcc -Os -static                                -> <cache>/tools/pause-<v>/pause
//! <cache>/tools/coredns-<v>/build/{go.mod,main.go} (plugins of cluster::dns)
//!     go build                                       -> <cache>/tools/coredns-<v>/coredns
//! ```
//!
//! The binaries are found by `nsight_e2e::cluster` (and `cargo xtask cluster up`) at these
//! paths. Measured after the API server on 2 cores: kubelet ~90 s, controller-manager ~86 s,
//! scheduler ~11 s, kube-proxy ~31 s; a second run does nothing.

use std::{fs, path::PathBuf, process::Command, time::Instant};

use anyhow::{bail, Context, Result};
use nsight_e2e::cluster::{self as cluster_paths, dns, KUBE_VERSION, NODE_BINARIES, PAUSE_VERSION};

use crate::{
    cmd::{output, run as run_cmd},
    paths::Layout,
    setup::apt_install,
    setup_kube::{go_cmd, kube_ldflags, staging_go_mod},
};

/// Debian packages of the node: the container runtime, the CNI plugins (bridge, host-local,
/// loopback) and the netfilter tools kube-proxy drives.
const NODE_APT_PACKAGES: &[&str] = &[
    "containerd",
    "runc",
    "containernetworking-plugins",
    "nftables",
    "conntrack",
];

/// The setup step: packages, the node's Kubernetes binaries, the pause binary.
pub fn node(layout: &Layout) -> Result<bool> {
    let apt = apt_install(NODE_APT_PACKAGES)?;
    let binaries = node_binaries(layout)?;
    let pause = pause(layout)?;
    let coredns = coredns(layout)?;
    Ok(apt || binaries || pause || coredns)
}

/// CoreDNS from the Go module proxy: a main package importing only the plugins the cluster's
/// Corefile uses (`nsight_e2e::cluster::dns`), the documented way to build a custom CoreDNS.
fn coredns(layout: &Layout) -> Result<bool> {
    let bin = cluster_paths::coredns_bin(&layout.cache);
    let want = format!("CoreDNS-{}", dns::COREDNS_VERSION.trim_start_matches('v'));
    if output(Command::new(&bin).arg("-version")).is_some_and(|v| v.contains(&want)) {
        return Ok(false);
    }
    let dir = bin.parent().context("coredns path has no parent")?;
    let build = dir.join("build");
    fs::create_dir_all(&build)?;
    let started = Instant::now();
    fs::write(
        build.join("go.mod"),
        format!(
            "module nsight.local/coredns\n\ngo 1.25\n\nrequire github.com/coredns/coredns {}\n",
            dns::COREDNS_VERSION
        ),
    )?;
    fs::write(build.join("main.go"), dns::main_go())?;
    run_cmd(go_cmd(layout, &build).args(["mod", "tidy"]))?;
    run_cmd(
        go_cmd(layout, &build)
            .args(["build", "-trimpath", "-ldflags", "-s -w", "-o"])
            .arg(&bin)
            .arg("."),
    )?;
    if !output(Command::new(&bin).arg("-version")).is_some_and(|v| v.contains(&want)) {
        bail!("{} does not report {want}", bin.display());
    }
    eprintln!(
        "    coredns built in {:.0}s",
        started.elapsed().as_secs_f64()
    );
    Ok(true)
}

fn node_binaries(layout: &Layout) -> Result<bool> {
    let bin_dir = cluster_paths::node_bin_dir(&layout.cache);
    let want = format!("Kubernetes {KUBE_VERSION}");
    let missing: Vec<&str> = NODE_BINARIES
        .iter()
        .copied()
        .filter(|name| {
            !output(Command::new(bin_dir.join(name)).arg("--version"))
                .is_some_and(|v| v.contains(&want))
        })
        .collect();
    if missing.is_empty() {
        return Ok(false);
    }
    let top = bin_dir
        .parent()
        .context("node bin dir has no parent")?
        .to_path_buf();
    let build = top.join("build");
    fs::create_dir_all(&build)?;
    fs::create_dir_all(&bin_dir)?;
    let started = Instant::now();
    let imports: String = NODE_BINARIES
        .iter()
        .map(|b| format!("import _ \"k8s.io/kubernetes/cmd/{b}\"\n"))
        .collect();
    fs::write(build.join("go.mod"), staging_go_mod(layout, &build)?)?;
    fs::write(
        build.join("tools.go"),
        format!("//go:build tools\n\npackage tools\n\n{imports}"),
    )?;
    run_cmd(go_cmd(layout, &build).args(["mod", "tidy"]))?;
    let ldflags = kube_ldflags();
    let mut go = go_cmd(layout, &build);
    go.args(["build", "-trimpath", "-ldflags", &ldflags, "-o"])
        .arg(format!("{}/", bin_dir.display()));
    for name in &missing {
        go.arg(format!("k8s.io/kubernetes/cmd/{name}"));
    }
    run_cmd(&mut go)?;
    for name in NODE_BINARIES {
        let bin = bin_dir.join(name);
        if !output(Command::new(&bin).arg("--version")).is_some_and(|v| v.contains(&want)) {
            bail!("{} does not report {want}", bin.display());
        }
    }
    eprintln!(
        "    {} built in {:.0}s",
        missing.join(", "),
        started.elapsed().as_secs_f64()
    );
    Ok(true)
}

/// The pause binary from the kubernetes module's own source (`build/pause/linux/pause.c`),
/// static, so that its image is the binary alone.
fn pause(layout: &Layout) -> Result<bool> {
    let bin = cluster_paths::pause_bin(&layout.cache);
    if output(Command::new(&bin).arg("-v")).is_some_and(|v| v.contains(PAUSE_VERSION)) {
        return Ok(false);
    }
    let source: PathBuf = layout
        .cache
        .join("go/mod/k8s.io")
        .join(format!("kubernetes@{KUBE_VERSION}"))
        .join("build/pause/linux/pause.c");
    if !source.is_file() {
        bail!(
            "{} is missing: the kubernetes module is downloaded by `cargo xtask setup kube`",
            source.display()
        );
    }
    let dir = bin.parent().context("pause path has no parent")?;
    fs::create_dir_all(dir)?;
    run_cmd(
        Command::new("gcc")
            .args(["-Os", "-static", "-Wall", "-Werror"])
            .arg(format!("-DVERSION={PAUSE_VERSION}"))
            .arg("-o")
            .arg(&bin)
            .arg(&source),
    )
    .context("gcc (Debian package `gcc`, libc6-dev) builds the pause binary")?;
    if !output(Command::new(&bin).arg("-v")).is_some_and(|v| v.contains(PAUSE_VERSION)) {
        bail!("{} does not report {PAUSE_VERSION}", bin.display());
    }
    Ok(true)
}
