//! `nsight-streamer-standin`: a STAND-IN for NVIDIA's Nsight Streamer image, which cannot be
//! pulled here. Tests run it as an NsightStreamer's container (`spec.image`) to prove what the
//! platform does around a streamer: the Pod starts after its reports were synced, is Ready,
//! and is reachable at `status.url`. It serves no GUI: `/` answers the synced manifest (the
//! files, their sizes as found on disk) and the WebRTC settings the operator gave it (the TURN
//! relay's URLs and user name, whether a password came: never the password), and says it is a
//! stand-in; `/healthz` is the probe.
//! A real install uses NVIDIA's image (docs/tenant.md, "The streamer image in a real install").

use std::{net::SocketAddr, path::PathBuf};

use axum::{extract::State, routing::get, Json, Router};
use clap::Parser;
use nsight_streamer::{Manifest, MANIFEST};
use serde_json::{json, Value};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "A stand-in for the Nsight Streamer in tests: serves the synced report list"
)]
struct Args {
    #[arg(long, env = "NSIGHT_STREAMER_HTTP", default_value = "0.0.0.0:8080")]
    http: SocketAddr,
    /// The reports volume the init container filled.
    #[arg(long, env = "NSIGHT_REPORTS_DIR", default_value = "/reports")]
    reports: PathBuf,
}

/// What `/` answers besides the manifest.
#[derive(Clone)]
struct Served {
    reports: PathBuf,
    /// The TURN settings from the environment the operator renders (`NSIGHT_STREAMER_TURN*`).
    webrtc: Value,
}

fn webrtc_from_env() -> Value {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let urls: Vec<String> = var("NSIGHT_STREAMER_TURN_URLS")
        .map(|u| u.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    json!({
        "turn": var("NSIGHT_STREAMER_TURN").as_deref() == Some("1"),
        "turnUrls": urls,
        "turnUsername": var("NSIGHT_STREAMER_TURN_USERNAME"),
        "turnPasswordSet": var("NSIGHT_STREAMER_TURN_PASSWORD").is_some(),
    })
}

/// The manifest, each file's size as it is on disk now (`null`: missing).
async fn listing(State(served): State<Served>) -> (axum::http::StatusCode, Json<Value>) {
    let dir = &served.reports;
    let path = dir.join(MANIFEST);
    let manifest: Option<Manifest> = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let Some(manifest) = manifest else {
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"standIn": true, "error": format!("no readable {}", path.display())})),
        );
    };
    let files: Vec<Value> = manifest
        .files
        .iter()
        .map(|f| {
            let on_disk = std::fs::metadata(dir.join(&f.path)).ok().map(|m| m.len());
            json!({"key": f.key, "path": f.path, "bytes": f.bytes, "onDisk": on_disk})
        })
        .collect();
    (
        axum::http::StatusCode::OK,
        Json(json!({
            "standIn": true,
            "note": "a test stand-in for NVIDIA's Nsight Streamer: it lists the synced reports and serves no GUI",
            "sessionId": manifest.session_id,
            "report": manifest.report,
            "files": files,
            "webrtc": served.webrtc,
        })),
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let app = Router::new()
        .route("/", get(listing))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(Served {
            reports: args.reports.clone(),
            webrtc: webrtc_from_env(),
        });
    let listener = tokio::net::TcpListener::bind(args.http).await?;
    eprintln!(
        "nsight-streamer-standin (a test stand-in, no GUI) serving {} on {}",
        args.reports.display(),
        listener.local_addr()?
    );
    axum::serve(listener, app).await?;
    Ok(())
}
