//! Golden tests: IR in, YAML out. Regenerate with `NSIGHT_UPDATE_GOLDEN=1 cargo test -p
//! nsight-gateway --test golden` and review the diff.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::{net::SocketAddr, path::PathBuf};

use nsight_contracts::gateway_only::GatewayToken;
use nsight_gateway::{
    auth::{ApiKey, AuthPolicy, OAuth2Policy},
    ir::{CaTrust, GatewayIr, IrError, Upstream},
    render::to_yaml,
    translate::translate,
};

fn addr(port: u16) -> SocketAddr {
    ([127, 0, 0, 1], port).into()
}

fn check(name: &str, ir: &GatewayIr) {
    let yaml = to_yaml(&translate(ir).unwrap()).unwrap();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/{name}.yaml"));
    if std::env::var_os("NSIGHT_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &yaml).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} missing: run with NSIGHT_UPDATE_GOLDEN=1",
            path.display()
        )
    });
    assert!(
        want == yaml,
        "{name}: translation differs from {}; rerun with NSIGHT_UPDATE_GOLDEN=1 and review the diff.\n--- got ---\n{yaml}",
        path.display()
    );
}

fn local() -> nsight_gateway::local::LocalGateway {
    GatewayIr::local()
        .coordinator(addr(8081))
        .coordinator_health_check("/healthz")
        .analysis(addr(8082))
        .tenant(addr(8083))
        .ui(addr(8084))
        .storage(addr(8085))
}

#[test]
fn local_platform_http_with_api_key() {
    let ir = local()
        .api_key_auth(
            "/opt/nsight/nsight_auth_filter.wasm",
            &["0123456789abcdef0123"],
        )
        .build()
        .unwrap();
    check("local_http_api_key", &ir);
}

#[test]
fn local_platform_https() {
    let ir = local()
        .tls(
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
            "KEY",
        )
        .build()
        .unwrap();
    check("local_https", &ir);
}

#[test]
fn the_gateway_token_goes_to_our_services_only() {
    const TOKEN: &str = "nsk_gateway-token-0123456789abcdef0123456789";
    let token = GatewayToken::parse(TOKEN).unwrap();
    let ir = local().gateway_token(token).build().unwrap();
    check("local_gateway_token", &ir);
    let yaml = to_yaml(&translate(&ir).unwrap()).unwrap();
    // The coordinator's and the analysis service's routes; not the tenant, UI or S3 routes.
    assert_eq!(yaml.matches(TOKEN).count(), 2, "{yaml}");
    assert!(!format!("{ir:?}").contains(TOKEN), "Debug prints the token");
    assert!(!serde_json::to_string(&ir).unwrap().contains(TOKEN));
}

#[test]
fn coordinator_only_on_custom_ports_with_dns_upstream() {
    let mut ir = GatewayIr::local()
        .listen("0.0.0.0", 18888, 19000)
        .coordinator(addr(8081))
        .build()
        .unwrap();
    ir.upstreams[0].endpoints[0].host = "nsight-coordinator.nsight.svc".into();
    check("coordinator_dns", &ir);
}

#[test]
fn the_private_key_never_reaches_the_rendering() {
    let ir = local().tls("CERT", "SECRET-KEY-MATERIAL").build().unwrap();
    let yaml = to_yaml(&translate(&ir).unwrap()).unwrap();
    assert!(!yaml.contains("SECRET-KEY-MATERIAL"));
    assert!(!format!("{ir:?}").contains("SECRET-KEY-MATERIAL"));
}

const TEST_CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB-test-ca\n-----END CERTIFICATE-----\n";

/// An HTTPS gateway in OAuth2 mode: the identity provider is an upstream with TLS (a private
/// CA from a Secret), and a second provider-like upstream trusts the system bundle.
fn oauth2_gateway() -> GatewayIr {
    let policy = AuthPolicy::OAuth2 {
        policy: OAuth2Policy {
            issuer: "https://idp.example.com/realms/nsight".into(),
            cluster: "idp-idp.example.com-443".into(),
            client_id: "nsight-web".into(),
            client_secret: "CLIENT-SECRET-MATERIAL".into(),
            redirect_uri: "https://gw.example.com:8888/oauth2/callback".into(),
            cookie_key: "COOKIE-KEY-MATERIAL".into(),
            audiences: vec!["nsight-web".into()],
            scopes: vec!["openid".into(), "profile".into()],
            identity_claim: Some("groups".into()),
            listener_tls: true,
        },
        api_keys: vec![ApiKey::for_tenant("API-KEY-MATERIAL-0000", "team-a")],
    };
    let mut ir = local()
        .tls(
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
            "KEY",
        )
        .auth(policy.filter("/opt/nsight/nsight_auth_filter.wasm"))
        .build()
        .unwrap();
    ir.upstreams.push(
        Upstream::new("idp-idp.example.com-443", "idp.example.com", 443)
            .with_tls("idp.example.com", CaTrust::Pem(TEST_CA.into())),
    );
    ir.upstreams.push(
        Upstream::new("idp-login.example.org-443", "login.example.org", 443)
            .with_tls("login.example.org", CaTrust::System),
    );
    ir
}

#[test]
fn https_gateway_with_oauth2_and_tls_upstreams() {
    check("oauth2_tls_upstreams", &oauth2_gateway());
}

/// The UI is public at `/`, which would also take the filter's own paths: `/oauth2/` goes to
/// the same upstream behind the filter, before it. Not in API-key mode (no such paths).
#[test]
fn oauth2_paths_stay_behind_the_filter_where_the_ui_is_public() {
    let yaml = to_yaml(&translate(&oauth2_gateway()).unwrap()).unwrap();
    let oauth2 = yaml.find("name: /oauth2/\n").expect("an /oauth2/ route");
    let ui = yaml.find("name: /\n").expect("the UI route");
    assert!(oauth2 < ui, "{yaml}");
    let own = &yaml[oauth2..ui];
    assert!(!own.contains("disabled: true"), "{own}");
    assert!(own.contains("cluster: ui"), "{own}");
    assert!(yaml[ui..].contains("disabled: true"), "the UI stays public");
    let api_key = local()
        .auth(nsight_gateway::ir::AuthFilter::api_key("/f.wasm", &["k"]))
        .build()
        .unwrap();
    let yaml = to_yaml(&translate(&api_key).unwrap()).unwrap();
    assert!(!yaml.contains("/oauth2/"), "{yaml}");
}

#[test]
fn oauth2_secrets_never_reach_the_rendering() {
    let ir = oauth2_gateway();
    let yaml = to_yaml(&translate(&ir).unwrap()).unwrap();
    for secret in ["CLIENT-SECRET-MATERIAL", "COOKIE-KEY-MATERIAL"] {
        assert!(!yaml.contains(secret), "{secret} rendered");
        assert!(!format!("{ir:?}").contains(secret), "{secret} in Debug");
    }
    assert!(yaml.contains("match_typed_subject_alt_names"), "{yaml}");
}

#[test]
fn upstream_tls_without_sni_or_with_a_ca_that_is_no_pem_is_refused() {
    let mut ir = oauth2_gateway();
    ir.upstreams.last_mut().unwrap().tls.as_mut().unwrap().sni = String::new();
    assert!(
        matches!(translate(&ir), Err(IrError::BadUpstreamTls { what, .. }) if what.contains("SNI"))
    );
    let mut ir = oauth2_gateway();
    ir.upstreams.last_mut().unwrap().tls.as_mut().unwrap().trust = CaTrust::Pem("nope".into());
    let err = translate(&ir).unwrap_err().to_string();
    assert!(err.contains("BEGIN CERTIFICATE"), "{err}");
}
