//! What `autoconfigure` concludes from the cluster's objects (pure: the shell in `mod.rs` reads
//! them with the user's kubeconfig):
//!
//! ```text
//! Service type  ClusterIP    -> http(s)://localhost:<8888>, port-forward 8888 and 9000
//!               LoadBalancer -> http(s)://<ingress ip|hostname>:<port>
//!               NodePort     -> http(s)://<a node's InternalIP>:<nodePort>
//! NsightGateway tlsSecretRef -> https, the TLS Secret's ca.crt trusted (when it has one)
//!               apikey       -> the key (inline, or its Secret's key, default `api-key`)
//!               oauth2       -> issuer + client ID for `login` (code flow)
//!               jwt only     -> no credentials; the note says how to get a token
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use nsight_api::NsightGateway;

use crate::config::ForwardedPort;

/// The gateway's HTTP port when the Service does not say.
pub const GATEWAY_PORT: u16 = 8888;
/// The storage proxy's port (fixed by the gateway).
pub const STORAGE_PORT: u16 = 9000;
/// `keySecretRef` without `key`: the operator's default key.
pub const DEFAULT_API_KEY_KEY: &str = "api-key";

/// What the CLI is configured with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    pub gateway_url: String,
    pub auth: FoundAuth,
    /// PEM of the CA that signed the gateway's certificate.
    pub ca_pem: Option<String>,
    /// ClusterIP: forward these loopback ports.
    pub port_forward: Option<Vec<ForwardedPort>>,
    /// Where the storage proxy is reached (download URLs are signed for it).
    pub storage_url: String,
    /// Things the user should know (printed).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FoundAuth {
    None,
    ApiKey(String),
    OAuth2 { issuer: String, client_id: String },
}

/// Why nothing usable was found; messages say what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoverError {
    #[error("Service {0} has type {1}; autoconfigure handles ClusterIP, NodePort and LoadBalancer (use `nsight-cloud configure --gw URL`)")]
    ServiceType(String, String),
    #[error("the LoadBalancer Service {0} has no external address yet; wait for it (kubectl get svc {0} -w) and run autoconfigure again")]
    NoLoadBalancerAddress(String),
    #[error("the NodePort Service {0} has no node port for {1}")]
    NoNodePort(String, u16),
    #[error("no node address for the NodePort Service (cannot list nodes); use `nsight-cloud configure --gw http://<node>:<nodePort>`")]
    NoNodeAddress,
    #[error("the gateway uses an API key from Secret {0}, which has no key {1:?}")]
    MissingKey(String, String),
    #[error("cannot read Secret {0} ({1}); ask your namespace admin for the credentials and use `nsight-cloud configure`")]
    SecretUnreadable(String, String),
}

/// The Secrets [`discover`] needs (their names), read by the shell beforehand.
pub fn secrets_needed(gateway: Option<&NsightGateway>) -> Vec<String> {
    let Some(spec) = gateway.map(|g| &g.spec) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    if let Some(tls) = &spec.tls_secret_ref {
        names.push(tls.name.clone());
    }
    let apikey = spec.authentication.as_ref().and_then(|a| a.apikey.as_ref());
    if let Some(r) = apikey
        .filter(|k| k.enabled && k.key.is_none())
        .and_then(|k| k.key_secret_ref.as_ref())
    {
        names.push(r.name.clone());
    }
    names
}

/// A Secret as the shell read it: its data, or why it could not be read.
pub type SecretData = Result<BTreeMap<String, String>, String>;

/// The configuration for the gateway behind `service`.
///
/// `local` is the pair of loopback ports a ClusterIP gateway is forwarded to (HTTP, storage).
pub fn discover(
    service: &Service,
    gateway: Option<&NsightGateway>,
    secrets: &BTreeMap<String, SecretData>,
    node_address: Option<&str>,
    local: (u16, u16),
) -> Result<Discovered, DiscoverError> {
    let name = service.metadata.name.clone().unwrap_or_default();
    let spec = service.spec.clone().unwrap_or_default();
    let gw = gateway.map(|g| &g.spec);
    let http_port = gw.and_then(|g| g.port).unwrap_or(GATEWAY_PORT);
    let tls = gw.and_then(|g| g.tls_secret_ref.as_ref());
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut notes = Vec::new();
    let ports = spec.ports.unwrap_or_default();
    let node_port = |port: u16| {
        ports
            .iter()
            .find(|p| p.port == i32::from(port))
            .and_then(|p| p.node_port)
    };
    let kind = spec.type_.unwrap_or_else(|| "ClusterIP".into());
    let (host, http, storage, port_forward) = match kind.as_str() {
        "ClusterIP" => {
            let forward = vec![
                ForwardedPort {
                    local: local.0,
                    remote: http_port,
                },
                ForwardedPort {
                    local: local.1,
                    remote: STORAGE_PORT,
                },
            ];
            ("localhost".to_owned(), local.0, local.1, Some(forward))
        }
        "LoadBalancer" => {
            let ingress = service
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref())
                .and_then(|i| i.first());
            let host = ingress
                .and_then(|i| i.ip.clone().or_else(|| i.hostname.clone()))
                .ok_or_else(|| DiscoverError::NoLoadBalancerAddress(name.clone()))?;
            (host, http_port, STORAGE_PORT, None)
        }
        "NodePort" => {
            let host = node_address
                .map(str::to_owned)
                .ok_or(DiscoverError::NoNodeAddress)?;
            let http = node_port(http_port)
                .ok_or_else(|| DiscoverError::NoNodePort(name.clone(), http_port))?;
            let storage = node_port(STORAGE_PORT)
                .ok_or_else(|| DiscoverError::NoNodePort(name.clone(), STORAGE_PORT))?;
            let as_port = |p: i32| u16::try_from(p).unwrap_or_default();
            (host, as_port(http), as_port(storage), None)
        }
        other => return Err(DiscoverError::ServiceType(name, other.to_owned())),
    };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    let ca_pem = match tls {
        None => None,
        Some(r) => match secrets.get(&r.name) {
            Some(Ok(data)) => {
                let ca = data.get("ca.crt").cloned();
                if ca.is_none() {
                    notes.push(format!(
                        "the TLS Secret {} has no ca.crt: the gateway's certificate must be trusted by this machine",
                        r.name
                    ));
                }
                ca
            }
            Some(Err(e)) => {
                notes.push(format!(
                    "cannot read the TLS Secret {} ({e}); the gateway's certificate must be trusted by this machine",
                    r.name
                ));
                None
            }
            None => None,
        },
    };
    if port_forward.is_some() && tls.is_some() {
        notes.push(
            "through the port-forward the gateway is https://localhost: its certificate must name localhost"
                .into(),
        );
    }
    let auth = auth_of(gateway, secrets, &mut notes)?;
    Ok(Discovered {
        gateway_url: format!("{scheme}://{host}:{http}"),
        auth,
        ca_pem,
        port_forward,
        storage_url: format!("{scheme}://{host}:{storage}"),
        notes,
    })
}

fn auth_of(
    gateway: Option<&NsightGateway>,
    secrets: &BTreeMap<String, SecretData>,
    notes: &mut Vec<String>,
) -> Result<FoundAuth, DiscoverError> {
    let Some(auth) = gateway.and_then(|g| g.spec.authentication.as_ref()) else {
        return Ok(FoundAuth::None);
    };
    let oauth2 = auth.oauth2.as_ref().filter(|o| o.enabled);
    let jwt = auth.jwt.as_ref().filter(|j| j.enabled);
    if let Some(apikey) = auth.apikey.as_ref().filter(|k| k.enabled) {
        if oauth2.is_some() || jwt.is_some() {
            notes.push("the gateway also accepts tokens; the API key is used".into());
        }
        if let Some(key) = &apikey.key {
            return Ok(FoundAuth::ApiKey(key.clone()));
        }
        if let Some(r) = &apikey.key_secret_ref {
            let key = r.key.clone().unwrap_or_else(|| DEFAULT_API_KEY_KEY.into());
            return match secrets.get(&r.name) {
                Some(Ok(data)) => data
                    .get(&key)
                    .map(|k| FoundAuth::ApiKey(k.trim().to_owned()))
                    .ok_or(DiscoverError::MissingKey(r.name.clone(), key)),
                Some(Err(e)) => Err(DiscoverError::SecretUnreadable(r.name.clone(), e.clone())),
                None => Err(DiscoverError::SecretUnreadable(
                    r.name.clone(),
                    "not read".into(),
                )),
            };
        }
    }
    if let Some(o) = oauth2 {
        if let (Some(issuer), Some(client_id)) = (&o.issuer, &o.client_id) {
            notes.push("OAuth2: run `nsight-cloud login` next".into());
            return Ok(FoundAuth::OAuth2 {
                issuer: issuer.clone(),
                client_id: client_id.clone(),
            });
        }
    }
    if let Some(j) = jwt {
        notes.push(format!(
            "the gateway accepts JWTs from {}; configure your client with `nsight-cloud configure --gw <url> --issuer {} --clientid <client>` and `login`",
            j.issuer.as_deref().unwrap_or("its issuer"),
            j.issuer.as_deref().unwrap_or("<issuer>")
        ));
    }
    Ok(FoundAuth::None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(v: serde_json::Value) -> Service {
        serde_json::from_value(v).unwrap_or_default()
    }

    fn gateway(spec: serde_json::Value) -> NsightGateway {
        serde_json::from_value(json!({
            "apiVersion": "nvidia.com/v1alpha1", "kind": "NsightGateway",
            "metadata": {"name": "nsight-operator-gateway"}, "spec": spec
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn secrets(entries: &[(&str, &[(&str, &str)])]) -> BTreeMap<String, SecretData> {
        entries
            .iter()
            .map(|(name, data)| {
                let data = data
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect();
                ((*name).to_owned(), Ok(data))
            })
            .collect()
    }

    #[test]
    fn a_cluster_ip_gateway_with_tls_and_a_key_is_forwarded() {
        let svc = service(
            json!({"metadata": {"name": "gw"}, "spec": {"type": "ClusterIP",
            "ports": [{"name": "http", "port": 8888}, {"name": "storage", "port": 9000}]}}),
        );
        let gw = gateway(json!({"tlsSecretRef": {"name": "tls"},
            "authentication": {"apikey": {"enabled": true, "keySecretRef": {"name": "k", "key": "key"}}}}));
        let needed = secrets_needed(Some(&gw));
        assert_eq!(needed, ["tls", "k"]);
        let s = secrets(&[("tls", &[("ca.crt", "PEM")]), ("k", &[("key", "s3cret\n")])]);
        let d = discover(&svc, Some(&gw), &s, None, (18888, 19000)).unwrap();
        assert_eq!(d.gateway_url, "https://localhost:18888");
        assert_eq!(d.storage_url, "https://localhost:19000");
        assert_eq!(d.auth, FoundAuth::ApiKey("s3cret".into()));
        assert_eq!(d.ca_pem.as_deref(), Some("PEM"));
        assert_eq!(
            d.port_forward.unwrap(),
            [
                ForwardedPort {
                    local: 18888,
                    remote: 8888
                },
                ForwardedPort {
                    local: 19000,
                    remote: 9000
                }
            ]
        );
    }

    #[test]
    fn node_port_and_load_balancer_use_their_addresses() {
        let svc = service(
            json!({"metadata": {"name": "gw"}, "spec": {"type": "NodePort",
            "ports": [{"port": 8888, "nodePort": 31888}, {"port": 9000, "nodePort": 31900}]}}),
        );
        let d = discover(&svc, None, &BTreeMap::new(), Some("10.0.0.5"), (1, 2)).unwrap();
        assert_eq!(d.gateway_url, "http://10.0.0.5:31888");
        assert_eq!(d.storage_url, "http://10.0.0.5:31900");
        assert!(d.port_forward.is_none());
        assert_eq!(
            discover(&svc, None, &BTreeMap::new(), None, (1, 2)),
            Err(DiscoverError::NoNodeAddress)
        );
        let lb = service(
            json!({"metadata": {"name": "gw"}, "spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": {"ingress": [{"hostname": "gw.example.com"}]}}}),
        );
        let d = discover(&lb, None, &BTreeMap::new(), None, (1, 2)).unwrap();
        assert_eq!(d.gateway_url, "http://gw.example.com:8888");
        let pending =
            service(json!({"metadata": {"name": "gw"}, "spec": {"type": "LoadBalancer"}}));
        assert!(matches!(
            discover(&pending, None, &BTreeMap::new(), None, (1, 2)),
            Err(DiscoverError::NoLoadBalancerAddress(_))
        ));
    }

    #[test]
    fn oauth2_gives_login_settings_and_a_missing_key_is_named() {
        let svc = service(json!({"metadata": {"name": "gw"}, "spec": {}}));
        let gw = gateway(json!({"tlsSecretRef": {"name": "tls"},
            "authentication": {"oauth2": {"enabled": true, "issuer": "https://idp", "clientId": "cli",
                                "clientSecretRef": {"name": "o"}}}}));
        let d = discover(&svc, Some(&gw), &BTreeMap::new(), None, (1, 2)).unwrap();
        assert_eq!(
            d.auth,
            FoundAuth::OAuth2 {
                issuer: "https://idp".into(),
                client_id: "cli".into()
            }
        );
        let gw = gateway(
            json!({"authentication": {"apikey": {"enabled": true, "keySecretRef": {"name": "k"}}}}),
        );
        let s = secrets(&[("k", &[("key", "x")])]);
        assert_eq!(
            discover(&svc, Some(&gw), &s, None, (1, 2)),
            Err(DiscoverError::MissingKey("k".into(), "api-key".into()))
        );
        let mut unreadable = BTreeMap::new();
        unreadable.insert("k".to_owned(), Err("forbidden".to_owned()));
        assert!(matches!(
            discover(&svc, Some(&gw), &unreadable, None, (1, 2)),
            Err(DiscoverError::SecretUnreadable(_, _))
        ));
    }
}
