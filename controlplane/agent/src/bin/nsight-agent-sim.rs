//! `nsight-agent-sim`: the test agent harness. Runs N agents in one process, each speaking the
//! real agent protocol to a real coordinator through [`nsight_agent::channel`], with a simulated
//! backend that "uploads" a report key per collection instead of profiling. For integration
//! tests and the coordinator benchmark; it is not a profiler.
//!
//! Prints one JSON line per channel event on stdout:
//! `{"agent":3,"event":"started",...,"atMs":<unix ms>}`.

use std::{io::Write, time::Duration};

use clap::Parser;
use nsight_agent::channel::{self, AgentConfig, Backend, CollectionRef, Event};
use tokio::sync::mpsc;

#[derive(Debug, Parser)]
#[command(about = "Simulated agents speaking the real protocol (a test harness, not a profiler)")]
struct Args {
    /// Coordinator agent channel URL.
    #[arg(long, default_value = "http://127.0.0.1:8081")]
    coordinator: String,
    /// Number of agents.
    #[arg(long, default_value_t = 1)]
    count: u32,
    #[arg(long, default_value = "default")]
    tag: String,
    #[arg(long, default_value = "sim")]
    namespace: String,
    /// Pods are named `<pod-prefix>-<n>`.
    #[arg(long, default_value = "sim-pod")]
    pod_prefix: String,
    /// Directory with ca.crt, agent.crt, agent.key for the channel's mutual TLS; without it
    /// the agents speak plaintext (the coordinator must allow that).
    #[arg(long)]
    tls_dir: Option<std::path::PathBuf>,
    /// The name on the coordinator's certificate.
    #[arg(long, default_value = "localhost")]
    tls_server_name: String,
    /// Delay between starting one agent and the next, in microseconds (a benchmark ramps
    /// thousands of agents up instead of opening every TLS connection in the same instant).
    #[arg(long, default_value_t = 0)]
    ramp_us: u64,
    /// Simulated upload time per collection.
    #[arg(long, default_value_t = 50)]
    upload_ms: u64,
}

/// Names the report the real agent would upload, and pretends to upload it.
#[derive(Debug)]
struct SimBackend {
    tag: String,
    pod: String,
    process: String,
    upload: Duration,
}

#[tonic::async_trait]
impl Backend for SimBackend {
    async fn start(&mut self, _at: &CollectionRef) -> Result<(), String> {
        Ok(())
    }

    async fn stop(&mut self, at: &CollectionRef) -> Result<Vec<String>, String> {
        tokio::time::sleep(self.upload).await;
        Ok(vec![format!(
            "{}/{}/{}/{}_{}_{}_sim.nsys-rep",
            self.tag, at.session, at.collection, self.process, self.tag, self.pod
        )])
    }
}

/// Wall-clock milliseconds, so a benchmark can relate events to its own clock.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

fn event_json(agent: u32, event: &Event) -> serde_json::Value {
    use serde_json::json;
    match event {
        Event::Registered { key, reconnected } => {
            json!({"agent": agent, "event": "registered", "key": key, "reconnected": reconnected})
        }
        Event::Started(at) => {
            json!({"agent": agent, "event": "started", "session": at.session, "collection": at.collection})
        }
        Event::Stopped { at, keys } => {
            json!({"agent": agent, "event": "stopped", "session": at.session, "collection": at.collection, "keys": keys})
        }
        Event::Failed { at, reason } => {
            json!({"agent": agent, "event": "failed", "session": at.session, "collection": at.collection, "reason": reason})
        }
        Event::Disconnected { reason } => {
            json!({"agent": agent, "event": "disconnected", "reason": reason})
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let tls = args
        .tls_dir
        .as_deref()
        .map(|dir| channel::AgentTls::from_dir(dir, &args.tls_server_name))
        .transpose()?
        .map(channel::TlsSource::Loaded);
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<String>();
    for n in 0..args.count {
        let pod = format!("{}-{n}", args.pod_prefix);
        let config = AgentConfig {
            coordinator: args.coordinator.clone(),
            tag: args.tag.clone(),
            namespace: args.namespace.clone(),
            pod: pod.clone(),
            container: "main".into(),
            process_name: "sim".into(),
            pid: 1000 + n,
            node: "local".into(),
            backend: "nvtx".into(),
            diagnostics: Vec::new(),
            max_backoff: Duration::from_secs(2),
            tls: tls.clone(),
            mirror: None,
        };
        let mut backend = SimBackend {
            tag: args.tag.clone(),
            pod,
            process: "sim".into(),
            upload: Duration::from_millis(args.upload_ms),
        };
        let out = out_tx.clone();
        let ramp = Duration::from_micros(args.ramp_us.saturating_mul(u64::from(n)));
        tokio::spawn(async move {
            tokio::time::sleep(ramp).await;
            let (tx, mut rx) = mpsc::unbounded_channel();
            let forward = tokio::spawn(async move {
                while let Some(event) = rx.recv().await {
                    let mut line = event_json(n, &event);
                    line["atMs"] = serde_json::json!(now_ms());
                    if out.send(line.to_string()).is_err() {
                        break;
                    }
                }
            });
            if let Err(e) = channel::run(config, &mut backend, tx).await {
                eprintln!("agent {n}: {e}");
            }
            let _ = forward.await;
        });
    }
    drop(out_tx);
    // One write per burst of events, not per line: 10,000 agents answering START together
    // would otherwise cost 10,000 writes.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    while let Some(line) = out_rx.recv().await {
        writeln!(out, "{line}")?;
        while let Ok(line) = out_rx.try_recv() {
            writeln!(out, "{line}")?;
        }
        out.flush()?;
    }
    Ok(())
}
