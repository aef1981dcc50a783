//! A real S3 server for tests: s3s-fs 0.14.1 (`cargo xtask setup s3`), which keeps each bucket as
//! a directory under its root and each object as a file, on a free loopback port with an access
//! key and secret. Killed (SIGKILL) and reaped on drop; it can be paused, killed and restarted on
//! the same port and root to simulate an outage.
//!
//! Multipart parts and half-written objects live in the root as hidden files
//! (`.upload_id-*`, `.tmp.*`), outside every bucket directory, so they are never listed.

use std::{
    fs::OpenOptions,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use crate::{free_port, required_path, wait_for_tcp};

/// The access key every test server accepts.
pub const ACCESS_KEY: &str = "nsight-test-access-key";
/// Its secret.
pub const SECRET_KEY: &str = "nsight-test-secret-key-0123456789";

pub fn s3s_fs_bin() -> PathBuf {
    required_path("NSIGHT_S3S_FS_BIN", "cargo xtask setup s3")
}

/// A running s3s-fs.
#[derive(Debug)]
pub struct S3Server {
    pub addr: SocketAddr,
    pub root: PathBuf,
    child: Child,
    log: PathBuf,
}

impl S3Server {
    /// Starts on a free port with `root` (created if missing) as its data directory.
    pub fn start(root: &Path) -> Self {
        Self::start_on(free_port(), root)
    }

    /// Starts on `port` (e.g. the port of a server that was killed) and waits until it accepts
    /// connections. Retries a few times in case the port is briefly still held.
    pub fn start_on(port: u16, root: &Path) -> Self {
        std::fs::create_dir_all(root).expect("create the s3s-fs root");
        let log = root.with_extension("s3s-fs.log");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        for _ in 0..20 {
            let out = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .expect("open the s3s-fs log");
            let err = out.try_clone().expect("clone the log handle");
            let mut child = Command::new(s3s_fs_bin())
                .arg("--host")
                .arg("127.0.0.1")
                .arg("--port")
                .arg(port.to_string())
                .arg("--access-key")
                .arg(ACCESS_KEY)
                .arg("--secret-key")
                .arg(SECRET_KEY)
                .arg(root)
                .env("RUST_LOG", "warn")
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start s3s-fs: {e}"));
            let listening = wait_for_tcp(addr, Duration::from_secs(20));
            // Listening, and it is ours (not another process that holds the port).
            if listening && matches!(child.try_wait(), Ok(None)) {
                return Self {
                    addr,
                    root: root.to_path_buf(),
                    child,
                    log,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
            std::thread::sleep(Duration::from_millis(250));
        }
        panic!(
            "s3s-fs did not start on {addr}; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the server logged (all its restarts on this root).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGSTOP: the server freezes mid-request (connections stay open, nothing is answered).
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// SIGCONT after [`S3Server::pause`].
    pub fn resume(&self) {
        self.signal("CONT");
    }

    fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{sig} {} failed", self.pid());
    }

    /// SIGKILL and reap, now: no chance to finish a request.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills this server and starts a new one on the same port and root.
    pub fn restart(mut self) -> Self {
        self.kill();
        Self::start_on(self.port(), &self.root.clone())
    }

    /// The directory that holds bucket `bucket`'s objects.
    /// Creates `bucket` (a directory of the root) and writes a storage-config.yaml for it at
    /// `path`, with the test credentials; returns `path`.
    pub fn storage_config(&self, bucket: &str, path: &Path) -> PathBuf {
        std::fs::create_dir_all(self.bucket_dir(bucket)).expect("create the bucket");
        std::fs::write(
            path,
            format!(
                "storage_type: s3\nbucket_name: {bucket}\naws_access_key_id: {ACCESS_KEY}\n\
                 aws_secret_access_key: {SECRET_KEY}\nendpoint_url: {}\n",
                self.endpoint()
            ),
        )
        .expect("write the storage config");
        path.to_path_buf()
    }

    pub fn bucket_dir(&self, bucket: &str) -> PathBuf {
        self.root.join(bucket)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
