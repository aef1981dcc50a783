//! The routing table as it arrives through Envoy (JSON in the plugin `configuration`).
//!
//! ```json
//! {"tenant_source": {"path_prefix": "/t/"},        // or {"header": "x-nsight-tenant"}
//!  "identity_header": "x-nsight-auth-identity",     // set by the auth filter
//!  "cluster_header": "x-nsight-tenant-cluster",     // read by Envoy's `cluster_header` route
//!  "identity_is_namespace": false,                  // identity `team-a` reaches team-a
//!  "tenants": [{"namespace": "team-a", "cluster": "tenant-team-a",
//!               "identities": ["alice", "ci-team-a"]},
//!              {"namespace": "team-b",                      // one cluster per backend:
//!               "routes": [{"prefix": "/coordinator/", "cluster": "tenant-team-b-coordinator"},
//!                          {"prefix": "/analysis/", "cluster": "tenant-team-b-analysis"}]}],
//!  "gateway_tokens": {"tenant-team-b-coordinator": "ngt_..."}}  // optional, per cluster
//! ```
//! A tenant has a `cluster` (every path), `routes` (the longest prefix of the forwarded path
//! wins; `cluster`, when also given, takes the rest), or both.
//! `gateway_tokens` (added by the gateway's translation, never written by hand) holds the secret
//! each of our services requires in `x-nsight-gateway-token`; the filter sets it on requests it
//! routes to that cluster and removes a client-sent one from every request.
//! The identity header may carry several comma-separated values (a list claim such as groups);
//! any one of them may open a tenant. `api-key:<namespace>` (an API key bound to that tenant by
//! the auth filter) always reaches its own namespace and no other.
//! Owns parsing and validation only; the per-request decision lives in `route`. Every refusal
//! names the field and the tenant so the operator can fix the table.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

/// Default path prefix: `/t/<namespace>/...`.
pub const DEFAULT_PATH_PREFIX: &str = "/t/";
/// The header our auth filter sets to the authenticated identity.
pub const DEFAULT_IDENTITY_HEADER: &str = "x-nsight-auth-identity";
/// The header the gateway's `cluster_header` route reads.
pub const DEFAULT_CLUSTER_HEADER: &str = "x-nsight-tenant-cluster";
/// Most tenants one table may hold.
pub const MAX_TENANTS: usize = 1024;
/// Longest Envoy cluster name accepted.
pub const MAX_CLUSTER_NAME_LEN: usize = 240;
/// Most `routes` one tenant may have.
pub const MAX_ROUTES: usize = 16;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    tenant_source: Option<RawSource>,
    #[serde(default)]
    identity_header: Option<String>,
    #[serde(default)]
    cluster_header: Option<String>,
    #[serde(default)]
    identity_is_namespace: bool,
    tenants: Vec<RawTenant>,
    #[serde(default)]
    gateway_tokens: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum RawSource {
    PathPrefix(String),
    Header(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTenant {
    namespace: String,
    #[serde(default)]
    cluster: Option<String>,
    #[serde(default)]
    routes: Vec<RawRoute>,
    #[serde(default)]
    identities: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoute {
    prefix: String,
    cluster: String,
}

/// Where a request names its tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantSource {
    /// `<prefix><namespace>[/rest]`; the `<prefix><namespace>` part is stripped before
    /// forwarding. The prefix starts and ends with `/`.
    PathPrefix(String),
    /// A request header (lowercase name) holds the namespace; the path is kept.
    Header(String),
}

/// One tenant: its upstream clusters and who may reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    /// Where a forwarded path no route matches goes (`None`: 404).
    pub cluster: Option<String>,
    /// `(prefix, cluster)` of the forwarded path, longest prefix first.
    pub routes: Routes,
    /// Identities (the auth filter's `x-nsight-auth-identity` values) allowed in; may be empty
    /// when the tenant is reached by its API keys or by [`RoutingConfig::identity_is_namespace`].
    pub identities: BTreeSet<String>,
}

/// A validated routing table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingConfig {
    pub source: TenantSource,
    pub identity_header: String,
    pub cluster_header: String,
    /// An identity value equal to a tenant's namespace reaches it (a `namespace` claim, or a
    /// group named after the namespace), without listing it.
    pub identity_is_namespace: bool,
    /// By namespace.
    pub tenants: BTreeMap<String, Tenant>,
    /// The token to send to a cluster, by cluster name (absent: none is sent).
    pub gateway_tokens: BTreeMap<String, String>,
}

/// Why a table is refused; the message says what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    Parse(String),
    NoTenant,
    TooManyTenants(usize),
    BadNamespace { index: usize, namespace: String },
    DuplicateTenant(String),
    BadCluster { namespace: String, cluster: String },
    NoCluster(String),
    BadRoute { namespace: String, prefix: String },
    BadIdentity { namespace: String },
    BadHeader { field: &'static str, name: String },
    BadPrefix(String),
    SameHeader(String),
    BadGatewayToken(String),
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Parse(e) => write!(f, "routing filter configuration is not valid: {e}"),
            Self::NoTenant => f.write_str("`tenants` is empty; list at least one tenant"),
            Self::TooManyTenants(n) => {
                write!(f, "{n} tenants listed; at most {MAX_TENANTS} are accepted")
            }
            Self::BadNamespace { index, namespace } => write!(
                f,
                "tenant #{index}: namespace {namespace:?} is not a Kubernetes namespace name \
                 (1-63 characters: a-z, 0-9, '-', starting and ending with a letter or digit)"
            ),
            Self::DuplicateTenant(ns) => {
                write!(f, "tenant {ns:?} is listed twice; list each namespace once")
            }
            Self::BadCluster { namespace, cluster } => write!(
                f,
                "tenant {namespace:?}: cluster {cluster:?} is not a valid Envoy cluster name \
                 (1-{MAX_CLUSTER_NAME_LEN} characters: A-Z, a-z, 0-9, '-', '_', '.', ':')"
            ),
            Self::NoCluster(ns) => write!(
                f,
                "tenant {ns:?} has neither `cluster` nor `routes`; give it somewhere to go"
            ),
            Self::BadRoute { namespace, prefix } => write!(
                f,
                "tenant {namespace:?}: route prefix {prefix:?} must start and end with '/' and \
                 contain no '?', '#' or whitespace (at most {MAX_ROUTES} routes, each prefix once)"
            ),
            Self::BadIdentity { namespace } => write!(
                f,
                "tenant {namespace:?}: identities must be 1-256 printable ASCII characters \
                 without a comma"
            ),
            Self::BadHeader { field, name } => write!(
                f,
                "`{field}` {name:?} is not a lowercase HTTP header name (a-z, 0-9, '-', '_')"
            ),
            Self::BadPrefix(p) => write!(
                f,
                "`tenant_source.path_prefix` {p:?} must start and end with '/' and contain no \
                 '?', '#' or whitespace, e.g. \"/t/\""
            ),
            Self::BadGatewayToken(cluster) => write!(
                f,
                "`gateway_tokens` of cluster {cluster:?} must name a cluster of the table and be \
                 32-256 visible ASCII characters (the gateway's translation writes it)"
            ),
            Self::SameHeader(h) => write!(
                f,
                "header {h:?} is used for two purposes; the tenant, identity and cluster headers \
                 must differ"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A Kubernetes namespace name (RFC 1123 label).
pub fn is_namespace(s: &str) -> bool {
    let b = s.as_bytes();
    let inner = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-';
    let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=63).contains(&b.len())
        && b.iter().all(inner)
        && b.first().is_some_and(edge)
        && b.last().is_some_and(edge)
}

fn is_cluster_name(s: &str) -> bool {
    (1..=MAX_CLUSTER_NAME_LEN).contains(&s.len())
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b':'))
}

fn is_header_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'_'))
}

fn is_identity(s: &str) -> bool {
    (1..=256).contains(&s.len()) && s.bytes().all(|c| (b' '..=b'~').contains(&c) && c != b',')
}

/// `/x/`: starts and ends with `/`, no query, fragment or whitespace.
fn is_slashed_prefix(p: &str, min_len: usize) -> bool {
    p.len() >= min_len
        && p.starts_with('/')
        && p.ends_with('/')
        && !p.contains(['?', '#'])
        && !p.chars().any(char::is_whitespace)
}

/// `(prefix, cluster)` pairs of a tenant, longest prefix first.
pub type Routes = Vec<(String, String)>;

/// A tenant's default cluster and routes, checked; routes longest prefix first.
fn clusters(t: &RawTenant) -> Result<(Option<String>, Routes), ConfigError> {
    let bad_cluster = |cluster: &str| ConfigError::BadCluster {
        namespace: t.namespace.clone(),
        cluster: cluster.to_owned(),
    };
    if let Some(c) = t.cluster.as_deref().filter(|c| !is_cluster_name(c)) {
        return Err(bad_cluster(c));
    }
    if t.cluster.is_none() && t.routes.is_empty() {
        return Err(ConfigError::NoCluster(t.namespace.clone()));
    }
    let mut routes: Routes = Vec::with_capacity(t.routes.len());
    for r in &t.routes {
        let repeated = routes.iter().any(|(p, _)| *p == r.prefix);
        if !is_slashed_prefix(&r.prefix, 1) || repeated || t.routes.len() > MAX_ROUTES {
            return Err(ConfigError::BadRoute {
                namespace: t.namespace.clone(),
                prefix: r.prefix.clone(),
            });
        }
        if !is_cluster_name(&r.cluster) {
            return Err(bad_cluster(&r.cluster));
        }
        routes.push((r.prefix.clone(), r.cluster.clone()));
    }
    routes.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
    Ok((t.cluster.clone(), routes))
}

fn header(
    field: &'static str,
    value: Option<String>,
    default: &str,
) -> Result<String, ConfigError> {
    let name = value.unwrap_or_else(|| default.to_owned());
    if is_header_name(&name) {
        Ok(name)
    } else {
        Err(ConfigError::BadHeader { field, name })
    }
}

impl RoutingConfig {
    /// Parses and validates a routing table.
    pub fn parse(bytes: &[u8]) -> Result<Self, ConfigError> {
        let raw: RawConfig =
            serde_json::from_slice(bytes).map_err(|e| ConfigError::Parse(e.to_string()))?;
        let source = match raw.tenant_source {
            None => TenantSource::PathPrefix(DEFAULT_PATH_PREFIX.into()),
            Some(RawSource::PathPrefix(p)) => {
                if !is_slashed_prefix(&p, 2) {
                    return Err(ConfigError::BadPrefix(p));
                }
                TenantSource::PathPrefix(p)
            }
            Some(RawSource::Header(h)) => {
                TenantSource::Header(header("tenant_source.header", Some(h), "")?)
            }
        };
        let identity_header = header(
            "identity_header",
            raw.identity_header,
            DEFAULT_IDENTITY_HEADER,
        )?;
        let cluster_header = header("cluster_header", raw.cluster_header, DEFAULT_CLUSTER_HEADER)?;
        if identity_header == cluster_header {
            return Err(ConfigError::SameHeader(cluster_header));
        }
        if let TenantSource::Header(h) = &source {
            if *h == identity_header || *h == cluster_header {
                return Err(ConfigError::SameHeader(h.clone()));
            }
        }
        if raw.tenants.is_empty() {
            return Err(ConfigError::NoTenant);
        }
        if raw.tenants.len() > MAX_TENANTS {
            return Err(ConfigError::TooManyTenants(raw.tenants.len()));
        }
        let mut tenants = BTreeMap::new();
        for (index, t) in raw.tenants.into_iter().enumerate() {
            if !is_namespace(&t.namespace) {
                return Err(ConfigError::BadNamespace {
                    index,
                    namespace: t.namespace,
                });
            }
            let (cluster, routes) = clusters(&t)?;
            if !t.identities.iter().all(|i| is_identity(i)) {
                return Err(ConfigError::BadIdentity {
                    namespace: t.namespace,
                });
            }
            let tenant = Tenant {
                cluster,
                routes,
                identities: t.identities.into_iter().collect(),
            };
            if tenants.insert(t.namespace.clone(), tenant).is_some() {
                return Err(ConfigError::DuplicateTenant(t.namespace));
            }
        }
        let named = |c: &str| {
            tenants
                .values()
                .any(|t| t.cluster.as_deref() == Some(c) || t.routes.iter().any(|(_, r)| r == c))
        };
        for (cluster, token) in &raw.gateway_tokens {
            let visible = token.bytes().all(|b| b.is_ascii_graphic());
            if !named(cluster) || !visible || !(32..=256).contains(&token.len()) {
                return Err(ConfigError::BadGatewayToken(cluster.clone()));
            }
        }
        Ok(Self {
            source,
            identity_header,
            cluster_header,
            identity_is_namespace: raw.identity_is_namespace,
            tenants,
            gateway_tokens: raw.gateway_tokens,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<RoutingConfig, ConfigError> {
        RoutingConfig::parse(json.as_bytes())
    }

    const ONE: &str =
        r#"{"tenants":[{"namespace":"team-a","cluster":"tenant-a","identities":["alice"]}]}"#;

    #[test]
    fn defaults_apply() {
        let c = parse(ONE).unwrap();
        assert_eq!(c.source, TenantSource::PathPrefix("/t/".into()));
        assert_eq!(c.identity_header, DEFAULT_IDENTITY_HEADER);
        assert_eq!(c.cluster_header, DEFAULT_CLUSTER_HEADER);
        assert_eq!(c.tenants["team-a"].cluster.as_deref(), Some("tenant-a"));
    }

    #[test]
    fn gateway_tokens_name_known_clusters() {
        let token = "ngt_0123456789abcdef0123456789abcdef";
        let with = |cluster: &str, token: &str| {
            parse(&ONE.replace(
                "]}]}",
                &format!(r#"]}}],"gateway_tokens":{{"{cluster}":"{token}"}}}}"#),
            ))
        };
        let c = with("tenant-a", token).unwrap();
        assert_eq!(c.gateway_tokens["tenant-a"], token);
        assert!(parse(ONE).unwrap().gateway_tokens.is_empty());
        for (cluster, bad) in [
            ("tenant-b", token),
            ("tenant-a", "short"),
            ("tenant-a", &*format!("{token} x")),
        ] {
            assert_eq!(
                with(cluster, bad),
                Err(ConfigError::BadGatewayToken(cluster.into())),
                "{cluster} {bad}"
            );
        }
    }

    #[test]
    fn header_source_parses() {
        let c = parse(
            r#"{"tenant_source":{"header":"x-tenant"},"cluster_header":"x-c",
                "tenants":[{"namespace":"a","cluster":"c.a:1","identities":["x"]}]}"#,
        )
        .unwrap();
        assert_eq!(c.source, TenantSource::Header("x-tenant".into()));
        assert_eq!(c.cluster_header, "x-c");
    }

    #[test]
    fn refuses_duplicates_bad_names_and_unknown_fields() {
        let dup = r#"{"tenants":[{"namespace":"a","cluster":"c1","identities":["x"]},
                                 {"namespace":"a","cluster":"c2","identities":["y"]}]}"#;
        assert_eq!(parse(dup), Err(ConfigError::DuplicateTenant("a".into())));
        let bad_cluster = r#"{"tenants":[{"namespace":"a","cluster":"c 1","identities":["x"]}]}"#;
        let e = parse(bad_cluster).unwrap_err();
        assert!(matches!(e, ConfigError::BadCluster { .. }));
        assert!(e
            .to_string()
            .contains("\"c 1\" is not a valid Envoy cluster name"));
        let empty_cluster = r#"{"tenants":[{"namespace":"a","cluster":"","identities":["x"]}]}"#;
        assert!(matches!(
            parse(empty_cluster),
            Err(ConfigError::BadCluster { .. })
        ));
        for ns in ["A", "-a", "a-", "", "a_b", &"a".repeat(64)] {
            let j = format!(
                r#"{{"tenants":[{{"namespace":"{ns}","cluster":"c","identities":["x"]}}]}}"#
            );
            assert!(
                matches!(parse(&j), Err(ConfigError::BadNamespace { index: 0, .. })),
                "{ns}"
            );
        }
        assert!(matches!(
            parse(r#"{"tenants":[],"x":1}"#),
            Err(ConfigError::Parse(_))
        ));
        assert_eq!(parse(r#"{"tenants":[]}"#), Err(ConfigError::NoTenant));
        // A tenant reached only by its API keys (or the namespace rule) lists no identities.
        let keys_only = parse(r#"{"tenants":[{"namespace":"a","cluster":"c"}]}"#).unwrap();
        assert!(keys_only.tenants["a"].identities.is_empty());
        assert!(!keys_only.identity_is_namespace);
        assert!(matches!(
            parse(r#"{"tenants":[{"namespace":"a","cluster":"c","identities":["x,y"]}]}"#),
            Err(ConfigError::BadIdentity { .. })
        ));
        assert!(matches!(parse("not json"), Err(ConfigError::Parse(_))));
    }

    #[test]
    fn refuses_bad_headers_and_prefixes() {
        let with = |extra: &str| {
            parse(&format!(
                r#"{{{extra},"tenants":[{{"namespace":"a","cluster":"c","identities":["x"]}}]}}"#
            ))
        };
        assert!(matches!(
            with(r#""cluster_header":"X-Upper""#),
            Err(ConfigError::BadHeader {
                field: "cluster_header",
                ..
            })
        ));
        assert!(matches!(
            with(r#""tenant_source":{"path_prefix":"/t"}"#),
            Err(ConfigError::BadPrefix(_))
        ));
        assert!(matches!(
            with(r#""tenant_source":{"path_prefix":"t/"}"#),
            Err(ConfigError::BadPrefix(_))
        ));
        assert!(matches!(
            with(r#""cluster_header":"x-nsight-auth-identity""#),
            Err(ConfigError::SameHeader(_))
        ));
        assert!(matches!(
            with(r#""tenant_source":{"header":"x-nsight-tenant-cluster"}"#),
            Err(ConfigError::SameHeader(_))
        ));
    }

    #[test]
    fn routes_are_checked_and_sorted_longest_first() {
        let c = parse(
            r#"{"tenants":[{"namespace":"a","routes":[
                {"prefix":"/c/","cluster":"a-c"},{"prefix":"/c/v2/","cluster":"a-c2"}]}]}"#,
        )
        .unwrap();
        let t = &c.tenants["a"];
        assert_eq!(t.cluster, None);
        assert_eq!(
            t.routes,
            [
                ("/c/v2/".into(), "a-c2".into()),
                ("/c/".into(), "a-c".into())
            ]
        );
        let refused = |routes: &str| {
            parse(&format!(
                r#"{{"tenants":[{{"namespace":"a","routes":[{routes}]}}]}}"#
            ))
        };
        for bad in [
            r#"{"prefix":"c/","cluster":"x"}"#,
            r#"{"prefix":"/c","cluster":"x"}"#,
            r#"{"prefix":"/c?/","cluster":"x"}"#,
            r#"{"prefix":"/c/","cluster":"x"},{"prefix":"/c/","cluster":"y"}"#,
        ] {
            assert!(
                matches!(refused(bad), Err(ConfigError::BadRoute { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            refused(r#"{"prefix":"/c/","cluster":"x y"}"#),
            Err(ConfigError::BadCluster { .. })
        ));
        let many: Vec<String> = (0..=MAX_ROUTES)
            .map(|i| format!(r#"{{"prefix":"/c{i}/","cluster":"x"}}"#))
            .collect();
        let many = many.join(",");
        assert!(matches!(refused(&many), Err(ConfigError::BadRoute { .. })));
        let e = parse(r#"{"tenants":[{"namespace":"a"}]}"#).unwrap_err();
        assert_eq!(e, ConfigError::NoCluster("a".into()));
        assert!(e.to_string().contains("neither `cluster` nor `routes`"));
    }
}
