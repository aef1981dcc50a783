//! `nsight-cloud login` with the browser flow (authorization code + PKCE on a loopback
//! redirect) against a real OpenID provider (npm oidc-provider): the test plays the browser
//! on the URL the CLI prints (the provider's login page, then the CLI's callback); the token
//! is stored 0600 with its refresh token. A forged callback (wrong state) fails the login.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::{
    io::{BufRead, BufReader},
    os::unix::fs::PermissionsExt,
    path::Path,
    process::{Child, Command, Stdio},
};

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use nsight_e2e::{
    bin,
    browser::Browser,
    free_port,
    oidc::{OidcProvider, AUDIENCE},
    TempDir,
};
use serde_json::{json, Value};

const CODE_CLIENT: &str = "nsight-cli-code";

fn cli(config: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin("nsight-cloud"));
    c.arg("--config")
        .arg(config)
        .args(args)
        .env_remove("NSIGHT_API_KEY")
        .env_remove("NSIGHT_OAUTH_CLIENT_SECRET");
    c
}

/// Starts `login` (no real browser: `BROWSER=true`) and reads the URL it prints.
fn start_login(config: &Path, port: u16) -> (Child, String) {
    let mut child = cli(config, &["login"])
        .env("NSIGHT_OAUTH_REDIRECT_PORT", port.to_string())
        .env("BROWSER", "true")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut shown = String::new();
    let url = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "CLI said:\n{shown}"
        );
        shown.push_str(&line);
        if line.starts_with("http") && line.contains("code_challenge=") {
            break line.trim().to_owned();
        }
    };
    // Keep draining stderr so the CLI never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut rest = String::new();
        while stderr.read_line(&mut rest).unwrap_or(0) > 0 {}
    });
    (child, url)
}

#[test]
fn browser_login_stores_tokens_and_refuses_a_forged_callback() {
    let dir = TempDir::new("cli-oauth-code");
    let port = free_port();
    let client = json!({"client_id": CODE_CLIENT, "token_endpoint_auth_method": "none",
        "application_type": "native", "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"], "redirect_uris": [format!("http://localhost:{port}/callback")]});
    let op = OidcProvider::start_with(600, &[client], 600);
    let config = dir.path().join("nsight-cloud.conf");
    let out = cli(
        &config,
        &[
            "configure",
            "--gw",
            "http://127.0.0.1:9",
            "--issuer",
            &op.issuer,
            "--clientid",
            CODE_CLIENT,
            "--oauth-flow-type",
            "code",
            "--scope",
            "openid offline_access api",
        ],
    )
    .output()
    .unwrap();
    assert!(out.status.success(), "{out:?}");

    let (child, url) = start_login(&config, port);
    for part in [
        "code_challenge_method=S256",
        "response_type=code",
        "state=",
        &format!("redirect_uri=http%3A%2F%2Flocalhost%3A{port}%2Fcallback"),
    ] {
        assert!(url.contains(part), "{part} missing in {url}");
    }
    assert!(url.starts_with(&op.authorization_endpoint()), "{url}");
    let mut browser = Browser::new(None);
    let callback = browser
        .sign_in_at_provider(&url, "dana")
        .unwrap_or_else(|e| panic!("{e}\n{}", op.log()));
    assert!(callback.starts_with(&format!("http://localhost:{port}/callback?code=")));
    let page = browser.get(&callback).unwrap();
    assert_eq!(page.status, 200, "{page:?}");
    assert!(page.body.contains("Signed in"), "{}", page.body);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", op.log());
    assert!(stdout.contains("Logged in to"), "{stdout}");

    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the config holds tokens");
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let token = &stored["auth"]["token"];
    assert!(token["refreshToken"].is_string(), "{token}");
    let access = token["accessToken"].as_str().unwrap();
    let claims: Value = serde_json::from_slice(
        &URL_SAFE_NO_PAD
            .decode(access.split('.').nth(1).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(claims["sub"], "dana", "{claims}");
    assert_eq!(claims["aud"], AUDIENCE, "{claims}");
    assert_eq!(claims["iss"], json!(op.issuer));

    // A forged callback (a state the CLI did not issue) fails the login; nothing is stored.
    let before = std::fs::read_to_string(&config).unwrap();
    let (child, _url) = start_login(&config, port);
    let page = Browser::new(None)
        .get(&format!(
            "http://localhost:{port}/callback?code=stolen&state=forged"
        ))
        .unwrap();
    assert_eq!(page.status, 400, "{page:?}");
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
}
