//! `cargo xtask bench auth`: the cost of authentication in a real Envoy, in one run.
//!
//! One Envoy (release build from the venv, static configuration, `--concurrency 2`) with
//! listeners that differ only in their auth filter:
//!
//! | case | filter |
//! |---|---|
//! | no auth | none |
//! | Wasm, unauthenticated | our Wasm filter (`plugins/auth`) checking nothing: the floor |
//! | Wasm API key | our Wasm filter, API-key mode |
//! | Wasm JWT | our Wasm filter, JWT mode, inline JWKS |
//! | native jwt_authn | Envoy's `envoy.filters.http.jwt_authn`, the same JWKS (`local_jwks`) |
//!
//! Each case twice: `proxied` (the gateway's shape: routed to an upstream, here another
//! listener of the same Envoy answering 200 itself) and `direct` (Envoy answers itself after
//! the filter, so the filter is nearly all the work: the worst case for any filter).
//! The JWT cases get the same RS256 token (the committed test-only key) with the same issuer,
//! audience and expiry checks. Our filter remembers verified tokens (`jwt::verified`);
//! jwt_authn runs with its defaults (no `jwt_cache_config`). wrk (2 threads, 32 connections)
//! runs against each listener in turn, `ROUNDS` interleaved rounds; the round with the median
//! req/s is reported with its p99. Every run first checks on each auth listener that a request
//! without credentials and one with a tampered credential are refused (401) and the right one
//! passes (200).

use std::{
    net::SocketAddr,
    process::Command,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{bail, Context, Result};
use nsight_e2e::{free_port, http, jwt::TestKeys, process::Running, wait_for_tcp, TempDir};
use serde_json::json;

use crate::paths::Layout;

const WRK: &str = "/usr/bin/wrk";
const ISS: &str = "https://idp.bench";
const AUD: &str = "nsight-cloud";
const API_KEY: &str = "bench-key-0123456789abcdef";
/// Interleaved rounds per listener.
const ROUNDS: usize = 3;
const SECONDS_PER_RUN: u32 = 6;

struct Case {
    name: &'static str,
    /// Listener name stem and its HTTP filter YAML.
    listener: &'static str,
    filter: String,
    authorization: Option<String>,
    /// Ports of the direct and proxied listeners.
    ports: [u16; 2],
}

const SHAPES: [&str; 2] = ["direct", "proxied"];

pub fn auth(layout: &Layout) -> Result<()> {
    let filter = layout.dist().join("nsight_auth_filter.wasm");
    if !filter.exists() {
        bail!("{} missing: run `cargo xtask build-wasm`", filter.display());
    }
    let wasm = filter.display().to_string();
    let keys = TestKeys::new();
    let jwks = json!({"keys": [keys.jwk("RS256", "rsa-1")]});
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let claims = json!({"iss": ISS, "aud": AUD, "sub": "bench", "iat": now, "exp": now + 3600});
    let token = keys.sign("RS256", "rsa-1", &claims);
    let api_key_config = json!({"mode": "api-key", "api_keys": [API_KEY]}).to_string();
    let jwt_config = json!({"mode": "jwt", "jwt": {"issuer": ISS, "audiences": [AUD],
        "jwks": jwks, "clock_skew_s": 60}})
    .to_string();
    let ports = || [free_port(), free_port()];
    let cases = [
        Case {
            name: "no auth",
            listener: "none",
            filter: String::new(),
            authorization: None,
            ports: ports(),
        },
        Case {
            name: "Wasm, unauthenticated",
            listener: "wasm_anon",
            filter: wasm_filter(&wasm, r#"{"mode":"unauthenticated"}"#),
            authorization: None,
            ports: ports(),
        },
        Case {
            name: "Wasm API key",
            listener: "api_key",
            filter: wasm_filter(&wasm, &api_key_config),
            authorization: Some(format!("Bearer {API_KEY}")),
            ports: ports(),
        },
        Case {
            name: "Wasm JWT (RS256)",
            listener: "wasm_jwt",
            filter: wasm_filter(&wasm, &jwt_config),
            authorization: Some(format!("Bearer {token}")),
            ports: ports(),
        },
        Case {
            name: "native jwt_authn (RS256)",
            listener: "native_jwt",
            filter: native_jwt_filter(&jwks.to_string()),
            authorization: Some(format!("Bearer {token}")),
            ports: ports(),
        },
    ];
    let (admin, backend) = (free_port(), free_port());
    let dir = TempDir::new("bench-auth");
    let config = dir.path().join("envoy.yaml");
    let mut yaml = format!(
        "admin:\n  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {admin} }} }}\n\
         static_resources:\n  listeners:\n{}",
        listener("backend", backend, "", DIRECT)
    );
    for case in &cases {
        for (shape, port) in SHAPES.iter().zip(case.ports) {
            let action = if *shape == "direct" { DIRECT } else { PROXIED };
            let name = format!("{}_{shape}", case.listener);
            yaml.push_str(&listener(&name, port, &case.filter, action));
        }
    }
    yaml.push_str(&backend_cluster(backend));
    std::fs::write(&config, yaml)?;
    let mut cmd = Command::new(layout.envoy());
    cmd.arg("-c").arg(&config).args([
        "--concurrency",
        "2",
        "--use-dynamic-base-id",
        "--log-level",
        "warn",
    ]);
    let envoy = Running::spawn("envoy", cmd, &dir.path().join("envoy.log"));
    for case in &cases {
        for port in case.ports {
            let addr = addr(port);
            if !wait_for_tcp(addr, Duration::from_secs(30)) {
                bail!("Envoy did not listen on {addr}; log:\n{}", envoy.log());
            }
            check(addr, case.authorization.as_deref())
                .with_context(|| format!("{}; Envoy log:\n{}", case.name, envoy.log()))?;
        }
    }

    let load_before = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    // results[shape][case]: (req/s, p99 ms) per round.
    let mut results: Vec<Vec<Vec<(f64, f64)>>> = vec![vec![Vec::new(); cases.len()]; 2];
    for _ in 0..ROUNDS {
        for (s, shape_results) in results.iter_mut().enumerate() {
            for (case, out) in cases.iter().zip(shape_results.iter_mut()) {
                out.push(wrk(addr(case.ports[s]), case.authorization.as_deref())?);
            }
        }
    }
    let load_after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "\nauth benchmark: wrk -t2 -c32 -d{SECONDS_PER_RUN}s per run, {ROUNDS} interleaved rounds \
         (median round), Envoy --concurrency 2, loopback, 2 cores shared"
    );
    println!(
        "  load average before {} / after {}",
        load_before.trim(),
        load_after.trim()
    );
    for (shape, shape_results) in SHAPES.iter().zip(results.iter_mut()) {
        let medians: Vec<(f64, f64)> = shape_results.iter_mut().map(|r| median(r)).collect();
        println!("  {shape}:");
        for (case, (rps, p99)) in cases.iter().zip(&medians) {
            println!(
                "    {:<26} {:>8.0} req/s  p99 {:>6.2} ms",
                case.name, rps, p99
            );
        }
        let best: Vec<f64> = shape_results
            .iter()
            .map(|r| r.iter().map(|x| x.0).fold(0.0, f64::max))
            .collect();
        let ratio = |a: usize, b: usize| medians[a].0 / medians[b].0;
        let best_ratio = |a: usize, b: usize| best[a] / best[b];
        println!(
            "    Wasm API key / no auth:       {:.2}x median, {:.2}x best rounds  (target >= 0.9)",
            ratio(2, 0),
            best_ratio(2, 0)
        );
        println!(
            "    Wasm JWT / native jwt_authn:  {:.2}x median, {:.2}x best rounds  (target >= 0.8)",
            ratio(3, 4),
            best_ratio(3, 4)
        );
        println!(
            "    rounds (req/s): {}",
            cases
                .iter()
                .zip(shape_results.iter())
                .map(|(c, r)| format!(
                    "{}: {}",
                    c.name,
                    r.iter()
                        .map(|(x, _)| format!("{x:.0}"))
                        .collect::<Vec<_>>()
                        .join("/")
                ))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    drop(envoy);
    Ok(())
}

fn addr(port: u16) -> SocketAddr {
    ([127, 0, 0, 1], port).into()
}

/// The refusals without and with a tampered credential, then the pass with the right one, so
/// the figures measure real checks.
fn check(a: SocketAddr, authorization: Option<&str>) -> Result<()> {
    let ok = match authorization {
        None => http::get(a, "/", &[])?,
        Some(auth) => {
            let refused = http::get(a, "/", &[])?;
            if refused.status != 401 {
                bail!("a request without credentials got {}", refused.status);
            }
            let forged = format!("{}x", &auth[..auth.len() - 2]);
            let bad = http::get(a, "/", &[("Authorization", forged.as_str())])?;
            if bad.status != 401 {
                bail!("a tampered credential got {}", bad.status);
            }
            http::get(a, "/", &[("Authorization", auth)])?
        }
    };
    if ok.status != 200 {
        bail!("a request with credentials got {}: {}", ok.status, ok.body);
    }
    Ok(())
}

/// Route actions: Envoy answers itself, or forwards to the backend listener.
const DIRECT: &str = r#"direct_response: { status: 200, body: { inline_string: "ok" } }"#;
const PROXIED: &str = "route: { cluster: backend }";

fn listener(name: &str, port: u16, filter: &str, action: &str) -> String {
    format!(
        r#"  - name: {name}
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: {name}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: "/" }}
                {action}
          http_filters:
{filter}          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#
    )
}

fn backend_cluster(port: u16) -> String {
    format!(
        r#"  clusters:
  - name: backend
    type: STATIC
    connect_timeout: 2s
    load_assignment:
      cluster_name: backend
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }} }}
"#
    )
}

fn wasm_filter(path: &str, config: &str) -> String {
    let config = config.replace('\'', "''");
    format!(
        r#"          - name: nsight.auth
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
              config:
                name: nsight_auth
                configuration:
                  "@type": type.googleapis.com/google.protobuf.StringValue
                  value: '{config}'
                vm_config:
                  runtime: envoy.wasm.runtime.v8
                  code: {{ local: {{ filename: "{path}" }} }}
"#
    )
}

fn native_jwt_filter(jwks: &str) -> String {
    let jwks = jwks.replace('\'', "''");
    format!(
        r#"          - name: envoy.filters.http.jwt_authn
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication
              providers:
                bench:
                  issuer: {ISS}
                  audiences: [{AUD}]
                  local_jwks: {{ inline_string: '{jwks}' }}
                  forward: true
                  clock_skew_seconds: 60
              rules:
              - match: {{ prefix: "/" }}
                requires: {{ provider_name: bench }}
"#
    )
}

/// The round with the median req/s.
fn median(rounds: &mut [(f64, f64)]) -> (f64, f64) {
    rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    rounds
        .get(rounds.len() / 2)
        .copied()
        .unwrap_or((f64::NAN, f64::NAN))
}

/// wrk for `SECONDS_PER_RUN` s (2 threads, 32 connections); (req/s, p99 ms). Non-2xx answers
/// make the run fail: a refused request is not a throughput figure.
fn wrk(addr: SocketAddr, authorization: Option<&str>) -> Result<(f64, f64)> {
    let mut c = Command::new(WRK);
    c.args(["-t2", "-c32", "--latency"])
        .arg(format!("-d{SECONDS_PER_RUN}s"));
    if let Some(a) = authorization {
        c.arg("-H").arg(format!("Authorization: {a}"));
    }
    let out = c
        .arg(format!("http://{addr}/"))
        .output()
        .with_context(|| format!("cannot run {WRK} (Debian package wrk; `cargo xtask setup`)"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("wrk failed: {text}");
    }
    if let Some(line) = text.lines().find(|l| l.contains("Non-2xx")) {
        bail!("wrk saw refused requests ({}):\n{text}", line.trim());
    }
    let rps = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .context("no Requests/sec in wrk's output")?;
    let p99 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("99%"))
        .map(str::trim)
        .and_then(wrk_ms)
        .context("no 99% latency in wrk's output")?;
    Ok((rps, p99))
}

/// `1.23ms`, `456.00us`, `1.02s` -> milliseconds.
fn wrk_ms(v: &str) -> Option<f64> {
    if let Some(us) = v.strip_suffix("us") {
        return us.parse::<f64>().ok().map(|x| x / 1000.0);
    }
    if let Some(ms) = v.strip_suffix("ms") {
        return ms.parse().ok();
    }
    v.strip_suffix('s')?.parse::<f64>().ok().map(|x| x * 1000.0)
}
