//! The node's configuration files as plain text from plain data: containerd's config, the CNI
//! network, the kubelet's and kube-proxy's configurations and the kubeconfigs. No I/O; the
//! settings that these machines require are explained where they are set (see
//! `shared/design/TOOLCHAIN.md`, "A real node").

use std::path::Path;

use super::Net;

/// containerd 1.6 (config version 2): everything under `state`, cgroupfs, and the settings
/// without which no sandbox starts here.
pub fn containerd_toml(state: &Path, sandbox_image: &str) -> String {
    let s = state.display();
    format!(
        r#"version = 2
root = "{s}/containerd/root"
state = "{s}/containerd/state"
# Plugins this node does not use; skipping them keeps the log free of their load errors.
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{s}/containerd/containerd.sock"

[ttrpc]
  address = "{s}/containerd/containerd.sock.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  # The sandbox lacks CAP_SYS_RESOURCE: without this every pod sandbox fails with
  # "runc create failed: ... can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  # Network namespaces under our state dir, not /var/run/netns.
  netns_mounts_under_state_dir = true
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    discard_unpacked_layers = false

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # The kubelet uses cgroupfs too: systemd is not PID 1 here.
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{s}/cni/net.d"
"#
    )
}

/// One bridge network on our own bridge (created by `cluster up` with the node address) and
/// host-local addresses kept under `state`. No masquerading: nothing leaves the machine.
pub fn cni_conflist(state: &Path, net: &Net) -> String {
    serde_json::json!({
        "cniVersion": "0.4.0",
        "name": "nsight",
        "plugins": [{
            "type": "bridge",
            "bridge": net.bridge,
            "isGateway": true,
            "ipMasq": false,
            "hairpinMode": true,
            "ipam": {
                "type": "host-local",
                "ranges": [[{
                    "subnet": net.pod_cidr,
                    "rangeStart": net.pod_range_start,
                    "gateway": net.node_ip,
                }]],
                "routes": [{ "dst": "0.0.0.0/0" }],
                "dataDir": state.join("cni/ipam"),
            },
        }],
    })
    .to_string()
}

/// The kubelet's configuration file.
pub fn kubelet_yaml(state: &Path, net: &Net) -> String {
    let s = state.display();
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {node_ip}
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {s}/pki/ca.crt}}
authorization: {{mode: Webhook}}
tlsCertFile: {s}/pki/kubelet.crt
tlsPrivateKeyFile: {s}/pki/kubelet.key
containerRuntimeEndpoint: unix://{s}/containerd/containerd.sock
# The host is cgroup v1 (hybrid); kubelet 1.35+ refuses it unless told not to.
failCgroupV1: false
cgroupDriver: cgroupfs
# Our pods' cgroups under one root, removed by `cluster down`.
cgroupRoot: /nsight
clusterDomain: cluster.local
clusterDNS: [{dns_ip}]
resolvConf: ""
podLogsDir: {s}/pod-logs
# No iptables chains of the kubelet's own (kube-proxy runs in nftables mode).
makeIPTablesUtilChains: false
failSwapOn: false
# Images come from archives imported into containerd, never from a registry: never delete one.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {{memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}}
maxPods: 60
serializeImagePulls: false
"#,
        node_ip = net.node_ip,
        dns_ip = net.dns_ip,
    )
}

/// kube-proxy in nftables mode, leaving the conntrack sysctls alone.
pub fn kube_proxy_yaml(state: &Path, net: &Net, node: &str) -> String {
    let s = state.display();
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {{kubeconfig: {s}/kubeconfigs/kube-proxy.kubeconfig}}
hostnameOverride: {node}
clusterCIDR: {pod_cidr}
bindAddress: {node_ip}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack: {{maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
"#,
        pod_cidr = net.pod_cidr,
        node_ip = net.node_ip,
    )
}

/// A kubeconfig with a client certificate.
pub fn kubeconfig(server: &str, ca: &Path, cert: &Path, key: &Path, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: nsight\n  cluster:\n    server: {server}\n    certificate-authority: {}\nusers:\n- name: {user}\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: nsight\n  context: {{cluster: nsight, user: {user}}}\ncurrent-context: nsight\n",
        ca.display(),
        cert.display(),
        key.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_required_settings_are_in_the_files() {
        let state = Path::new("/var/cache/x/cluster");
        let net = Net::default();
        let c = containerd_toml(state, "nsight.local/pause:3.10");
        for needle in [
            "restrict_oom_score_adj = true",
            "SystemdCgroup = false",
            "netns_mounts_under_state_dir = true",
            "sandbox_image = \"nsight.local/pause:3.10\"",
            "address = \"/var/cache/x/cluster/containerd/containerd.sock\"",
        ] {
            assert!(c.contains(needle), "containerd config lacks {needle}:\n{c}");
        }
        let k = kubelet_yaml(state, &net);
        for needle in [
            "failCgroupV1: false",
            "cgroupDriver: cgroupfs",
            "makeIPTablesUtilChains: false",
            "imageGCHighThresholdPercent: 100",
            "clusterDNS: [10.0.0.10]",
        ] {
            assert!(k.contains(needle), "kubelet config lacks {needle}:\n{k}");
        }
        let cni: serde_json::Value =
            serde_json::from_str(&cni_conflist(state, &net)).expect("json");
        assert_eq!(cni["plugins"][0]["bridge"], net.bridge);
        assert_eq!(cni["plugins"][0]["ipMasq"], false);
        assert_eq!(
            cni["plugins"][0]["ipam"]["dataDir"],
            "/var/cache/x/cluster/cni/ipam"
        );
        assert!(kube_proxy_yaml(state, &net, "n").contains("mode: nftables"));
    }
}
