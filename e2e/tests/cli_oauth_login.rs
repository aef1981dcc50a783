//! `nsight-cloud login` against a real OpenID provider (npm oidc-provider) and a real Envoy
//! running our auth filter (JWT mode, the provider's jwks_uri) in front of a real coordinator:
//! the device flow (the test plays the user in the provider's pages), the token stored 0600
//! and sent as a bearer token, refreshed with the refresh token when it is about to expire;
//! the client-credentials flow for machines.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::{
    io::{BufRead, BufReader},
    net::SocketAddr,
    os::unix::fs::PermissionsExt,
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use nsight_e2e::{
    bin,
    envoy::{auth_filter_config_with_clusters, Behind},
    envoy_bin, free_port,
    oidc::{approve_device, OidcProvider, AUDIENCE, CLI_CLIENT, MACHINE_CLIENT, MACHINE_SECRET},
    platform::CoordinatorProcess,
    process::Running,
    wait_for, wait_for_tcp, wasm_artifact, TempDir,
};
use serde_json::{json, Value};

/// Access-token lifetime: the CLI refreshes a token expiring within 30 s, so a 40 s token
/// needs a refresh 10 s after it was issued.
const TTL_S: u64 = 40;

struct Stack {
    op: OidcProvider,
    _coordinator: CoordinatorProcess,
    envoy: Running,
    gateway: SocketAddr,
    dir: TempDir,
}

fn stack() -> Stack {
    let dir = TempDir::new("cli-oauth");
    let op = OidcProvider::start(TTL_S);
    let coordinator = CoordinatorProcess::start(&dir.path().join("state"), 15_000);
    let config = json!({"mode": "jwt", "jwt": {"issuer": op.issuer, "audiences": [AUDIENCE],
        "clock_skew_s": 0,
        "remote_jwks": {"cluster": "idp", "uri": op.jwks_uri(), "min_refresh_interval_s": 1}}});
    let (listen, admin) = (free_port(), free_port());
    let yaml = auth_filter_config_with_clusters(
        listen,
        admin,
        &wasm_artifact("nsight_auth_filter.wasm"),
        &config.to_string(),
        Behind::Upstream(coordinator.http),
        &[("idp", op.addr)],
    );
    std::fs::write(dir.path().join("envoy.yaml"), yaml).unwrap();
    let mut cmd = Command::new(envoy_bin());
    cmd.arg("-c").arg(dir.path().join("envoy.yaml")).args([
        "--use-dynamic-base-id",
        "--concurrency",
        "1",
    ]);
    let envoy = Running::spawn("envoy", cmd, &dir.path().join("envoy.log"));
    let gateway: SocketAddr = ([127, 0, 0, 1], listen).into();
    assert!(
        wait_for_tcp(gateway, Duration::from_secs(20)),
        "{}",
        envoy.log()
    );
    // Wait until the filter has the provider's keys (503 before).
    let ready = wait_for(Duration::from_secs(15), || {
        envoy
            .log()
            .contains("loaded 1 signing key(s)")
            .then_some(())
    });
    assert!(ready.is_some(), "{}", envoy.log());
    Stack {
        op,
        _coordinator: coordinator,
        envoy,
        gateway,
        dir,
    }
}

/// `nsight-cloud --config <config> <args>` with `env`: (exit code, stdout, stderr).
fn cli(config: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(bin("nsight-cloud"))
        .arg("--config")
        .arg(config)
        .args(args)
        .env_remove("NSIGHT_API_KEY")
        .env_remove("NSIGHT_OAUTH_CLIENT_SECRET")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stored_token(config: &Path) -> Value {
    let text = std::fs::read_to_string(config).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["auth"]["token"].clone()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn device_login_stores_a_token_sends_it_through_the_gateway_and_refreshes_it() {
    let s = stack();
    let config = s.dir.path().join("nsight-cloud.conf");
    let gw = format!("http://{}", s.gateway);
    let (code, out, err) = cli(
        &config,
        &[
            "configure",
            "--gw",
            &gw,
            "--issuer",
            &s.op.issuer,
            "--clientid",
            CLI_CLIENT,
            "--oauth-flow-type",
            "device",
            "--scope",
            "openid offline_access api",
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        format!("{out}{err}").contains("nsight-cloud login"),
        "{out}\n{err}"
    );

    // Not logged in yet: a clear error, exit 2.
    let (code, _, err) = cli(&config, &["--tag", "t", "status"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("not logged in") && err.contains("login"),
        "{err}"
    );

    // login: the CLI prints where to go; the test signs in there as alice.
    let mut child = Command::new(bin("nsight-cloud"))
        .arg("--config")
        .arg(&config)
        .arg("login")
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
        if let Some(url) = line.trim().strip_prefix("(or open ") {
            break url.trim_end_matches(')').to_owned();
        }
    };
    assert!(shown.contains("enter the code"), "{shown}");
    approve_device(&url, "alice").unwrap_or_else(|e| panic!("{e}\n{}", s.op.log()));
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", s.op.log());
    assert!(stdout.contains("Logged in to"), "{stdout}");
    assert_eq!(mode(&config), 0o600, "the config holds tokens");
    let first = stored_token(&config);
    assert!(first["refreshToken"].is_string(), "{first}");
    let access = first["accessToken"].as_str().unwrap().to_owned();

    // Commands send it as a bearer token: through Envoy and our filter to the coordinator.
    let (code, out, err) = cli(&config, &["--tag", "t", "--output", "json", "status"], &[]);
    assert_eq!(code, 0, "{out}\n{err}\n{}", s.envoy.log());
    assert!(serde_json::from_str::<Value>(&out).is_ok(), "{out}");
    assert_eq!(
        stored_token(&config)["accessToken"],
        json!(access),
        "not refreshed yet"
    );

    // A token the gateway refuses (tampered in the file) is refused with the filter's reason.
    let text = std::fs::read_to_string(&config).unwrap();
    let parts: Vec<&str> = access.split('.').collect();
    let tampered = format!("{}.{}x.{}", parts[0], parts[1], parts[2]);
    std::fs::write(&config, text.replace(&access, &tampered)).unwrap();
    let (code, _, err) = cli(&config, &["--tag", "t", "status"], &[]);
    assert_ne!(code, 0);
    assert!(
        err.contains("401") || err.contains("not a well-formed") || err.contains("signature"),
        "{err}"
    );
    std::fs::write(&config, text).unwrap();

    // Ten seconds later the token is within 30 s of expiry: the next command refreshes it
    // with the refresh token, stores the new one (still 0600) and uses it.
    std::thread::sleep(Duration::from_secs(TTL_S - 30 + 1));
    let (code, out, err) = cli(&config, &["--tag", "t", "-v", "status"], &[]);
    assert_eq!(code, 0, "{out}\n{err}\n{}", s.op.log());
    assert!(err.contains("refreshed the OAuth2 access token"), "{err}");
    let second = stored_token(&config);
    assert_ne!(second["accessToken"], first["accessToken"]);
    assert!(second["expiresAt"].as_u64() > first["expiresAt"].as_u64());
    assert_eq!(mode(&config), 0o600);
}

#[test]
fn client_credentials_login_for_machines() {
    let s = stack();
    let config = s.dir.path().join("machine.conf");
    let gw = format!("http://{}", s.gateway);
    let (code, out, err) = cli(
        &config,
        &[
            "configure",
            "--gw",
            &gw,
            "--issuer",
            &s.op.issuer,
            "--clientid",
            MACHINE_CLIENT,
            "--oauth-flow-type",
            "client-credentials",
        ],
        &[],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    // Without the secret: exit 2, saying where it goes.
    let (code, _, err) = cli(&config, &["login"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("NSIGHT_OAUTH_CLIENT_SECRET"), "{err}");
    // A wrong secret: the issuer's refusal.
    let (code, _, err) = cli(
        &config,
        &["login"],
        &[("NSIGHT_OAUTH_CLIENT_SECRET", "wrong")],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("refused the client credentials request"),
        "{err}"
    );

    let secret = [("NSIGHT_OAUTH_CLIENT_SECRET", MACHINE_SECRET)];
    let (code, out, err) = cli(&config, &["login"], &secret);
    assert_eq!(code, 0, "{out}\n{err}\n{}", s.op.log());
    assert_eq!(mode(&config), 0o600);
    let token = stored_token(&config);
    assert!(token["refreshToken"].is_null(), "{token}");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        !text.contains(MACHINE_SECRET),
        "the client secret is never stored"
    );

    let (code, out, err) = cli(&config, &["--tag", "t", "status"], &[]);
    assert_eq!(code, 0, "{out}\n{err}\n{}", s.envoy.log());

    // Expiring with no refresh token: client credentials again, when the secret is there.
    std::thread::sleep(Duration::from_secs(TTL_S - 30 + 1));
    let (code, _, err) = cli(&config, &["--tag", "t", "status"], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("expired") && err.contains("login"), "{err}");
    let (code, out, err) = cli(&config, &["--tag", "t", "status"], &secret);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_ne!(stored_token(&config)["accessToken"], token["accessToken"]);
}
