//! The OAuth2 mode on the host: configuration refusals, PKCE/state/nonce, the signed cookies
//! (tampered, expired, for another purpose), the callback (state mismatch, replayed code) and
//! the ID token checks, with ID tokens signed by the committed test-only RSA key.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use base64::{engine::general_purpose::STANDARD, Engine};
use jsonwebtoken::{encode, jwk::Jwk, Algorithm, EncodingKey, Header};
use nsight_auth_filter::{
    jwks::{parse_jwks, VerifyKey},
    oauth::{
        cookie::{self, Pending, Session, PENDING_COOKIE, SESSION_COOKIE},
        flow::{self, complete_login, complete_refresh, pkce_challenge, verify_id_token},
        route, Discovery, Oauth2Config, Random, Request, Step,
    },
    AuthConfig, ConfigError,
};
use serde_json::{json, Value};

const NOW: u64 = 1_800_000_000;
const ISS: &str = "https://idp.test";
const CLIENT: &str = "nsight-web";
const SECRET: &str = "web-secret-0123456789abcdef";

fn rsa() -> EncodingKey {
    let pem = std::fs::read(format!(
        "{}/tests/keys/rsa-test-only.pem",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    EncodingKey::from_rsa_pem(&pem).unwrap()
}

fn keys() -> Vec<VerifyKey> {
    let mut jwk = Jwk::from_encoding_key(&rsa(), Algorithm::RS256).unwrap();
    jwk.common.key_id = Some("rsa-1".into());
    parse_jwks(&json!({"keys": [serde_json::to_value(jwk).unwrap()]})).unwrap()
}

fn id_token(claims: &Value) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("rsa-1".into());
    encode(&header, claims, &rsa()).unwrap()
}

fn cookie_key() -> String {
    STANDARD.encode([7u8; 32])
}

fn raw_config(extra: Value) -> Value {
    let mut o = json!({"issuer": ISS, "cluster": "idp", "client_id": CLIENT,
        "client_secret": SECRET, "redirect_uri": "https://nsight.test/oauth2/callback",
        "cookie_key": cookie_key(), "audiences": ["nsight-cloud"], "listener_tls": true,
        "scopes": ["openid", "offline_access"]});
    for (k, v) in extra.as_object().unwrap() {
        o[k] = v.clone();
    }
    json!({"mode": "oauth2", "oauth2": o})
}

fn parse(extra: Value) -> Result<AuthConfig, ConfigError> {
    AuthConfig::parse(raw_config(extra).to_string().as_bytes())
}

fn cfg() -> Oauth2Config {
    match parse(json!({})).unwrap() {
        AuthConfig::Oauth2 { oauth2, .. } => *oauth2,
        other => panic!("{other:?}"),
    }
}

fn disc() -> Discovery {
    Discovery::parse(
        &cfg(),
        Some(200),
        json!({"issuer": ISS, "authorization_endpoint": "https://idp.test/auth",
               "token_endpoint": "https://idp.test/token", "jwks_uri": "https://idp.test/jwks",
               "end_session_endpoint": "https://idp.test/session/end",
               "code_challenge_methods_supported": ["S256"]})
        .to_string()
        .as_bytes(),
    )
    .unwrap()
}

fn rnd() -> Random {
    Random {
        state: [1; 32],
        nonce: [2; 32],
        verifier: [3; 32],
    }
}

fn get<'a>(path: &'a str, cookie: Option<&'a str>) -> Request<'a> {
    Request {
        method: "GET",
        path,
        authorization: None,
        cookie,
    }
}

fn header<'r>(r: &'r flow::Response, name: &str) -> Vec<&'r str> {
    r.headers
        .iter()
        .filter(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// A GET without a session: the redirect and the pending cookie's value.
fn start_sign_in(path: &str) -> (String, String) {
    let Step::Respond(r) = route(&cfg(), &disc(), &get(path, None), NOW, &rnd()) else {
        panic!("no redirect")
    };
    assert_eq!(r.status, 302);
    let location = header(&r, "location")[0].to_owned();
    let set = header(&r, "set-cookie")[0];
    let value = set
        .strip_prefix(&format!("{PENDING_COOKIE}="))
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    (location, value)
}

fn session_cookie(s: &Session) -> String {
    format!(
        "{SESSION_COOKIE}={}",
        cookie::seal(&cfg().cookie_key, "session", s)
    )
}

#[test]
fn refuses_a_listener_without_tls_and_weak_or_missing_settings() {
    let e = parse(json!({"listener_tls": false})).err().unwrap();
    assert!(e.to_string().contains("needs TLS on the listener"), "{e}");
    let e = parse(json!({"cookie_key": STANDARD.encode([1u8; 16])}))
        .err()
        .unwrap();
    assert!(e.to_string().contains("at least 32"), "{e}");
    let e = parse(json!({"redirect_uri": "http://nsight.test/cb"}))
        .err()
        .unwrap();
    assert!(e.to_string().contains("https://"), "{e}");
    let e = parse(json!({"scopes": ["api"]})).err().unwrap();
    assert!(e.to_string().contains("openid"), "{e}");
    let e = parse(json!({"logout_path": "/oauth2/callback"}))
        .err()
        .unwrap();
    assert!(e.to_string().contains("logout_path"), "{e}");
    assert!(matches!(
        parse(json!({"extra": 1})),
        Err(ConfigError::Parse(_))
    ));
}

#[test]
fn debug_never_shows_the_client_secret_or_cookie_key() {
    let shown = format!("{:?}", parse(json!({})).unwrap());
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(!shown.contains(&cookie_key()), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
}

#[test]
fn discovery_must_name_the_configured_issuer_and_support_s256() {
    let doc = |issuer: &str, methods: Value| {
        json!({"issuer": issuer, "authorization_endpoint": "https://idp.test/auth",
               "token_endpoint": "https://idp.test/token", "jwks_uri": "https://idp.test/jwks",
               "code_challenge_methods_supported": methods})
        .to_string()
    };
    let parse = |status, body: &str| Discovery::parse(&cfg(), status, body.as_bytes());
    assert!(parse(Some(200), &doc(ISS, json!(["S256"]))).is_ok());
    let e = parse(Some(200), &doc("https://evil.test", json!(["S256"]))).unwrap_err();
    assert!(e.contains("issuer"), "{e}");
    let e = parse(Some(200), &doc(ISS, json!(["plain"]))).unwrap_err();
    assert!(e.contains("S256"), "{e}");
    assert!(parse(Some(503), "{}").unwrap_err().contains("503"));
    assert!(parse(None, "").is_err());
    let remote = disc().jwks_remote(&cfg());
    assert_eq!(
        (remote.authority.as_str(), remote.path.as_str()),
        ("idp.test", "/jwks")
    );
}

#[test]
fn pkce_challenge_matches_rfc_7636_appendix_b() {
    assert_eq!(
        pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
        "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    );
}

#[test]
fn a_browser_without_session_is_sent_to_sign_in_with_pkce_state_and_nonce() {
    let (location, pending) = start_sign_in("/api/sessions?x=1");
    assert!(location.starts_with("https://idp.test/auth?"), "{location}");
    let p: Pending = cookie::open(&cfg().cookie_key, "pending", &pending).unwrap();
    for part in [
        "response_type=code".to_owned(),
        format!("client_id={CLIENT}"),
        "code_challenge_method=S256".to_owned(),
        format!("code_challenge={}", pkce_challenge(&p.verifier)),
        format!("state={}", p.state),
        format!("nonce={}", p.nonce),
        "scope=openid+offline_access".to_owned(),
        "redirect_uri=https%3A%2F%2Fnsight.test%2Foauth2%2Fcallback".to_owned(),
    ] {
        assert!(location.contains(&part), "{part} missing in {location}");
    }
    assert_eq!(p.return_to, "/api/sessions?x=1");
    assert_eq!(p.exp, NOW + flow::PENDING_TTL_S);
    // The verifier never leaves in the URL, only its challenge.
    assert!(!location.contains(&p.verifier));
    // Another request's random bytes give another state, nonce and verifier.
    let other = Random {
        state: [9; 32],
        nonce: [8; 32],
        verifier: [7; 32],
    };
    let Step::Respond(r) = route(&cfg(), &disc(), &get("/", None), NOW, &other) else {
        panic!()
    };
    assert!(!header(&r, "location")[0].contains(&p.state));
}

#[test]
fn cookies_are_secure_httponly_samesite_lax() {
    let set = cookie::set_cookie(SESSION_COOKIE, "v", 60);
    for attr in ["Secure", "HttpOnly", "SameSite=Lax", "Max-Age=60", "Path=/"] {
        assert!(set.contains(attr), "{set}");
    }
}

#[test]
fn offsite_return_paths_are_not_followed() {
    let (_, pending) = start_sign_in("//evil.test/x");
    let p: Pending = cookie::open(&cfg().cookie_key, "pending", &pending).unwrap();
    assert_eq!(p.return_to, "/");
}

#[test]
fn the_sign_in_entry_point_returns_to_the_page_that_asked() {
    // Not signed in: through the issuer, coming back to the page (`to`, decoded).
    let (location, pending) = start_sign_in("/oauth2/signin?to=%2Fsessions%3Ftag%3Dgpu");
    assert!(location.starts_with("https://idp.test/auth?"), "{location}");
    let p: Pending = cookie::open(&cfg().cookie_key, "pending", &pending).unwrap();
    assert_eq!(p.return_to, "/sessions?tag=gpu");
    // Another origin, a missing `to`, or the filter's own paths: back to `/`.
    for bad in [
        "/oauth2/signin?to=%2F%2Fevil.test%2F",
        "/oauth2/signin?to=https%3A%2F%2Fevil.test%2F",
        "/oauth2/signin",
        "/oauth2/signin?to=%2Foauth2%2Flogout",
        "/oauth2/signin?to=%2Foauth2%2Fsignin%3Fto%3D%2Fx",
    ] {
        let (_, pending) = start_sign_in(bad);
        let p: Pending = cookie::open(&cfg().cookie_key, "pending", &pending).unwrap();
        assert_eq!(p.return_to, "/", "{bad}");
    }
    // Signed in: straight back, no new sign-in.
    let c = session_cookie(&Session {
        sub: "alice".into(),
        exp: NOW + 60,
        until: NOW + 3600,
        rt: None,
    });
    let Step::Respond(r) = route(
        &cfg(),
        &disc(),
        &get("/oauth2/signin?to=%2Fjobs", Some(&c)),
        NOW,
        &rnd(),
    ) else {
        panic!("no answer")
    };
    assert_eq!((r.status, header(&r, "location")), (302, vec!["/jobs"]));
    assert!(header(&r, "set-cookie").is_empty());
    // Its path is refused where it would shadow the callback or the logout.
    for clash in ["/oauth2/callback", "/oauth2/logout", "signin"] {
        let e = parse(json!({"signin_path": clash})).err().unwrap();
        assert!(e.to_string().contains("`oauth2.signin_path`"), "{e}");
    }
}

#[test]
fn a_valid_session_passes_and_names_its_subject() {
    let s = Session {
        sub: "alice".into(),
        exp: NOW + 60,
        until: NOW + 3600,
        rt: None,
    };
    let c = session_cookie(&s);
    let step = route(
        &cfg(),
        &disc(),
        &get("/x", Some(&format!("a=b; {c}"))),
        NOW,
        &rnd(),
    );
    assert_eq!(
        step,
        Step::Allow {
            identity: "alice".into()
        }
    );
}

#[test]
fn tampered_cookie_is_refused_with_a_new_sign_in_or_401() {
    let s = Session {
        sub: "alice".into(),
        exp: NOW + 60,
        until: NOW + 3600,
        rt: None,
    };
    let sealed = cookie::seal(&cfg().cookie_key, "session", &s);
    let (payload, tag) = sealed.split_once('.').unwrap();
    // Claims changed by the client (sub: admin), old MAC kept.
    let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"sub": "admin", "exp": NOW + 60, "until": NOW + 3600}).to_string());
    for bad in [
        format!("{forged}.{tag}"),
        format!("{payload}.{}", &tag[1..]),
        format!("{payload}x.{tag}"),
        "garbage".to_owned(),
        // Sealed under another key.
        cookie::seal(&[9; 32], "session", &s),
        // A pending cookie presented as a session.
        cookie::seal(&cfg().cookie_key, "pending", &s),
    ] {
        assert!(cookie::open::<Session>(&cfg().cookie_key, "session", &bad).is_err());
        let c = format!("{SESSION_COOKIE}={bad}");
        match route(&cfg(), &disc(), &get("/x", Some(&c)), NOW, &rnd()) {
            Step::Respond(r) => {
                assert_eq!(r.status, 302, "{bad}");
                assert!(header(&r, "set-cookie")
                    .iter()
                    .any(|c| c.starts_with(&format!("{SESSION_COOKIE}=;"))));
            }
            other => panic!("{bad}: {other:?}"),
        }
        let post = Request {
            method: "POST",
            ..get("/x", Some(&c))
        };
        match route(&cfg(), &disc(), &post, NOW, &rnd()) {
            Step::Respond(r) => assert_eq!(r.status, 401, "{}", r.body),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn expired_cookie_refreshes_with_a_refresh_token_else_signs_in_again() {
    let mut s = Session {
        sub: "alice".into(),
        exp: NOW - 1,
        until: NOW + 3600,
        rt: None,
    };
    let step = route(
        &cfg(),
        &disc(),
        &get("/x", Some(&session_cookie(&s))),
        NOW,
        &rnd(),
    );
    assert!(
        matches!(step, Step::Respond(ref r) if r.status == 302),
        "{step:?}"
    );
    s.rt = Some("rt-1".into());
    match route(
        &cfg(),
        &disc(),
        &get("/x", Some(&session_cookie(&s))),
        NOW,
        &rnd(),
    ) {
        Step::Refresh { request, session } => {
            assert_eq!(session, s);
            assert_eq!(request.path, "/token");
            assert!(request.body.contains("grant_type=refresh_token"));
            assert!(request.body.contains("refresh_token=rt-1"));
            let basic = request.headers(&cfg());
            let auth = &basic.iter().find(|(k, _)| k == "authorization").unwrap().1;
            assert_eq!(
                auth,
                &format!("Basic {}", STANDARD.encode(format!("{CLIENT}:{SECRET}")))
            );
        }
        other => panic!("{other:?}"),
    }
    // Past `until`, even a refresh token does not extend the session.
    s.until = NOW;
    let step = route(
        &cfg(),
        &disc(),
        &get("/x", Some(&session_cookie(&s))),
        NOW,
        &rnd(),
    );
    assert!(
        matches!(step, Step::Respond(ref r) if r.status == 302),
        "{step:?}"
    );
}

fn callback(query: &str, pending: Option<&str>) -> Step {
    let path = format!("/oauth2/callback?{query}");
    let cookie = pending.map(|p| format!("{PENDING_COOKIE}={p}"));
    route(&cfg(), &disc(), &get(&path, cookie.as_deref()), NOW, &rnd())
}

#[test]
fn callback_with_matching_state_exchanges_the_code_with_the_verifier() {
    let (_, pending) = start_sign_in("/x");
    let p: Pending = cookie::open(&cfg().cookie_key, "pending", &pending).unwrap();
    match callback(&format!("code=c0de&state={}", p.state), Some(&pending)) {
        Step::Exchange { request, pending } => {
            assert_eq!(pending, p);
            assert!(request.body.contains("grant_type=authorization_code"));
            assert!(request.body.contains("code=c0de"));
            assert!(request
                .body
                .contains(&format!("code_verifier={}", p.verifier)));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn state_mismatch_missing_or_expired_sign_in_are_refused_before_any_exchange() {
    let (_, pending) = start_sign_in("/x");
    let refused = |step: Step, status: u16, says: &str| match step {
        Step::Respond(r) => {
            assert_eq!(r.status, status, "{}", r.body);
            assert!(r.body.contains(says), "{}", r.body);
        }
        other => panic!("{other:?}"),
    };
    refused(
        callback("code=c&state=attacker", Some(&pending)),
        400,
        "state does not match",
    );
    refused(
        callback("code=c", Some(&pending)),
        400,
        "state does not match",
    );
    refused(
        callback("code=c&state=x", None),
        400,
        "no sign-in is in progress",
    );
    refused(
        callback("error=access_denied&state=x", Some(&pending)),
        401,
        "access_denied",
    );
    // The pending cookie expired (ten minutes later).
    let late = route(
        &cfg(),
        &disc(),
        &get(
            "/oauth2/callback?code=c",
            Some(&format!("{PENDING_COOKIE}={pending}")),
        ),
        NOW + flow::PENDING_TTL_S,
        &rnd(),
    );
    refused(late, 400, "took too long");
}

fn id_claims(nonce: &str) -> Value {
    json!({"iss": ISS, "aud": CLIENT, "sub": "alice", "exp": NOW + 600, "iat": NOW,
           "nonce": nonce})
}

#[test]
fn login_completes_with_a_valid_id_token_and_sets_the_session() {
    let (_, sealed) = start_sign_in("/x?y=1");
    let p: Pending = cookie::open(&cfg().cookie_key, "pending", &sealed).unwrap();
    let body = json!({"access_token": "at", "id_token": id_token(&id_claims(&p.nonce)),
                      "refresh_token": "rt-1", "token_type": "Bearer", "expires_in": 600});
    let r = complete_login(
        &cfg(),
        &keys(),
        &p,
        Some(200),
        body.to_string().as_bytes(),
        NOW,
    );
    assert_eq!(r.status, 302, "{}", r.body);
    assert_eq!(header(&r, "location"), vec!["/x?y=1"]);
    let set = header(&r, "set-cookie");
    let session = set
        .iter()
        .find_map(|c| c.strip_prefix(&format!("{SESSION_COOKIE}=")))
        .unwrap()
        .split(';')
        .next()
        .unwrap();
    let s: Session = cookie::open(&cfg().cookie_key, "session", session).unwrap();
    assert_eq!(
        (s.sub.as_str(), s.exp, s.rt.as_deref()),
        ("alice", NOW + 600, Some("rt-1"))
    );
    // The access and ID tokens are not in the cookie.
    let raw = String::from_utf8(
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(session.split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert!(!raw.contains("\"at\"") && !raw.contains("eyJ"), "{raw}");
    assert!(set
        .iter()
        .any(|c| c.starts_with(&format!("{PENDING_COOKIE}=;"))));
}

#[test]
fn replayed_code_refused_by_the_issuer_gives_401_and_no_session() {
    let (_, sealed) = start_sign_in("/x");
    let p: Pending = cookie::open(&cfg().cookie_key, "pending", &sealed).unwrap();
    let body = json!({"error": "invalid_grant", "error_description": "grant request is invalid"});
    let r = complete_login(
        &cfg(),
        &keys(),
        &p,
        Some(400),
        body.to_string().as_bytes(),
        NOW,
    );
    assert_eq!(r.status, 401);
    assert!(r.body.contains("invalid_grant"), "{}", r.body);
    assert!(!header(&r, "set-cookie")
        .iter()
        .any(|c| c.starts_with(&format!("{SESSION_COOKIE}=")) && !c.contains("Max-Age=0")));
}

#[test]
fn id_token_with_wrong_nonce_audience_or_signature_is_refused() {
    let cfg = cfg();
    let ok = id_token(&id_claims("n1"));
    assert_eq!(
        verify_id_token(&cfg, &keys(), &ok, NOW, Some("n1")).unwrap(),
        ("alice".to_owned(), NOW + 600)
    );
    let e = verify_id_token(&cfg, &keys(), &ok, NOW, Some("n2")).unwrap_err();
    assert!(e.contains("nonce"), "{e}");
    let mut other_aud = id_claims("n1");
    other_aud["aud"] = json!("someone-else");
    assert!(verify_id_token(&cfg, &keys(), &id_token(&other_aud), NOW, Some("n1")).is_err());
    let mut tampered = ok.split('.').map(str::to_owned).collect::<Vec<_>>();
    tampered[1] = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(id_claims("n1").to_string().replace("alice", "admin"));
    assert!(verify_id_token(&cfg, &keys(), &tampered.join("."), NOW, Some("n1")).is_err());
    assert!(verify_id_token(&cfg, &keys(), &ok, NOW + 3600, Some("n1")).is_err());
}

#[test]
fn refresh_renews_the_session_and_keeps_its_end() {
    let s = Session {
        sub: "alice".into(),
        exp: NOW - 1,
        until: NOW + 3600,
        rt: Some("rt-1".into()),
    };
    let mut claims = id_claims("ignored");
    claims["exp"] = json!(NOW + 300);
    let body = json!({"id_token": id_token(&claims), "refresh_token": "rt-2"}).to_string();
    let (renewed, set) =
        complete_refresh(&cfg(), &keys(), &s, Some(200), body.as_bytes(), NOW).unwrap();
    assert_eq!((renewed.exp, renewed.until), (NOW + 300, NOW + 3600));
    assert_eq!(renewed.rt.as_deref(), Some("rt-2"));
    assert!(set.starts_with(&format!("{SESSION_COOKIE}=")));
    let mut other = claims.clone();
    other["sub"] = json!("mallory");
    let body = json!({"id_token": id_token(&other)}).to_string();
    assert!(complete_refresh(&cfg(), &keys(), &s, Some(200), body.as_bytes(), NOW).is_err());
    let body = json!({"error": "invalid_grant"}).to_string();
    assert!(complete_refresh(&cfg(), &keys(), &s, Some(400), body.as_bytes(), NOW).is_err());
}

#[test]
fn logout_clears_the_cookies_and_goes_to_the_end_session_endpoint() {
    let Step::Respond(r) = route(&cfg(), &disc(), &get("/oauth2/logout", None), NOW, &rnd()) else {
        panic!()
    };
    assert_eq!(r.status, 302);
    assert!(header(&r, "location")[0].starts_with("https://idp.test/session/end?client_id="));
    let set = header(&r, "set-cookie");
    assert!(
        set.contains(&cookie::clear_cookie(SESSION_COOKIE).as_str()),
        "{set:?}"
    );
}

#[test]
fn bearer_requests_and_non_browser_requests_go_to_the_bearer_policy() {
    let req = Request {
        authorization: Some("Bearer x.y.z"),
        ..get("/x", None)
    };
    assert_eq!(route(&cfg(), &disc(), &req, NOW, &rnd()), Step::Bearer);
    let post = Request {
        method: "POST",
        ..get("/x", None)
    };
    assert_eq!(route(&cfg(), &disc(), &post, NOW, &rnd()), Step::Bearer);
}
