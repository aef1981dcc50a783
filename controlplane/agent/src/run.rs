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

use tokio::sync::{mpsc, watch};

use crate::{
    channel::{self, AgentConfig, Backend, CollectionRef, FinalReport},
    nsys::{NsysCommands, NsysState},
    nsys_run::{self, NsysBackend},
    nvtx::ControlServer,
    publish::Publisher,
    started::{self, Start},
    unprofiled,
};

/// Set in the target's environment: the exec hook never wraps a process that has it.
pub const ENV_AGENT_ACTIVE: &str = "NSIGHT_AGENT_ACTIVE";

/// Set once the target (or the nsys command launching it) has started: from then on a failure
/// must never start it a second time (see `nsight-agent`'s unprofiled fallback).
static TARGET_STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Records that the target is running.
pub fn mark_target_started() {
    TARGET_STARTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether the target has been started by this process.
pub fn target_started() -> bool {
    TARGET_STARTED.load(std::sync::atomic::Ordering::SeqCst)
}

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
    pub backend: BackendKind,
    /// Scratch space: control socket, dumps, reports before spooling.
    pub work_dir: PathBuf,
    /// Coordinator mode: who we are and where the coordinator is (`pid` and `process_name` are
    /// filled in from the target).
    pub agent: Option<AgentConfig>,
}

/// Which profiler runs the target.
#[derive(Debug)]
pub enum BackendKind {
    /// The built-in capture (NVTX, CUPTI or both), with the injection library
    /// (`libnsight_nvtx.so`).
    Nvtx(crate::capture::Injection),
    /// Nsight Systems, with these command lines.
    Nsys(NsysCommands),
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

    async fn target_exited(&mut self, how: &str) -> Option<FinalReport> {
        let at = self.current.take()?;
        let collection = at.collection.to_string();
        let dumps = self.server.stop(&collection).await;
        let result = if dumps.is_empty() {
            Err(format!(
                "the target exited ({how}) during the collection and no process left NVTX data \
                 (none made an NVTX call while collecting, or it was killed before it could \
                 write its dump)"
            ))
        } else {
            self.publisher
                .publish(&at.session, &collection, &dumps)
                .await
                .map_err(|e| format!("the target exited ({how}) during the collection: {e}"))
        };
        match &result {
            Ok(keys) => {
                tracing::info!(?keys, how, "target exited while collecting; reports stored")
            }
            Err(e) => tracing::error!(error = %e, "target exited while collecting"),
        }
        if let Ok(keys) = &result {
            self.last = Some((at.clone(), keys.clone()));
        }
        Some(FinalReport { at, result })
    }
}

/// `exit code N` or `killed by signal N`, for messages.
pub fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "unknown status".into(),
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

/// How long an exiting agent waits for mirrored spans still queued.
const MIRROR_FLUSH: Duration = Duration::from_secs(5);

/// Runs the target to completion; returns its exit code.
pub async fn run(options: RunOptions, publisher: Publisher) -> anyhow::Result<i32> {
    if options.argv.is_empty() {
        anyhow::bail!("nothing to run: give the program after `--`");
    }
    // Reports and the control socket live here: for this user only.
    nsight_storage::private::state_dir(&options.work_dir)?;
    match &options.backend {
        BackendKind::Nvtx(injection) => {
            let injection = injection.clone();
            let code = run_nvtx(options, &injection, &publisher).await;
            if let Some(to) = &publisher.mirror {
                if !to.mirror.flush(MIRROR_FLUSH).await {
                    to.mirror.abandon();
                }
                to.mirror.log();
            }
            code
        }
        BackendKind::Nsys(commands) => {
            if publisher.mirror.is_some() {
                tracing::warn!(
                    "NVTX mirroring needs the built-in capture (--backend nvtx); with nsys it is off"
                );
            }
            let commands = commands.clone();
            run_nsys(options, commands, publisher).await
        }
    }
}

/// Coordinator mode: follows the coordinator until the target has exited (`wait`) and the
/// collection it cut short, if any, is reported; returns the target's status.
async fn follow_coordinator(
    config: AgentConfig,
    backend: &mut dyn Backend,
    wait: impl std::future::Future<Output = anyhow::Result<ExitStatus>>,
) -> anyhow::Result<ExitStatus> {
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let log_events = tokio::spawn(async move {
        while let Some(event) = events_rx.recv().await {
            tracing::info!(?event, "channel");
        }
    });
    // The channel runs until the target has exited and the collection it cut short (if any) is
    // reported; the target keeps running if the channel gives up first.
    let (exit_tx, exit_rx) = watch::channel(None);
    let wait = async {
        let status = wait.await;
        let how = match &status {
            Ok(s) => describe(*s),
            Err(e) => format!("wait failed: {e}"),
        };
        tracing::info!(how, "target exited");
        let _ = exit_tx.send(Some(how));
        status
    };
    let channel = async {
        if let Err(e) = channel::run_until_exit(config, backend, events_tx, exit_rx).await {
            tracing::error!(error = %e, "the coordinator channel ended; the target keeps running");
        }
    };
    let (status, ()) = tokio::join!(wait, channel);
    log_events.abort();
    status
}

/// The `nsys` backend: `nsys profile` (launch mode) or `nsys launch` + start/stop per
/// collection (coordinator mode). The program goes through the `exec-marked` trampoline
/// ([`crate::started`]); if nsys exits before it started, the program runs unprofiled.
async fn run_nsys(
    options: RunOptions,
    mut commands: NsysCommands,
    publisher: Publisher,
) -> anyhow::Result<i32> {
    let dir = options.work_dir.join("nsys");
    std::fs::create_dir_all(&dir)?;
    let marker = started::fresh_marker(&options.work_dir)?;
    commands.wrapper = started::wrapper(&std::env::current_exe()?, &marker);
    let state = NsysState::new(commands, dir);
    match options.mode {
        Mode::Launch => {
            let session = launch_session();
            nsys_run::run_profile(
                &state,
                &publisher,
                &options.argv,
                options.duration,
                &session,
                &marker,
            )
            .await
        }
        Mode::Coordinator => {
            let Some(mut config) = options.agent else {
                anyhow::bail!("coordinator mode needs --coordinator (or NSIGHT_COORDINATOR_URL)");
            };
            let mut launched = nsys_run::spawn(&state.commands().launch(&options.argv))?;
            let pid = launched.pid;
            let forwarding = crate::signals::forward_to(pid, None);
            let start = started::until_started(&mut launched.child, &marker).await;
            forwarding.abort();
            config.process_name = nsys_run::process_name(&options.argv);
            if let Start::NeverRan(status) = start? {
                let reason = started::failure_reason(
                    "launch",
                    status,
                    &launched.stderr.settled_text().await,
                );
                return run_unprofiled_following(config, &options.argv, &reason).await;
            }
            mark_target_started();
            config.pid = pid;
            let mut backend = NsysBackend {
                state,
                publisher: &publisher,
                process: (config.process_name.clone(), pid),
            };
            let status =
                follow_coordinator(config, &mut backend, nsys_run::wait(launched.child, pid))
                    .await?;
            Ok(exit_code(status))
        }
    }
}

/// The backend of a program that runs unprofiled: every collection fails with the reason.
struct Unprofiled {
    reason: String,
}

#[tonic::async_trait]
impl Backend for Unprofiled {
    async fn start(&mut self, _at: &CollectionRef) -> Result<(), String> {
        Err(format!("profiling disabled: {}", self.reason))
    }

    async fn stop(&mut self, _at: &CollectionRef) -> Result<Vec<String>, String> {
        Err(format!("profiling disabled: {}", self.reason))
    }
}

/// Coordinator mode after nsys failed before the program started: runs the program
/// unprofiled (as the agent's child, `NSIGHT_PROFILING_DISABLED` set) and still registers, with
/// the reason among its diagnostics; each collection is answered `Failed` with it. Returns the
/// program's exit code.
async fn run_unprofiled_following(
    mut config: AgentConfig,
    argv: &[String],
    reason: &str,
) -> anyhow::Result<i32> {
    let program = argv.first().map(String::as_str).unwrap_or_default();
    tracing::error!(
        program,
        reason,
        "profiling disabled; running the program unprofiled"
    );
    eprintln!("{}", unprofiled::notice(program, reason));
    let mut child = tokio::process::Command::new(program)
        .args(argv.get(1..).unwrap_or_default())
        .env(ENV_AGENT_ACTIVE, "1")
        .env(
            unprofiled::ENV_DISABLED_REASON,
            unprofiled::one_line(reason),
        )
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {program}: {e}"))?;
    mark_target_started();
    let pid = child.id().unwrap_or_default();
    config.pid = pid;
    config
        .diagnostics
        .push(format!("profiling disabled: {reason}"));
    let mut backend = Unprofiled {
        reason: reason.to_owned(),
    };
    let status = follow_coordinator(config, &mut backend, async {
        let forwarding = crate::signals::forward_to(pid, None);
        let status = wait_child(&mut child).await;
        forwarding.abort();
        Ok(status?)
    })
    .await?;
    Ok(exit_code(status))
}

/// The `nvtx` backend: the target with the injection library.
async fn run_nvtx(
    options: RunOptions,
    injection: &crate::capture::Injection,
    publisher: &Publisher,
) -> anyhow::Result<i32> {
    let program = &options.argv[0];
    let server = ControlServer::bind(
        &options.work_dir.join("control.sock"),
        &options.work_dir.join("dumps"),
    )?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&options.argv[1..])
        .envs(crate::capture::environment(injection))
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
    mark_target_started();
    let pid = child.id().unwrap_or_default();
    let forwarding = crate::signals::forward_to(pid, Some(server.checkpoint()));
    tracing::info!(pid, program, mode = ?options.mode, "target started");
    let status = match options.mode {
        Mode::Launch => {
            server.start().await;
            let session = launch_session();
            let status = match options.duration {
                Some(d) => tokio::select! {
                    status = wait_child(&mut child) => Some(status?),
                    () = tokio::time::sleep(d) => None,
                },
                None => Some(wait_child(&mut child).await?),
            };
            let dumps = server.stop("1").await;
            let keys = publisher.publish(&session, "1", &dumps).await;
            match &keys {
                Ok(keys) => tracing::info!(?keys, "launch-mode reports stored"),
                Err(e) => tracing::error!(error = %e, "launch-mode reports not stored"),
            }
            match status {
                Some(s) => s,
                None => wait_child(&mut child).await?,
            }
        }
        Mode::Coordinator => {
            let Some(mut config) = options.agent else {
                anyhow::bail!("coordinator mode needs --coordinator (or NSIGHT_COORDINATOR_URL)");
            };
            config.pid = pid;
            config.process_name = nsys_run::process_name(&options.argv);
            let mut backend = NvtxBackend {
                server: &server,
                publisher,
                current: None,
                last: None,
            };
            follow_coordinator(config, &mut backend, async {
                Ok(wait_child(&mut child).await?)
            })
            .await?
        }
    };
    forwarding.abort();
    Ok(exit_code(status))
}

/// How often [`wait_child`] also asks the kernel directly.
const CHILD_POLL: Duration = Duration::from_millis(500);

/// The target's exit status. tokio learns of a child's exit from SIGCHLD; should that wake-up
/// ever be missed (seen once in CI, under heavy load, as an agent waiting forever for a target
/// that had exited), a periodic non-blocking `waitpid` still ends the wait.
pub(crate) async fn wait_child(child: &mut tokio::process::Child) -> std::io::Result<ExitStatus> {
    loop {
        tokio::select! {
            status = child.wait() => return status,
            () = tokio::time::sleep(CHILD_POLL) => {
                if let Some(status) = child.try_wait()? {
                    return Ok(status);
                }
            }
        }
    }
}
