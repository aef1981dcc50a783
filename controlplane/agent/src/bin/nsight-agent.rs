//! `nsight-agent run [--mode coordinator|launch] [--duration S] -- <argv>`: the profiling agent.
//! Parses flags and environment, opens the report store and the spool, and hands over to
//! [`nsight_agent::run`]. Exits with the target's exit code.

use std::{path::PathBuf, time::Duration};

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use nsight_agent::{
    capture::{self, Capture, Injection},
    channel::{self, AgentConfig, TlsSource},
    leftovers,
    mirror_export::Mirror,
    nsys::{split_tool_args, NsysCommands},
    nsys_run,
    preflight::{self, Facts},
    publish::{MirrorTo, Publisher},
    run::{self, BackendKind, Mode, RunOptions},
    unprofiled,
};
use nsight_storage::{config::LocalConfig, StorageConfig, Store, Uploader};

#[derive(Debug, Parser)]
#[command(about = "The Nsight profiling agent: runs a program under a profiler backend")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Launch a program under the profiler.
    Run(Box<RunArgs>),
    /// The injected Pod's init container: copy the tools into the shared volume, then wait
    /// (bounded) until the coordinator and storage answer.
    Init(InitArgs),
    /// The init container that copies Nsight Systems out of the image it runs in into the
    /// tools volume (the cluster's nsys from an image). Exits 0 even when the copy fails: the
    /// reason is left for the agent, which then runs programs unprofiled and says why.
    InstallNsys(InstallNsysArgs),
    /// The trampoline nsys launches: create MARKER, then replace this process with the program
    /// (so the agent knows the program started).
    ExecMarked(ExecMarkedArgs),
}

#[derive(Debug, clap::Args)]
struct ExecMarkedArgs {
    /// The file to create before the program starts.
    marker: PathBuf,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    argv: Vec<String>,
}

#[derive(Debug, clap::Args)]
struct InitArgs {
    /// The tools volume's mount point.
    #[arg(long, value_name = "DIR")]
    to: PathBuf,
    /// Where the tools are (default: this binary's directory).
    #[arg(long, value_name = "DIR")]
    from: Option<PathBuf>,
    /// A service profiling needs, as host:port or a URL (repeatable).
    #[arg(long = "wait", value_name = "HOST:PORT")]
    wait: Vec<String>,
    /// How long to wait for them before letting the workload start anyway.
    #[arg(long, default_value_t = 60)]
    timeout_seconds: u64,
}

#[derive(Debug, clap::Args)]
struct InstallNsysArgs {
    /// The Nsight Systems installation in this image.
    #[arg(long, value_name = "DIR")]
    from: PathBuf,
    /// Where to copy it (in the tools volume).
    #[arg(long, value_name = "DIR")]
    to: PathBuf,
}

/// `install-nsys`: always succeeds; a failure is written where the agent finds it.
fn install_nsys_command(args: &InstallNsysArgs) {
    let started = std::time::Instant::now();
    match nsight_agent::nsys_install::install(&args.from, &args.to) {
        Ok(done) => eprintln!(
            "nsight-agent install-nsys: copied {} files ({:.1} MiB) from {} to {} in {:.1} s; \
             the agent runs {}",
            done.files,
            done.bytes as f64 / (1024.0 * 1024.0),
            args.from.display(),
            args.to.display(),
            started.elapsed().as_secs_f64(),
            done.nsys.display()
        ),
        Err(reason) => eprintln!(
            "nsight-agent install-nsys: {reason}; programs asking for nsys run unprofiled"
        ),
    }
}

/// `init`: exits non-zero only when the tools could not be copied.
fn init_command(args: InitArgs) -> anyhow::Result<()> {
    let from = match args.from {
        Some(dir) => dir,
        None => std::env::current_exe()?
            .parent()
            .map(PathBuf::from)
            .context("cannot locate the agent's directory")?,
    };
    let copied = nsight_agent::init::copy_tools(&from, &args.to)?;
    eprintln!(
        "nsight-agent init: copied {} files to {}",
        copied.len(),
        args.to.display()
    );
    let mut targets = Vec::new();
    for w in &args.wait {
        match nsight_agent::init::parse_target(w) {
            Ok(t) => targets.push(t),
            // A bad address must not block the workload: say so and skip it.
            Err(e) => eprintln!("nsight-agent init: not waiting for {w}: {e}"),
        }
    }
    let started = std::time::Instant::now();
    let left =
        nsight_agent::init::wait_reachable(&targets, Duration::from_secs(args.timeout_seconds));
    for (target, why) in &left {
        eprintln!(
            "nsight-agent init: {target} did not answer within {} s ({why}); starting the \
             workload anyway (it runs unprofiled if profiling cannot work)",
            args.timeout_seconds
        );
    }
    if left.is_empty() && !targets.is_empty() {
        eprintln!(
            "nsight-agent init: {} reachable after {:.1} s",
            args.wait.join(", "),
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModeArg {
    Coordinator,
    Launch,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum BackendArg {
    /// NVTX, and GPU activity through CUPTI where the container sees a GPU.
    Auto,
    /// NVTX ranges (built in).
    Nvtx,
    /// GPU kernels, copies, sets and CUDA API calls through CUPTI (built in).
    Cupti,
    /// Both built-in recorders.
    #[value(name = "nvtx+cupti")]
    NvtxCupti,
    /// Nsight Systems.
    Nsys,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    #[arg(
        long,
        value_enum,
        env = "NSIGHT_AGENT_MODE",
        default_value = "coordinator"
    )]
    mode: ModeArg,
    /// Launch mode: stop collecting after this many seconds (the program keeps running).
    #[arg(long)]
    duration: Option<u64>,
    #[arg(long, value_enum, env = "NSIGHT_AGENT_BACKEND", default_value = "auto")]
    backend: BackendArg,
    /// The coordinator's agent channel, e.g. https://coordinator:8081.
    #[arg(long, env = "NSIGHT_COORDINATOR_URL")]
    coordinator: Option<String>,
    #[arg(long, env = "NSIGHT_TAG", default_value = "default")]
    tag: String,
    /// Directory with ca.crt, agent.crt, agent.key (mutual TLS to the coordinator); without it
    /// the channel is plaintext.
    #[arg(long, env = "NSIGHT_AGENT_TLS_DIR")]
    tls_dir: Option<PathBuf>,
    /// The name the coordinator's certificate must carry [default: the host of --coordinator].
    #[arg(long, env = "NSIGHT_AGENT_TLS_SERVER_NAME")]
    tls_server_name: Option<String>,
    /// storage-config.yaml (also NSIGHT_CLOUD_STORAGE_CONFIG_FILE).
    #[arg(long, env = "NSIGHT_CLOUD_STORAGE_CONFIG_FILE")]
    storage_config: Option<PathBuf>,
    /// Store reports in this directory instead (local mode).
    #[arg(long, env = "NSIGHT_STORAGE_DIR", conflicts_with = "storage_config")]
    storage_dir: Option<PathBuf>,
    /// The uploader's spool directory (default: local_cache_dir of an s3 config, else under
    /// the work directory).
    #[arg(long, env = "NSIGHT_AGENT_SPOOL_DIR")]
    spool_dir: Option<PathBuf>,
    /// Scratch directory (default: $TMPDIR/nsight-agent-<pid>).
    #[arg(long, env = "NSIGHT_AGENT_WORK_DIR")]
    work_dir: Option<PathBuf>,
    /// The nsys executable for --backend nsys (default: `nsys` on PATH).
    #[arg(long, env = "NSIGHT_NSYS")]
    nsys: Option<PathBuf>,
    /// The tool config's `nsightToolArgs` for --backend nsys, e.g. "--trace=cuda,nvtx".
    #[arg(long, env = "NSIGHT_TOOL_ARGS", allow_hyphen_values = true)]
    tool_args: Option<String>,
    /// The NVTX injection library (default: libnsight_nvtx.so beside this binary).
    #[arg(long, env = "NSIGHT_NVTX_LIB")]
    nvtx_lib: Option<PathBuf>,
    /// The libcupti for the cupti backend (default: the program's own CUDA, $CUDA_HOME or
    /// /usr/local/cuda).
    #[arg(long, env = "NSIGHT_CUPTI_LIB")]
    cupti_lib: Option<PathBuf>,
    #[arg(long, env = "NSIGHT_NAMESPACE", default_value = "local")]
    namespace: String,
    /// The pod's name (default: the host name).
    #[arg(long, env = "NSIGHT_POD_NAME")]
    pod: Option<String>,
    #[arg(long, env = "NSIGHT_CONTAINER_NAME", default_value = "main")]
    container: String,
    #[arg(long, env = "NODE_NAME", default_value = "local")]
    node: String,
    /// Mirror NVTX ranges as OTLP spans to this OTLP/gRPC endpoint (the Pod's sidecar,
    /// `http://127.0.0.1:4317`) at each collection's stop; reports are stored as ever.
    #[arg(long, env = "NSIGHT_OTLP_MIRROR_ENDPOINT", value_name = "URL")]
    otlp_mirror: Option<String>,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    argv: Vec<String>,
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into())
}

fn store(args: &RunArgs) -> anyhow::Result<(Store, Option<PathBuf>)> {
    let config = match (&args.storage_dir, &args.storage_config) {
        (Some(dir), _) => StorageConfig::Local(LocalConfig { root: dir.clone() }),
        (None, Some(path)) => {
            let loaded = StorageConfig::from_path(path)?;
            for field in &loaded.ignored_fields {
                tracing::warn!(field, "storage config field not used by this agent");
            }
            loaded.config
        }
        (None, None) => anyhow::bail!(
            "no report storage: give --storage-config FILE (or NSIGHT_CLOUD_STORAGE_CONFIG_FILE) \
             or --storage-dir DIR"
        ),
    };
    let spool = match &config {
        StorageConfig::S3(s3) => s3.local_cache_dir.clone(),
        StorageConfig::Local(_) => None,
    };
    Ok((Store::from_config(&config)?, spool))
}

async fn run_command(args: RunArgs) -> anyhow::Result<i32> {
    let gpu = capture::gpu_present();
    let built_in = match args.backend {
        BackendArg::Auto => Capture::choose("auto", gpu),
        BackendArg::Nvtx => Capture::choose("nvtx", gpu),
        BackendArg::Cupti => Capture::choose("cupti", gpu),
        BackendArg::NvtxCupti => Capture::choose("nvtx+cupti", gpu),
        BackendArg::Nsys => None,
    };
    let backend = built_in.map_or("nsys", Capture::name);
    let mut diagnostics = preflight::diagnose(&Facts::gather(backend, args.nsys.as_deref()));
    if let Some(c) = built_in {
        let cupti = capture::find_cupti(
            args.cupti_lib.as_deref(),
            std::env::var("CUDA_HOME").ok().as_deref(),
            std::env::var("LD_LIBRARY_PATH").ok().as_deref(),
        );
        diagnostics.extend(capture::diagnose(c, gpu, cupti.as_deref()));
    }
    for d in &diagnostics {
        tracing::warn!("preflight: {d}");
    }
    // Checked before anything else is opened: a missing nsys is the likeliest mistake.
    let nsys = match args.backend {
        BackendArg::Nsys => Some(
            nsys_run::locate(args.nsys.as_deref(), std::env::var_os("PATH").as_deref())
                .map_err(anyhow::Error::msg)?,
        ),
        _ => None,
    };
    let work_dir = args
        .work_dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(leftovers::work_dir_name(std::process::id())));
    let (store, config_spool) = store(&args)?;
    if args.work_dir.is_none() {
        clean_leftovers(store.clone());
    }
    let spool = args
        .spool_dir
        .clone()
        .or(config_spool)
        .unwrap_or_else(|| work_dir.join("spool"));
    let uploader = Uploader::open(store, &spool, Default::default())
        .with_context(|| format!("opening the spool {}", spool.display()))?;
    // Reports spooled before a restart go up first.
    let leftovers = uploader.drain().await?;
    if !leftovers.uploaded.is_empty() {
        tracing::info!(keys = ?leftovers.keys(), "uploaded reports left from an earlier run");
    }
    // The NVTX backend in launch mode also honours nsys' own `--duration` in the tool args
    // (nsys applies it itself with the nsys backend).
    let duration = args.duration.or_else(|| match (&nsys, args.mode) {
        (None, ModeArg::Launch) => nsight_agent::nsys::duration_of(&split_tool_args(
            args.tool_args.as_deref().unwrap_or_default(),
        )),
        _ => None,
    });
    let backend_kind = match nsys {
        // Arguments nsys would refuse stop here: the program then runs unprofiled, the
        // reason naming the option.
        Some(nsys) => BackendKind::Nsys(
            NsysCommands::new(
                nsys.display().to_string(),
                format!("nsight-agent-{}", std::process::id()),
                &split_tool_args(args.tool_args.as_deref().unwrap_or_default()),
                matches!(args.mode, ModeArg::Coordinator),
            )
            .context("the tool config's nsightToolArgs")?,
        ),
        None => {
            let nvtx_lib = match args.nvtx_lib.clone() {
                Some(p) => p,
                None => std::env::current_exe()?
                    .parent()
                    .map(|d| d.join("libnsight_nvtx.so"))
                    .context("cannot locate the agent's directory")?,
            };
            anyhow::ensure!(
                nvtx_lib.exists(),
                "the NVTX injection library {} does not exist: set --nvtx-lib or NSIGHT_NVTX_LIB",
                nvtx_lib.display()
            );
            BackendKind::Nvtx(Injection {
                lib: nvtx_lib,
                capture: built_in.unwrap_or(Capture::NVTX),
                cupti_lib: args.cupti_lib.clone(),
            })
        }
    };
    // A bad endpoint is a warning: the program is profiled and its reports stored anyway.
    let mirror = args.otlp_mirror.as_deref().and_then(|url| {
        Mirror::start(url)
            .map_err(|e| tracing::warn!("NVTX mirroring is off: {e}"))
            .ok()
    });
    let pod = args.pod.clone().unwrap_or_else(hostname);
    let mode = match args.mode {
        ModeArg::Coordinator => Mode::Coordinator,
        ModeArg::Launch => Mode::Launch,
    };
    let agent = match (&args.coordinator, mode) {
        (Some(url), Mode::Coordinator) => Some(AgentConfig {
            coordinator: url.clone(),
            tag: args.tag.clone(),
            namespace: args.namespace.clone(),
            pod: pod.clone(),
            container: args.container.clone(),
            process_name: String::new(),
            pid: 0,
            node: args.node.clone(),
            backend: backend.into(),
            diagnostics,
            max_backoff: Duration::from_secs(10),
            tls: args.tls_dir.as_deref().map(|d| TlsSource::Dir {
                dir: d.to_owned(),
                server_name: args
                    .tls_server_name
                    .clone()
                    .unwrap_or_else(|| channel::server_name_of(url)),
            }),
            mirror: mirror.as_ref().map(Mirror::stats_handle),
        }),
        _ => None,
    };
    let publisher = Publisher {
        uploader,
        work_dir: work_dir.join("reports"),
        tag: args.tag.clone(),
        instance: pod,
        mirror: mirror.map(|mirror| MirrorTo {
            mirror,
            namespace: args.namespace.clone(),
            container: args.container.clone(),
        }),
    };
    let options = RunOptions {
        mode,
        duration: duration.map(Duration::from_secs),
        argv: args.argv,
        backend: backend_kind,
        work_dir: work_dir.clone(),
        agent,
    };
    let code = run::run(options, publisher).await;
    if args.work_dir.is_none() {
        let _ = std::fs::remove_dir_all(&work_dir);
    }
    code
}

/// In the background: uploads what agents killed earlier left spooled in their default work
/// directories, and removes those (the target does not wait for it).
fn clean_leftovers(store: Store) {
    let Some(uid) = leftovers::own_uid() else {
        return;
    };
    tokio::spawn(async move {
        for outcome in leftovers::clean(&std::env::temp_dir(), uid, &store).await {
            match outcome {
                leftovers::Outcome::Removed { pid, uploaded } => tracing::info!(
                    pid,
                    ?uploaded,
                    "removed the work directory of an agent that was killed"
                ),
                leftovers::Outcome::Kept { pid, reason } => tracing::warn!(
                    pid,
                    reason,
                    "kept the work directory of an agent that was killed"
                ),
            }
        }
    });
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NSIGHT_AGENT_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // The agent's lines land in the profiled container's log: colour only on a terminal.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = match Cli::parse().command {
        Command::Run(args) => *args,
        Command::ExecMarked(args) => {
            let err = nsight_agent::started::exec_marked(&args.marker, &args.argv);
            let program = args.argv.first().map(String::as_str).unwrap_or_default();
            eprintln!("nsight-agent: cannot start {program}: {err}");
            std::process::exit(127);
        }
        Command::InstallNsys(args) => {
            install_nsys_command(&args);
            std::process::exit(0);
        }
        Command::Init(args) => match init_command(args) {
            Ok(()) => std::process::exit(0),
            Err(e) => {
                eprintln!("nsight-agent init: {e:#}");
                std::process::exit(1);
            }
        },
    };
    let argv = args.argv.clone();
    unprofiled::on_panic_run_unprofiled(argv.clone());
    match run_command(args).await {
        Ok(code) => std::process::exit(code),
        // Profiling could not be set up and the program has not started: it runs anyway,
        // unprofiled, in place of the agent (a profiler never stops its workload).
        Err(e) if !run::target_started() => {
            let reason = format!("{e:#}");
            let program = argv.first().map(String::as_str).unwrap_or_default();
            tracing::error!(
                program,
                reason,
                "profiling disabled; running the program unprofiled"
            );
            eprintln!("{}", unprofiled::notice(program, &reason));
            let err = unprofiled::exec(&argv, &reason);
            eprintln!("nsight-agent: cannot start {program}: {err}");
            std::process::exit(127);
        }
        Err(e) => {
            eprintln!("nsight-agent: {e:#}");
            std::process::exit(127);
        }
    }
}
