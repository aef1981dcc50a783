//! `nsight-webhook-bench`: the release-built half of `cargo xtask bench webhook`.
//!
//! - `certs DIR`: a CA and a serving certificate for 127.0.0.1 (`ca.crt`, `tls.crt`, `tls.key`).
//! - `echo --listen A --cert C --key K`: the reference, the webhook's own HTTPS shell
//!   (`server::serve`, rustls, axum, HTTP/1.1) whose `POST /mutate` answers with the request
//!   body unchanged: everything the webhook does except reading the review and deciding.
//! - `load --url U --ca C --payloads F --rate R --secs S`: an open-loop client (keep-alive
//!   HTTP/1.1 over TLS, like the API server's webhook client) sending the AdmissionReviews of
//!   `F` (a JSON array) round-robin at `R` per second; latency counts from each request's
//!   scheduled time, so a slow server cannot hide queueing. Prints one JSON line of results.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use axum::{body::Bytes, http::header, response::IntoResponse, routing::get, routing::post};
use clap::{Parser, Subcommand};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use serde_json::{json, Value};

#[derive(Parser)]
#[command(name = "nsight-webhook-bench")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write ca.crt, tls.crt and tls.key (for 127.0.0.1 and localhost) into DIR.
    Certs { dir: PathBuf },
    /// Serve the reference echo over HTTPS.
    Echo {
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        cert: PathBuf,
        #[arg(long)]
        key: PathBuf,
    },
    /// Send AdmissionReviews at a fixed rate and report latency.
    Load {
        /// e.g. https://127.0.0.1:8443/mutate
        #[arg(long)]
        url: String,
        /// PEM CA that signed the server's certificate.
        #[arg(long)]
        ca: PathBuf,
        /// A JSON array of AdmissionReview objects.
        #[arg(long)]
        payloads: PathBuf,
        #[arg(long, default_value_t = 500)]
        rate: u32,
        #[arg(long, default_value_t = 20)]
        secs: u32,
        /// Seconds of load before measuring (connections opened, caches warm).
        #[arg(long, default_value_t = 2)]
        warmup_secs: u32,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Certs { dir } => certs(&dir),
        Command::Echo { listen, cert, key } => echo(listen, &cert, &key),
        Command::Load {
            url,
            ca,
            payloads,
            rate,
            secs,
            warmup_secs,
        } => load(&url, &ca, &payloads, rate, secs, warmup_secs),
    }
}

fn certs(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let key = KeyPair::generate()?;
    let serving = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])?
        .signed_by(&key, &ca)?;
    std::fs::write(dir.join("ca.crt"), ca.pem())?;
    std::fs::write(dir.join("tls.crt"), serving.pem())?;
    std::fs::write(dir.join("tls.key"), key.serialize_pem())?;
    Ok(())
}

fn echo(listen: SocketAddr, cert: &Path, key: &Path) -> Result<()> {
    let tls = nsight_operator::server::tls_config(cert, key)?;
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let router = axum::Router::new()
            .route(
                "/mutate",
                post(|body: Bytes| async move {
                    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
                }),
            )
            .route("/healthz", get(|| async { "ok" }));
        nsight_operator::server::serve(listener, Arc::new(tls), router).await?;
        Ok(())
    })
}

/// What one request found.
struct Sample {
    latency: Duration,
    ok: bool,
    patched: bool,
}

fn load(url: &str, ca: &Path, payloads: &Path, rate: u32, secs: u32, warmup: u32) -> Result<()> {
    if rate == 0 || secs == 0 {
        bail!("--rate and --secs must be positive");
    }
    let ca = std::fs::read(ca).with_context(|| format!("cannot read {}", ca.display()))?;
    let reviews: Vec<Value> = serde_json::from_slice(
        &std::fs::read(payloads).with_context(|| format!("cannot read {}", payloads.display()))?,
    )
    .context("--payloads is not a JSON array of AdmissionReviews")?;
    if reviews.is_empty() {
        bail!("--payloads holds no AdmissionReview");
    }
    let bodies: Arc<Vec<(String, Bytes)>> = Arc::new(
        reviews
            .iter()
            .map(|r| {
                let uid = r["request"]["uid"].as_str().unwrap_or_default().to_owned();
                (uid, Bytes::from(serde_json::to_vec(r).unwrap_or_default()))
            })
            .collect(),
    );
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca)?)
        .http1_only()
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(10))
        .build()?;
    let runtime = tokio::runtime::Runtime::new()?;
    let samples = runtime.block_on(drive(
        client,
        url.to_owned(),
        bodies.clone(),
        rate,
        secs + warmup,
    ))?;
    let measured: Vec<&Sample> = samples.iter().skip((rate * warmup) as usize).collect();
    let mut ok: Vec<f64> = measured
        .iter()
        .filter(|s| s.ok)
        .map(|s| s.latency.as_secs_f64() * 1e3)
        .collect();
    ok.sort_by(f64::total_cmp);
    let errors = measured.iter().filter(|s| !s.ok).count();
    let patched = measured.iter().filter(|s| s.patched).count();
    let mut sizes: Vec<usize> = bodies.iter().map(|(_, b)| b.len()).collect();
    sizes.sort_unstable();
    let pct = |p: f64| -> f64 {
        if ok.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * ok.len() as f64).ceil() as usize;
        ok[rank.clamp(1, ok.len()) - 1]
    };
    println!(
        "{}",
        json!({
            "requests": measured.len(),
            "errors": errors,
            "patched": patched,
            "p50_ms": pct(50.0),
            "p99_ms": pct(99.0),
            "p999_ms": pct(99.9),
            "max_ms": ok.last().copied().unwrap_or(f64::NAN),
            "payload_bytes_min": sizes[0],
            "payload_bytes_median": sizes[sizes.len() / 2],
            "payload_bytes_max": sizes[sizes.len() - 1],
        })
    );
    Ok(())
}

async fn drive(
    client: reqwest::Client,
    url: String,
    bodies: Arc<Vec<(String, Bytes)>>,
    rate: u32,
    secs: u32,
) -> Result<Vec<Sample>> {
    let period = Duration::from_secs_f64(1.0 / f64::from(rate));
    let total = rate as usize * secs as usize;
    let start = Instant::now();
    let mut handles = Vec::with_capacity(total);
    for i in 0..total {
        let scheduled = start + period * u32::try_from(i).unwrap_or(u32::MAX);
        tokio::time::sleep_until(scheduled.into()).await;
        let (uid, body) = bodies[i % bodies.len()].clone();
        let request = client
            .post(&url)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.clone());
        handles.push(tokio::spawn(async move {
            let result = async {
                let resp = request.send().await.ok()?;
                if !resp.status().is_success() {
                    return None;
                }
                resp.bytes().await.ok()
            }
            .await;
            let latency = scheduled.elapsed();
            let (ok, patched) = match result {
                Some(answer) => check(&uid, &body, &answer),
                None => (false, false),
            };
            Sample {
                latency,
                ok,
                patched,
            }
        }));
    }
    let mut samples = Vec::with_capacity(total);
    for handle in handles {
        samples.push(handle.await?);
    }
    Ok(samples)
}

/// An echo must return the body; the webhook an allowed response for the same uid.
fn check(uid: &str, sent: &[u8], answer: &[u8]) -> (bool, bool) {
    if answer == sent {
        return (true, false);
    }
    let Ok(review) = serde_json::from_slice::<Value>(answer) else {
        return (false, false);
    };
    let response = &review["response"];
    let ok = response["uid"] == uid && response["allowed"] == true;
    (ok, ok && response["patch"].is_string())
}
