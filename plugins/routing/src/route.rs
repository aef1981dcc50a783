//! The decision per request: which tenant does it name, may its identity reach that tenant, and
//! where does it go. Pure function of the table and three header values; no I/O, no panics.
//!
//! The identity header holds one value or several, comma-separated (a list claim); the request
//! may reach a tenant when one value is listed in its `identities`, is `api-key:<namespace>`
//! (an API key the auth filter bound to that tenant), or equals the namespace when the table
//! sets `identity_is_namespace`.

use crate::config::{is_namespace, RoutingConfig, TenantSource};

/// The request headers the decision reads (values as received; absent when not sent).
#[derive(Debug, Clone, Copy, Default)]
pub struct Request<'a> {
    pub path: Option<&'a str>,
    /// The tenant header's value (only read with [`TenantSource::Header`]).
    pub tenant_header: Option<&'a str>,
    /// The identity the auth filter forwarded.
    pub identity: Option<&'a str>,
}

impl<'a> Request<'a> {
    /// A request naming its tenant by path, from `identity` (e.g. to check a rendered table).
    pub fn by_path(path: &'a str, identity: &'a str) -> Self {
        Self {
            path: Some(path),
            tenant_header: None,
            identity: Some(identity),
        }
    }
}

/// What the filter does with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Forward to `cluster` (through the cluster header); replace `:path` when `path` is set.
    Route {
        namespace: String,
        cluster: String,
        path: Option<String>,
    },
    /// Answer locally without forwarding.
    Refuse(Refusal),
}

impl Decision {
    /// The cluster a routed request goes to, or the status of the local answer.
    pub fn cluster_or_status(self) -> Result<String, u16> {
        match self {
            Self::Route { cluster, .. } => Ok(cluster),
            Self::Refuse(r) => Err(r.status),
        }
    }
}

/// A local answer: 403 (another tenant's namespace) or 404 (no such tenant). `detail` is safe
/// to show the client: it names only the namespace asked for and the caller's own identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub detail: String,
}

impl Refusal {
    fn forbidden(detail: String) -> Decision {
        Decision::Refuse(Self {
            status: 403,
            detail,
        })
    }

    fn not_found(detail: String) -> Decision {
        Decision::Refuse(Self {
            status: 404,
            detail,
        })
    }

    pub fn title(&self) -> &'static str {
        match self.status {
            403 => "Forbidden",
            404 => "Not Found",
            _ => "Refused",
        }
    }

    /// The `application/problem+json` body.
    pub fn body(&self) -> String {
        serde_json::json!({
            "title": self.title(),
            "status": self.status,
            "detail": self.detail,
        })
        .to_string()
    }
}

/// Longest tenant name echoed back in a message.
const ECHO_MAX: usize = 64;

fn echo(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(ECHO_MAX)
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .collect();
    if s.chars().count() > ECHO_MAX {
        out.push_str("...");
    }
    out
}

/// Splits `<prefix><namespace>[/rest][?query]` into the namespace and the path to forward.
fn split_path<'a>(prefix: &str, path: &'a str) -> Option<(&'a str, String)> {
    let after = path.strip_prefix(prefix)?;
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (namespace, rest) = after.split_at(end);
    let forward = match rest.chars().next() {
        None => "/".to_owned(),
        Some('/') => rest.to_owned(),
        Some(_) => format!("/{rest}"),
    };
    Some((namespace, forward))
}

/// Decides where a request goes.
pub fn route(config: &RoutingConfig, request: Request<'_>) -> Decision {
    let (namespace, path) = match &config.source {
        TenantSource::PathPrefix(prefix) => {
            let Some((ns, forward)) = request.path.and_then(|p| split_path(prefix, p)) else {
                return Refusal::not_found(format!(
                    "no tenant in the path; use {prefix}<namespace>/..."
                ));
            };
            (ns, Some(forward))
        }
        TenantSource::Header(header) => {
            let Some(ns) = request.tenant_header.map(str::trim) else {
                return Refusal::not_found(format!(
                    "no tenant named; send the namespace in the {header} header"
                ));
            };
            (ns, None)
        }
    };
    if namespace.is_empty() {
        return Refusal::not_found("no tenant named: the namespace is empty".into());
    }
    let tenant = is_namespace(namespace)
        .then(|| config.tenants.get(namespace))
        .flatten();
    let Some(tenant) = tenant else {
        return Refusal::not_found(format!("no tenant {:?} on this gateway", echo(namespace)));
    };
    let Some(identity) = request.identity.filter(|i| !i.is_empty()) else {
        return Refusal::forbidden(format!(
            "no authenticated identity reached the routing filter (header {}); tenant {:?} \
             needs one",
            config.identity_header, namespace
        ));
    };
    let api_key_identity = format!("api-key:{namespace}");
    let admitted = identity.split(',').map(str::trim).any(|v| {
        tenant.identities.contains(v)
            || v == api_key_identity
            || (config.identity_is_namespace && v == namespace)
    });
    if !admitted {
        return Refusal::forbidden(format!(
            "identity {:?} may not access tenant {:?}",
            echo(identity),
            namespace
        ));
    }
    // The tenant's backend: the longest route prefix of the path it will see, else its
    // default cluster. Decided only after the identity passed, so a 404 here tells an outsider
    // nothing about the tenant.
    let seen = path.as_deref().or(request.path).unwrap_or("/");
    let cluster = tenant
        .routes
        .iter()
        .find(|(prefix, _)| seen.starts_with(prefix.as_str()))
        .map(|(_, cluster)| cluster)
        .or(tenant.cluster.as_ref());
    let Some(cluster) = cluster else {
        return Refusal::not_found(format!(
            "tenant {namespace:?} has no backend at {:?}",
            echo(seen.split(['?', '#']).next().unwrap_or_default())
        ));
    };
    Decision::Route {
        namespace: namespace.to_owned(),
        cluster: cluster.clone(),
        path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> RoutingConfig {
        RoutingConfig::parse(
            br#"{"tenants":[
                {"namespace":"team-a","cluster":"tenant-a","identities":["alice","ci-a"]},
                {"namespace":"team-b","cluster":"tenant-b","identities":["bob"]}]}"#,
        )
        .unwrap()
    }

    fn req<'a>(path: &'a str, identity: Option<&'a str>) -> Request<'a> {
        Request {
            path: Some(path),
            tenant_header: None,
            identity,
        }
    }

    fn routed(path: Option<&str>) -> Decision {
        Decision::Route {
            namespace: "team-a".into(),
            cluster: "tenant-a".into(),
            path: path.map(Into::into),
        }
    }

    #[test]
    fn own_tenant_is_routed_with_the_prefix_stripped() {
        let t = table();
        assert_eq!(
            route(&t, req("/t/team-a/api/x?y=1", Some("alice"))),
            routed(Some("/api/x?y=1"))
        );
        assert_eq!(route(&t, req("/t/team-a", Some("ci-a"))), routed(Some("/")));
        assert_eq!(
            route(&t, req("/t/team-a/", Some("alice"))),
            routed(Some("/"))
        );
        assert_eq!(
            route(&t, req("/t/team-a?q", Some("alice"))),
            routed(Some("/?q"))
        );
    }

    #[test]
    fn another_tenant_is_forbidden() {
        let d = route(&table(), req("/t/team-b/x", Some("alice")));
        let Decision::Refuse(r) = d else {
            panic!("{d:?}")
        };
        assert_eq!(r.status, 403);
        let body: serde_json::Value = serde_json::from_str(&r.body()).unwrap();
        assert_eq!(body["title"], "Forbidden");
        assert_eq!(body["status"], 403);
        assert_eq!(
            body["detail"],
            "identity \"alice\" may not access tenant \"team-b\""
        );
    }

    #[test]
    fn a_tenant_api_key_reaches_its_own_tenant_only() {
        let t = table();
        assert_eq!(
            route(&t, req("/t/team-a/x", Some("api-key:team-a"))),
            routed(Some("/x"))
        );
        for other in ["api-key:team-b", "api-key", "api-key:team-a-x", "api-key:"] {
            assert!(
                matches!(
                    route(&t, req("/t/team-a/x", Some(other))),
                    Decision::Refuse(Refusal { status: 403, .. })
                ),
                "{other}"
            );
        }
    }

    #[test]
    fn any_value_of_a_list_identity_may_open_a_tenant() {
        let t = table();
        assert_eq!(
            route(&t, req("/t/team-a/x", Some("devs, ci-a"))),
            routed(Some("/x"))
        );
        assert!(matches!(
            route(&t, req("/t/team-a/x", Some("bob,devs"))),
            Decision::Refuse(Refusal { status: 403, .. })
        ));
    }

    #[test]
    fn identity_is_namespace_admits_the_matching_tenant_only() {
        let t = RoutingConfig::parse(
            br#"{"identity_is_namespace":true,"tenants":[
                {"namespace":"team-a","cluster":"tenant-a"},
                {"namespace":"team-b","cluster":"tenant-b","identities":["bob"]}]}"#,
        )
        .unwrap();
        assert_eq!(
            route(&t, req("/t/team-a/x", Some("team-a"))),
            routed(Some("/x"))
        );
        assert!(matches!(
            route(&t, req("/t/team-b/x", Some("team-a"))),
            Decision::Refuse(Refusal { status: 403, .. })
        ));
        // Without the option a namespace-named identity is just another identity.
        assert!(matches!(
            route(&table(), req("/t/team-a/x", Some("team-a"))),
            Decision::Refuse(Refusal { status: 403, .. })
        ));
    }

    #[test]
    fn routes_pick_the_backend_by_the_forwarded_path() {
        let t = RoutingConfig::parse(
            br#"{"tenants":[
                {"namespace":"team-a","identities":["alice"],"routes":[
                    {"prefix":"/coordinator/","cluster":"a-coord"},
                    {"prefix":"/analysis/","cluster":"a-analysis"}]},
                {"namespace":"team-b","identities":["bob"],"cluster":"b-default",
                 "routes":[{"prefix":"/analysis/","cluster":"b-analysis"}]}]}"#,
        )
        .unwrap();
        let to = |path: &str, id: &str| match route(&t, req(path, Some(id))) {
            Decision::Route { cluster, path, .. } => Ok((cluster, path.unwrap_or_default())),
            Decision::Refuse(r) => Err(r.status),
        };
        assert_eq!(
            to("/t/team-a/coordinator/v1/status", "alice"),
            Ok(("a-coord".into(), "/coordinator/v1/status".into()))
        );
        assert_eq!(
            to("/t/team-a/analysis/v1/jobs?x=1", "alice"),
            Ok(("a-analysis".into(), "/analysis/v1/jobs?x=1".into()))
        );
        // No route and no default cluster: 404, but only for an identity that may enter.
        assert_eq!(to("/t/team-a/other", "alice"), Err(404));
        assert_eq!(to("/t/team-a/coordinator", "alice"), Err(404));
        assert_eq!(to("/t/team-a/other", "bob"), Err(403));
        assert_eq!(to("/t/team-a/coordinator/v1/status", "bob"), Err(403));
        // With a default cluster, what no route matches goes there.
        assert_eq!(
            to("/t/team-b/coordinator/v1/x", "bob"),
            Ok(("b-default".into(), "/coordinator/v1/x".into()))
        );
        assert_eq!(
            to("/t/team-b/analysis/", "bob"),
            Ok(("b-analysis".into(), "/analysis/".into()))
        );
        let Decision::Refuse(r) = route(&t, req("/t/team-a/x?secret", Some("alice"))) else {
            panic!()
        };
        assert_eq!(r.detail, "tenant \"team-a\" has no backend at \"/x\"");
    }

    #[test]
    fn missing_identity_is_forbidden() {
        for id in [None, Some("")] {
            assert!(matches!(
                route(&table(), req("/t/team-a/x", id)),
                Decision::Refuse(Refusal { status: 403, .. })
            ));
        }
    }

    #[test]
    fn unknown_or_malformed_tenants_are_not_found() {
        let t = table();
        for path in [
            "/t/team-c/x",
            "/t//x",
            "/t/",
            "/t",
            "/x/team-a/",
            "/t/Team-A/x",
            "/t/team%2Da/x",
            "/t/team-ab/x",
        ] {
            let d = route(&t, req(path, Some("alice")));
            assert!(
                matches!(&d, Decision::Refuse(Refusal { status: 404, .. })),
                "{path}: {d:?}"
            );
        }
        let Decision::Refuse(r) = route(&t, req("/t/team-c/x", Some("alice"))) else {
            panic!()
        };
        assert_eq!(r.detail, "no tenant \"team-c\" on this gateway");
        let long = format!("/t/{}\u{7}/x", "z".repeat(100));
        let Decision::Refuse(r) = route(&t, req(&long, Some("alice"))) else {
            panic!()
        };
        assert!(r.detail.len() < 120, "{}", r.detail);
        assert!(!r.detail.contains('\u{7}'));
    }

    #[test]
    fn header_source_keeps_the_path() {
        let t = RoutingConfig::parse(
            br#"{"tenant_source":{"header":"x-nsight-tenant"},
                 "tenants":[{"namespace":"team-a","cluster":"tenant-a","identities":["alice"]}]}"#,
        )
        .unwrap();
        let r = |h: Option<&'static str>, id: &'static str| {
            route(
                &t,
                Request {
                    path: Some("/api"),
                    tenant_header: h,
                    identity: Some(id),
                },
            )
        };
        assert_eq!(r(Some(" team-a "), "alice"), routed(None));
        assert!(matches!(
            r(Some("team-a"), "bob"),
            Decision::Refuse(Refusal { status: 403, .. })
        ));
        assert!(matches!(
            r(None, "alice"),
            Decision::Refuse(Refusal { status: 404, .. })
        ));
        assert!(matches!(
            r(Some("team-z"), "alice"),
            Decision::Refuse(Refusal { status: 404, .. })
        ));
    }
}
