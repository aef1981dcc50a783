//! `cargo xtask bench webhook`: the injector webhook (`nsight-operator webhook`, release build,
//! HTTPS) under 500 AdmissionReviews/s, against the named reference measured in the same run:
//! the same HTTPS shell echoing the same bodies (`nsight-webhook-bench echo`).
//!
//! The reviews are Pod CREATE reviews shaped like the API server's at the point mutating
//! webhooks run (owner reference, service-account token volume, default tolerations, GPU
//! limits, probes), in five namespaces whose NsightOperatorProfileConfigs (passed with
//! `--world`) select pods by pod label, label + namespace selector, set-based selector and CEL;
//! half the pods are selected, the other half are opted out, match no rule, or are in a
//! namespace without configs. The expected number of patched answers is checked, so a webhook
//! that stops injecting fails the benchmark.
//!
//! Before the load, `nsight-webhook-bench profile` times the webhook's own work per review in
//! process (parse, decide, CEL, patch, answer), to show what the request path costs besides
//! the HTTPS shell the echo also has.
//!
//! The webhook is measured twice: with the World from `--world` (a file), and with the World
//! from a real kube-apiserver (the e2e harness's) holding the same namespaces and configs,
//! with skip Events and auto-provisioning on, so the cluster lookup and the side effects are
//! in the figures (that row says "not measured" when `cargo xtask setup kube` has not run).
//! Both run with the webhook's default log level and runtime, as deployed.
//!
//! The client (`nsight-webhook-bench load`) is the API server's way of calling a
//! Service-backed webhook: keep-alive HTTP/1.1 over TLS, open loop, each latency from the
//! request's scheduled send time; a plain thread paces it, and how late it sent is reported
//! (`send lag`, included in the latency).
//!
//! ```text
//! nsight-webhook-bench certs -> webhook --world --cert --key    <- load (500/s, open loop)
//!                            -> webhook (KUBECONFIG: kube-apiserver with the same world)
//!                            -> echo    --cert --key (reference) <- load (same payloads)
//! ```

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::{bail, Context, Result};
use nsight_e2e::{free_port, kube::Kube, process::Running, wait_for_tcp, TempDir};
use serde_json::{json, Value};

use crate::{cmd::run as run_cmd, paths::Layout, setup_kube};

const RATE: u32 = 500;
const SECS: u32 = 20;
const PODS: usize = 200;

/// Builds `nsight-operator` and `nsight-webhook-bench` (release); the directory holding them.
pub(crate) fn build_release(layout: &Layout) -> Result<PathBuf> {
    crate::bench::build_release(layout, &["-p", "nsight-operator", "--bins"])
}

/// The `p`-th percentile (nearest rank) of ascending `sorted`.
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64)).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn webhook(layout: &Layout) -> Result<()> {
    let release = build_release(layout)?;
    let operator = release.join("nsight-operator");
    let bench = release.join("nsight-webhook-bench");
    let dir = TempDir::new("nsight-bench-webhook");
    let d = dir.path();
    run_cmd(Command::new(&bench).arg("certs").arg(d))?;
    std::fs::write(d.join("world.json"), serde_json::to_vec(&world())?)?;
    let reviews = reviews(PODS);
    let expect_patched = reviews.iter().filter(|(_, inject)| *inject).count();
    let reviews: Vec<Value> = reviews.into_iter().map(|(r, _)| r).collect();
    std::fs::write(d.join("reviews.json"), serde_json::to_vec(&reviews)?)?;
    let profile = profile(&bench, d)?;

    let port = free_port();
    let mut cmd = https_server(&operator, "webhook", port, d);
    cmd.arg("--world")
        .arg(d.join("world.json"))
        .arg("--coordinator-url=https://nsight-coordinator.research.svc:8443");
    let webhook = Running::spawn("webhook", cmd, &d.join("webhook.log"));
    let webhook_result = measure(&bench, d, port, "webhook");
    let webhook_rss = rss_kb(webhook.pid());
    drop(webhook);
    let webhook_result = webhook_result?;

    // The same webhook with its World from a real kube-apiserver (reflector caches), skip
    // Events and auto-provisioning on: the production configuration. Said, not skipped
    // silently, when `cargo xtask setup kube` has not run.
    let kube_row = if kube_installed(layout) {
        Some(kube_world_row(&operator, &bench, d, expect_patched)?)
    } else {
        None
    };

    let port = free_port();
    let cmd = https_server(&bench, "echo", port, d);
    let echo = Running::spawn("echo", cmd, &d.join("echo.log"));
    let echo_result = measure(&bench, d, port, "echo");
    drop(echo);
    let echo_result = echo_result?;

    check(&webhook_result, expect_patched)?;
    let requests = webhook_result["requests"].as_u64().unwrap_or(0) as usize;
    let patched = webhook_result["patched"].as_u64().unwrap_or(0) as usize;

    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    println!(
        "\nwebhook benchmark: {RATE} AdmissionReviews/s for {SECS} s (after 2 s warm-up), \
         {PODS} distinct Pod reviews ({}-{} bytes, median {}), loopback, 2 shared cores; \
         client: keep-alive HTTP/1.1 over TLS, paced by a thread, latency from the scheduled send",
        webhook_result["payload_bytes_min"],
        webhook_result["payload_bytes_max"],
        webhook_result["payload_bytes_median"]
    );
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>9} {:>7} {:>12}",
        "", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "errors", "send lag p99"
    );
    for (name, r) in [
        ("nsight-operator webhook", Some(&webhook_result)),
        (
            "webhook, World from kube-apiserver",
            kube_row.as_ref().map(|(r, _)| r),
        ),
        ("reference: HTTPS echo (same shell)", Some(&echo_result)),
    ] {
        let Some(r) = r else {
            println!("{name:<34} not measured: no kube-apiserver (`cargo xtask setup kube`)");
            continue;
        };
        println!(
            "{name:<34} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>7} {:>12.3}",
            f(r, "p50_ms"),
            f(r, "p99_ms"),
            f(r, "p999_ms"),
            f(r, "max_ms"),
            r["errors"],
            f(r, "send_lag_p99_ms")
        );
    }
    println!(
        "patched: {patched} of {requests} ({expect_patched} of {PODS} pods selected); \
         webhook RSS after the run: {:.1} MB",
        webhook_rss as f64 / 1024.0
    );
    if let Some((_, events)) = &kube_row {
        println!(
            "cluster World: {events} skip Events stored (series-aggregated), published off the request path"
        );
    }
    println!("\nthe webhook's own work per review, in process (no network), microseconds:");
    println!("{:<34} {:>7} {:>9} {:>9}", "", "n", "p50 us", "p99 us");
    for (key, name) in [
        ("review_and_answer", "whole review + answer JSON"),
        ("parse_typed_pod", "  parse the review (typed Pod)"),
        ("decide_no_cel", "  decide (selectors)"),
        (
            "decide_with_cel_rule",
            "  decide (namespace with a CEL rule)",
        ),
        ("patch", "  patch (+ JSON + base64)"),
        ("serialize_answer", "  answer JSON"),
    ] {
        let r = &profile[key];
        println!(
            "{name:<34} {:>7} {:>9.1} {:>9.1}",
            r["n"],
            f(r, "p50_us"),
            f(r, "p99_us")
        );
    }
    let p99 = f(&webhook_result, "p99_ms");
    println!(
        "target p99 < 2 ms: {} (p99 {p99:.3} ms; the echo's p99 {:.3} ms)",
        if p99 < 2.0 { "met" } else { "NOT met" },
        f(&echo_result, "p99_ms")
    );
    Ok(())
}

/// `program subcommand` listening on 127.0.0.1:`port` with the certificate of `d`.
fn https_server(program: &Path, subcommand: &str, port: u16, d: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.arg(subcommand)
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg("--cert")
        .arg(d.join("tls.crt"))
        .arg("--key")
        .arg(d.join("tls.key"));
    cmd
}

/// Whether the e2e harness finds kube-apiserver and etcd (as `nsight_e2e::kube` looks them up).
fn kube_installed(layout: &Layout) -> bool {
    [
        (
            "NSIGHT_KUBE_APISERVER_BIN",
            setup_kube::kube_apiserver_bin(layout),
        ),
        ("NSIGHT_ETCD_BIN", setup_kube::etcd_bin(layout)),
    ]
    .into_iter()
    .all(|(var, default)| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .unwrap_or(default)
            .exists()
    })
}

/// The webhook with its World from a kube-apiserver holding the benchmark's world: the load
/// result and how many skip Events were stored.
fn kube_world_row(
    operator: &Path,
    bench: &Path,
    d: &Path,
    expect_patched: usize,
) -> Result<(Value, usize)> {
    let kube = cluster_with_world()?;
    let port = free_port();
    let mut cmd = https_server(operator, "webhook", port, d);
    cmd.arg("--auto-provision")
        .arg("--coordinator-url=https://nsight-coordinator.{namespace}.svc:8443")
        .env("KUBECONFIG", kube.kubeconfig());
    let webhook = Running::spawn("webhook (cluster)", cmd, &d.join("webhook-kube.log"));
    let result = measure(bench, d, port, "webhook (cluster World)");
    drop(webhook);
    let (_, events) = kube.request("GET", "/apis/events.k8s.io/v1/events", None);
    let events = events["items"].as_array().map_or(0, Vec::len);
    let result = result?;
    check(&result, expect_patched)?;
    Ok((result, events))
}

/// The number of patched answers is what the rules select, and nothing failed.
fn check(result: &Value, expect_patched: usize) -> Result<()> {
    let requests = result["requests"].as_u64().unwrap_or(0) as usize;
    let patched = result["patched"].as_u64().unwrap_or(0) as usize;
    // Round-robin over the payloads: the expected share of patched answers.
    let want = requests * expect_patched / PODS;
    if patched.abs_diff(want) > PODS || result["errors"] != 0 {
        bail!(
            "the webhook answered wrongly: {patched} patched of {requests} (expected ~{want}), result {result}"
        );
    }
    Ok(())
}

/// A kube-apiserver holding the benchmark's namespaces (with their labels) and profile configs.
fn cluster_with_world() -> Result<Kube> {
    let kube = Kube::start();
    kube.install_crds(
        nsight_api::crds::all()
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<Vec<_>, _>>()?,
    );
    let world = world();
    for (name, labels) in world["namespaces"].as_object().into_iter().flatten() {
        kube.create(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": labels}}),
        );
    }
    for config in world["configs"].as_array().into_iter().flatten() {
        let ns = config["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default");
        kube.create(
            &format!("/apis/nvidia.com/v1/namespaces/{ns}/nsightoperatorprofileconfigs"),
            config,
        );
    }
    Ok(kube)
}

/// `nsight-webhook-bench profile` over the benchmark's payloads and world; its JSON result.
fn profile(bench: &Path, d: &Path) -> Result<Value> {
    let out = Command::new(bench)
        .arg("profile")
        .arg("--payloads")
        .arg(d.join("reviews.json"))
        .arg("--world")
        .arg(d.join("world.json"))
        .arg("--rounds=20")
        .output()
        .context("cannot run nsight-webhook-bench profile")?;
    if !out.status.success() {
        bail!("profile failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    serde_json::from_slice(&out.stdout).context("profile printed no JSON result")
}

/// Waits for the server, then runs the load generator against it; its JSON result.
fn measure(bench: &Path, d: &Path, port: u16, what: &str) -> Result<Value> {
    let addr = ([127, 0, 0, 1], port).into();
    if !wait_for_tcp(addr, Duration::from_secs(20)) {
        bail!(
            "the {what} server did not listen on {addr}; see {}",
            d.display()
        );
    }
    let out = Command::new(bench)
        .arg("load")
        .arg(format!("--url=https://127.0.0.1:{port}/mutate"))
        .arg("--ca")
        .arg(d.join("ca.crt"))
        .arg("--payloads")
        .arg(d.join("reviews.json"))
        .arg(format!("--rate={RATE}"))
        .arg(format!("--secs={SECS}"))
        .output()
        .context("cannot run nsight-webhook-bench load")?;
    if !out.status.success() {
        bail!(
            "load against the {what} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("load printed no JSON result")
}

pub(crate) fn rss_kb(pid: u32) -> u64 {
    proc_status_kb(pid, "VmRSS:")
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`), 0 when unreadable.
pub(crate) fn proc_status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Namespace labels and the profile configs of the benchmark's namespaces.
fn world() -> Value {
    let config = |ns: &str, name: &str, rules: Value| {
        json!({
            "apiVersion": "nvidia.com/v1", "kind": "NsightOperatorProfileConfig",
            "metadata": {"name": name, "namespace": ns},
            "spec": {
                "nsightToolConfigs": [
                    {"name": "cuda-trace", "nsightToolArgs": "-t cuda,nvtx,osrt --cuda-memory-usage=true",
                     "injectionIncludePatterns": [".*python.*", ".*train.*"],
                     "injectionExcludePatterns": [".*pip.*"],
                     "env": [{"name": "NSYS_NVTX_PROFILER_REGISTER_ONLY", "value": "0"}]},
                    {"name": "light", "nsightToolArgs": "-t nvtx --sample=none"}
                ],
                "injectionRules": rules
            }
        })
    };
    json!({
        "namespaces": {
            "research": {"team": "research"},
            "ml-train": {"team": "ml", "gpu": "true"},
            "inference": {"team": "serving"},
            "batch": {"team": "batch"}
        },
        "configs": [
            config("research", "research-profiles", json!([])),
            config("ml-train", "ml-profiles", json!([
                {"name": "trainers", "nsightToolConfig": "cuda-trace",
                 "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "trainer"}},
                 "namespaceSelector": {"matchLabels": {"gpu": "true"}}}
            ])),
            config("inference", "serving-profiles", json!([
                {"name": "canary", "nsightToolConfig": "light",
                 "labelSelector": {"matchExpressions": [
                     {"key": "track", "operator": "In", "values": ["canary"]}]}}
            ])),
            config("batch", "batch-profiles", json!([
                {"name": "big-gpu-jobs", "nsightToolConfig": "cuda-trace",
                 "celExpression": "object.metadata.name.startsWith('gpu-job-')"}
            ])),
        ]
    })
}

/// `n` Pod CREATE reviews and whether the webhook should patch each.
fn reviews(n: usize) -> Vec<(Value, bool)> {
    (0..n)
        .map(|i| {
            // (namespace, extra pod labels, name, selected)
            let (ns, labels, name, inject): (&str, Value, String, bool) = match i % 10 {
                0 => (
                    "research",
                    json!({"nvidia-nsight-profile": "enabled"}),
                    format!("notebook-{i}"),
                    true,
                ),
                1 | 2 => (
                    "ml-train",
                    json!({"app.kubernetes.io/component": "trainer"}),
                    format!("trainer-{i}"),
                    true,
                ),
                3 => (
                    "inference",
                    json!({"track": "canary"}),
                    format!("server-canary-{i}"),
                    true,
                ),
                4 => ("batch", json!({}), format!("gpu-job-{i}"), true),
                5 => (
                    "ml-train",
                    json!({"nvidia-nsight-profile": "disabled", "app.kubernetes.io/component": "trainer"}),
                    format!("trainer-optout-{i}"),
                    false,
                ),
                6 => (
                    "ml-train",
                    json!({"app.kubernetes.io/component": "data-loader"}),
                    format!("loader-{i}"),
                    false,
                ),
                7 => ("inference", json!({"track": "stable"}), format!("server-{i}"), false),
                8 => ("batch", json!({}), format!("cpu-job-{i}"), false),
                _ => ("default", json!({}), format!("web-{i}"), false),
            };
            (review(i, ns, &name, labels), inject)
        })
        .collect()
}

fn review(i: usize, ns: &str, name: &str, extra_labels: Value) -> Value {
    let mut labels = json!({
        "app.kubernetes.io/name": name.split('-').next().unwrap_or(name),
        "app.kubernetes.io/instance": format!("{ns}-release"),
        "app.kubernetes.io/managed-by": "Helm",
        "pod-template-hash": format!("7d9f8{:05x}", i),
    });
    if let (Some(l), Some(extra)) = (labels.as_object_mut(), extra_labels.as_object()) {
        l.extend(extra.clone());
    }
    let env: Vec<Value> = (0..12)
        .map(|k| json!({"name": format!("SETTING_{k}"), "value": format!("value-{k}-{i}")}))
        .chain([
            json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}),
            json!({"name": "NCCL_DEBUG", "value": "WARN"}),
        ])
        .collect();
    let main = json!({
        "name": "main",
        "image": format!("registry.example.com/{ns}/{}:v1.{}", name.split('-').next().unwrap_or(name), i % 7),
        "command": ["python", "-m", "train"],
        "args": ["--epochs=10", "--batch-size=64", format!("--run-id={i}")],
        "env": env,
        "ports": [{"name": "metrics", "containerPort": 9400, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"},
                      "requests": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"}},
        "volumeMounts": [
            {"name": "data", "mountPath": "/data"},
            {"name": "config", "mountPath": "/etc/app", "readOnly": true},
            {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}
        ],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 9400, "scheme": "HTTP"},
                          "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {"allowPrivilegeEscalation": false}
    });
    let sidecar = json!({
        "name": "log-shipper", "image": "fluent/fluent-bit:3.1",
        "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "50m", "memory": "64Mi"}},
        "volumeMounts": [{"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent"
    });
    let containers = if i.is_multiple_of(3) {
        json!([main])
    } else {
        json!([main, sidecar])
    };
    let pod = json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "namespace": ns, "generateName": format!("{name}-"),
            "labels": labels,
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-20T10:00:00Z",
                            "prometheus.io/scrape": "true"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": format!("{name}-7d9f8"), "uid": format!("3f0c1d2e-0000-4000-8000-{i:012}"),
                                 "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                               "apiVersion": "v1", "time": "2026-11-20T10:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}}}}}]
        },
        "spec": {
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": format!("{ns}-data")}},
                {"name": "config", "configMap": {"name": "app-config", "defaultMode": 420}},
                {"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
                ]}}
            ],
            "containers": containers,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "nodeSelector": {"nvidia.com/gpu.present": "true"},
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "fsGroup": 1000},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority"
        },
        "status": {}
    });
    json!({
        "kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": format!("5a1e0c3b-0000-4000-8000-{i:012}"),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": ns,
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller",
                         "uid": "9b1c0000-0000-4000-8000-000000000001",
                         "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]},
            "object": pod,
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_pods_are_selected_and_payloads_are_realistic_sizes() {
        let r = reviews(200);
        assert_eq!(r.iter().filter(|(_, inject)| *inject).count(), 100);
        let size = serde_json::to_vec(&r[1].0).map(|b| b.len()).unwrap_or(0);
        assert!((3_000..20_000).contains(&size), "{size} bytes");
    }
}
