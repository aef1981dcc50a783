//! Runs a real Envoy for the local mode: writes the bootstrap, starts the binary, waits until
//! the admin interface says `/ready` (LIVE), restarts it with exponential backoff when it
//! exits, and kills it when the handle is stopped or dropped.
//!
//! ```text
//!  EnvoySupervisor::start ──> task: loop { spawn envoy ─> wait exit | stop } ──> backoff
//!        │                        └─> state: Starting / Running{pid} / Backoff / Stopped
//!        └─ EnvoyHandle::wait_ready polls GET /ready on the admin address (TCP or Unix socket)
//! ```
//! Owns the child process and nothing else: the configuration arrives over xDS.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::{TcpStream, UnixStream},
    process::Command,
    sync::{oneshot, watch},
    task::JoinHandle,
};

use crate::bootstrap::{AdminAddress, Bootstrap};

/// The variable naming the Envoy binary (`cargo xtask env` prints it).
pub const ENVOY_BIN_VAR: &str = "NSIGHT_ENVOY_BIN";

#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error(
        "{ENVOY_BIN_VAR} is not set: point it at an Envoy binary (`cargo xtask env` prints it)"
    )]
    NoEnvoyBin,
    #[error("the Envoy binary {0} does not exist (run `cargo xtask setup`)")]
    MissingEnvoyBin(PathBuf),
    #[error("cannot write the Envoy bootstrap to {path}")]
    WriteBootstrap {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open Envoy's log file {path}")]
    OpenLog {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Envoy did not become ready on admin {admin} within {timeout:?}; see {log}")]
    NotReady {
        admin: AdminAddress,
        timeout: Duration,
        log: PathBuf,
    },
}

/// How to run Envoy.
#[derive(Debug, Clone)]
pub struct EnvoyConfig {
    pub envoy_bin: PathBuf,
    pub bootstrap: Bootstrap,
    /// Holds `envoy.yaml` and `envoy.log` (appended across restarts).
    pub work_dir: PathBuf,
    pub log_level: String,
    /// First restart delay; doubles per consecutive quick crash up to `max_backoff`.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl EnvoyConfig {
    /// The binary from `NSIGHT_ENVOY_BIN`, log level `info`, backoff 200 ms .. 10 s.
    pub fn from_env(bootstrap: Bootstrap, work_dir: &Path) -> Result<Self, SupervisorError> {
        let bin = std::env::var_os(ENVOY_BIN_VAR)
            .map(PathBuf::from)
            .ok_or(SupervisorError::NoEnvoyBin)?;
        Ok(Self {
            envoy_bin: bin,
            bootstrap,
            work_dir: work_dir.into(),
            log_level: "info".into(),
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(10),
        })
    }

    pub fn log_path(&self) -> PathBuf {
        self.work_dir.join("envoy.log")
    }
}

/// Where the supervised Envoy is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvoyState {
    Starting,
    Running {
        pid: u32,
    },
    /// Exited; restarting after a delay.
    Backoff,
    Stopped,
}

#[derive(Debug)]
pub struct EnvoySupervisor;

impl EnvoySupervisor {
    /// Writes the bootstrap and starts supervising. Returns at once; use
    /// [`EnvoyHandle::wait_ready`] to wait for Envoy to serve.
    pub fn start(config: EnvoyConfig) -> Result<EnvoyHandle, SupervisorError> {
        if !config.envoy_bin.exists() {
            return Err(SupervisorError::MissingEnvoyBin(config.envoy_bin));
        }
        let bootstrap_path = config.work_dir.join("envoy.yaml");
        let write = std::fs::create_dir_all(&config.work_dir).and_then(|()| {
            let text = serde_json::to_string_pretty(&config.bootstrap.to_json())
                .map_err(std::io::Error::other)?;
            std::fs::write(&bootstrap_path, text)
        });
        write.map_err(|source| SupervisorError::WriteBootstrap {
            path: bootstrap_path.clone(),
            source,
        })?;
        let log = config.log_path();
        // Fail early on an unwritable log rather than in the background task.
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|source| SupervisorError::OpenLog {
                path: log.clone(),
                source,
            })?;
        let (state_tx, state_rx) = watch::channel(EnvoyState::Starting);
        let (stop_tx, stop_rx) = oneshot::channel();
        let restarts = Arc::new(AtomicU32::new(0));
        let task = tokio::spawn(supervise(
            config.clone(),
            bootstrap_path,
            state_tx,
            stop_rx,
            restarts.clone(),
        ));
        Ok(EnvoyHandle {
            admin: config.bootstrap.admin.clone(),
            log,
            state: state_rx,
            restarts,
            stop: Some(stop_tx),
            task: Some(task),
        })
    }
}

/// A supervised Envoy. Dropping it kills Envoy.
#[derive(Debug)]
pub struct EnvoyHandle {
    admin: AdminAddress,
    log: PathBuf,
    state: watch::Receiver<EnvoyState>,
    restarts: Arc<AtomicU32>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl EnvoyHandle {
    pub fn admin_addr(&self) -> &AdminAddress {
        &self.admin
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    pub fn state(&self) -> EnvoyState {
        *self.state.borrow()
    }

    /// The running process id, if any.
    pub fn pid(&self) -> Option<u32> {
        match self.state() {
            EnvoyState::Running { pid } => Some(pid),
            _ => None,
        }
    }

    /// How many times Envoy was started again after exiting.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Polls the admin `/ready` until it answers 200 (Envoy initialized, i.e. its first
    /// listeners and clusters arrived over xDS).
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), SupervisorError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if admin_ready(&self.admin).await {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(SupervisorError::NotReady {
                    admin: self.admin.clone(),
                    timeout,
                    log: self.log.clone(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills Envoy and waits for the supervisor to finish.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for EnvoyHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // If the runtime is gone the task is dropped, and with it the child (kill_on_drop).
    }
}

/// `GET /ready` on the admin interface answered 200.
pub async fn admin_ready(admin: &AdminAddress) -> bool {
    matches!(
        tokio::time::timeout(Duration::from_secs(1), admin_get(admin, "/ready")).await,
        Ok(Ok(answer)) if answer.starts_with(b"HTTP/1.1 200") || answer.starts_with(b"HTTP/1.0 200")
    )
}

/// `GET path` on the admin interface, over TCP or its Unix socket: the whole answer, status
/// line and headers included. No timeout: the caller bounds it.
pub async fn admin_get(admin: &AdminAddress, path: &str) -> std::io::Result<Vec<u8>> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n");
    match admin {
        AdminAddress::Tcp(addr) => exchange(TcpStream::connect(addr).await?, &request).await,
        AdminAddress::Pipe(socket) => exchange(UnixStream::connect(socket).await?, &request).await,
        AdminAddress::Off => Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "this Envoy has no admin interface",
        )),
    }
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    request: &str,
) -> std::io::Result<Vec<u8>> {
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await?;
    Ok(answer)
}

async fn supervise(
    config: EnvoyConfig,
    bootstrap: PathBuf,
    state: watch::Sender<EnvoyState>,
    mut stop: oneshot::Receiver<()>,
    restarts: Arc<AtomicU32>,
) {
    let mut backoff = config.initial_backoff;
    let mut first = true;
    loop {
        if !first {
            restarts.fetch_add(1, Ordering::Relaxed);
        }
        first = false;
        state.send_replace(EnvoyState::Starting);
        let started = tokio::time::Instant::now();
        let child = spawn_envoy(&config, &bootstrap);
        let mut child = match child {
            Ok(child) => child,
            Err(e) => {
                tracing::error!(error = %e, bin = %config.envoy_bin.display(), "cannot start Envoy");
                state.send_replace(EnvoyState::Backoff);
                tokio::select! {
                    _ = &mut stop => break,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(config.max_backoff);
                continue;
            }
        };
        if let Some(pid) = child.id() {
            state.send_replace(EnvoyState::Running { pid });
            tracing::info!(pid, "Envoy started");
        }
        tokio::select! {
            _ = &mut stop => {
                let _ = child.kill().await;
                break;
            }
            status = child.wait() => {
                tracing::warn!(?status, log = %config.log_path().display(), "Envoy exited; restarting");
            }
        }
        // A run that lasted a while resets the backoff; quick crashes back off further.
        if started.elapsed() > Duration::from_secs(30) {
            backoff = config.initial_backoff;
        }
        state.send_replace(EnvoyState::Backoff);
        tokio::select! {
            _ = &mut stop => break,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(config.max_backoff);
    }
    state.send_replace(EnvoyState::Stopped);
}

fn spawn_envoy(config: &EnvoyConfig, bootstrap: &Path) -> std::io::Result<tokio::process::Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(config.log_path())?;
    let err = log.try_clone()?;
    let mut command = Command::new(&config.envoy_bin);
    die_with_parent(&mut command);
    command
        .arg("-c")
        .arg(bootstrap)
        .args(["--disable-hot-restart", "--log-level", &config.log_level])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .kill_on_drop(true)
        .spawn()
}

/// Makes the child get SIGTERM when this process dies, however it dies (SIGKILL included), so a
/// killed parent never leaves its children serving. Linux delivers it when the thread that
/// spawned the child exits: spawn from a thread that lives as long as the process (the main
/// thread or a runtime worker, not a blocking-pool thread).
#[allow(
    unsafe_code,
    reason = "pre_exec runs between fork and exec; prctl(PR_SET_PDEATHSIG) is async-signal-safe"
)]
pub fn die_with_parent(command: &mut Command) {
    let parent = rustix::process::getpid();
    // SAFETY: the closure only makes two system calls, both async-signal-safe, and allocates
    // nothing.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM))?;
            // The parent may have died between fork and prctl: then nothing would be delivered.
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::Error::other("the parent exited while starting"));
            }
            Ok(())
        });
    }
}
