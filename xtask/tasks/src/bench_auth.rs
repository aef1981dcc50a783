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
//! | Wasm API key, full module | API-key mode in the full module (with the response hook) |
//!
//! The Wasm cases load the module the gateway loads for their mode: the lean one
//! (`nsight_auth_filter_lean.wasm`, no response-headers hook; `AuthFilter::module_path`); the
//! last case is the same API-key filter in the full module (what OAuth2 gateways load), so
//! one run compares the two.
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
//! passes (200). Each run also reports Envoy's CPU time per request (user + system time of the
//! Envoy process over the run, from `/proc/<pid>/stat`, divided by the requests wrk completed):
//! on a machine shared with other jobs, req/s moves with the load, the CPU a request costs much
//! less, so the per-request cost of a filter is the CPU difference to no auth in the same run.

use std::{
    net::SocketAddr,
    path::Path,
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
    let module = |name: &str| {
        let path = layout.dist().join(name);
        if !path.exists() {
            bail!("{} missing: run `cargo xtask build-wasm`", path.display());
        }
        Ok(path.display().to_string())
    };
    let wasm = module("nsight_auth_filter_lean.wasm")?;
    let full = module("nsight_auth_filter.wasm")?;
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
        Case {
            name: "Wasm API key, full module",
            listener: "api_key_full",
            filter: wasm_filter(&full, &api_key_config),
            authorization: Some(format!("Bearer {API_KEY}")),
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
    let ticks = clock_ticks();
    // results[shape][case]: one `Run` per round.
    let mut results: Vec<Vec<Vec<Run>>> = vec![vec![Vec::new(); cases.len()]; 2];
    for _ in 0..ROUNDS {
        for (s, shape_results) in results.iter_mut().enumerate() {
            for (case, out) in cases.iter().zip(shape_results.iter_mut()) {
                let cpu_before = cpu_ticks(envoy.pid())?;
                let (rps, p99, requests) = wrk(addr(case.ports[s]), case.authorization.as_deref())?;
                let cpu = (cpu_ticks(envoy.pid())? - cpu_before) as f64 / ticks;
                out.push(Run {
                    rps,
                    p99,
                    cpu_us: cpu * 1e6 / requests.max(1) as f64,
                });
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
        let medians: Vec<Run> = shape_results.iter_mut().map(|r| median(r)).collect();
        let cpu: Vec<f64> = shape_results.iter().map(|r| median_cpu(r)).collect();
        println!("  {shape}:");
        for ((case, m), cpu) in cases.iter().zip(&medians).zip(&cpu) {
            println!(
                "    {:<26} {:>8.0} req/s  p99 {:>6.2} ms  Envoy CPU {:>5.1} us/request",
                case.name, m.rps, m.p99, cpu
            );
        }
        println!(
            "    Envoy CPU per request over no auth (median rounds): Wasm unauthenticated \
             +{:.1} us, Wasm API key +{:.1} us (full module +{:.1} us)",
            cpu[1] - cpu[0],
            cpu[2] - cpu[0],
            cpu[5] - cpu[0]
        );
        let best: Vec<f64> = shape_results
            .iter()
            .map(|r| r.iter().map(|x| x.rps).fold(0.0, f64::max))
            .collect();
        let ratio = |a: usize, b: usize| medians[a].rps / medians[b].rps;
        let best_ratio = |a: usize, b: usize| best[a] / best[b];
        println!(
            "    Wasm API key / no auth:       {:.2}x median, {:.2}x best rounds  (target >= 0.9)",
            ratio(2, 0),
            best_ratio(2, 0)
        );
        println!(
            "    (full module) API key / no auth: {:.2}x median, {:.2}x best rounds",
            ratio(5, 0),
            best_ratio(5, 0)
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
                        .map(|x| format!("{:.0}", x.rps))
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
    let cluster = nsight_e2e::envoy::static_cluster("backend", ([127, 0, 0, 1], port).into());
    format!("  clusters:\n{cluster}")
}

fn wasm_filter(path: &str, config: &str) -> String {
    nsight_e2e::envoy::wasm_auth_filter(Path::new(path), config)
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

/// One wrk run against one listener.
#[derive(Debug, Clone, Copy)]
struct Run {
    rps: f64,
    /// p99 latency, ms.
    p99: f64,
    /// Envoy's CPU time (user + system, all threads) per completed request, microseconds.
    cpu_us: f64,
}

/// The round with the median req/s.
fn median(rounds: &mut [Run]) -> Run {
    rounds.sort_by(|a, b| a.rps.total_cmp(&b.rps));
    rounds.get(rounds.len() / 2).copied().unwrap_or(Run {
        rps: f64::NAN,
        p99: f64::NAN,
        cpu_us: f64::NAN,
    })
}

/// The median of the rounds' CPU per request (rounds taken on their own: the CPU a request
/// costs need not be lowest in the round with the median req/s).
fn median_cpu(rounds: &[Run]) -> f64 {
    let mut cpu: Vec<f64> = rounds.iter().map(|r| r.cpu_us).collect();
    cpu.sort_by(f64::total_cmp);
    cpu.get(cpu.len() / 2).copied().unwrap_or(f64::NAN)
}

/// User + system time of process `pid` (all its threads), in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("cannot read /proc/{pid}/stat (is Envoy still running?)"))?;
    parse_cpu_ticks(&stat).with_context(|| format!("unexpected /proc/{pid}/stat: {stat}"))
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line; the command name (field 2)
/// may contain spaces and parentheses, so fields are counted after its closing `)`.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux when getconf is missing).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// wrk for `SECONDS_PER_RUN` s (2 threads, 32 connections); (req/s, p99 ms, requests).
/// Non-2xx answers make the run fail: a refused request is not a throughput figure.
fn wrk(addr: SocketAddr, authorization: Option<&str>) -> Result<(f64, f64, u64)> {
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
    let (rps, p99) = crate::bench_gateway::wrk_rps_p99(&text)?;
    // "  123456 requests in 6.00s, 12.34MB read"
    let requests = text
        .lines()
        .find_map(|l| l.trim().split_once(" requests in "))
        .and_then(|(n, _)| n.trim().parse::<u64>().ok())
        .context("no request count in wrk's output")?;
    Ok((rps, p99, requests))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_counted_after_the_command_name() {
        // A command name with spaces and a parenthesis must not shift the fields.
        let stat = "4242 (envoy (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 1500 250 0 0 20 0 \
                    9 0 123 456 789";
        assert_eq!(parse_cpu_ticks(stat), Some(1750));
        assert_eq!(parse_cpu_ticks("garbage"), None);
        assert_eq!(parse_cpu_ticks("1 (x) S 1 2"), None);
    }
}
