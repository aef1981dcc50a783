//! `cargo xtask bench operator`: the manager (`nsight-operator manager`, release build) against
//! the real kube-apiserver + etcd of the e2e harness, with 1,000 NsightOperatorProfileConfigs
//! and 200 NsightGateways spread over 20 namespaces.
//!
//! ```text
//! Kube::start + CRDs -> manager (no leader election, KUBECONFIG = admin token)
//!   idle RSS (the reference: the same process with nothing to reconcile)
//!   create 1,000 profile configs + 200 gateways -> every gateway Reconciled=True (convergence)
//!   settle 10 s -> steady-state RSS, reconciles during the settle (0 = no loop)
//!   reconcile durations: the manager's debug line `reconcile timing ... took_us=N`, per reconcile
//! ```
//!
//! No controller-manager runs, so the gateways' Deployments never become ready (`Ready=False`);
//! the reconcile work (render, server-side apply of 4 objects, prune, status) is all done.

use std::{net::SocketAddr, process::Command, time::Duration, time::Instant};

use anyhow::{bail, Context, Result};
use nsight_e2e::{free_port, http, kube::Kube, process::Running, wait_for, wait_for_tcp};
use serde_json::{json, Value};

use crate::{
    bench_webhook::{build_release, percentile, rss_kb},
    paths::Layout,
};

const NAMESPACES: usize = 20;
const CONFIGS: usize = 1_000;
const GATEWAYS: usize = 200;

pub fn operator(layout: &Layout) -> Result<()> {
    let release = build_release(layout)?;
    let kube = Kube::start();
    kube.install_crds(
        nsight_api::crds::all()
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<Vec<_>, _>>()?,
    );
    for n in 0..NAMESPACES {
        kube.create(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns(n)}}),
        );
    }
    let port = free_port();
    let metrics: SocketAddr = ([127, 0, 0, 1], port).into();
    let log = kube.kubeconfig().with_file_name("manager.log");
    let mut cmd = Command::new(release.join("nsight-operator"));
    cmd.arg("manager")
        .arg(format!("--metrics-addr={metrics}"))
        // Node settings are not what this measures (and the harness has no operator namespace).
        .arg("--machine-config=null")
        .env("KUBECONFIG", kube.kubeconfig())
        .env("NO_COLOR", "1")
        .env(
            "NSIGHT_OPERATOR_LOG",
            "warn,nsight_operator::controller=debug",
        );
    let manager = Running::spawn("manager", cmd, &log);
    if !wait_for_tcp(metrics, Duration::from_secs(30)) {
        bail!("the manager did not serve {metrics}; see {}", log.display());
    }
    std::thread::sleep(Duration::from_secs(3));
    let idle_kb = rss_kb(manager.pid());

    let started = Instant::now();
    for i in 0..CONFIGS {
        let n = i % NAMESPACES;
        kube.create(
            &format!(
                "/apis/nvidia.com/v1/namespaces/{}/nsightoperatorprofileconfigs",
                ns(n)
            ),
            &profile_config(i),
        );
    }
    for i in 0..GATEWAYS {
        let n = i % NAMESPACES;
        kube.create(
            &format!(
                "/apis/nvidia.com/v1alpha1/namespaces/{}/nsightgateways",
                ns(n)
            ),
            &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightGateway",
                    "metadata": {"name": format!("gateway-{i}")},
                    "spec": {"port": 8080 + (i % 10), "service": {"type": "ClusterIP"}}}),
        );
    }
    let created = started.elapsed();
    let converged = wait_for(Duration::from_secs(600), || {
        (reconciled_gateways(&kube) == GATEWAYS).then(Instant::now)
    })
    .with_context(|| {
        format!(
            "only {} of {GATEWAYS} gateways reconciled in 10 min; see {}",
            reconciled_gateways(&kube),
            log.display()
        )
    })?;
    let converge = converged - started;

    std::thread::sleep(Duration::from_secs(5));
    let before = total_reconciles(metrics)?;
    let mut rss = Vec::new();
    for _ in 0..10 {
        std::thread::sleep(Duration::from_secs(1));
        rss.push(rss_kb(manager.pid()) as f64 / 1024.0);
    }
    let settle_reconciles = total_reconciles(metrics)? - before;
    let hwm_kb = hwm_kb(manager.pid());
    drop(manager);

    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let mut gateway_ms = timings(&text, "NsightGateway");
    gateway_ms.sort_by(f64::total_cmp);
    if gateway_ms.len() < GATEWAYS {
        bail!(
            "only {} reconcile timings in {}: was the debug line removed?",
            gateway_ms.len(),
            log.display()
        );
    }
    let deployments = kube.request("GET", "/apis/apps/v1/deployments", None).1["items"]
        .as_array()
        .map_or(0, Vec::len);

    let steady = rss.iter().sum::<f64>() / rss.len() as f64;
    println!(
        "\noperator benchmark: {CONFIGS} NsightOperatorProfileConfigs + {GATEWAYS} NsightGateways \
         in {NAMESPACES} namespaces, real kube-apiserver + etcd on loopback, 2 shared cores"
    );
    println!(
        "objects created in {:.1} s; all {GATEWAYS} gateways Reconciled=True {:.1} s after the \
         first create; {deployments} Deployments",
        created.as_secs_f64(),
        converge.as_secs_f64()
    );
    println!(
        "NsightGateway reconcile ({} reconciles): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        gateway_ms.len(),
        percentile(&gateway_ms, 50.0),
        percentile(&gateway_ms, 99.0),
        gateway_ms.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "manager RSS: idle (reference, no objects) {:.1} MB; steady state {steady:.1} MB \
         (10 samples, {:.1}-{:.1}); peak {:.1} MB",
        idle_kb as f64 / 1024.0,
        rss.iter().copied().fold(f64::INFINITY, f64::min),
        rss.iter().copied().fold(0.0, f64::max),
        hwm_kb as f64 / 1024.0
    );
    println!("reconciles during the 10 s settle: {settle_reconciles} (0 = no reconcile loop)");
    Ok(())
}

fn ns(n: usize) -> String {
    format!("bench-{n:02}")
}

/// A profile config like the user guide's: two tool configs and two injection rules.
fn profile_config(i: usize) -> Value {
    json!({
        "apiVersion": "nvidia.com/v1", "kind": "NsightOperatorProfileConfig",
        "metadata": {"name": format!("profile-{i}")},
        "spec": {
            "nsightToolConfigs": [
                {"name": "cuda-trace", "nsightToolArgs": "-t cuda,nvtx,osrt --cuda-memory-usage=true",
                 "injectionIncludePatterns": [".*python.*"], "injectionExcludePatterns": [".*pip.*"],
                 "env": [{"name": "NSYS_NVTX_PROFILER_REGISTER_ONLY", "value": "0"}]},
                {"name": "light", "nsightToolArgs": "-t nvtx --sample=none"}
            ],
            "injectionRules": [
                {"name": "trainers", "nsightToolConfig": "cuda-trace",
                 "labelSelector": {"matchLabels": {"app": format!("trainer-{i}")}}},
                {"name": "gpu-jobs", "nsightToolConfig": "light",
                 "celExpression": "object.metadata.name.startsWith('gpu-')"}
            ]
        }
    })
}

fn reconciled_gateways(kube: &Kube) -> usize {
    let (_, list) = kube.request("GET", "/apis/nvidia.com/v1alpha1/nsightgateways", None);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| {
            g["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Reconciled" && c["status"] == "True")
        })
        .count()
}

fn total_reconciles(metrics: SocketAddr) -> Result<u64> {
    let r = http::get(metrics, "/metrics", &[])?;
    if r.status != 200 {
        bail!("GET /metrics: {}", r.status);
    }
    Ok(r.body
        .lines()
        .filter(|l| l.starts_with("nsight_operator_reconciles_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum())
}

/// Milliseconds of every `reconcile timing` line of `kind` in the manager's log.
fn timings(log: &str, kind: &str) -> Vec<f64> {
    log.lines()
        .filter(|l| l.contains("reconcile timing") && l.contains(kind))
        .filter_map(|l| {
            let rest = &l[l.find("took_us=")? + "took_us=".len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            Some(digits.parse::<f64>().ok()? / 1e3)
        })
        .collect()
}

fn hwm_kb(pid: u32) -> u64 {
    crate::bench_webhook::proc_status_kb(pid, "VmHWM:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_are_read_from_the_debug_lines() {
        let log = "2026-11-22T04:00:00Z DEBUG nsight_operator::controller: reconcile timing kind=\"NsightGateway\" took_us=1234 ok=true\n\
                   2026-11-22T04:00:00Z DEBUG nsight_operator::controller: reconcile timing kind=\"NsightCoordinator\" took_us=9 ok=true\n\
                   noise";
        assert_eq!(timings(log, "NsightGateway"), vec![1.234]);
    }
}
