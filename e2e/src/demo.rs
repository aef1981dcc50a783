//! The end-to-end flow of the README's main command (`cargo xtask demo`), shared with its CI
//! test: start the local platform (`nsight-controlplane local`), run a Python program with NVTX
//! ranges under `nsight-agent`, and drive a real session through the gateway with the CLI:
//! configure, session-begin, profiler-start, profiler-stop, ls, download, analysis run nvtx_sum.
//! Every step is the real binary; failures are messages that say which step and where its log is.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::{process::Running, wait_for_tcp};

/// Where the parts are.
#[derive(Debug, Clone)]
pub struct DemoPaths {
    /// nsight-controlplane, nsight-coordinator, nsight-analysis, nsight-cloud, nsight-agent, libnsight_nvtx.so.
    pub bin_dir: PathBuf,
    /// The built Wasm artifacts (auth filter, recipes, UI).
    pub wasm_dir: PathBuf,
    pub envoy_bin: PathBuf,
    /// A Python with the `nvtx` package.
    pub python: PathBuf,
    /// The sample program (xtask/demo/nvtx_sample.py).
    pub sample: PathBuf,
    /// When Nsight Systems is installed: a second program profiled by the nsys backend.
    pub nsys: Option<NsysSample>,
}

/// A program run under `nsight-agent --backend nsys`.
#[derive(Debug, Clone)]
pub struct NsysSample {
    /// The nsys CLI.
    pub nsys: PathBuf,
    /// The program and its arguments (the CUDA sample when nvcc built it).
    pub argv: Vec<String>,
}

/// Ports and directories of one run.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    pub state_dir: PathBuf,
    pub gateway_port: u16,
    pub storage_port: u16,
    /// First of seven consecutive internal ports.
    pub internal_ports_from: u16,
    /// How long the collection runs.
    pub collect_for: Duration,
    /// Where downloads and analysis outputs go.
    pub out_dir: PathBuf,
    /// HTTPS on the gateway with the local certificates (`local --tls`).
    pub tls: bool,
    /// More arguments for `nsight-controlplane local` (e.g. the OAuth2 flags).
    pub extra_args: Vec<String>,
}

/// What the demo produced, for the person (and the test) to check.
#[derive(Debug, Clone)]
pub struct DemoOutcome {
    pub gateway_url: String,
    pub api_key: String,
    pub session: String,
    pub downloaded: Vec<PathBuf>,
    pub job: String,
    pub notebook_url: String,
    pub analysis_files: Vec<PathBuf>,
    /// The nvtx_sum CSV.
    pub csv: String,
    /// The cuda_gpu_kern_sum CSV of the nsys run, when there was one.
    pub kernels_csv: Option<String>,
    /// What the CLI printed, step by step (command, output).
    pub transcript: Vec<(String, String)>,
}

impl DemoPaths {
    /// The built binaries and Wasm artifacts, Envoy, no sample program.
    pub fn for_tests() -> Self {
        Self {
            bin_dir: crate::bin("nsight-controlplane")
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            wasm_dir: crate::required_path("NSIGHT_WASM_DIR", "cargo xtask build-wasm"),
            envoy_bin: crate::envoy_bin(),
            python: crate::agent::python(),
            sample: PathBuf::new(),
            nsys: None,
        }
    }
}

impl DemoOptions {
    /// Free ports, plain HTTP, state and outputs below `root`.
    pub fn for_tests(root: &Path) -> Self {
        Self {
            state_dir: root.join("state"),
            gateway_port: crate::free_port(),
            storage_port: crate::free_port(),
            internal_ports_from: crate::free_port_range(7),
            collect_for: Duration::from_secs(1),
            out_dir: root.join("out"),
            tls: false,
            extra_args: Vec::new(),
        }
    }
}

/// The running local platform; stopped with SIGTERM (so it stops its children) when dropped.
#[derive(Debug)]
pub struct LocalPlatform {
    process: Running,
    pub gateway_url: String,
    pub gateway: SocketAddr,
    pub api_key: String,
    pub description: Value,
    pub log: PathBuf,
}

impl LocalPlatform {
    /// The platform as the browser tests run it: the built binaries and Wasm artifacts, Envoy,
    /// no sample program, free ports, plain HTTP, its state and outputs below `root`. Returns it
    /// and the options it was started with.
    pub fn start_for_tests(root: &Path) -> Result<(Self, DemoOptions), String> {
        let options = DemoOptions::for_tests(root);
        Ok((Self::start(&DemoPaths::for_tests(), &options)?, options))
    }

    /// The controlplane's pid.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// SIGKILL to the controlplane alone, not its process group: what its servers do then is
    /// up to them (they should die with it).
    pub fn kill9(&mut self) {
        self.process.kill();
    }

    /// Starts `nsight-controlplane local` and waits until its gateway answers.
    pub fn start(paths: &DemoPaths, options: &DemoOptions) -> Result<Self, String> {
        std::fs::create_dir_all(&options.state_dir)
            .map_err(|e| format!("creating {}: {e}", options.state_dir.display()))?;
        let log = options.state_dir.join("controlplane.log");
        let mut cmd = Command::new(paths.bin_dir.join("nsight-controlplane"));
        cmd.arg("local")
            .arg("--state-dir")
            .arg(&options.state_dir)
            .arg("--gateway-port")
            .arg(options.gateway_port.to_string())
            .arg("--storage-port")
            .arg(options.storage_port.to_string())
            .arg("--internal-ports-from")
            .arg(options.internal_ports_from.to_string())
            .arg("--wasm-dir")
            .arg(&paths.wasm_dir)
            .arg("--bin-dir")
            .arg(&paths.bin_dir)
            .arg("--envoy-bin")
            .arg(&paths.envoy_bin)
            .env("RUST_LOG", "info");
        if options.tls {
            cmd.arg("--tls");
        }
        cmd.args(&options.extra_args);
        let mut process = Running::spawn("nsight-controlplane", cmd, &log);
        let ready = "nsight-controlplane ready";
        let deadline = Instant::now() + Duration::from_secs(120);
        while !process.log().contains(ready) {
            if !process.is_running() || Instant::now() > deadline {
                return Err(format!(
                    "the local platform did not start; its output ({}):\n{}",
                    log.display(),
                    process.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let description: Value = std::fs::read(options.state_dir.join("local.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or("the platform wrote no readable local.json")?;
        let key_file = description["apiKeyFile"].as_str().unwrap_or_default();
        let api_key = std::fs::read_to_string(key_file)
            .map_err(|e| format!("reading the API key {key_file}: {e}"))?
            .trim()
            .to_owned();
        let gateway = SocketAddr::from(([127, 0, 0, 1], options.gateway_port));
        if !wait_for_tcp(gateway, Duration::from_secs(10)) {
            return Err(format!("the gateway does not answer on {gateway}"));
        }
        Ok(Self {
            process,
            gateway_url: description["gatewayUrl"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            gateway,
            api_key,
            description,
            log,
        })
    }

    /// The CA to trust for the gateway's certificate (`local --tls`).
    pub fn ca_cert(&self) -> Option<String> {
        self.description["gatewayTls"]["caCert"]
            .as_str()
            .map(str::to_owned)
    }

    /// Sends SIGTERM and waits for a clean stop (SIGKILL after 15 s).
    pub fn stop(mut self) {
        terminate(&mut self.process);
    }
}

impl Drop for LocalPlatform {
    fn drop(&mut self) {
        terminate(&mut self.process);
    }
}

fn terminate(process: &mut Running) {
    if process.is_running() {
        let _ = Command::new("kill")
            .args(["-TERM", &process.pid().to_string()])
            .status();
        if process.wait_exit(Duration::from_secs(15)).is_none() {
            process.kill();
        }
    }
}

/// The CLI with the demo's own configuration file.
struct Cli<'a> {
    bin: PathBuf,
    config: PathBuf,
    transcript: &'a mut Vec<(String, String)>,
}

impl Cli<'_> {
    fn run(&mut self, args: &[&str], json: bool) -> Result<String, String> {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--config").arg(&self.config);
        if json {
            cmd.args(["--output", "json"]);
        }
        let out = cmd
            .args(args)
            .env_remove("NSIGHT_API_KEY")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.bin.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            return Err(format!(
                "`nsight-cloud {}` failed ({}):\n{stdout}{stderr}",
                args.join(" "),
                out.status
            ));
        }
        if !json {
            let mut shown = stdout.clone();
            for line in stderr.lines() {
                shown.push_str(line);
                shown.push('\n');
            }
            self.transcript
                .push((format!("nsight-cloud {}", args.join(" ")), shown));
        }
        Ok(stdout)
    }

    fn json(&mut self, args: &[&str]) -> Result<Value, String> {
        let text = self.run(args, true)?;
        serde_json::from_str(&text).map_err(|e| format!("`nsight-cloud {}`: {e}", args.join(" ")))
    }
}

fn poll<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Result<T, String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return Err(format!("timed out after {timeout:?} waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Runs the profiling session through the gateway, as a user would.
pub fn run_session(
    platform: &LocalPlatform,
    paths: &DemoPaths,
    options: &DemoOptions,
) -> Result<DemoOutcome, String> {
    let mut transcript = Vec::new();
    let mut cli = Cli {
        bin: paths.bin_dir.join("nsight-cloud"),
        config: options.state_dir.join("nsight-cloud.conf"),
        transcript: &mut transcript,
    };
    let ca_cert = platform.ca_cert();
    let mut configure = vec![
        "configure",
        "--gw",
        &platform.gateway_url,
        "--apikey",
        &platform.api_key,
    ];
    if let Some(ca) = &ca_cert {
        configure.extend(["--ca-cert", ca.as_str()]);
    }
    cli.run(&configure, true)?;

    // The profiled program, under the agent, in coordinator mode.
    let d = &platform.description;
    let text = |k: &str| d[k].as_str().unwrap_or_default().to_owned();
    // `nsight-agent run <backend> ... --pod <pod> -- <argv>`, spooling under the state dir.
    let agent_command = |backend: &[&std::ffi::OsStr], pod: &str, argv: &[&std::ffi::OsStr]| {
        let mut cmd = Command::new(paths.bin_dir.join("nsight-agent"));
        cmd.arg("run")
            .args(backend)
            .arg("--coordinator")
            .arg(text("agentChannel"))
            .arg("--tls-dir")
            .arg(text("tlsDir"))
            .arg("--storage-dir")
            .arg(text("reportsDir"))
            .arg("--spool-dir")
            .arg(options.state_dir.join(format!("agent-spool-{pod}")))
            .arg("--pod")
            .arg(pod)
            .arg("--")
            .args(argv);
        cmd
    };
    let agent_log = options.state_dir.join("logs/demo-agent.log");
    let agent_cmd = agent_command(
        &[],
        "demo",
        &[
            paths.python.as_os_str(),
            paths.sample.as_os_str(),
            "600".as_ref(),
        ],
    );
    let mut agent = Running::spawn("nsight-agent", agent_cmd, &agent_log);
    let nsys_log = options.state_dir.join("logs/demo-agent-nsys.log");
    let mut nsys_agent = paths.nsys.as_ref().map(|sample| {
        let argv: Vec<&std::ffi::OsStr> = sample.argv.iter().map(|a| a.as_ref()).collect();
        let backend = [
            "--backend".as_ref(),
            "nsys".as_ref(),
            "--nsys".as_ref(),
            sample.nsys.as_os_str(),
        ];
        let cmd = agent_command(&backend, "demo-nsys", &argv);
        Running::spawn("nsight-agent (nsys)", cmd, &nsys_log)
    });
    let agents = 1 + u64::from(nsys_agent.is_some());
    poll("the agents to register", Duration::from_secs(60), || {
        if !agent.is_running() || nsys_agent.as_mut().is_some_and(|a| !a.is_running()) {
            return None;
        }
        let status = cli.json(&["status"]).ok()?;
        (status["agentCounts"]["connected"].as_u64() >= Some(agents)).then_some(())
    })
    .map_err(|e| format!("{e}; agent log {}:\n{}", agent_log.display(), agent.log()))?;
    cli.run(&["status"], false)?;

    let begun = cli.json(&["session-begin", "--title", "nsight demo"])?;
    let session = begun["id"].as_str().unwrap_or_default().to_owned();
    cli.transcript.push((
        "nsight-cloud session-begin --title \"nsight demo\"".into(),
        format!("Opened session {session}\n"),
    ));
    cli.run(&["profiler-start"], false)?;
    std::thread::sleep(options.collect_for);
    cli.run(&["profiler-stop"], false)?;
    // nvtx: one .sqlite; nsys: the .nsys-rep and its .sqlite export.
    let expected = 1 + 2 * usize::from(nsys_agent.is_some());
    poll("the report upload", Duration::from_secs(60), || {
        let listing = cli.json(&["ls"]).ok()?;
        (listing["reports"].as_array()?.len() >= expected).then_some(())
    })
    .map_err(|e| format!("{e}; agent log {}:\n{}", agent_log.display(), agent.log()))?;
    cli.run(&["ls"], false)?;
    let reports_out = options.out_dir.join("reports");
    cli.run(
        &["download", "-o", &reports_out.display().to_string()],
        false,
    )?;
    let downloaded = files_under(&reports_out);

    let job = cli.json(&["analysis", "run", "nvtx_sum", "--wait"])?;
    let job_id = job["id"].as_str().unwrap_or_default().to_owned();
    if job["status"] != "succeeded" {
        return Err(format!("the nvtx_sum job did not succeed: {job:#}"));
    }
    cli.run(&["analysis", "reports", "info", &job_id], false)?;
    let analysis_out = options.out_dir.join("analysis");
    cli.run(
        &[
            "analysis",
            "reports",
            "download",
            &job_id,
            "-o",
            &analysis_out.display().to_string(),
        ],
        false,
    )?;
    let analysis_files = files_under(&analysis_out);
    let csv = analysis_files
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "csv"))
        .and_then(|p| std::fs::read_to_string(p).ok())
        .ok_or("the nvtx_sum job produced no CSV")?;
    let kernels_csv = match &nsys_agent {
        Some(_) => Some(kernel_summary(&mut cli, &options.out_dir.join("kernels"))?),
        None => None,
    };
    cli.run(&["session-end"], false)?;
    terminate(&mut agent);
    if let Some(a) = nsys_agent.as_mut() {
        terminate(a);
    }
    Ok(DemoOutcome {
        gateway_url: platform.gateway_url.clone(),
        api_key: platform.api_key.clone(),
        session,
        downloaded,
        notebook_url: format!(
            "{}/analysis/v1/jobs/{job_id}/notebook.html",
            platform.gateway_url
        ),
        job: job_id,
        analysis_files,
        csv,
        kernels_csv,
        transcript,
    })
}

/// `analysis run cuda_gpu_kern_sum` over the session (the nsys report has the kernels) and its CSV.
fn kernel_summary(cli: &mut Cli<'_>, out: &Path) -> Result<String, String> {
    let job = cli.json(&["analysis", "run", "cuda_gpu_kern_sum", "--wait"])?;
    if job["status"] != "succeeded" {
        return Err(format!(
            "the cuda_gpu_kern_sum job did not succeed: {job:#}"
        ));
    }
    let id = job["id"].as_str().unwrap_or_default().to_owned();
    let dir = out.display().to_string();
    cli.run(&["analysis", "reports", "download", &id, "-o", &dir], false)?;
    files_under(out)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "csv"))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .find(|csv| csv.lines().count() > 1)
        .ok_or_else(|| "the cuda_gpu_kern_sum job produced no kernel rows".to_owned())
}
