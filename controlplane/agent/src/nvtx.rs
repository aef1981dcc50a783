//! The agent's side of the `nvtx` backend: a Unix-socket server that every injected process
//! (libnsight_nvtx.so) connects to, and the START/STOP fan-out over those connections.
//!
//! ```text
//!  process A ──HELLO──┐                      START ──> every session (and each new one while
//!  process B ──HELLO──┼─> ControlServer ──>            collecting) ──> STARTED
//!                     │                      STOP  ──> every session ──> DUMPED <dir>/<pid>.json
//!  process C exits while recording ──> <dir>/<pid>.exit.json (picked up by the next STOP)
//! ```
//! Owns the socket and the dump directory; knows nothing of reports or storage.

use std::{
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use nsight_nvtx::{
    control::{Command, Reply},
    dump::Dump,
};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    net::{UnixListener, UnixStream},
    sync::{mpsc, oneshot, Mutex},
};

/// How long a process has to answer START or STOP.
const REPLY_TIMEOUT: Duration = Duration::from_secs(20);

type Request = (Command, oneshot::Sender<Result<Reply, String>>);

/// One connected process.
#[derive(Debug)]
struct Session {
    pid: u32,
    name: String,
    tx: mpsc::Sender<Request>,
}

/// Shared between the accept loop and the collector.
#[derive(Debug, Default)]
struct Shared {
    sessions: Mutex<Vec<Session>>,
    collecting: AtomicBool,
}

/// The control socket and the processes connected to it.
#[derive(Debug)]
pub struct ControlServer {
    socket: PathBuf,
    dump_dir: PathBuf,
    shared: Arc<Shared>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.accept.abort();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// A process's dump, read back.
#[derive(Debug)]
pub struct ProcessDump {
    pub path: PathBuf,
    pub dump: Dump,
}

impl ControlServer {
    /// Listens on `socket`; dumps go to `dump_dir` (created).
    pub fn bind(socket: &Path, dump_dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dump_dir)?;
        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket).map_err(|e| {
            std::io::Error::new(e.kind(), format!("binding {}: {e}", socket.display()))
        })?;
        let shared = Arc::new(Shared::default());
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Self {
            socket: socket.to_path_buf(),
            dump_dir: dump_dir.to_path_buf(),
            shared,
            accept,
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn dump_dir(&self) -> &Path {
        &self.dump_dir
    }

    /// The (pid, name) of every connected process.
    pub async fn processes(&self) -> Vec<(u32, String)> {
        let mut sessions = self.shared.sessions.lock().await;
        sessions.retain(|s| !s.tx.is_closed());
        sessions.iter().map(|s| (s.pid, s.name.clone())).collect()
    }

    /// Starts recording in every connected process, and in each that connects until
    /// [`ControlServer::stop`]. Errors of single processes are logged, not fatal.
    pub async fn start(&self) {
        self.shared.collecting.store(true, Ordering::SeqCst);
        let sessions: Vec<(u32, mpsc::Sender<Request>)> = {
            let mut sessions = self.shared.sessions.lock().await;
            sessions.retain(|s| !s.tx.is_closed());
            sessions.iter().map(|s| (s.pid, s.tx.clone())).collect()
        };
        for (pid, tx) in sessions {
            if let Err(e) = request(&tx, Command::Start).await {
                tracing::warn!(pid, error = %e, "a process did not start recording");
            }
        }
    }

    /// A handle that saves the processes' recordings before the agent forwards a terminating
    /// signal (see [`Checkpoint`]).
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint {
            dump_dir: self.dump_dir.clone(),
            shared: Arc::clone(&self.shared),
        }
    }

    /// Stops every process and returns the dumps of this window (including those written at
    /// exit by processes that ended meanwhile). Processes that never recorded give none.
    pub async fn stop(&self, collection: &str) -> Vec<ProcessDump> {
        self.shared.collecting.store(false, Ordering::SeqCst);
        // Bounded at each step: an agent once waited here forever after its target had exited
        // (seen in CI; the cause is not known yet). The exit dumps below still hold what ended
        // processes recorded, and the agent goes on to store them and exit with the target's
        // status.
        let sessions: Vec<(u32, mpsc::Sender<Request>)> =
            match tokio::time::timeout(STOP_TIMEOUT, self.shared.sessions.lock()).await {
                Ok(mut sessions) => {
                    sessions.retain(|s| !s.tx.is_closed());
                    sessions.iter().map(|s| (s.pid, s.tx.clone())).collect()
                }
                Err(_) => {
                    tracing::warn!("the process list stayed locked for {STOP_TIMEOUT:?}");
                    Vec::new()
                }
            };
        let mut paths = Vec::new();
        for (pid, tx) in sessions {
            let path = self.dump_dir.join(format!("{pid}.{collection}.json"));
            let asked = request(&tx, Command::Stop(path.clone()));
            match tokio::time::timeout(2 * REPLY_TIMEOUT, asked).await {
                Ok(Ok(Reply::Dumped(p))) => paths.push(p),
                Ok(Ok(other)) => tracing::warn!(pid, reply = ?other, "a process did not dump"),
                Ok(Err(e)) => tracing::warn!(pid, error = %e, "a process did not dump"),
                Err(_) => tracing::warn!(pid, "a process did not answer STOP in time"),
            }
        }
        paths.extend(exit_dumps(&self.dump_dir));
        let mut dumps = Vec::new();
        for path in paths {
            match Dump::read(&path) {
                Ok(dump) => {
                    let _ = std::fs::remove_file(&path);
                    // A process that was not recording answers with an empty window.
                    if dump.window.utc_start_ns != 0 {
                        dumps.push(ProcessDump { path, dump });
                    }
                }
                Err(e) => tracing::warn!(path = %path.display(), error = %e, "unreadable dump"),
            }
        }
        dumps.sort_by_key(|d| d.dump.pid);
        dumps
    }
}

/// Saves what the processes recorded so far, while they can still write it: SIGTERM (a Pod
/// deleted, a rollout) kills a program that does not handle it before the injection library's
/// exit handler runs, and the collection's data would be lost. Each recording process is asked
/// to stop and dump to `<pid>.signal.exit.json`, which the next [`ControlServer::stop`] picks
/// up with the other exit dumps; bounded, so the signal is never held back long.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    dump_dir: PathBuf,
    shared: Arc<Shared>,
}

/// How long [`ControlServer::stop`] waits for the list of connected processes.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a checkpoint may hold back a forwarded signal.
const CHECKPOINT_TIMEOUT: Duration = Duration::from_secs(2);

impl Checkpoint {
    /// Returns how many processes dumped (0 when nothing is being collected).
    pub async fn save(&self) -> usize {
        if !self.shared.collecting.load(Ordering::SeqCst) {
            return 0;
        }
        let sessions: Vec<(u32, mpsc::Sender<Request>)> = {
            let mut sessions = self.shared.sessions.lock().await;
            sessions.retain(|s| !s.tx.is_closed());
            sessions.iter().map(|s| (s.pid, s.tx.clone())).collect()
        };
        let mut saved = 0;
        let all = async {
            for (pid, tx) in sessions {
                let path = self.dump_dir.join(format!("{pid}.signal.exit.json"));
                match request(&tx, Command::Stop(path)).await {
                    Ok(Reply::Dumped(_)) => saved += 1,
                    Ok(other) => tracing::warn!(pid, reply = ?other, "a process did not dump"),
                    Err(e) => tracing::warn!(pid, error = %e, "a process did not dump"),
                }
            }
        };
        if tokio::time::timeout(CHECKPOINT_TIMEOUT, all).await.is_err() {
            tracing::warn!("saving the recordings before the signal took too long");
        }
        saved
    }
}

/// Dumps written by processes that exited while recording.
fn exit_dumps(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.ends_with(".exit.json"))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

async fn request(tx: &mpsc::Sender<Request>, command: Command) -> Result<Reply, String> {
    let (reply_tx, reply_rx) = oneshot::channel();
    tx.send((command, reply_tx))
        .await
        .map_err(|_| "the process disconnected".to_owned())?;
    reply_rx
        .await
        .map_err(|_| "the process disconnected".to_owned())?
}

async fn accept_loop(listener: UnixListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            if let Err(e) = session(stream, shared).await {
                tracing::debug!(error = %e, "control session ended");
            }
        });
    }
}

/// One process's connection: HELLO, then requests one at a time.
async fn session(stream: UnixStream, shared: Arc<Shared>) -> Result<(), String> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let hello = lines
        .next_line()
        .await
        .map_err(|e| e.to_string())?
        .ok_or("closed before HELLO")?;
    let Reply::Hello { pid, name } = Reply::parse(&hello)? else {
        return Err(format!("expected HELLO, got `{hello}`"));
    };
    tracing::info!(pid, name, "process connected");
    let (tx, mut rx) = mpsc::channel::<Request>(4);
    {
        // Registered under the lock that START takes, so a process is started exactly once.
        let mut sessions = shared.sessions.lock().await;
        if shared.collecting.load(Ordering::SeqCst) {
            let (reply_tx, _ignored) = oneshot::channel();
            let _ = tx.try_send((Command::Start, reply_tx));
        }
        sessions.push(Session {
            pid,
            name,
            tx: tx.clone(),
        });
    }
    drop(tx);
    loop {
        tokio::select! {
            request = rx.recv() => {
                let Some((command, reply)) = request else { break };
                let answer = async {
                    write
                        .write_all(command.line().as_bytes())
                        .await
                        .map_err(|e| e.to_string())?;
                    let line = tokio::time::timeout(REPLY_TIMEOUT, lines.next_line())
                        .await
                        .map_err(|_| format!("no answer to {command:?} in {REPLY_TIMEOUT:?}"))?
                        .map_err(|e| e.to_string())?
                        .ok_or("the process disconnected")?;
                    Reply::parse(&line)
                }
                .await;
                let failed = answer.is_err();
                let _ = reply.send(answer);
                if failed {
                    break;
                }
            }
            // Between requests a process says nothing: a line or EOF here means it is gone.
            line = lines.next_line() => {
                if !matches!(line, Ok(Some(_))) {
                    break;
                }
            }
        }
    }
    tracing::info!(pid, "process disconnected");
    Ok(())
}
