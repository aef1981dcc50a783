//! The port-forward helper: `kubectl port-forward` for a ClusterIP gateway, as a process the CLI
//! manages so that users never run one by hand.
//!
//! ```text
//! autoconfigure ──spawn──> nsight-cloud port-forward run   (own process group, detached;
//!                            stderr -> <config>.port-forward.log)
//!   127.0.0.1:<local> ──kube-rs portforward (WebSocket)──> API server ──> a Ready Pod of the
//!                                                          Service, its targetPort
//! any later command ──[`ensure`]── local port answers? else spawn again (pid saved)
//! port-forward stop ──SIGTERM──> listeners closed, exit 0
//! ```
//!
//! Each connection is forwarded on its own stream; a failure re-resolves the Pod (a gateway
//! Pod restarted elsewhere), so one helper outlives gateway restarts.

use std::{
    io,
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::{api::ListParams, Api};
use tokio::{io::copy_bidirectional, net::TcpListener, sync::Mutex};

use crate::config::{ForwardedPort, PortForward};

/// How long a new helper may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// Why the helper could not be started or run.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("cannot start the port-forward helper: {0}")]
    Spawn(io::Error),
    #[error("the port-forward helper did not start; its log {}:\n{log}", path.display())]
    NotStarted { path: PathBuf, log: String },
    #[error("{0}")]
    Kube(String),
}

/// The helper's log, beside the configuration file.
pub fn log_path(config_path: &Path) -> PathBuf {
    let mut name = config_path.as_os_str().to_owned();
    name.push(".port-forward.log");
    PathBuf::from(name)
}

fn answers(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(300)).is_ok()
}

/// Whether the helper of `pf` is running (its first local port answers).
pub fn is_up(pf: &PortForward) -> bool {
    pf.ports.first().is_some_and(|p| answers(p.local))
}

/// Starts a helper for `pf` (the configuration at `config_path` holds it) and waits until it
/// listens; its process ID.
pub fn spawn(config_path: &Path) -> Result<u32, ForwardError> {
    let exe = std::env::current_exe().map_err(ForwardError::Spawn)?;
    let log = log_path(config_path);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(ForwardError::Spawn)?;
    let mut child = {
        use std::os::unix::process::CommandExt as _;
        Command::new(exe)
            .arg("--config")
            .arg(config_path)
            .args(["port-forward", "run"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(file))
            // Not in the terminal's process group: Ctrl-C on a later command leaves it running.
            .process_group(0)
            .spawn()
            .map_err(ForwardError::Spawn)?
    };
    let pid = child.id();
    let pf = crate::config::load(config_path)
        .ok()
        .and_then(|c| c.port_forward);
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if pf.as_ref().is_some_and(is_up) {
            return Ok(pid);
        }
        let exited = matches!(child.try_wait(), Ok(Some(_)));
        if exited || Instant::now() > deadline {
            if !exited {
                let _ = child.kill();
            }
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(8).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(ForwardError::NotStarted {
                path: log,
                log: tail.join("\n"),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Stops the helper of `pf` when it is still ours (a process whose command line says
/// `port-forward run`); whether one was stopped.
pub fn stop(pf: &PortForward) -> bool {
    let Some(pid) = pf.pid else {
        return false;
    };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let ours = String::from_utf8_lossy(&cmdline).contains("port-forward\0run");
    if !ours {
        return false;
    }
    let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    let sent = rustix::process::kill_process(pid, rustix::process::Signal::TERM).is_ok();
    if sent {
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && is_up(pf) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    sent
}

/// `port-forward run`: forwards until SIGTERM or SIGINT.
pub fn run(pf: &PortForward) -> Result<(), ForwardError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ForwardError::Spawn)?;
    runtime.block_on(serve(pf.clone()))
}

async fn serve(pf: PortForward) -> Result<(), ForwardError> {
    let client = super::kube_client(pf.context.as_deref(), pf.kubeconfig.as_deref())
        .await
        .map_err(ForwardError::Kube)?;
    let target = Arc::new(Target {
        services: Api::namespaced(client.clone(), &pf.namespace),
        pods: Api::namespaced(client, &pf.namespace),
        service: pf.service.clone(),
        pod: Mutex::new(None),
    });
    // Fail early, with the reason in the log, when there is nothing to forward to.
    target.resolve().await.map_err(ForwardError::Kube)?;
    let mut tasks = Vec::new();
    for port in &pf.ports {
        let listener = TcpListener::bind(("127.0.0.1", port.local))
            .await
            .map_err(|e| {
                ForwardError::Kube(format!(
                    "cannot listen on 127.0.0.1:{} ({e}); another program uses it: stop it or run \
                     autoconfigure with other --local-ports",
                    port.local
                ))
            })?;
        tracing::info!(local = port.local, remote = port.remote, service = %pf.service, "forwarding");
        tasks.push(tokio::spawn(accept(listener, *port, target.clone())));
    }
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(ForwardError::Spawn)?;
    tokio::select! {
        _ = terminate.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    for task in tasks {
        task.abort();
    }
    eprintln!("port-forward stopped");
    Ok(())
}

/// The Service's Pod and port mapping, re-resolved after a failure.
struct Target {
    services: Api<Service>,
    pods: Api<Pod>,
    service: String,
    pod: Mutex<Option<Resolved>>,
}

/// A Pod's name and the Service's ports as (port, targetPort number or name).
type Resolved = (String, Vec<(u16, TargetPort)>);

#[derive(Clone, Debug)]
enum TargetPort {
    Number(u16),
    Name(String),
}

impl Target {
    /// A Ready Pod selected by the Service, and the container port for each Service port.
    async fn resolve(&self) -> Result<Resolved, String> {
        let svc = self
            .services
            .get(&self.service)
            .await
            .map_err(|e| format!("Service {}: {e}", self.service))?;
        let spec = svc.spec.unwrap_or_default();
        let selector = spec
            .selector
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("Service {} selects no Pods", self.service))?;
        let labels: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let pods = self
            .pods
            .list(&ListParams::default().labels(&labels.join(",")))
            .await
            .map_err(|e| format!("Pods of Service {}: {e}", self.service))?;
        let ready = pods.items.into_iter().find(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        });
        let pod = ready
            .and_then(|p| p.metadata.name)
            .ok_or_else(|| format!("no Ready Pod behind Service {} yet", self.service))?;
        let ports = spec
            .ports
            .unwrap_or_default()
            .into_iter()
            .filter_map(|p| {
                let port = u16::try_from(p.port).ok()?;
                let target = match p.target_port {
                    Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n)) => {
                        TargetPort::Number(u16::try_from(n).ok()?)
                    }
                    Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(
                        name,
                    )) => TargetPort::Name(name),
                    None => TargetPort::Number(port),
                };
                Some((port, target))
            })
            .collect();
        let resolved = (pod, ports);
        *self.pod.lock().await = Some(resolved.clone());
        Ok(resolved)
    }

    /// The Pod and its container port for the Service's `port`.
    async fn endpoint(&self, port: u16, fresh: bool) -> Result<(String, u16), String> {
        let cached = self.pod.lock().await.clone();
        let (pod, ports) = match cached {
            Some(c) if !fresh => c,
            _ => self.resolve().await?,
        };
        let target = ports
            .iter()
            .find(|(p, _)| *p == port)
            .map(|(_, t)| t.clone())
            .unwrap_or(TargetPort::Number(port));
        let number = match target {
            TargetPort::Number(n) => n,
            TargetPort::Name(name) => self.named_port(&pod, &name).await?,
        };
        Ok((pod, number))
    }

    async fn named_port(&self, pod: &str, name: &str) -> Result<u16, String> {
        let pod = self
            .pods
            .get(pod)
            .await
            .map_err(|e| format!("Pod {pod}: {e}"))?;
        pod.spec
            .into_iter()
            .flat_map(|s| s.containers)
            .flat_map(|c| c.ports.unwrap_or_default())
            .find(|p| p.name.as_deref() == Some(name))
            .and_then(|p| u16::try_from(p.container_port).ok())
            .ok_or_else(|| format!("no container port named {name}"))
    }
}

async fn accept(listener: TcpListener, port: ForwardedPort, target: Arc<Target>) {
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            continue;
        };
        let target = target.clone();
        tokio::spawn(async move {
            for fresh in [false, true] {
                let (pod, container_port) = match target.endpoint(port.remote, fresh).await {
                    Ok(e) => e,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot forward");
                        return;
                    }
                };
                let mut forwarder = match target.pods.portforward(&pod, &[container_port]).await {
                    Ok(f) => f,
                    Err(e) => {
                        tracing::warn!(%pod, port = container_port, error = %e, "port-forward failed; looking for the Pod again");
                        continue;
                    }
                };
                let Some(mut upstream) = forwarder.take_stream(container_port) else {
                    return;
                };
                if let Err(e) = copy_bidirectional(&mut socket, &mut upstream).await {
                    tracing::debug!(%pod, error = %e, "connection ended");
                }
                drop(upstream);
                let _ = forwarder.join().await;
                return;
            }
        });
    }
}
