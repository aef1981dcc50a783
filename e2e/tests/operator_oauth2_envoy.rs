//! An OAuth2 NsightGateway, translated by the operator (`xds::translate`, pure) and published by
//! our ADS server, in a real Envoy: the issuer's upstream cluster with TLS (SNI, the name
//! checked, the CA from the client Secret's `ca.crt`) is accepted and used. The issuer is a
//! TLS listener of the same Envoy (certificate for `localhost` from a test CA) in front of a
//! minimal discovery + JWKS responder: only its reachability over the rendered TLS cluster is
//! under test here (the OAuth2 flows against a real OpenID provider are in `envoy_oauth2.rs`).
//!
//! First the client Secret has no `ca.crt` (the system bundle, which does not trust the test
//! CA): the filter cannot load the discovery document (Envoy answers its call 503) and requests
//! get 503. Then `ca.crt` is added: discovery and JWKS load over TLS, a browser is redirected to
//! the issuer with the derived redirect URI, a bearer token of the issuer and the API key pass.
//! With the UI public at `/`, the filter still answers its own paths: the sign-in entry point
//! the UI links to redirects to the issuer, and the callback is never the UI's.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use k8s_openapi::api::core::v1::{Secret, Service};
use nsight_api::NsightGateway;
use nsight_e2e::{
    browser::Browser,
    free_port,
    gateway::{named_upstream, LocalGateway},
    jwt::TestKeys,
    wait_for, wasm_artifact,
};
use nsight_gateway::{
    bootstrap::AdsFlavor,
    cache::node_id,
    ir::{GatewayIr, Listener, Route, TlsSecret, Upstream},
};
use nsight_operator::xds::translate::{translate, Inputs, XdsSettings};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use serde_json::{json, Value};

const CLIENT_SECRET: &str = "client-secret-test-only";
const API_KEY: &str = "api-key-0123456789abcdef";

/// Answers `/.well-known/openid-configuration` and `/jwks` (plain HTTP, behind Envoy's TLS).
fn idp_responder(issuer: String, jwks: Value) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (issuer, jwks) = (issuer.clone(), jwks.clone());
            std::thread::spawn(move || {
                let _ = idp_connection(stream, &issuer, &jwks);
            });
        }
    });
    addr
}

fn idp_connection(stream: TcpStream, issuer: &str, jwks: &Value) -> std::io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let mut length = 0u64;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 {
                return Ok(());
            }
            let lower = header.trim().to_ascii_lowercase();
            if lower.is_empty() {
                break;
            }
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        std::io::copy(&mut (&mut reader).take(length), &mut std::io::sink())?;
        let (status, body) = match path.as_str() {
            "/.well-known/openid-configuration" => (
                "200 OK",
                json!({"issuer": issuer,
                       "authorization_endpoint": format!("{issuer}/auth"),
                       "token_endpoint": format!("{issuer}/token"),
                       "jwks_uri": format!("{issuer}/jwks"),
                       "response_types_supported": ["code"],
                       "code_challenge_methods_supported": ["S256"]})
                .to_string(),
            ),
            "/jwks" => ("200 OK", jwks.to_string()),
            _ => ("404 Not Found", "{}".to_owned()),
        };
        write!(
            writer,
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )?;
    }
}

/// A test CA and a certificate for `localhost` signed by it: (CA PEM, chain PEM, key PEM).
/// Distinct subject names: with rcgen's default name on both, Envoy (BoringSSL) would take the
/// leaf for a self-signed certificate.
fn pki() -> (String, String, String) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "nsight test IdP CA (test only)");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".into()]).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    let cert = leaf.signed_by(&key, &ca).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "team"},
        "stringData": data.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect::<serde_json::Map<_, _>>(),
    }))
    .unwrap()
}

#[test]
fn operator_built_oauth2_gateway_reaches_its_issuer_over_tls() {
    let keys = TestKeys::new();
    let (ca, chain, key) = pki();
    let (gw_port, idp_port) = (free_port(), free_port());
    let issuer = format!("https://localhost:{idp_port}");
    let responder = idp_responder(issuer.clone(), keys.jwks());
    let coordinator = named_upstream("coordinator");
    let ui = named_upstream("ui");

    let gateway: NsightGateway = serde_json::from_value(json!({
        "apiVersion": "nvidia.com/v1alpha1", "kind": "NsightGateway",
        "metadata": {"name": "gw", "namespace": "team"},
        "spec": {"port": gw_port, "tlsSecretRef": {"name": "gw-tls"},
                 "authentication": {
                     "oauth2": {"enabled": true, "issuer": issuer, "clientId": "nsight-web",
                                "clientSecretRef": {"name": "oauth"},
                                "audiences": ["nsight-cloud"], "identityClaim": "groups"},
                     "apikey": {"enabled": true, "key": API_KEY}}}}))
    .unwrap();
    let service = |name: &str, component: &str, port: u16| -> Service {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "team",
                         "labels": {"app.kubernetes.io/component": component,
                                    "app.kubernetes.io/managed-by": "nsight-operator"}},
            "spec": {"type": "ExternalName", "externalName": "127.0.0.1",
                     "ports": [{"name": "http", "port": port}]}}))
        .unwrap()
    };
    // The UI is served at `/` without auth, as the operator routes it.
    let services = vec![
        service("coord", "coordinator", coordinator.port()),
        service("ui", "cloud-ui", ui.port()),
    ];
    let settings = XdsSettings {
        wasm_path: wasm_artifact("nsight_auth_filter.wasm"),
        listen_address: "127.0.0.1".into(),
        ..XdsSettings::default()
    };
    let hmac = "aG1hYy1rZXktMzItYnl0ZXMtb2YtdGVzdC1vbmx5LS0=";
    let ir_with = |with_ca: bool| -> GatewayIr {
        let mut oauth: Vec<(&str, &str)> =
            vec![("client_secret.key", CLIENT_SECRET), ("hmac.key", hmac)];
        if with_ca {
            oauth.push(("ca.crt", &ca));
        }
        let secrets = BTreeMap::from([
            (
                "gw-tls".to_owned(),
                secret("gw-tls", &[("tls.crt", &chain), ("tls.key", &key)]),
            ),
            ("oauth".to_owned(), secret("oauth", &oauth)),
        ]);
        let now = i64::try_from(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs(),
        )
        .unwrap();
        let out = translate(
            &Inputs {
                gateway: &gateway,
                services: &services,
                secrets: &secrets,
                gateway_tokens: &BTreeMap::new(),
                now,
            },
            &settings,
        );
        let mut ir = out
            .ir
            .unwrap_or_else(|e| panic!("{e}: {:?}", out.conditions));
        // The issuer: a TLS listener of the same Envoy in front of the responder.
        ir.secrets.push(TlsSecret {
            name: "idp-tls".into(),
            cert_chain_pem: chain.clone(),
            private_key_pem: key.clone(),
        });
        ir.upstreams
            .push(Upstream::new("idp-plain", "127.0.0.1", responder.port()));
        let mut idp = Listener::http("idp", "127.0.0.1", idp_port);
        idp.tls_secret = Some("idp-tls".into());
        idp.routes.push(Route::api("/", "idp-plain"));
        ir.listeners.push(idp);
        ir
    };

    let node = node_id::gateway("team", "gw");
    let gw = LocalGateway::start(&node, AdsFlavor::Delta);
    gw.xds().set_ir(&node, &ir_with(false)).unwrap();
    gw.wait_ready();
    let base = format!("https://localhost:{gw_port}");
    let mut browser = Browser::new(Some(&ca));

    // System CAs only: the issuer's certificate is not trusted, discovery cannot load.
    let refused = wait_for(Duration::from_secs(20), || {
        gw.envoy_log()
            .contains(&format!(
                "fetching the OpenID configuration of {issuer} failed: the issuer answered 503"
            ))
            .then_some(())
    });
    assert!(
        refused.is_some(),
        "an untrusted issuer certificate must fail discovery; log:\n{}",
        gw.envoy_log()
    );
    let page = browser.get(&format!("{base}/coordinator/x")).unwrap();
    assert_eq!(page.status, 503, "{page:?}");
    assert!(gw.xds().nacks().is_empty(), "{:?}", gw.xds().nacks());

    // The Secret's ca.crt: the cluster now trusts the test CA; discovery and JWKS load.
    gw.xds().set_ir(&node, &ir_with(true)).unwrap();
    let redirect = wait_for(Duration::from_secs(30), || {
        let page = browser.get(&format!("{base}/coordinator/x")).ok()?;
        (page.status == 302).then_some(page)
    })
    .unwrap_or_else(|| {
        let admin = gw.envoy.admin_addr();
        let stats = browser
            .get(&format!("http://{admin}/stats?filter=oauth2-idp"))
            .map(|p| p.body);
        panic!(
            "never redirected to the issuer; stats:\n{}\nlog:\n{}",
            stats.unwrap_or_default(),
            gw.envoy_log()
        )
    });
    let location = redirect.location.unwrap();
    assert!(
        location.starts_with(&format!("{issuer}/auth?")),
        "{location}"
    );
    let callback = format!("https%3A%2F%2Flocalhost%3A{gw_port}%2Foauth2%2Fcallback");
    assert!(
        location.contains(&format!("redirect_uri={callback}")),
        "the redirect URI derived from the certificate's name and the port: {location}"
    );
    assert!(location.contains("client_id=nsight-web"), "{location}");
    assert!(gw.envoy_log().contains("loaded the OpenID configuration"));

    // The UI is public; the filter's own paths are not the UI's: the sign-in entry point the
    // UI links to goes to the issuer (to come back to the UI's view), and the callback is
    // answered by the filter, not by the UI.
    let page = browser.get(&format!("{base}/?tab=jobs")).unwrap();
    assert_eq!(
        (page.status, page.body.as_str()),
        (200, "ui /?tab=jobs"),
        "{page:?}"
    );
    let signin = browser
        .get(&format!("{base}/oauth2/signin?to=%2F%3Ftab%3Djobs"))
        .unwrap();
    assert_eq!(signin.status, 302, "{signin:?}");
    let to_issuer = signin.location.clone().unwrap();
    assert!(
        to_issuer.starts_with(&format!("{issuer}/auth?")),
        "{to_issuer}"
    );
    let callback_page = browser
        .get(&format!("{base}/oauth2/callback?code=c&state=s"))
        .unwrap();
    assert!(
        (400..500).contains(&callback_page.status) && !callback_page.body.starts_with("ui "),
        "the filter answers its callback: {callback_page:?}"
    );

    // A bearer token of the issuer (identity from the `groups` claim) and the API key pass.
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let claims = json!({"iss": issuer, "aud": "nsight-cloud", "sub": "alice",
                        "groups": ["team"], "exp": now + 600, "iat": now});
    let bearer = format!("Bearer {}", keys.sign("ES256", "ec-1", &claims));
    let ok = wait_for(Duration::from_secs(20), || {
        let page = browser
            .get_with(
                &format!("{base}/coordinator/x"),
                &[("Authorization", &bearer)],
            )
            .ok()?;
        (page.status == 200).then_some(page)
    })
    .unwrap_or_else(|| panic!("the bearer token never passed; log:\n{}", gw.envoy_log()));
    assert_eq!(ok.body, "coordinator /coordinator/x");
    let key_page = browser
        .get_with(
            &format!("{base}/coordinator/y"),
            &[("Authorization", &format!("Bearer {API_KEY}"))],
        )
        .unwrap();
    assert_eq!(key_page.status, 200, "{key_page:?}");
    assert!(gw.xds().nacks().is_empty(), "{:?}", gw.xds().nacks());
    assert!(
        !gw.envoy_log().contains(CLIENT_SECRET),
        "the client secret reached Envoy's log"
    );
}
