//! Starts the local platform from a [`Plan`], watches it, and stops it: child processes for the
//! coordinator and the analysis service (logs in `<state>/logs`), the UI file server and the xDS
//! server in this process, and a supervised Envoy fed by that xDS server. Any part that cannot
//! start stops the whole platform with a message naming the part and its log.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use anyhow::{bail, Context, Result};
use nsight_contracts::gateway_only::GatewayToken;
use nsight_gateway::{
    bootstrap::{AdminAddress, Bootstrap},
    server::{XdsHandle, XdsServer},
    supervisor::{die_with_parent, EnvoyConfig, EnvoyHandle, EnvoySupervisor},
};
use tokio::process::{Child, Command};

use crate::{
    oauth2::{OAuth2Plan, OAuth2Secrets},
    plan::{ChildSpec, Plan, Settings, TlsFiles, GATEWAY_NODE},
    secrets, survivors, ui_server,
};

const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A running local platform. Dropping it kills the child processes and Envoy.
#[derive(Debug)]
pub struct Running {
    pub plan: Plan,
    pub api_key: String,
    children: Vec<(&'static str, PathBuf, Child)>,
    envoy: Option<EnvoyHandle>,
    xds: Option<XdsHandle>,
    _lock: survivors::StateLock,
}

/// Checks what must exist before anything starts, with the command that provides it.
pub fn preflight(settings: &Settings, plan: &Plan) -> Result<()> {
    let mut missing = Vec::new();
    for child in &plan.children {
        if !child.program.is_file() {
            missing.push(format!(
                "{} (build it: cargo build -p {}; or set NSIGHT_BIN_DIR)",
                child.program.display(),
                if child.name == "nsight-coordinator" {
                    "nsight-coordinator"
                } else {
                    "nsight-analysis"
                }
            ));
        }
    }
    for filter in [&plan.auth_filter, &plan.auth_filter_lean] {
        if !filter.is_file() {
            missing.push(format!(
                "{} (build it: cargo xtask build-wasm; or set NSIGHT_WASM_DIR)",
                filter.display()
            ));
        }
    }
    let recipes = settings.wasm_dir.join("recipes");
    if !recipes.is_dir() {
        missing.push(format!(
            "{} (build it: cargo xtask build-wasm)",
            recipes.display()
        ));
    }
    if !settings.envoy_bin.is_file() {
        missing.push(format!(
            "{} (install it: cargo xtask setup python; or set NSIGHT_ENVOY_BIN)",
            settings.envoy_bin.display()
        ));
    }
    if missing.is_empty() {
        Ok(())
    } else {
        bail!("the local platform is missing:\n  {}", missing.join("\n  "))
    }
}

async fn wait_tcp(addr: SocketAddr, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

async fn spawn(spec: &ChildSpec) -> Result<Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&spec.log)
        .with_context(|| format!("opening {}", spec.log.display()))?;
    let mut command = Command::new(&spec.program);
    die_with_parent(&mut command);
    let child = command
        .args(&spec.args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", spec.program.display()))?;
    Ok(child)
}

/// The gateway certificate chain and key (PEM), checked for the markers Envoy needs so a wrong
/// file is named here rather than as an Envoy NACK.
fn read_tls(files: &TlsFiles) -> Result<(String, String)> {
    let read = |path: &Path, what: &str, marker: &str| {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the gateway's {what} {}", path.display()))?;
        if !text.contains(marker) {
            bail!(
                "{} is not a PEM {what} (no `{marker}` line); give --tls-cert a certificate \
                 chain and --tls-key its private key",
                path.display()
            );
        }
        Ok(text)
    };
    Ok((
        read(&files.cert, "certificate", "-----BEGIN CERTIFICATE-----")?,
        read(&files.key, "private key", "PRIVATE KEY-----")?,
    ))
}

/// The OAuth2 client secret (the user's file, owner-only), the cookie key (made once in the
/// state directory) and the provider's CA, each refused with its file named.
fn read_oauth2(plan: &OAuth2Plan) -> Result<OAuth2Secrets> {
    let client_secret = secrets::read_private(&plan.client_secret_file)
        .context("the OAuth2 client secret (--oauth2-client-secret-file)")?;
    let cookie_key = secrets::load_or_create(&plan.cookie_key_file)?;
    let ca_pem = match &plan.ca_cert {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| {
                format!("cannot read the identity provider's CA {}", path.display())
            })?;
            if !text.contains("-----BEGIN CERTIFICATE-----") {
                bail!(
                    "{} is not a PEM certificate (no `-----BEGIN CERTIFICATE-----` line); give \
                     --oauth2-ca-cert the CA that issued the identity provider's certificate",
                    path.display()
                );
            }
            Some(text)
        }
        None => None,
    };
    Ok(OAuth2Secrets {
        client_secret,
        cookie_key,
        ca_pem,
    })
}

/// Starts every part and waits until the gateway answers.
pub async fn start(settings: &Settings) -> Result<Running> {
    let plan = Plan::new(settings).map_err(anyhow::Error::msg)?;
    preflight(settings, &plan)?;
    let lock = survivors::lock(&settings.state_dir)?;
    stop_survivors(settings, &plan)?;
    std::fs::create_dir_all(&plan.logs_dir)
        .with_context(|| format!("creating {}", plan.logs_dir.display()))?;
    let api_key = secrets::load_or_create(&plan.api_key_file)?;
    // Before the services start: they read it at start.
    let gateway_token = GatewayToken::parse(&secrets::load_or_create(&plan.gateway_token_file)?)
        .with_context(|| plan.gateway_token_file.display().to_string())?;
    let oauth2 = plan.oauth2.as_ref().map(read_oauth2).transpose()?;
    let mut running = Running {
        plan: plan.clone(),
        api_key: api_key.clone(),
        children: Vec::new(),
        envoy: None,
        xds: None,
        _lock: lock,
    };

    for spec in &plan.children {
        let mut child = spawn(spec).await?;
        if !wait_tcp(spec.ready_at, READY_TIMEOUT).await {
            let exited = child.try_wait().ok().flatten();
            bail!(
                "{} did not start listening on {} ({}); its log {}:\n{}",
                spec.name,
                spec.ready_at,
                exited.map_or("still running".to_owned(), |s| format!("exited: {s}")),
                spec.log.display(),
                tail(&spec.log, 20)
            );
        }
        tracing::info!(part = spec.name, addr = %spec.ready_at, "ready");
        running.children.push((spec.name, spec.log.clone(), child));
    }

    // Only Envoy, on this machine, fetches from it (the gateway's `/` route).
    let ui_addr = SocketAddr::from(([127, 0, 0, 1], plan.ports.ui));
    let ui = tokio::net::TcpListener::bind(ui_addr)
        .await
        .with_context(|| {
            format!("the UI server cannot listen on {ui_addr} (is the port in use?)")
        })?;
    let app = ui_server::router(plan.ui_dir.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(ui, app).await {
            tracing::error!(error = %e, "UI server stopped");
        }
    });

    let xds_addr = SocketAddr::from(([127, 0, 0, 1], plan.ports.xds));
    let xds = XdsServer::serve(xds_addr).await?;
    // Read after the coordinator started: it makes the local certificates on first start.
    let tls = match &plan.gateway_tls {
        Some(files) => Some(read_tls(files)?),
        None => None,
    };
    let ir = plan.gateway_ir(
        &api_key,
        &gateway_token,
        tls.as_ref()
            .map(|(cert, key)| (cert.as_str(), key.as_str())),
        oauth2.as_ref(),
    )?;
    xds.set_ir(GATEWAY_NODE, &ir)?;
    let status_addr = SocketAddr::from(([127, 0, 0, 1], plan.ports.status));
    let status_listener = tokio::net::TcpListener::bind(status_addr)
        .await
        .with_context(|| format!("the status endpoint cannot listen on {status_addr}"))?;
    let status = crate::status::router(xds.status_reader());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(status_listener, status).await {
            tracing::error!(error = %e, "status endpoint stopped");
        }
    });
    let work_dir = settings.state_dir.join("envoy");
    let admin = admin_socket(&work_dir, &plan.envoy_admin_socket)?;
    let envoy = EnvoySupervisor::start(EnvoyConfig {
        envoy_bin: settings.envoy_bin.clone(),
        bootstrap: Bootstrap::new(GATEWAY_NODE, xds.local_addr(), admin),
        work_dir: work_dir.clone(),
        log_level: "warning".into(),
        initial_backoff: Duration::from_millis(200),
        max_backoff: Duration::from_secs(10),
    })?;
    running.xds = Some(xds);
    let log = envoy.log_path().to_path_buf();
    let ready = envoy.wait_ready(READY_TIMEOUT).await;
    running.envoy = Some(envoy);
    if let Err(e) = ready {
        bail!(
            "envoy did not become ready: {e}; its log {}:\n{}",
            log.display(),
            tail(&log, 20)
        );
    }
    let gateway = SocketAddr::from(([127, 0, 0, 1], plan.ports.gateway));
    if !wait_tcp(gateway, READY_TIMEOUT).await {
        let nacks = running
            .xds
            .as_ref()
            .map(|x| x.status_json().to_string())
            .unwrap_or_default();
        bail!(
            "the gateway did not open port {}; xDS status: {nacks}",
            plan.ports.gateway
        );
    }
    let description = serde_json::to_vec_pretty(&plan)?;
    std::fs::write(settings.state_dir.join("local.json"), description)?;
    Ok(running)
}

/// Stops what an earlier platform on this state directory left running (its coordinator would
/// hold the ports and the database lock), naming each in the log.
fn stop_survivors(settings: &Settings, plan: &Plan) -> Result<()> {
    let programs: Vec<&str> = plan
        .children
        .iter()
        .map(|c| c.program.as_path())
        .chain([settings.envoy_bin.as_path()])
        .filter_map(|p| p.file_name()?.to_str())
        .collect();
    let found = survivors::find(&settings.state_dir, &programs);
    if found.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = found.iter().map(ToString::to_string).collect();
    tracing::warn!(
        survivors = %names.join(", "),
        "an earlier platform on this state directory left these running; stopping them"
    );
    survivors::stop(&found, Duration::from_secs(5))
}

/// Envoy's admin interface: the socket `socket` (Envoy makes it 0600) in `work_dir`, which is
/// created 0700 so that no other user can reach the socket even before its mode is set.
fn admin_socket(work_dir: &Path, socket: &Path) -> Result<AdminAddress> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    // sockaddr_un holds 108 bytes, the terminating NUL included.
    const MAX_SOCKET_PATH: usize = 107;
    let len = socket.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        bail!(
            "Envoy's admin socket {} is {len} bytes long, more than the {MAX_SOCKET_PATH} a Unix \
             socket path may have: choose a shorter --state-dir",
            socket.display()
        );
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(work_dir)
        .with_context(|| format!("creating {}", work_dir.display()))?;
    // An existing directory keeps its mode: tighten it.
    std::fs::set_permissions(work_dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("making {} private (0700)", work_dir.display()))?;
    Ok(AdminAddress::Pipe(socket.to_path_buf()))
}

impl Running {
    /// Runs until Ctrl-C / SIGTERM, or until a part exits (an error naming it and its log).
    pub async fn wait(&mut self) -> Result<()> {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let children = &mut self.children;
        let exited = async {
            loop {
                for (name, log, child) in children.iter_mut() {
                    if let Ok(Some(status)) = child.try_wait() {
                        return (*name, log.clone(), status);
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => Ok(()),
            _ = term.recv() => Ok(()),
            (name, log, status) = exited => bail!(
                "{name} exited ({status}); the platform is stopping. Its log {}:\n{}",
                log.display(),
                tail(&log, 20)
            ),
        }
    }

    /// Stops Envoy, the xDS server and the children.
    pub async fn stop(mut self) {
        if let Some(envoy) = self.envoy.take() {
            envoy.stop().await;
        }
        if let Some(xds) = self.xds.take() {
            xds.shutdown().await;
        }
        for (_, _, child) in &mut self.children {
            let _ = child.kill().await;
        }
    }
}
