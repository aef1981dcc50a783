//! `nsight-agent run`: launches the target under the `nvtx` backend, follows the coordinator
//! (coordinator mode) or profiles from start to exit or `--duration` (launch mode), and hands
//! each process's report to the uploader. Exits with the target's status.
//!
//! ```text
//!  argv ──spawn (NVTX_INJECTION64_PATH, NSIGHT_NVTX_CONTROL, NSIGHT_AGENT_ACTIVE=1)──> target
//!  coordinator ──START/STOP──> channel::run ──> NvtxBackend ──> ControlServer ──> dumps
//!  dumps ──> Publisher (report::write_file, Uploader) ──> keys ──> Uploaded
//! ```

use std::{
    path::PathBuf,
    process::ExitStatus,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use tokio::sync::mpsc;

use crate::{
    channel::{self, AgentConfig, Backend, CollectionRef},
    nvtx::ControlServer,
    publish::Publisher,
};

/// Set in the target's environment: the exec hook never wraps a process that has it.
pub const ENV_AGENT_ACTIVE: &str = "NSIGHT_AGENT_ACTIVE";

/// Coordinator or launch mode (docs: "Profiling Modes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Coordinator,
    Launch,
}

/// Everything `run` needs, resolved by the binary from flags and environment.
#[derive(Debug)]
pub struct RunOptions {
    pub mode: Mode,
    pub duration: Option<Duration>,
    pub argv: Vec<String>,
    /// The injection library (`libnsight_nvtx.so`).
    pub nvtx_lib: PathBuf,
    /// Scratch space: control socket, dumps, reports before spooling.
    pub work_dir: PathBuf,
    /// Coordinator mode: who we are and where the coordinator is (`pid` and `process_name` are
    /// filled in from the target).
    pub agent: Option<AgentConfig>,
}

/// The `nvtx` backend behind the coordinator channel.
struct NvtxBackend<'a> {
    server: &'a ControlServer,
    publisher: &'a Publisher,
    current: Option<CollectionRef>,
    last: Option<(CollectionRef, Vec<String>)>,
}

#[tonic::async_trait]
impl Backend for NvtxBackend<'_> {
    async fn start(&mut self, at: &CollectionRef) -> Result<(), String> {
        if self.current.as_ref() == Some(at) {
            return Ok(());
        }
        self.server.start().await;
        self.current = Some(at.clone());
        Ok(())
    }

    async fn stop(&mut self, at: &CollectionRef) -> Result<Vec<String>, String> {
        if let Some((done, keys)) = &self.last {
            if done == at {
                return Ok(keys.clone());
            }
        }
        let dumps = self.server.stop(&at.collection.to_string()).await;
        self.current = None;
        let keys = self
            .publisher
            .publish(&at.session, &at.collection.to_string(), &dumps)
            .await?;
        self.last = Some((at.clone(), keys.clone()));
        Ok(keys)
    }
}

/// The exit code a shell would report for `status`.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt as _;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// A session id for launch mode (no coordinator names one): `launch-<unix seconds>-<uuid8>`.
fn launch_session() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("launch-{secs}-{}", &id[..8])
}

/// Runs the target to completion; returns its exit code.
pub async fn run(options: RunOptions, publisher: Publisher) -> anyhow::Result<i32> {
    let Some(program) = options.argv.first() else {
        anyhow::bail!("nothing to run: give the program after `--`");
    };
    std::fs::create_dir_all(&options.work_dir)?;
    let server = ControlServer::bind(
        &options.work_dir.join("control.sock"),
        &options.work_dir.join("dumps"),
    )?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&options.argv[1..])
        .env("NVTX_INJECTION64_PATH", &options.nvtx_lib)
        .env(nsight_nvtx::ENV_CONTROL, server.socket())
        .env(nsight_nvtx::ENV_DUMP_DIR, server.dump_dir())
        .env(ENV_AGENT_ACTIVE, "1");
    if options.mode == Mode::Launch {
        cmd.env(nsight_nvtx::ENV_RECORD_AT_START, "1");
    }
    let mut child = cmd
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {program}: {e}"))?;
    let pid = child.id().unwrap_or_default();
    let forwarding = crate::signals::forward_to(pid);
    tracing::info!(pid, program, mode = ?options.mode, "target started");
    let status = match options.mode {
        Mode::Launch => {
            server.start().await;
            let session = launch_session();
            let status = match options.duration {
                Some(d) => tokio::select! {
                    status = child.wait() => Some(status?),
                    () = tokio::time::sleep(d) => None,
                },
                None => Some(child.wait().await?),
            };
            let dumps = server.stop("1").await;
            let keys = publisher.publish(&session, "1", &dumps).await;
            match &keys {
                Ok(keys) => tracing::info!(?keys, "launch-mode reports stored"),
                Err(e) => tracing::error!(error = %e, "launch-mode reports not stored"),
            }
            match status {
                Some(s) => s,
                None => child.wait().await?,
            }
        }
        Mode::Coordinator => {
            let Some(mut config) = options.agent else {
                anyhow::bail!("coordinator mode needs --coordinator (or NSIGHT_COORDINATOR_URL)");
            };
            config.pid = pid;
            config.process_name = std::path::Path::new(program)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| program.clone());
            let mut backend = NvtxBackend {
                server: &server,
                publisher: &publisher,
                current: None,
                last: None,
            };
            let (events_tx, mut events_rx) = mpsc::unbounded_channel();
            let log_events = tokio::spawn(async move {
                while let Some(event) = events_rx.recv().await {
                    tracing::info!(?event, "channel");
                }
            });
            let status = tokio::select! {
                status = child.wait() => status?,
                result = channel::run(config, &mut backend, events_tx) => {
                    if let Err(e) = result {
                        tracing::error!(error = %e, "the coordinator channel ended; the target keeps running");
                    }
                    child.wait().await?
                }
            };
            log_events.abort();
            status
        }
    };
    forwarding.abort();
    Ok(exit_code(status))
}
