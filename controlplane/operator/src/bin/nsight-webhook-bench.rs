//! `nsight-webhook-bench`: the release-built half of `cargo xtask bench webhook`.
//!
//! - `certs DIR`: a CA and a serving certificate for 127.0.0.1 (`ca.crt`, `tls.crt`, `tls.key`).
//! - `echo --listen A --cert C --key K [--worker-threads N]`: the reference, the webhook's own
//!   HTTPS shell (`server::runtime`, `server::serve`, rustls, axum, HTTP/1.1) whose `POST /mutate` answers with the request
//!   body unchanged: everything the webhook does except reading the review and deciding.
//! - `load --url U --ca C --payloads F --rate R --secs S`: an open-loop client (keep-alive
//!   HTTP/1.1 over TLS, like the API server's webhook client) sending the AdmissionReviews of
//!   `F` (a JSON array) round-robin at `R` per second, paced by a plain thread (microsecond
//!   sleeps, not tokio's millisecond timer); latency counts from each request's scheduled
//!   time, so neither a slow server nor a late client can hide queueing. Prints one JSON line
//!   of results, with how late the pacing thread sent (`send_lag_*`, part of the latency).
//! - `profile --payloads F --world W --rounds N`: the webhook's own work per review, in
//!   process and without the network: the whole `admission::review` plus the answer's
//!   serialization, and its stages (parse the review into a typed Pod, decide, CEL, patch).
//!   Prints one JSON line (microseconds).

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
        /// The webhook's `--worker-threads` (the same runtime as the webhook's).
        #[arg(long, default_value_t = 1)]
        worker_threads: usize,
    },
    /// Send AdmissionReviews at a fixed rate and report latency.
    Load(LoadArgs),
    /// Time the webhook's work per review in process (no network).
    Profile {
        #[arg(long)]
        payloads: PathBuf,
        /// The `--world` file the webhook is run with.
        #[arg(long)]
        world: PathBuf,
        /// Passes over all payloads (the first one is not measured).
        #[arg(long, default_value_t = 20)]
        rounds: u32,
    },
}

#[derive(clap::Args)]
struct LoadArgs {
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
    /// Worker threads of the client's runtime (besides the pacing thread).
    #[arg(long, default_value_t = 1)]
    client_threads: usize,
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Certs { dir } => certs(&dir),
        Command::Echo {
            listen,
            cert,
            key,
            worker_threads,
        } => echo(listen, &cert, &key, worker_threads),
        Command::Load(args) => load(&args),
        Command::Profile {
            payloads,
            world,
            rounds,
        } => profile(&payloads, &world, rounds),
    }
}

/// The parts of a review the stages need.
#[derive(serde::Deserialize)]
struct ReviewPod {
    request: RequestPod,
}

#[derive(serde::Deserialize)]
struct RequestPod {
    namespace: String,
    object: k8s_openapi::api::core::v1::Pod,
}

fn profile(payloads: &Path, world: &Path, rounds: u32) -> Result<()> {
    use nsight_operator::{
        admission::{review, StaticWorld, World},
        decide::{decide_in, Decision},
        otlp_sidecar,
        patch::{patch, report_storage},
        settings::Settings,
    };
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("cannot read {}", p.display()));
    let world: StaticWorld =
        serde_json::from_slice(&read(world)?).context("--world is not a world file")?;
    let reviews: Vec<Value> =
        serde_json::from_slice(&read(payloads)?).context("--payloads is not a JSON array")?;
    let bodies: Vec<Vec<u8>> = reviews
        .iter()
        .map(serde_json::to_vec)
        .collect::<Result<_, _>>()?;
    if bodies.is_empty() || rounds < 2 {
        bail!("need at least one payload and --rounds >= 2");
    }
    let settings = Settings {
        coordinator_url: Some("https://nsight-coordinator.research.svc:8443".into()),
        ..Settings::default()
    };
    let has_cel = |ns: &str| {
        world.view(ns).configs.iter().any(|c| {
            c.spec
                .injection_rules
                .iter()
                .any(|r| r.cel_expression.is_some())
        })
    };
    let us = |t: Instant| t.elapsed().as_secs_f64() * 1e6;
    let (mut total, mut parse, mut decide, mut cel, mut patching, mut answer) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for round in 0..rounds {
        for body in &bodies {
            let t = Instant::now();
            let out = review(body, &world, &settings)?;
            let t_answer = Instant::now();
            let bytes = serde_json::to_vec(&out)?;
            let answer_us = us(t_answer);
            let total_us = us(t);
            std::hint::black_box(bytes);

            let t = Instant::now();
            let input: ReviewPod = serde_json::from_slice(body)?;
            let parse_us = us(t);
            let mut pod = input.request.object;
            pod.metadata.namespace = Some(input.request.namespace.clone());
            let t = Instant::now();
            let view = world.view(&input.request.namespace);
            let decision = decide_in(&pod, None, &view, &settings.default_tool_config);
            let decide_us = us(t);
            let patch_us = match &decision {
                Decision::Inject { tool, source } => {
                    let t = Instant::now();
                    let storage =
                        report_storage(tool, &view.storage, view.cluster_storage.as_ref());
                    let mirroring =
                        otlp_sidecar::choose(tool, &view.otlp_proxies, settings.otlp_xds.as_ref());
                    let ops = patch(&pod, tool, source, &settings, &storage, &mirroring);
                    let bytes = serde_json::to_vec(&ops)?;
                    std::hint::black_box(base64::Engine::encode(
                        &base64::engine::general_purpose::STANDARD,
                        bytes,
                    ));
                    Some(us(t))
                }
                Decision::Skip(_) => None,
            };
            if round == 0 {
                continue;
            }
            total.push(total_us);
            answer.push(answer_us);
            parse.push(parse_us);
            if has_cel(&input.request.namespace) {
                cel.push(decide_us);
            } else {
                decide.push(decide_us);
            }
            patching.extend(patch_us);
        }
    }
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        json!({"n": v.len(), "p50_us": nearest_rank(v, 50.0), "p99_us": nearest_rank(v, 99.0),
               "mean_us": v.iter().sum::<f64>() / v.len().max(1) as f64})
    };
    println!(
        "{}",
        json!({
            "review_and_answer": stats(&mut total),
            "parse_typed_pod": stats(&mut parse),
            "decide_no_cel": stats(&mut decide),
            "decide_with_cel_rule": stats(&mut cel),
            "patch": stats(&mut patching),
            "serialize_answer": stats(&mut answer),
        })
    );
    Ok(())
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

fn echo(listen: SocketAddr, cert: &Path, key: &Path, workers: usize) -> Result<()> {
    let tls = nsight_operator::server::tls_config(cert, key)?;
    let runtime = nsight_operator::server::runtime(workers)?;
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

fn load(args: &LoadArgs) -> Result<()> {
    let (rate, warmup) = (args.rate, args.warmup_secs);
    if rate == 0 || args.secs == 0 {
        bail!("--rate and --secs must be positive");
    }
    let read = |p: &Path| std::fs::read(p).with_context(|| format!("cannot read {}", p.display()));
    let ca = read(&args.ca)?;
    let reviews: Vec<Value> = serde_json::from_slice(&read(&args.payloads)?)
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
    // HTTP/1.1 with a keep-alive pool, like kube-apiserver's client for a Service-backed
    // webhook (it forces http/1.1 in ALPN there since Kubernetes 1.16, kubernetes#82090).
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca)?)
        .http1_only()
        .pool_max_idle_per_host(256)
        .timeout(Duration::from_secs(10))
        .build()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads.max(1))
        .enable_all()
        .build()?;
    let samples = drive(
        &runtime,
        &client,
        &args.url,
        &bodies,
        rate,
        args.secs + warmup,
    )?;
    let measured: Vec<&Sample> = samples.iter().skip((rate * warmup) as usize).collect();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut ok: Vec<f64> = measured
        .iter()
        .filter(|s| s.ok)
        .map(|s| ms(s.latency))
        .collect();
    ok.sort_by(f64::total_cmp);
    let mut lag: Vec<f64> = measured.iter().map(|s| ms(s.lag)).collect();
    lag.sort_by(f64::total_cmp);
    let errors = measured.iter().filter(|s| !s.ok).count();
    let patched = measured.iter().filter(|s| s.patched).count();
    let mut sizes: Vec<usize> = bodies.iter().map(|(_, b)| b.len()).collect();
    sizes.sort_unstable();
    println!(
        "{}",
        json!({
            "requests": measured.len(),
            "errors": errors,
            "patched": patched,
            "p50_ms": nearest_rank(&ok, 50.0),
            "p99_ms": nearest_rank(&ok, 99.0),
            "p999_ms": nearest_rank(&ok, 99.9),
            "max_ms": ok.last().copied().unwrap_or(f64::NAN),
            "send_lag_p50_ms": nearest_rank(&lag, 50.0),
            "send_lag_p99_ms": nearest_rank(&lag, 99.0),
            "payload_bytes_min": sizes[0],
            "payload_bytes_median": sizes[sizes.len() / 2],
            "payload_bytes_max": sizes[sizes.len() - 1],
        })
    );
    Ok(())
}

/// The `p`-th percentile (nearest rank) of ascending `sorted`; NaN when empty.
fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// What one request found.
struct Sample {
    /// From the scheduled send time to the whole answer read.
    latency: Duration,
    /// How late the pacing thread handed the request over (part of `latency`).
    lag: Duration,
    ok: bool,
    patched: bool,
}

/// Sends `rate * secs` requests, request `i` at `start + i / rate`, and waits for all answers.
///
/// Pacing runs on this (a plain) thread with `std::thread::sleep`, which wakes within tens of
/// microseconds: tokio's timer rounds every deadline up to the next millisecond tick, which
/// made each request leave up to 1-2 ms after its scheduled time and counted that delay as
/// server latency, for the webhook and the echo alike. The requests run on `runtime`.
fn drive(
    runtime: &tokio::runtime::Runtime,
    client: &reqwest::Client,
    url: &str,
    bodies: &Arc<Vec<(String, Bytes)>>,
    rate: u32,
    secs: u32,
) -> Result<Vec<Sample>> {
    let period = Duration::from_secs_f64(1.0 / f64::from(rate));
    let total = rate as usize * secs as usize;
    // A little ahead, so the first request is not late by the setup below.
    let start = Instant::now() + Duration::from_millis(20);
    let mut handles = Vec::with_capacity(total);
    for i in 0..total {
        let scheduled = start + period * u32::try_from(i).unwrap_or(u32::MAX);
        if let Some(wait) = scheduled.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let lag = scheduled.elapsed();
        let (uid, body) = bodies[i % bodies.len()].clone();
        let request = client
            .post(url)
            .header(header::CONTENT_TYPE, "application/json")
            .body(body.clone());
        handles.push(runtime.spawn(async move {
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
                lag,
                ok,
                patched,
            }
        }));
    }
    runtime.block_on(async {
        let mut samples = Vec::with_capacity(total);
        for handle in handles {
            samples.push(handle.await?);
        }
        Ok(samples)
    })
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
