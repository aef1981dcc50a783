//! The end-to-end harness shared by every test that drives real processes (Envoy, Chromium,
//! S3, the API server): where their binaries and our Wasm artifacts are, free ports, readiness
//! waits, a process guard that kills on drop, a tiny HTTP/1.1 client and a static file server.
//!
//! Locations come from the variables `cargo xtask ci` sets (`cargo xtask env` prints them). A
//! missing artifact is a test failure with the command that builds it, never a silent skip.

#![allow(
    clippy::expect_used,
    clippy::panic,
    reason = "a test harness: failing loudly with the cause is its job"
)]

pub mod agent;
pub mod browser;
pub mod cli;
pub mod cluster;
pub mod demo;
pub mod echo;
pub mod envoy;
pub mod gateway;
pub mod http;
pub mod jwt;
pub mod kube;
pub mod mock_nsys_image;
pub mod oci;
pub mod oidc;
pub mod otlp;
pub mod platform;
pub mod process;
pub mod s3;
pub mod schemathesis;

use std::{
    net::{SocketAddr, TcpListener, TcpStream},
    path::PathBuf,
    time::{Duration, Instant},
};

/// `NSIGHT_CACHE_DIR`, else `/var/cache/nsight-operator` (where `cargo xtask setup` puts
/// everything it installs when run as root, as CI does).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("NSIGHT_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/nsight-operator"))
}

/// Whether this process runs as root (`id -u`).
pub fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A path from the environment that must exist, with the command that provides it.
pub fn required_path(var: &str, provided_by: &str) -> PathBuf {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        panic!("{var} is not set: run the tests through `cargo xtask ci`, or `eval \"$(cargo xtask env)\"` after `{provided_by}`")
    });
    assert!(
        path.exists(),
        "{var}={} does not exist: run `{provided_by}`",
        path.display()
    );
    path
}

pub fn envoy_bin() -> PathBuf {
    required_path("NSIGHT_ENVOY_BIN", "cargo xtask setup")
}

pub fn chromium_bin() -> PathBuf {
    required_path("NSIGHT_CHROMIUM_BIN", "cargo xtask setup")
}

pub fn wasm_tools_bin() -> PathBuf {
    required_path("NSIGHT_WASM_TOOLS_BIN", "cargo xtask setup")
}

/// One of the workspace's binaries (built by `cargo test --workspace`, found in the target dir).
pub fn bin(name: &str) -> PathBuf {
    let dir = required_path("NSIGHT_BIN_DIR", "cargo build --workspace");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} missing: run `cargo build --workspace` (CARGO_TARGET_DIR as in `cargo xtask env`)",
        path.display()
    );
    path
}

/// Polls `check` until it returns `Some` or `timeout` passes.
pub fn wait_for<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A built Wasm artifact, relative to the dist directory.
pub fn wasm_artifact(relative: &str) -> PathBuf {
    let dir = required_path("NSIGHT_WASM_DIR", "cargo xtask build-wasm");
    let path = dir.join(relative);
    assert!(
        path.exists(),
        "{} missing: run `cargo xtask build-wasm`",
        path.display()
    );
    path
}

/// A real Nsight Systems export under the testdata directory: `NSIGHT_TESTDATA_DIR`, else
/// `shared/testdata/nsys` beside the clone (see docs/development.md).
pub fn testdata(relative: &str) -> PathBuf {
    std::env::var_os("NSIGHT_TESTDATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata/nsys")
        })
        .join(relative)
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral loopback port")
}

/// The first of `n` consecutive free loopback ports (the local platform's internal ports).
pub fn free_port_range(n: u16) -> u16 {
    for _ in 0..100 {
        let base = free_port().saturating_sub(10).max(20_000);
        let held: Vec<TcpListener> = (0..n)
            .filter_map(|i| TcpListener::bind(("127.0.0.1", base + i)).ok())
            .collect();
        if held.len() == usize::from(n) {
            return base;
        }
    }
    panic!("no {n} consecutive free ports");
}

/// Waits until something accepts TCP connections on `addr`.
pub fn wait_for_tcp(addr: SocketAddr, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A fresh directory under the system temp dir, removed when dropped.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// A directory no other `TempDir` of any process holds: the name carries the process id
    /// and a per-process sequence number (a clock alone can give two threads the same name),
    /// and `create_dir` refuses a name that exists.
    pub fn new(prefix: &str) -> Self {
        static SEQUENCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let pid = std::process::id();
        loop {
            let n = SEQUENCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let path = std::env::temp_dir().join(format!("{prefix}-{pid}-{n}-{nanos}"));
            match std::fs::create_dir(&path) {
                Ok(()) => return Self(path),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("create temp dir {}: {e}", path.display()),
            }
        }
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
