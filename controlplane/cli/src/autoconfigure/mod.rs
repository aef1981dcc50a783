//! `nsight-cloud autoconfigure -n <namespace> [-s <service>]`: configures the CLI from the
//! cluster with the user's kubeconfig (kube-rs), as the user guide describes: the gateway URL
//! from its Service, the credentials from its NsightGateway (and the Secrets it names), the CA
//! from the TLS Secret's `ca.crt`, and for a ClusterIP Service a port-forward helper
//! ([`forward`]) that later commands reuse.
//!
//! This file is the I/O shell (API reads, the configuration file, the helper);
//! [`discover`] decides.

pub mod discover;
pub mod forward;

use std::{collections::BTreeMap, path::Path};

use k8s_openapi::api::core::v1::{Node, Secret, Service};
use kube::{api::ListParams, Api, Client};
use nsight_api::NsightGateway;

use crate::{
    config::{self, ApiKey, Auth, Config, HttpUrl, OAuth2, OAuthFlow, PortForward},
    trust::CaCert,
};
use discover::{Discovered, FoundAuth, SecretData};

/// The documented default Service.
pub const DEFAULT_SERVICE: &str = "nsight-operator-gateway";

/// What `autoconfigure` was asked.
#[derive(Debug, Clone)]
pub struct Request {
    pub namespace: String,
    pub service: String,
    /// Loopback ports for a ClusterIP gateway: (HTTP, storage).
    pub local_ports: (u16, u16),
}

/// Why autoconfigure failed; the message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum AutoconfigureError {
    #[error("cannot reach the cluster with your kubeconfig: {0}")]
    Cluster(String),
    #[error("no Service {service} in namespace {namespace}: is the chart installed there? (-s names another gateway Service)")]
    NoService { namespace: String, service: String },
    #[error(transparent)]
    Discover(#[from] discover::DiscoverError),
    #[error("the cluster's {what} is not usable: {reason}")]
    Unusable { what: String, reason: String },
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Forward(#[from] forward::ForwardError),
}

impl AutoconfigureError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Cluster(_) => 3,
            _ => 2,
        }
    }
}

/// What was configured (printed by main).
#[derive(Debug)]
pub struct Outcome {
    pub discovered: Discovered,
    pub forward_pid: Option<u32>,
}

/// A kube-rs client from the kubeconfig (`file`, else `KUBECONFIG`, `~/.kube/config`, or
/// in-cluster), in `context` when given.
pub async fn kube_client(context: Option<&str>, file: Option<&Path>) -> Result<Client, String> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    if let Some(file) = file {
        let kubeconfig = kube::config::Kubeconfig::read_from(file)
            .map_err(|e| format!("{}: {e}", file.display()))?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .map_err(|e| e.to_string())?;
        return Client::try_from(config).map_err(|e| e.to_string());
    }
    let config = match kube::Config::from_kubeconfig(&options).await {
        Ok(c) => c,
        Err(e) if context.is_none() => kube::Config::incluster().map_err(|_| e.to_string())?,
        Err(e) => return Err(e.to_string()),
    };
    Client::try_from(config).map_err(|e| e.to_string())
}

/// Runs autoconfigure and writes the configuration at `config_path`.
pub fn run(config_path: &Path, request: &Request) -> Result<Outcome, AutoconfigureError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| AutoconfigureError::Cluster(e.to_string()))?;
    let context = kube::config::Kubeconfig::read()
        .ok()
        .and_then(|k| k.current_context);
    let discovered = runtime.block_on(read_cluster(request))?;
    let previous = config::load(config_path).ok();
    let config = config_of(&discovered, request, context)?;
    // The old helper (another namespace, other ports) makes way for the new one.
    if let Some(old) = previous.as_ref().and_then(|c| c.port_forward.as_ref()) {
        forward::stop(old);
    }
    config::save(config_path, &config)?;
    let forward_pid = match &config.port_forward {
        Some(_) => {
            let pid = forward::spawn(config_path)?;
            let mut saved = config;
            if let Some(pf) = saved.port_forward.as_mut() {
                pf.pid = Some(pid);
            }
            config::save(config_path, &saved)?;
            Some(pid)
        }
        None => None,
    };
    Ok(Outcome {
        discovered,
        forward_pid,
    })
}

async fn read_cluster(request: &Request) -> Result<Discovered, AutoconfigureError> {
    let client = kube_client(None, None)
        .await
        .map_err(AutoconfigureError::Cluster)?;
    let ns = &request.namespace;
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let service = match services.get_opt(&request.service).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            return Err(AutoconfigureError::NoService {
                namespace: ns.clone(),
                service: request.service.clone(),
            })
        }
        Err(e) => return Err(AutoconfigureError::Cluster(e.to_string())),
    };
    // The operator names a gateway's Service after its NsightGateway (and owns it).
    let gateway_name = service
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "NsightGateway")
        .map_or_else(|| request.service.clone(), |o| o.name.clone());
    let gateways: Api<NsightGateway> = Api::namespaced(client.clone(), ns);
    let gateway = gateways.get_opt(&gateway_name).await.ok().flatten();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let mut found: BTreeMap<String, SecretData> = BTreeMap::new();
    for name in discover::secrets_needed(gateway.as_ref()) {
        let data = match secrets.get(&name).await {
            Ok(secret) => Ok(secret
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
                .collect()),
            Err(kube::Error::Api(e)) => Err(format!("{} {}", e.code, e.reason)),
            Err(e) => Err(e.to_string()),
        };
        found.insert(name, data);
    }
    let is_node_port = service
        .spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .is_some_and(|t| t == "NodePort");
    let node_address = if is_node_port {
        node_address(&client).await
    } else {
        None
    };
    Ok(discover::discover(
        &service,
        gateway.as_ref(),
        &found,
        node_address.as_deref(),
        request.local_ports,
    )?)
}

/// A node's InternalIP (else ExternalIP), when the user may list nodes.
async fn node_address(client: &Client) -> Option<String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes.list(&ListParams::default().limit(10)).await.ok()?;
    let addresses: Vec<_> = list
        .items
        .into_iter()
        .flat_map(|n| n.status.and_then(|s| s.addresses).unwrap_or_default())
        .collect();
    ["InternalIP", "ExternalIP"].iter().find_map(|kind| {
        addresses
            .iter()
            .find(|a| a.type_ == *kind)
            .map(|a| a.address.clone())
    })
}

fn config_of(
    d: &Discovered,
    request: &Request,
    context: Option<String>,
) -> Result<Config, AutoconfigureError> {
    let unusable = |what: &str, reason: String| AutoconfigureError::Unusable {
        what: what.to_owned(),
        reason,
    };
    let auth = match &d.auth {
        FoundAuth::None => Auth::None,
        FoundAuth::ApiKey(key) => Auth::ApiKey {
            key: ApiKey::parse(key).map_err(|e| unusable("API key", e.to_string()))?,
        },
        FoundAuth::OAuth2 { issuer, client_id } => Auth::OAuth2(OAuth2 {
            issuer: HttpUrl::parse("the gateway's OAuth2 issuer", issuer)?,
            client_id: client_id.clone(),
            flow: OAuthFlow::Code,
            authorization_endpoint: None,
            token_endpoint: None,
            scope: None,
            token: None,
        }),
    };
    let ca_cert = d
        .ca_pem
        .as_deref()
        .map(|pem| CaCert::parse("the TLS Secret's ca.crt", pem))
        .transpose()
        .map_err(|e| unusable("TLS Secret's ca.crt", e.to_string()))?;
    Ok(Config {
        version: config::FORMAT_VERSION,
        gateway: HttpUrl::parse("the gateway URL", &d.gateway_url)?,
        auth,
        ca_cert,
        port_forward: d.port_forward.clone().map(|ports| PortForward {
            namespace: request.namespace.clone(),
            service: request.service.clone(),
            context,
            kubeconfig: std::env::var_os("KUBECONFIG")
                .filter(|k| !k.is_empty() && !k.to_string_lossy().contains(':'))
                .map(std::path::PathBuf::from),
            ports,
            pid: None,
        }),
    })
}

/// Before a command talks to the gateway: a configured port-forward whose helper is gone is
/// started again (its new process ID saved).
pub fn ensure_forward(
    config_path: &Path,
    config: &mut Config,
) -> Result<(), forward::ForwardError> {
    let Some(pf) = &config.port_forward else {
        return Ok(());
    };
    if forward::is_up(pf) {
        return Ok(());
    }
    tracing::debug!("the port-forward helper is not running; starting it");
    let pid = forward::spawn(config_path)?;
    if let Some(pf) = config.port_forward.as_mut() {
        pf.pid = Some(pid);
    }
    // The pid is only for `port-forward stop`; failing to record it is not fatal.
    let _ = config::save(config_path, config);
    Ok(())
}

/// What autoconfigure prints (never a secret).
pub fn summary(
    config_path: &Path,
    request: &Request,
    outcome: &Outcome,
) -> crate::render::Rendered {
    let d = &outcome.discovered;
    let mut out = format!("configured {}\n", config_path.display());
    let via = match (&d.port_forward, outcome.forward_pid) {
        (Some(_), Some(pid)) => format!(
            " (port-forward to {}/svc/{}, helper pid {pid}; `nsight-cloud port-forward stop` ends it)",
            request.namespace, request.service
        ),
        _ => String::new(),
    };
    out.push_str(&format!("  gateway  {}{via}\n", d.gateway_url));
    let auth = match &d.auth {
        FoundAuth::None => "none (the gateway is open)".to_owned(),
        FoundAuth::ApiKey(_) => "API key (from the cluster)".to_owned(),
        FoundAuth::OAuth2 { issuer, client_id } => {
            format!("OAuth2, issuer {issuer}, client {client_id}")
        }
    };
    out.push_str(&format!("  auth     {auth}\n"));
    if d.ca_pem.is_some() {
        out.push_str("  CA       the TLS Secret's ca.crt\n");
    }
    out.push_str(&format!("  storage  {}\n", d.storage_url));
    crate::render::Rendered {
        out,
        warnings: d.notes.clone(),
    }
}

/// The same as JSON.
pub fn summary_json(config_path: &Path, outcome: &Outcome) -> serde_json::Value {
    let d = &outcome.discovered;
    let auth = match &d.auth {
        FoundAuth::None => serde_json::json!({"type": "none"}),
        FoundAuth::ApiKey(_) => serde_json::json!({"type": "apiKey"}),
        FoundAuth::OAuth2 { issuer, client_id } => {
            serde_json::json!({"type": "oauth2", "issuer": issuer, "clientId": client_id})
        }
    };
    serde_json::json!({
        "config": config_path.display().to_string(),
        "gateway": d.gateway_url,
        "auth": auth,
        "caTrusted": d.ca_pem.is_some(),
        "storage": d.storage_url,
        "portForward": d.port_forward.as_ref().map(|ports| serde_json::json!({
            "pid": outcome.forward_pid,
            "ports": ports.iter().map(|p| serde_json::json!({"local": p.local, "remote": p.remote})).collect::<Vec<_>>(),
        })),
        "notes": d.notes,
    })
}
