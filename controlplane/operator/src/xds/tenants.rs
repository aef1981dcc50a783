//! Multi-tenant gateways (`spec.tenants`): which namespaces one gateway serves, each tenant's
//! backends (the Services the operator rendered for its NsightCoordinator, NsightAnalysis and
//! NsightTenantOperator), the routing filter's table, the tenant API keys, and the
//! `TenantRoutingValid` condition. Pure: namespaces, Services and Secrets come in as arguments.
//!
//! ```text
//!  spec.tenants.namespaces ∪ namespaceSelector(Namespace labels)  -> tenant namespaces
//!  per tenant: operator Services (coordinator, analysis, tenant)  -> upstreams
//!              tenant-<ns>-coordinator ... + filter routes {prefix -> upstream}
//!              identities[ns], identityIsNamespace                -> who may enter
//!              Secret <apiKeySecretRef> in <ns>                   -> ApiKey bound to <ns>
//!  table checked with the routing filter's own parser             -> TenantRouting | refusal
//! ```
//! A gateway may serve namespaces other than its own only when its namespace is one the
//! cluster admin trusts (`XdsSettings::shared_gateway_namespaces`): otherwise a namespace
//! admin could publish another namespace's coordinator behind their own gateway's auth.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::core::v1::{Secret, Service};
use nsight_api::{NsightGateway, Tenants};
use nsight_gateway::{
    auth::ApiKey,
    ir::{Tenant, TenantRouting, Upstream},
};
use nsight_routing_filter::RoutingConfig;

use super::{
    secrets,
    translate::{bad, discover, ok, upstream_of, GatewayTokens, Role, XdsSettings},
};
use crate::{conditions::Cond, selector};

/// The condition a gateway with `spec.tenants` reports.
pub const CONDITION_TENANTS: &str = "TenantRoutingValid";
/// The routing filter's module, beside the auth filter's in the gateway's Envoy.
pub const ROUTING_WASM: &str = "nsight_routing_filter.wasm";
/// The key of the tenant API-key Secret when `apiKeySecretRef.key` is not given.
pub const DEFAULT_TENANT_KEY: &str = secrets::DEFAULT_API_KEY_KEY;
/// The backends a tenant may have, in the order of its routes.
const BACKENDS: [Role; 3] = [Role::Coordinator, Role::Analysis, Role::Tenant];

/// What the tenants of one gateway read; the shell lists them.
#[derive(Clone, Copy, Debug)]
pub struct TenantInputs<'a> {
    /// Namespace name -> labels (read only when `namespaceSelector` is set).
    pub namespaces: &'a BTreeMap<String, BTreeMap<String, String>>,
    /// Operator-labelled Services of the tenant namespaces.
    pub services: &'a [Service],
    /// The tenant API-key Secrets that exist, by namespace.
    pub api_key_secrets: &'a BTreeMap<String, Secret>,
    /// The gateway tokens of the tenants' Services.
    pub gateway_tokens: &'a GatewayTokens,
}

/// The prefixes of the gateway's own routes, which a tenant's routes reuse.
#[derive(Clone, Debug)]
pub struct Prefixes {
    pub coordinator: String,
    pub analysis: String,
    pub tenant: String,
}

impl Prefixes {
    fn of(&self, role: Role) -> &str {
        match role {
            Role::Analysis => self.analysis.as_str(),
            Role::Tenant => self.tenant.as_str(),
            _ => self.coordinator.as_str(),
        }
    }
}

/// A gateway's tenants, ready for the IR.
#[derive(Debug, Clone)]
pub struct TenantPlan {
    /// `None` when no tenant has a backend yet (no filter is installed then).
    pub routing: Option<TenantRouting>,
    pub upstreams: Vec<Upstream>,
    /// API keys bound to their tenant, for the auth filter.
    pub api_keys: Vec<ApiKey>,
    pub condition: Cond,
}

/// The tenant namespaces of `gw`: those listed plus those whose labels its selector matches,
/// sorted, each once.
pub fn namespaces(
    gw: &NsightGateway,
    all: &BTreeMap<String, BTreeMap<String, String>>,
) -> Vec<String> {
    let Some(t) = &gw.spec.tenants else {
        return Vec::new();
    };
    let mut out: Vec<String> = t.namespaces.clone();
    if let Some(sel) = &t.namespace_selector {
        out.extend(
            all.iter()
                .filter(|(_, labels)| selector::matches(sel, labels))
                .map(|(name, _)| name.clone()),
        );
    }
    out.sort();
    out.dedup();
    out
}

/// The Envoy cluster of one tenant backend: `tenant-<namespace>-<backend>`.
fn upstream_name(namespace: &str, role: Role) -> String {
    format!("tenant-{namespace}-{}", role.upstream())
}

fn refused(reason: &'static str, message: String) -> Cond {
    bad(CONDITION_TENANTS, reason, message)
}

/// The gateway's tenants; `Err` is a condition that stops publishing (the last good
/// configuration keeps serving).
pub fn plan(
    gw: &NsightGateway,
    spec: &Tenants,
    inputs: &TenantInputs<'_>,
    prefixes: &Prefixes,
    own_keys: &[ApiKey],
    settings: &XdsSettings,
) -> Result<TenantPlan, Cond> {
    let own_ns = gw.metadata.namespace.clone().unwrap_or_default();
    let tenant_ns = namespaces(gw, inputs.namespaces);
    let foreign: Vec<&str> = tenant_ns
        .iter()
        .map(String::as_str)
        .filter(|ns| *ns != own_ns)
        .collect();
    if !foreign.is_empty() && !settings.shared_gateway_namespaces.contains(&own_ns) {
        return Err(refused(
            "NamespaceNotAllowed",
            format!(
                "this gateway's namespace {own_ns} is not one where shared gateways may live, so it may not route namespaces {}; create the gateway in one of [{}] (the manager's --shared-gateway-namespaces)",
                foreign.join(", "),
                settings.shared_gateway_namespaces.join(", ")
            ),
        ));
    }
    let path_prefix = spec
        .path_prefix
        .clone()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| TenantRouting::PATH_PREFIX.into());
    for own in [&prefixes.coordinator, &prefixes.analysis, &prefixes.tenant] {
        if own.starts_with(&path_prefix) || path_prefix.starts_with(own.as_str()) {
            return Err(refused(
                "PrefixConflict",
                format!("spec.tenants.pathPrefix {path_prefix} overlaps the gateway's route {own}; choose a prefix neither starts with (default /t/)"),
            ));
        }
    }

    let mut tenants = Vec::new();
    let mut upstreams = Vec::new();
    let mut api_keys: Vec<ApiKey> = Vec::new();
    let mut routed = Vec::new();
    let mut idle = Vec::new();
    let mut key_problems = Vec::new();
    let mut analysis = false;
    for ns in &tenant_ns {
        let mut routes = Vec::new();
        let mut names = Vec::new();
        for role in BACKENDS {
            let name = upstream_name(ns, role);
            let Some(upstream) = discover(inputs.services, ns, role, None)
                .and_then(|svc| upstream_of(&name, svc, ns, role, inputs.gateway_tokens, settings))
            else {
                continue;
            };
            upstreams.push(upstream);
            routes.push((prefixes.of(role).to_owned(), name));
            names.push(role.upstream());
            analysis |= role == Role::Analysis;
        }
        if routes.is_empty() {
            idle.push(ns.as_str());
            continue;
        }
        routed.push(format!("{ns} ({})", names.join(", ")));
        tenants.push(Tenant {
            namespace: ns.clone(),
            routes,
            identities: spec.identities.get(ns).cloned().unwrap_or_default(),
            ..Tenant::default()
        });
        if let Some(r) = &spec.api_key_secret_ref {
            let Some(secret) = inputs.api_key_secrets.get(ns) else {
                continue;
            };
            let key = r.key.as_deref().unwrap_or(DEFAULT_TENANT_KEY);
            match secrets::api_key_of("spec.tenants.apiKeySecretRef", ns, &r.name, key, Some(secret)) {
                Ok(k) if own_keys.iter().chain(&api_keys).any(|o| o.key == k) => key_problems
                    .push(format!("Secret {ns}/{}: the key is already another tenant's or the gateway's; choose a new one (`openssl rand -hex 24`)", r.name)),
                Ok(k) => api_keys.push(ApiKey::for_tenant(k, ns.clone())),
                Err(why) => key_problems.push(why),
            }
        }
    }

    let mut summary = if routed.is_empty() {
        format!(
            "no tenant namespace has an operator-managed coordinator, analysis or tenant-operator Service yet (tenants: {})",
            if tenant_ns.is_empty() { "none".to_owned() } else { tenant_ns.join(", ") }
        )
    } else {
        format!("{path_prefix}<namespace>/ routes {}", routed.join(", "))
    };
    if !routed.is_empty() && !idle.is_empty() {
        summary = format!("{summary}; no backend yet: {}", idle.join(", "));
    }
    let routing = if tenants.is_empty() {
        None
    } else {
        let mut routing = TenantRouting::by_prefix(
            settings.wasm_path.with_file_name(ROUTING_WASM),
            &path_prefix,
            &tenants,
        );
        if spec.identity_is_namespace == Some(true) {
            routing = routing.with_identity_is_namespace();
        }
        if analysis {
            // Analysis requests may run long (as on the gateway's own /analysis/ route).
            routing.timeout = Duration::from_secs(300);
        }
        // The filter's own parser: what it would refuse (a NACK) is refused here, visibly.
        RoutingConfig::parse(routing.config_json.as_bytes()).map_err(|e| {
            refused(
                "TableRefused",
                format!("the routing table would be refused by the filter: {e}"),
            )
        })?;
        Some(routing)
    };
    let condition = match (routing.is_some(), key_problems.is_empty()) {
        (true, true) => ok(CONDITION_TENANTS, "Routed", summary),
        (false, _) => refused("NoTenantBackends", summary),
        (true, false) => refused(
            "TenantApiKeyInvalid",
            format!(
                "{summary}; tenant API keys left out (those tenants' keys get 401): {}",
                key_problems.join("; ")
            ),
        ),
    };
    Ok(TenantPlan {
        routing,
        upstreams,
        api_keys,
        condition,
    })
}
