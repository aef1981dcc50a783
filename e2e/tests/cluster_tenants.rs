//! Multi-tenant on a real node: one release with `multiTenant.enabled` (auto-provisioning on,
//! the documented default in that mode) and two tenant namespaces.
//!
//! ```text
//! helm install (multiTenant) -> a labelled sample in tenant A and in tenant B
//!   each first Pod provisions its namespace: storage, coordinator, collector, OTLP proxy
//!   config, analysis, gateway (labelled nvidia.com/nsight-auto-provisioned); that first Pod
//!   was admitted before its namespace had storage, so it runs unprofiled and its annotation
//!   says why; restarted (as the guide says for Pods that predate the rules), it is profiled
//!   and its agent registers with its own namespace's coordinator
//! each tenant's admin puts an API key (a Secret of their own) on their gateway
//!   A's `autoconfigure -n A`: A's gateway shows A's agent only; a session there lists A's
//!   report; A's key at B's gateway is refused (401)
//! ```
//!
//! Needs root, `cargo xtask image all` and `cargo xtask setup helm` (CI does all three).

#![allow(
    clippy::expect_used,
    clippy::panic,
    clippy::unwrap_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::{ffi::OsStr, time::Duration};

use nsight_e2e::{cli::Cli, cluster, wait_for, TempDir};
use serde_json::{json, Value};

#[path = "support/node_release.rs"]
mod node_release;

use node_release::{b64, condition, free_ports, sample_deployment, Release};

const VALUES: &str =
    "image: {pullPolicy: Never}\nmachineConfig: null\nmultiTenant: {enabled: true}\n";
const AGENT_WAIT: Duration = Duration::from_secs(120);

/// A tenant: its namespace, its key, its CLI configuration.
struct Tenant {
    namespace: String,
    key: String,
    config: std::path::PathBuf,
}

impl Tenant {
    fn cli(&self) -> Cli<'_> {
        Cli {
            config: &self.config,
        }
    }
}

/// Stops the tenants' port-forward helpers however the test ends.
struct Helpers<'a>(&'a [Tenant]);

impl Drop for Helpers<'_> {
    fn drop(&mut self) {
        for t in self.0 {
            let _ = t.cli().run(&["port-forward", "stop"]);
        }
    }
}

#[test]
fn two_tenants_are_auto_provisioned_and_isolated() {
    let c = cluster::shared();
    let system = cluster::TestNamespace::create(&c, "nsight-mt");
    let ns_a = cluster::TestNamespace::create(&c, "tenant-a");
    let ns_b = cluster::TestNamespace::create(&c, "tenant-b");
    let _release = Release::install(
        &c,
        &format!("mt{}", std::process::id()),
        &system.name,
        VALUES,
    );
    let dir = TempDir::new("cluster-tenants");
    let tenants: Vec<Tenant> = [&ns_a, &ns_b]
        .iter()
        .enumerate()
        .map(|(i, ns)| Tenant {
            namespace: ns.name.clone(),
            key: format!("tenant-{i}-key-5d1e"),
            config: dir.path().join(format!("tenant-{i}.conf")),
        })
        .collect();
    let _helpers = Helpers(&tenants);

    // 1. A labelled sample in each namespace: its admission provisions the namespace.
    for t in &tenants {
        c.create(
            &format!("/apis/apps/v1/namespaces/{}/deployments", t.namespace),
            &sample_deployment(
                "sample",
                1,
                json!({"app": "sample", "nvidia-nsight-profile": "enabled"}),
            ),
        );
    }
    for t in &tenants {
        let ns = &t.namespace;
        for (plural, name, kind) in [
            (
                "nsightcloudstorageconfigs",
                "nsight-operator-storage",
                "BucketReady",
            ),
            ("nsightcoordinators", "nsight-operator-coordinator", "Ready"),
            ("nsightanalyses", "nsight-operator-analysis", "Ready"),
            ("nsightgateways", "nsight-operator-gateway", "Ready"),
        ] {
            let path = format!("/apis/nvidia.com/v1alpha1/namespaces/{ns}/{plural}/{name}");
            let ok = wait_for(Duration::from_secs(120), || condition(&c, &path, kind));
            assert!(
                ok.is_some(),
                "{ns}: {plural}/{name} not {kind}: {}\n{}",
                c.request("GET", &path, None).1["status"],
                c.describe_namespace(ns)
            );
            let (_, cr) = c.request("GET", &path, None);
            assert_eq!(
                cr["metadata"]["labels"]["nvidia.com/nsight-auto-provisioned"], "true",
                "{cr}"
            );
        }
        // Nothing was provisioned in the release namespace.
        let (_, none) = c.request(
            "GET",
            &format!(
                "/apis/nvidia.com/v1alpha1/namespaces/{}/nsightcoordinators",
                system.name
            ),
            None,
        );
        assert_eq!(none["items"].as_array().map(Vec::len), Some(0), "{none}");
    }

    // 2. The first Pods were admitted before their namespace had storage: unprofiled, and
    //    they say why. Restarted, they are profiled.
    for t in &tenants {
        let ns = &t.namespace;
        let pods = format!("/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dsample");
        let (_, list) = c.request("GET", &pods, None);
        let first = &list["items"][0];
        let note = first["metadata"]["annotations"]["nvidia.com/nsight-storage"]
            .as_str()
            .unwrap_or_default();
        assert!(note.starts_with("none: "), "{ns}: {note}");
        let name = first["metadata"]["name"].as_str().expect("pod name");
        let (status, _) = c.request(
            "DELETE",
            &format!("/api/v1/namespaces/{ns}/pods/{name}"),
            None,
        );
        assert_eq!(status, 200);
    }

    // 3. Each tenant's admin puts a key of their own on their gateway; each user runs
    //    autoconfigure in their namespace.
    for t in &tenants {
        let ns = &t.namespace;
        c.create(
            &format!("/api/v1/namespaces/{ns}/secrets"),
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tenant-key"},
                    "data": {"api-key": b64(&t.key)}}),
        );
        let path = format!(
            "/apis/nvidia.com/v1alpha1/namespaces/{ns}/nsightgateways/nsight-operator-gateway"
        );
        let (_, mut gateway) = c.request("GET", &path, None);
        gateway["spec"]["authentication"] =
            json!({"apikey": {"enabled": true, "keySecretRef": {"name": "tenant-key"}}});
        let (status, out) = c.request("PUT", &path, Some(&gateway));
        assert_eq!(status, 200, "{out}");
    }
    let kubeconfig = c.kubeconfig();
    let env = [("KUBECONFIG", kubeconfig.as_os_str())];
    for t in &tenants {
        let cli = t.cli();
        configure(&cli, &env, &t.namespace);
        // The key is enforced once the operator pushed the new configuration to Envoy.
        let agent = wait_for(AGENT_WAIT, || {
            let (code, out, _) = cli.run(&["--output", "json", "status"]);
            let status: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
            (code == 0 && status["agentCounts"]["connected"] == 1).then_some(status)
        })
        .unwrap_or_else(|| {
            panic!(
                "{}: no agent through the tenant's gateway: {:?}\n{}",
                t.namespace,
                cli.run(&["status"]),
                c.describe_namespace(&t.namespace)
            )
        });
        assert_eq!(
            agent["agents"][0]["info"]["identity"]["namespace"],
            t.namespace.as_str(),
            "a tenant sees its own agent only: {agent}"
        );
    }

    // 4. A's session: A's report, listed through A's gateway.
    let a = tenants[0].cli();
    a.json(&["profiler-start"]);
    std::thread::sleep(Duration::from_secs(2));
    a.json(&["profiler-stop"]);
    let listing = wait_for(Duration::from_secs(60), || {
        let (code, out, _) = a.run(&["--output", "json", "ls"]);
        let listing: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        (code == 0 && listing["reports"].as_array().is_some_and(|r| !r.is_empty()))
            .then_some(listing)
    })
    .unwrap_or_else(|| {
        panic!(
            "no report for tenant A\n{}",
            c.describe_namespace(&tenants[0].namespace)
        )
    });
    let (_, pods) = c.request(
        "GET",
        &format!(
            "/api/v1/namespaces/{}/pods?labelSelector=app%3Dsample",
            tenants[0].namespace
        ),
        None,
    );
    let a_pods: Vec<&str> = pods["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    for report in listing["reports"].as_array().into_iter().flatten() {
        let instance = report["instance"].as_str().unwrap_or_default();
        assert!(
            a_pods.contains(&instance),
            "a report of another tenant's Pod {instance} (A's: {a_pods:?}): {listing}"
        );
    }

    // 5. A's key at B's gateway is refused; B sees no session of A's.
    let b_config: Value =
        serde_json::from_str(&std::fs::read_to_string(&tenants[1].config).expect("B's config"))
            .expect("JSON config");
    let b_gateway = b_config["gateway"].as_str().expect("B's gateway URL");
    let cross_config = dir.path().join("a-at-b.conf");
    let cross = Cli {
        config: &cross_config,
    };
    cross.ok(&["configure", "--gw", b_gateway, "--apikey", &tenants[0].key]);
    let (code, _, err) = cross.run(&["status"]);
    assert_ne!(code, 0, "tenant A's key opened tenant B's gateway");
    assert!(
        err.contains("401") || err.to_lowercase().contains("unauthorized"),
        "{err}"
    );
    let b_sessions = tenants[1].cli().json(&["status"]);
    assert!(
        b_sessions["activeSession"].is_null(),
        "tenant B sees a session: {b_sessions}"
    );
}

/// `autoconfigure -n <namespace>` on free loopback ports.
fn configure(cli: &Cli<'_>, env: &[(&str, &OsStr)], namespace: &str) {
    let (http_port, storage_port) = free_ports();
    let ports = format!("{http_port},{storage_port}");
    let (code, out, err) = cli.run_env(
        &[
            "--output",
            "json",
            "autoconfigure",
            "-n",
            namespace,
            "--local-ports",
            &ports,
        ],
        env,
    );
    assert_eq!(code, 0, "autoconfigure -n {namespace}:\n{out}\n{err}");
    let summary: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(summary["auth"]["type"], "apiKey", "{summary}");
}
