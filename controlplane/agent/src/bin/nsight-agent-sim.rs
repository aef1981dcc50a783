//! `nsight-agent-sim`: the test agent harness. Runs N agents in one process, each speaking the
//! real agent protocol to a real coordinator through [`nsight_agent::channel`], with a simulated
//! backend that "uploads" a report key per collection instead of profiling. For integration
//! tests and the coordinator benchmark; it is not a profiler.
//!
//! Prints one JSON line per channel event on stdout: `{"agent":3,"event":"started",...}`.

use std::time::Duration;

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
        };
        let mut backend = SimBackend {
            tag: args.tag.clone(),
            pod,
            process: "sim".into(),
            upload: Duration::from_millis(args.upload_ms),
        };
        let out = out_tx.clone();
        tokio::spawn(async move {
            let (tx, mut rx) = mpsc::unbounded_channel();
            let forward = tokio::spawn(async move {
                while let Some(event) = rx.recv().await {
                    if out.send(event_json(n, &event).to_string()).is_err() {
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
    while let Some(line) = out_rx.recv().await {
        println!("{line}");
    }
    Ok(())
}
