//! The cluster's DNS: CoreDNS (built here by `cargo xtask setup node` with only the plugins a
//! cluster needs) as a Deployment in `kube-system` behind the `kube-dns` Service at the address
//! the kubelet gives pods (10.0.0.10). It answers `*.cluster.local` from the API server and
//! nothing else (no upstream: nothing outside is reachable).

use serde_json::{json, Value};

/// The CoreDNS release the setup builds (a main package importing its plugins).
pub const COREDNS_VERSION: &str = "v1.15.0";
/// Its image, written by `cluster up` (built here, never pulled).
pub const COREDNS_IMAGE: &str = "nsight.local/coredns:v1.15.0";
/// The plugins compiled in, in CoreDNS's directive order.
pub const COREDNS_PLUGINS: [&str; 7] = [
    "log",
    "errors",
    "health",
    "ready",
    "kubernetes",
    "cache",
    "loadbalance",
];

/// The unprivileged port CoreDNS listens on (the Service maps 53 to it).
const PORT: u16 = 1053;

/// `main.go` of the CoreDNS build: its plugins registered in [`COREDNS_PLUGINS`] order.
pub fn main_go() -> String {
    let imports: String = COREDNS_PLUGINS
        .iter()
        .map(|p| format!("\t_ \"github.com/coredns/coredns/plugin/{p}\"\n"))
        .collect();
    let directives: Vec<String> = COREDNS_PLUGINS.iter().map(|p| format!("\"{p}\"")).collect();
    format!(
        "package main\n\nimport (\n\t\"github.com/coredns/coredns/core/dnsserver\"\n\t\"github.com/coredns/coredns/coremain\"\n\n{imports})\n\nfunc init() {{\n\tdnsserver.Directives = []string{{{}}}\n}}\n\nfunc main() {{ coremain.Run() }}\n",
        directives.join(", ")
    )
}

fn corefile() -> String {
    format!(
        ".:{PORT} {{\n    errors\n    health :8080\n    ready :8181\n    kubernetes cluster.local in-addr.arpa ip6.arpa {{\n        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n    }}\n    cache 30\n    loadbalance\n}}\n"
    )
}

/// The objects, in creation order, with their collection paths.
pub fn manifests(dns_ip: &str) -> Vec<(&'static str, Value)> {
    let labels = json!({"k8s-app": "kube-dns"});
    vec![
        (
            "/api/v1/namespaces/kube-system/serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", "namespace": "kube-system"}}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "system:coredns"},
                "rules": [
                    {"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"], "verbs": ["list", "watch"]},
                    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
                ],
            }),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "system:coredns"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
                "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": "kube-system"}],
            }),
        ),
        (
            "/api/v1/namespaces/kube-system/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "coredns", "namespace": "kube-system"}, "data": {"Corefile": corefile()}}),
        ),
        (
            "/apis/apps/v1/namespaces/kube-system/deployments",
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "coredns", "namespace": "kube-system", "labels": labels},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {
                            "serviceAccountName": "coredns",
                            "dnsPolicy": "Default",
                            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532},
                            "containers": [{
                                "name": "coredns",
                                "image": COREDNS_IMAGE,
                                "imagePullPolicy": "Never",
                                "args": ["-conf", "/etc/coredns/Corefile"],
                                "ports": [
                                    {"name": "dns", "containerPort": PORT, "protocol": "UDP"},
                                    {"name": "dns-tcp", "containerPort": PORT, "protocol": "TCP"},
                                ],
                                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 1},
                                "livenessProbe": {"httpGet": {"path": "/health", "port": 8080}},
                                "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": true}],
                                "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}},
                            }],
                            "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                        },
                    },
                },
            }),
        ),
        (
            "/api/v1/namespaces/kube-system/services",
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
                "spec": {
                    "selector": labels,
                    "clusterIP": dns_ip,
                    "ports": [
                        {"name": "dns", "port": 53, "targetPort": PORT, "protocol": "UDP"},
                        {"name": "dns-tcp", "port": 53, "targetPort": PORT, "protocol": "TCP"},
                    ],
                },
            }),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_registers_every_plugin_the_corefile_uses() {
        let main = main_go();
        for p in COREDNS_PLUGINS {
            assert!(main.contains(&format!("coredns/plugin/{p}\"")), "{main}");
        }
        for directive in [
            "errors",
            "health",
            "ready",
            "kubernetes",
            "cache",
            "loadbalance",
        ] {
            assert!(corefile().contains(directive), "{directive}");
        }
        let svc = &manifests("10.0.0.10")[5].1;
        assert_eq!(svc["spec"]["clusterIP"], "10.0.0.10");
    }
}
