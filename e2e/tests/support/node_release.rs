//! The chart on the node, as the node tests install it: `helm` against the node's API server,
//! a release uninstalled when the test ends, CR conditions, the sample workload.
//!
//! Shared with `#[path = "support/node_release.rs"] mod node_release;`.

// Each test uses part of this module.
#![allow(dead_code)]

use std::{path::PathBuf, process::Command, time::Duration};

use nsight_e2e::{
    cluster,
    kube::{chart_dir, helm, helm_bin},
    wait_for,
};
use serde_json::{json, Value};

/// helm against the node's API server.
pub fn helm_on(kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let mut all = vec![
        "--kubeconfig",
        kubeconfig.to_str().expect("kubeconfig path"),
    ];
    all.extend_from_slice(args);
    helm(&all)
}

/// Two loopback ports free now (for `nsight-cloud port-forward`'s gateway and storage ports).
pub fn free_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("port");
    let b = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("port");
    (
        a.local_addr().expect("addr").port(),
        b.local_addr().expect("addr").port(),
    )
}

pub fn b64(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The release, uninstalled when the test ends (its cluster-scoped webhook configuration
/// would otherwise outlive the namespace).
pub struct Release {
    pub helm: PathBuf,
    pub kubeconfig: PathBuf,
    pub name: String,
    pub namespace: String,
}

impl Release {
    /// `<release>-nsight-operator`, the chart's full name.
    pub fn fullname(&self) -> String {
        format!("{}-nsight-operator", self.name)
    }

    /// `helm install` (or `upgrade`) of the chart with `values` (YAML), waiting until the
    /// operator's Deployment has `replicas` ready.
    pub fn install(c: &cluster::Cluster, name: &str, namespace: &str, values: &str) -> Self {
        let release = Release {
            helm: helm_bin(),
            kubeconfig: c.kubeconfig(),
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        };
        release.apply(c, "install", values);
        release
    }

    /// `helm <verb>` (`install`, `upgrade`) with `values`; waits for the operator's rollout.
    pub fn apply(&self, c: &cluster::Cluster, verb: &str, values: &str) {
        let file = std::env::temp_dir().join(format!(
            "nsight-values-{}-{}.yaml",
            std::process::id(),
            self.name
        ));
        std::fs::write(&file, values).expect("values");
        helm_on(
            &self.kubeconfig,
            &[
                verb,
                &self.name,
                chart_dir().to_str().expect("chart path"),
                "-n",
                &self.namespace,
                "-f",
                file.to_str().expect("values path"),
            ],
        );
        let _ = std::fs::remove_file(&file);
        let path = format!(
            "/apis/apps/v1/namespaces/{}/deployments/{}",
            self.namespace,
            self.fullname()
        );
        let rolled = wait_for(Duration::from_secs(120), || {
            let (_, d) = c.request("GET", &path, None);
            let s = &d["status"];
            let want = d["spec"]["replicas"].as_i64().unwrap_or(1);
            (s["observedGeneration"] == d["metadata"]["generation"]
                && s["updatedReplicas"].as_i64() == Some(want)
                && s["readyReplicas"].as_i64() == Some(want)
                && s["replicas"].as_i64() == Some(want))
            .then_some(())
        });
        assert!(
            rolled.is_some(),
            "operator not rolled out after helm {verb}\n{}",
            c.describe_namespace(&self.namespace)
        );
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        let _ = Command::new(&self.helm)
            .env("KUBECONFIG", &self.kubeconfig)
            .args(["uninstall", &self.name, "-n", &self.namespace, "--wait"])
            .output();
    }
}

/// The condition `kind` of the CR at `path` when it is `True`.
pub fn condition(c: &cluster::Cluster, path: &str, kind: &str) -> Option<Value> {
    let (_, cr) = c.request("GET", path, None);
    cr["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|x| x["type"] == kind && x["status"] == "True")
        .cloned()
}

/// Creates the `nvidia.com/v1alpha1` resources `(plural, body)` in `ns` and waits until each
/// `(plural, name, condition)` holds.
pub fn create_ready(
    c: &cluster::Cluster,
    ns: &str,
    crs: Vec<(&str, Value)>,
    ready: &[(&str, &str, &str)],
) {
    for (plural, mut cr) in crs {
        cr["apiVersion"] = json!("nvidia.com/v1alpha1");
        c.create(
            &format!("/apis/nvidia.com/v1alpha1/namespaces/{ns}/{plural}"),
            &cr,
        );
    }
    for (plural, name, kind) in ready {
        let path = format!("/apis/nvidia.com/v1alpha1/namespaces/{ns}/{plural}/{name}");
        let ok = wait_for(Duration::from_secs(120), || condition(c, &path, kind));
        assert!(
            ok.is_some(),
            "{plural}/{name} not {kind}: {}\n{}",
            c.request("GET", &path, None).1["status"],
            c.describe_namespace(ns)
        );
    }
}

/// A Deployment `name` of the NVTX sample with `replicas` and the Pod `labels`.
pub fn sample_deployment(name: &str, replicas: u32, labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{
                    "name": "main",
                    "image": format!("nvcr.io/nvidia/devtools/nsight-nvtx-sample:{}", env!("CARGO_PKG_VERSION")),
                    "imagePullPolicy": "Never",
                }]},
            },
        },
    })
}
