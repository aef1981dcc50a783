//! The shell that feeds gateways: a kube-runtime `Controller` over NsightGateway, triggered also
//! by the Secrets a gateway references and the operator-labelled Services of its namespace.
//!
//! ```text
//! NsightGateway | Secret (referenced) | Service (managed-by=nsight-operator, same namespace)
//!   | Namespace (labels, for spec.tenants.namespaceSelector) | tenant Services and key Secrets
//!   ─> reconcile: list Services, get Secrets (+ the tenants': namespaces, their Services and
//!      API-key Secrets) ─> translate (pure) ─> XdsHandle::set_ir(node)
//!                                                     └ invalid: publish nothing (last good kept)
//!      ─> status: TLSSecretValid, AuthConfigValid, XdsConfigured (field manager nsight-operator-xds)
//! ```
//! Owns the reads, the publish and the status write; what the IR looks like is `translate`.
//!
//! A deleted NsightGateway (no finalizer): once the watch's delete event has left the
//! controller's store, the sweep ([`stale_nodes`], `super::sweep`) removes the node's snapshot
//! and status from the ADS server and ends its streams, so nothing is kept or served for a
//! gateway that no longer exists.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use futures::StreamExt;
use k8s_openapi::{
    api::core::v1::{Namespace, Secret, Service},
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::Timestamp,
    NamespaceResourceScope,
};
use kube::{
    api::{ListParams, PartialObjectMeta, Patch, PatchParams},
    runtime::{controller::Action, reflector::ObjectRef, watcher, Controller},
    Api, Client, Resource, ResourceExt,
};
use nsight_api::{NsightGateway, NsightStatus};
use nsight_gateway::{cache::node_id, server::XdsHandle};
use serde_json::json;

use super::{
    sweep,
    tenants::{self, TenantInputs},
    translate::{self, GatewayTokens, Inputs, Role, XdsSettings},
};
use crate::{
    conditions::{self, Cond},
    controller::backoff,
    render::{gateway_token, LABEL_COMPONENT, LABEL_INSTANCE, LABEL_MANAGED_BY, MANAGER},
};

/// The status field manager of this controller (the reconcile controller uses `nsight-operator`).
pub const STATUS_MANAGER: &str = "nsight-operator-xds";
/// The condition saying whether Envoy has the gateway's current configuration.
pub const CONDITION_XDS: &str = "XdsConfigured";

/// Every gateway node id starts so (`node_id::gateway`).
pub const GATEWAY_NODE_PREFIX: &str = "nsight-gateway/";

/// What every reconcile shares.
pub struct XdsContext {
    pub client: Client,
    pub xds: Arc<XdsHandle>,
    pub settings: XdsSettings,
    failures: std::sync::Mutex<BTreeMap<String, u32>>,
}

impl std::fmt::Debug for XdsContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdsContext")
            .field("xds", &self.xds.local_addr())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl XdsContext {
    pub fn new(client: Client, xds: Arc<XdsHandle>, settings: XdsSettings) -> Self {
        Self {
            client,
            xds,
            settings,
            failures: std::sync::Mutex::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot list the Services of namespace {namespace}")]
    ListServices {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot read Secret {namespace}/{name}")]
    ReadSecret {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot list the namespaces (for spec.tenants.namespaceSelector)")]
    ListNamespaces(#[source] kube::Error),
    #[error("cannot update the status")]
    Status(#[source] kube::Error),
}

fn api<T>(client: &Client, namespace: Option<&str>) -> Api<T>
where
    T: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// `XdsConfigured` from what was published and what Envoy said (pure).
pub fn xds_condition(
    node: &str,
    published: Result<u64, String>,
    had_snapshot: bool,
    unresolved_nack: Option<(&str, &str)>,
) -> Cond {
    match (published, unresolved_nack) {
        (Ok(_), Some((kind, message))) => Cond {
            type_: CONDITION_XDS,
            status: false,
            reason: "Rejected",
            message: format!("Envoy ({node}) rejected the {kind} configuration and keeps serving the last one it accepted: {message}"),
        },
        (Ok(version), None) => Cond {
            type_: CONDITION_XDS,
            status: true,
            reason: "Published",
            message: format!("snapshot {version} published for node {node}"),
        },
        (Err(why), _) if had_snapshot => Cond {
            type_: CONDITION_XDS,
            status: false,
            reason: "LastGoodConfigKept",
            message: format!("not reconfigured ({why}); Envoy ({node}) keeps serving the last good configuration"),
        },
        (Err(why), _) => Cond {
            type_: CONDITION_XDS,
            status: false,
            reason: "NotConfigured",
            message: format!("no configuration published for node {node} ({why}); the gateway serves nothing until this is fixed"),
        },
    }
}

/// The operator-labelled Services of `namespace`.
async fn managed_services(client: &Client, namespace: &str) -> Result<Vec<Service>, Error> {
    Ok(Api::<Service>::namespaced(client.clone(), namespace)
        .list(&ListParams::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGER}")))
        .await
        .map_err(|source| Error::ListServices {
            namespace: namespace.to_owned(),
            source,
        })?
        .items)
}

/// What `spec.tenants` reads: the namespaces' labels (only with a selector), then each tenant
/// namespace's operator Services and API-key Secret.
struct TenantReads {
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
    services: Vec<Service>,
    secrets: BTreeMap<String, Secret>,
}

async fn tenant_reads(gw: &NsightGateway, client: &Client) -> Result<TenantReads, Error> {
    let mut reads = TenantReads {
        namespaces: BTreeMap::new(),
        services: Vec::new(),
        secrets: BTreeMap::new(),
    };
    let Some(spec) = &gw.spec.tenants else {
        return Ok(reads);
    };
    if spec.namespace_selector.is_some() {
        reads.namespaces = Api::<Namespace>::all(client.clone())
            .list_metadata(&ListParams::default())
            .await
            .map_err(Error::ListNamespaces)?
            .items
            .into_iter()
            .map(|n| (n.name_any(), n.metadata.labels.unwrap_or_default()))
            .collect();
    }
    for ns in tenants::namespaces(gw, &reads.namespaces) {
        reads.services.extend(managed_services(client, &ns).await?);
        if let Some(r) = &spec.api_key_secret_ref {
            let found = Api::<Secret>::namespaced(client.clone(), &ns)
                .get_opt(&r.name)
                .await
                .map_err(|source| Error::ReadSecret {
                    namespace: ns.clone(),
                    name: r.name.clone(),
                    source,
                })?;
            if let Some(found) = found {
                reads.secrets.insert(ns, found);
            }
        }
    }
    Ok(reads)
}

/// The gateway tokens of `services` that need one (`render::gateway_token`): a Secret not
/// created yet, or holding no valid token, gives none (the service then answers the gateway
/// 403 until it appears; its creation is watched).
async fn gateway_tokens<'a>(
    client: &Client,
    services: impl Iterator<Item = &'a Service>,
) -> Result<GatewayTokens, Error> {
    let mut tokens = GatewayTokens::new();
    for svc in services {
        let labels = svc.labels();
        let role = labels.get(LABEL_COMPONENT).and_then(|c| Role::of(c));
        let (Some(role), Some(instance), Some(ns)) =
            (role, labels.get(LABEL_INSTANCE), svc.namespace())
        else {
            continue;
        };
        if !translate::needs_gateway_token(role) {
            continue;
        }
        let name = gateway_token::secret_name(instance);
        let found = Api::<Secret>::namespaced(client.clone(), &ns)
            .get_opt(&name)
            .await
            .map_err(|source| Error::ReadSecret {
                namespace: ns.clone(),
                name: name.clone(),
                source,
            })?;
        if let Some(token) = found.as_ref().and_then(gateway_token::read) {
            tokens.insert((ns, svc.name_any()), token);
        }
    }
    Ok(tokens)
}

async fn reconcile_inner(gw: &NsightGateway, ctx: &XdsContext) -> Result<Action, Error> {
    let namespace = gw.namespace().unwrap_or_default();
    let name = gw.name_any();
    let node = node_id::gateway(&namespace, &name);
    let services = managed_services(&ctx.client, &namespace).await?;
    let mut secrets = BTreeMap::new();
    let secret_api = Api::<Secret>::namespaced(ctx.client.clone(), &namespace);
    for secret in translate::referenced_secrets(gw) {
        let found = secret_api
            .get_opt(&secret)
            .await
            .map_err(|source| Error::ReadSecret {
                namespace: namespace.clone(),
                name: secret.clone(),
                source,
            })?;
        if let Some(found) = found {
            secrets.insert(secret, found);
        }
    }
    let reads = tenant_reads(gw, &ctx.client).await?;
    let tokens = gateway_tokens(&ctx.client, services.iter().chain(&reads.services)).await?;
    let out = translate::translate_with_tenants(
        &Inputs {
            gateway: gw,
            services: &services,
            secrets: &secrets,
            gateway_tokens: &tokens,
            now: unix_now(),
        },
        &TenantInputs {
            namespaces: &reads.namespaces,
            services: &reads.services,
            api_key_secrets: &reads.secrets,
            gateway_tokens: &tokens,
        },
        &ctx.settings,
    );
    let had_snapshot = ctx.xds.snapshot(&node).is_some();
    let published = match &out.ir {
        Ok(ir) => ctx.xds.set_ir(&node, ir).map_err(|e| e.to_string()),
        Err(why) => Err(why.clone()),
    };
    if let Err(why) = &published {
        tracing::warn!(%node, reason = %why, "gateway not reconfigured");
    }
    let status = ctx.xds.node_status(&node);
    let nack = status.as_ref().and_then(|s| {
        s.nacks
            .iter()
            .find(|(_, n)| !n.resolved)
            .map(|(kind, n)| (*kind, n.message.clone()))
    });
    let mut conds = out.conditions;
    conds.push(xds_condition(
        &node,
        published,
        had_snapshot,
        nack.as_ref().map(|(k, m)| (*k, m.as_str())),
    ));
    let previous = gw.status.as_ref().map_or(&[][..], |s| &s.conditions[..]);
    let merged = conditions::merge(
        previous,
        &conds,
        gw.meta().generation,
        &Time(Timestamp::now()),
    );
    if merged != previous {
        let body = json!({
            "apiVersion": NsightGateway::api_version(&()),
            "kind": NsightGateway::kind(&()),
            "status": NsightStatus { conditions: merged, observed_generation: None },
        });
        Api::<NsightGateway>::namespaced(ctx.client.clone(), &namespace)
            .patch_status(
                &name,
                &PatchParams::apply(STATUS_MANAGER).force(),
                &Patch::Apply(&body),
            )
            .await
            .map_err(Error::Status)?;
    }
    // Look again soon while a connected Envoy has not caught up (a NACK becomes a condition).
    let connected = status.as_ref().is_some_and(|s| s.streams > 0);
    Ok(Action::requeue(if connected && !ctx.xds.in_sync(&node) {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(60)
    }))
}

fn key(gw: &NsightGateway) -> String {
    format!("{}/{}", gw.namespace().unwrap_or_default(), gw.name_any())
}

async fn reconcile(gw: Arc<NsightGateway>, ctx: Arc<XdsContext>) -> Result<Action, Error> {
    let result = reconcile_inner(&gw, &ctx).await;
    if result.is_ok() {
        if let Ok(mut f) = ctx.failures.lock() {
            f.remove(&key(&gw));
        }
    }
    result
}

fn error_policy(gw: Arc<NsightGateway>, error: &Error, ctx: Arc<XdsContext>) -> Action {
    let failures = ctx.failures.lock().map_or(1, |mut f| {
        let n = f.entry(key(&gw)).or_insert(0);
        *n = n.saturating_add(1);
        *n
    });
    let mut chain = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(s) = source {
        chain.push_str(": ");
        chain.push_str(&s.to_string());
        source = s.source();
    }
    tracing::warn!(gateway = %key(&gw), error = %chain, failures, "xDS reconcile failed");
    Action::requeue(backoff(failures))
}

/// The name of the Secret holding each tenant's API key, when the gateway has tenants.
fn tenant_key_name(gw: &NsightGateway) -> Option<&str> {
    gw.spec
        .tenants
        .as_ref()?
        .api_key_secret_ref
        .as_ref()
        .map(|r| r.name.as_str())
}

/// The prefix of the gateway nodes of the watched `namespace`, or of all.
fn gateway_prefix(namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => node_id::gateway(ns, ""),
        None => GATEWAY_NODE_PREFIX.to_owned(),
    }
}

/// The gateway nodes among `nodes` (of the watched `namespace`, or all) whose NsightGateway
/// is not in `live` (node ids of the gateways that exist). Pure.
pub fn stale_nodes<'a>(
    nodes: &'a [String],
    live: &BTreeSet<String>,
    namespace: Option<&str>,
) -> Vec<&'a str> {
    sweep::stale(nodes, live, &gateway_prefix(namespace))
}

/// Runs until the watches end (never, in practice).
pub async fn run(ctx: Arc<XdsContext>, namespace: Option<String>) {
    let client = ctx.client.clone();
    let ns = namespace.as_deref();
    let controller = Controller::new(
        api::<NsightGateway>(&client, ns),
        watcher::Config::default(),
    );
    let sweeper = tokio::spawn(sweep::run(
        ctx.clone(),
        controller.store(),
        sweep::Swept {
            key_of: node_id::gateway,
            prefix: gateway_prefix(ns),
            kind: "NsightGateway",
        },
    ));
    let by_secret = controller.store();
    let by_service = controller.store();
    let by_namespace = controller.store();
    controller
        // Metadata only: the cache holds no Secret data (the reconcile reads by name).
        .watches(
            api::<PartialObjectMeta<Secret>>(&client, ns),
            watcher::Config::default(),
            move |secret: PartialObjectMeta<Secret>| {
                let (ns, name) = (secret.namespace(), secret.name_any());
                by_secret
                    .state()
                    .into_iter()
                    .filter(|g| {
                        (g.namespace() == ns && translate::referenced_secrets(g).contains(&name))
                            || tenant_key_name(g) == Some(name.as_str())
                            // A service's gateway token: its own namespace's gateways, and
                            // shared ones (which may route it as a tenant).
                            || (gateway_token::is_token_secret(&name)
                                && (g.namespace() == ns || g.spec.tenants.is_some()))
                    })
                    .map(|g| ObjectRef::from_obj(&*g))
                    .collect::<Vec<_>>()
            },
        )
        .watches(
            api::<Service>(&client, ns),
            watcher::Config::default().labels(&format!("{LABEL_MANAGED_BY}={MANAGER}")),
            move |service: Service| {
                let ns = service.namespace();
                // A shared gateway may route any namespace's Services (its tenants).
                by_service
                    .state()
                    .into_iter()
                    .filter(|g| g.namespace() == ns || g.spec.tenants.is_some())
                    .map(|g| ObjectRef::from_obj(&*g))
                    .collect::<Vec<_>>()
            },
        )
        // Namespace labels decide which namespaces a tenant selector picks.
        .watches(
            Api::<PartialObjectMeta<Namespace>>::all(client.clone()),
            watcher::Config::default(),
            move |_: PartialObjectMeta<Namespace>| {
                by_namespace
                    .state()
                    .into_iter()
                    .filter(|g| {
                        g.spec
                            .tenants
                            .as_ref()
                            .is_some_and(|t| t.namespace_selector.is_some())
                    })
                    .map(|g| ObjectRef::from_obj(&*g))
                    .collect::<Vec<_>>()
            },
        )
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "xDS controller event");
            }
        })
        .await;
    sweeper.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xds_condition_cases() {
        let c = xds_condition("n", Ok(3), false, None);
        assert!(c.status && c.reason == "Published" && c.message.contains("snapshot 3"));
        let c = xds_condition("n", Ok(3), true, Some(("listener", "bad key")));
        assert!(!c.status && c.reason == "Rejected" && c.message.contains("bad key"));
        let c = xds_condition("n", Err("see condition TLSSecretValid".into()), true, None);
        assert!(
            !c.status && c.reason == "LastGoodConfigKept" && c.message.contains("TLSSecretValid")
        );
        let c = xds_condition("n", Err("x".into()), false, None);
        assert_eq!(c.reason, "NotConfigured");
    }

    #[test]
    fn stale_nodes_are_the_gateways_that_are_gone() {
        assert!(node_id::gateway("a", "b").starts_with(GATEWAY_NODE_PREFIX));
        let nodes: Vec<String> = [
            node_id::gateway("team-a", "gw"),
            node_id::gateway("team-a", "gone"),
            node_id::gateway("team-b", "gone"),
            node_id::otlp_sidecar("team-a", "pod-1"),
        ]
        .into();
        let live = BTreeSet::from([node_id::gateway("team-a", "gw")]);
        assert_eq!(
            stale_nodes(&nodes, &live, None),
            [nodes[1].as_str(), nodes[2].as_str()]
        );
        // Watching one namespace: another namespace's nodes are not ours to judge.
        assert_eq!(
            stale_nodes(&nodes, &live, Some("team-a")),
            [nodes[1].as_str()]
        );
        // "team-a" must not match "team-ab".
        let other = vec![node_id::gateway("team-ab", "x")];
        assert!(stale_nodes(&other, &live, Some("team-a")).is_empty());
        let all_live: BTreeSet<String> = nodes.iter().cloned().collect();
        assert!(stale_nodes(&nodes, &all_live, None).is_empty());
    }
}
