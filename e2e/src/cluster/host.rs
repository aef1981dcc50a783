//! What the node changes on this machine, and how `cluster down` puts it back: kernel settings
//! (saved before `up`, restored after `down`), our bridge, kube-proxy's nftables tables,
//! mounts under the state dir and the runtime's fixed paths, the pods' cgroups.
//!
//! Everything here runs as root and touches only what the node made: the bridge named in
//! [`super::Net`], the tables named `kube-proxy`, the cgroup root `/nsight`, mounts under the
//! state dir or the fixed paths listed below.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result};

use super::Net;

/// The settings the kubelet, the bridge plugin and kube-proxy change.
pub const SYSCTLS: &[&str] = &[
    "vm/overcommit_memory",
    "kernel/panic",
    "kernel/panic_on_oops",
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
    "net/bridge/bridge-nf-call-iptables",
    "net/bridge/bridge-nf-call-ip6tables",
];

/// Paths the runtime and kubelet use whatever root dirs they are given.
pub const FIXED_PATHS: &[&str] = &[
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/run/containerd/s",
    "/run/containerd/fifo",
    "/run/containerd/runc",
    "/var/lib/cni",
];

/// The cgroup hierarchies here (v1) and the root the kubelet puts pods under.
const CGROUP_ROOT: &str = "nsight";

fn sysctl_path(name: &str) -> PathBuf {
    Path::new("/proc/sys").join(name)
}

/// Reads the settings as they are now (those that exist on this kernel).
pub fn read_sysctls() -> BTreeMap<String, String> {
    SYSCTLS
        .iter()
        .filter_map(|n| {
            std::fs::read_to_string(sysctl_path(n))
                .ok()
                .map(|v| ((*n).to_owned(), v.trim().to_owned()))
        })
        .collect()
}

/// Writes the saved settings back; returns the ones that could not be written.
pub fn restore_sysctls(saved: &BTreeMap<String, String>) -> Vec<String> {
    saved
        .iter()
        .filter(|(n, v)| {
            let now = std::fs::read_to_string(sysctl_path(n)).unwrap_or_default();
            now.trim() != v.as_str() && std::fs::write(sysctl_path(n), v).is_err()
        })
        .map(|(n, _)| n.clone())
        .collect()
}

pub fn write_sysctl(name: &str, value: &str) -> Result<()> {
    std::fs::write(sysctl_path(name), value).with_context(|| format!("cannot set {name}={value}"))
}

fn ip(args: &[&str]) -> Result<String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("ip (Debian package iproute2)")?;
    anyhow::ensure!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Our bridge with the node address (the API server and the kubelet listen there, and pods
/// reach the host through it). Idempotent.
pub fn bridge_up(net: &Net) -> Result<()> {
    if ip(&["link", "show", "dev", &net.bridge]).is_err() {
        ip(&["link", "add", "name", &net.bridge, "type", "bridge"])?;
    }
    let addr = format!("{}/{}", net.node_ip, net.pod_prefix_len);
    if !ip(&["-4", "addr", "show", "dev", &net.bridge])?.contains(&format!("inet {addr}")) {
        ip(&["addr", "add", &addr, "dev", &net.bridge])?;
    }
    ip(&["link", "set", "dev", &net.bridge, "up"])?;
    Ok(())
}

pub fn bridge_down(net: &Net) {
    let _ = ip(&["link", "delete", "dev", &net.bridge]);
}

/// Deletes the tables kube-proxy made (nftables mode).
pub fn delete_kube_proxy_tables() {
    for family in ["ip", "ip6"] {
        let _ = Command::new("nft")
            .args(["delete", "table", family, "kube-proxy"])
            .output();
    }
}

/// Unmounts everything mounted at or under one of `roots`, deepest first (lazily, so a busy
/// mount cannot stop the teardown).
pub fn unmount_under(roots: &[PathBuf]) -> usize {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<String> = info
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .map(unescape_mount)
        .filter(|p| roots.iter().any(|r| Path::new(p).starts_with(r)))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    points.dedup();
    let mut n = 0;
    for p in points {
        if Command::new("umount")
            .args(["-l", &p])
            .output()
            .is_ok_and(|o| o.status.success())
        {
            n += 1;
        }
    }
    n
}

/// `/proc/self/mountinfo` escapes spaces and such as `\040`.
fn unescape_mount(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let code: String = chars.by_ref().take(3).collect();
            if let Ok(v) = u8::from_str_radix(&code, 8) {
                out.push(char::from(v));
                continue;
            }
            out.push('\\');
            out.push_str(&code);
        } else {
            out.push(c);
        }
    }
    out
}

/// Creates the kubelet's `cgroupRoot` in every v1 hierarchy (the kubelet insists that it
/// exists); a new cpuset gets its parent's CPUs and memory nodes, or no task could join it.
pub fn create_cgroup_root() -> Result<()> {
    let hierarchies = std::fs::read_dir("/sys/fs/cgroup").context("cannot read /sys/fs/cgroup")?;
    for h in hierarchies.flatten() {
        let base = h.path();
        if base.join("unified").exists() || !base.join("cgroup.procs").exists() {
            continue;
        }
        let root = base.join(CGROUP_ROOT);
        if !root.is_dir() {
            std::fs::create_dir(&root)
                .with_context(|| format!("cannot create {}", root.display()))?;
        }
        for file in ["cpuset.cpus", "cpuset.mems"] {
            if let Ok(value) = std::fs::read_to_string(base.join(file)) {
                std::fs::write(root.join(file), value.trim())
                    .with_context(|| format!("cannot set {}", root.join(file).display()))?;
            }
        }
    }
    Ok(())
}

/// Removes the pods' cgroups (the kubelet's `cgroupRoot`) from every v1 hierarchy, deepest
/// first; a cgroup with a process left in it stays (and is reported).
pub fn remove_cgroups() -> Vec<PathBuf> {
    let mut left = Vec::new();
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return left;
    };
    for h in hierarchies.flatten() {
        let root = h.path().join(CGROUP_ROOT);
        if !root.is_dir() {
            continue;
        }
        let mut dirs = Vec::new();
        collect_dirs(&root, &mut dirs);
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for d in dirs {
            if std::fs::remove_dir(&d).is_err() {
                left.push(d);
            }
        }
    }
    left
}

fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                collect_dirs(&e.path(), out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_with_escapes_are_read_back() {
        assert_eq!(unescape_mount(r"/a\040b/c"), "/a b/c");
        assert_eq!(unescape_mount("/plain"), "/plain");
    }
}
