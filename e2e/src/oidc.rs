//! A real OpenID provider for tests: npm `oidc-provider` (installed by `cargo xtask setup oidc`
//! under `NSIGHT_OIDC_PROVIDER_DIR`) run on the machine's Node by `oidc_provider.mjs`, on
//! loopback, with the test clients below. Tokens are RS256 JWT access tokens for the resource
//! `urn:nsight:api` (audience [`AUDIENCE`]); see the script for the other resources.

use std::{net::SocketAddr, path::PathBuf, process::Command, time::Duration};

use serde_json::{json, Value};

use crate::{free_port, process::Running, required_path, wait_for, TempDir};

/// The audience of the provider's access tokens for `urn:nsight:api`.
pub const AUDIENCE: &str = "nsight-cloud";
/// A confidential client allowed the client-credentials grant.
pub const MACHINE_CLIENT: &str = "nsight-machine";
pub const MACHINE_SECRET: &str = "machine-secret-0123456789abcdef";
/// A public client (no secret) allowed the device grant and refresh tokens: the CLI.
pub const CLI_CLIENT: &str = "nsight-cli";
/// Lifetime of the `urn:nsight:api-short` tokens, in seconds.
pub const SHORT_TTL_S: u64 = 2;

const SCRIPT: &str = include_str!("oidc_provider.mjs");

/// Where `cargo xtask setup oidc` installed oidc-provider.
pub fn oidc_provider_dir() -> PathBuf {
    required_path("NSIGHT_OIDC_PROVIDER_DIR", "cargo xtask setup oidc")
}

/// A running provider; stopped when dropped.
pub struct OidcProvider {
    process: Running,
    pub addr: SocketAddr,
    pub issuer: String,
    _dir: TempDir,
}

impl std::fmt::Debug for OidcProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OidcProvider({})", self.issuer)
    }
}

impl OidcProvider {
    /// Starts the provider with the test clients, access tokens valid for `ttl_s` seconds.
    pub fn start(ttl_s: u64) -> Self {
        Self::start_with(ttl_s, &[], 600)
    }

    /// [`OidcProvider::start`] with more clients (oidc-provider client metadata, e.g. a web
    /// client of the code flow) and ID tokens valid for `id_token_ttl_s` seconds.
    pub fn start_with(ttl_s: u64, extra_clients: &[Value], id_token_ttl_s: u64) -> Self {
        let dir = TempDir::new("oidc-provider");
        let port = free_port();
        let issuer = format!("http://127.0.0.1:{port}");
        let config = json!({
            "module_dir": oidc_provider_dir(),
            "issuer": issuer,
            "port": port,
            "audience": AUDIENCE,
            "ttl_s": ttl_s,
            "short_ttl_s": SHORT_TTL_S,
            "clients": [
                {"client_id": MACHINE_CLIENT, "client_secret": MACHINE_SECRET,
                 "grant_types": ["client_credentials"], "redirect_uris": [],
                 "response_types": [], "token_endpoint_auth_method": "client_secret_basic"},
                {"client_id": CLI_CLIENT, "token_endpoint_auth_method": "none",
                 "grant_types": ["urn:ietf:params:oauth:grant-type:device_code",
                                 "refresh_token"],
                 "redirect_uris": [], "response_types": []},
            ],
            "id_token_ttl_s": id_token_ttl_s,
        });
        let mut config = config;
        if let Some(clients) = config["clients"].as_array_mut() {
            clients.extend(extra_clients.iter().cloned());
        }
        let config_path = dir.path().join("config.json");
        let script = dir.path().join("oidc_provider.mjs");
        std::fs::write(&config_path, config.to_string()).expect("write the provider config");
        std::fs::write(&script, SCRIPT).expect("write the provider script");
        let mut cmd = Command::new("node");
        cmd.arg(&script).arg(&config_path);
        let process = Running::spawn("oidc-provider", cmd, &dir.path().join("oidc.log"));
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let up = wait_for(Duration::from_secs(30), || {
            process.log().contains("listening ").then_some(())
        });
        assert!(
            up.is_some(),
            "oidc-provider did not start; log:\n{}",
            process.log()
        );
        Self {
            process,
            addr,
            issuer,
            _dir: dir,
        }
    }

    /// The provider's log (stdout and stderr).
    pub fn log(&self) -> String {
        self.process.log()
    }

    pub fn jwks_uri(&self) -> String {
        format!("{}/jwks", self.issuer)
    }

    pub fn token_endpoint(&self) -> String {
        format!("{}/token", self.issuer)
    }

    pub fn authorization_endpoint(&self) -> String {
        format!("{}/auth", self.issuer)
    }

    pub fn device_authorization_endpoint(&self) -> String {
        format!("{}/device/auth", self.issuer)
    }

    /// The discovery document (`/.well-known/openid-configuration`).
    pub fn discovery(&self) -> Value {
        reqwest::blocking::get(format!("{}/.well-known/openid-configuration", self.issuer))
            .and_then(|r| r.error_for_status())
            .and_then(|r| r.json())
            .expect("fetch the discovery document")
    }

    /// A client-credentials access token of the machine client for `resource`.
    pub fn machine_token(&self, resource: &str) -> String {
        let r = reqwest::blocking::Client::new()
            .post(self.token_endpoint())
            .basic_auth(MACHINE_CLIENT, Some(MACHINE_SECRET))
            .form(&[
                ("grant_type", "client_credentials"),
                ("resource", resource),
                ("scope", "api"),
            ])
            .send()
            .expect("POST /token");
        let status = r.status();
        let body: Value = r.json().expect("token response is JSON");
        assert!(status.is_success(), "token request refused: {body}");
        body["access_token"]
            .as_str()
            .expect("access_token in the token response")
            .to_owned()
    }
}

/// Plays the user of the device flow in the provider's own pages (its development login
/// screens accept any login name): opens `verification_uri_complete`, confirms the code, signs
/// in as `login`. Cookies are carried by hand; redirects are followed by hand.
pub fn approve_device(verification_uri_complete: &str, login: &str) -> Result<(), String> {
    let http = reqwest::blocking::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())?;
    let mut jar: Vec<(String, String)> = Vec::new();
    let origin = verification_uri_complete
        .split('/')
        .take(3)
        .collect::<Vec<_>>()
        .join("/");
    let absolute = |location: &str| {
        if location.starts_with('/') {
            format!("{origin}{location}")
        } else {
            location.to_owned()
        }
    };
    let mut send =
        |req: reqwest::blocking::RequestBuilder| -> Result<(u16, String, String), String> {
            let cookie = jar
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ");
            let r = req
                .header("cookie", cookie)
                .send()
                .map_err(|e| e.to_string())?;
            for value in r.headers().get_all("set-cookie") {
                let pair = value.to_str().unwrap_or("").split(';').next().unwrap_or("");
                if let Some((k, v)) = pair.split_once('=') {
                    jar.retain(|(name, _)| name != k);
                    jar.push((k.to_owned(), v.to_owned()));
                }
            }
            let location = r
                .headers()
                .get("location")
                .and_then(|l| l.to_str().ok())
                .unwrap_or("")
                .to_owned();
            let status = r.status().as_u16();
            Ok((status, location, r.text().unwrap_or_default()))
        };
    let (_, _, page) = send(http.get(verification_uri_complete))?;
    let field = |page: &str, name: &str| {
        let marker = format!("name=\"{name}\" value=\"");
        page.split(&marker)
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .map(str::to_owned)
            .ok_or_else(|| format!("no {name} field in the device page:\n{page}"))
    };
    let form = [
        ("xsrf", field(&page, "xsrf")?),
        ("user_code", field(&page, "user_code")?),
        ("confirm", "yes".to_owned()),
    ];
    let (status, interaction, _) = send(http.post(format!("{origin}/device")).form(&form))?;
    if status != 303 || interaction.is_empty() {
        return Err(format!("confirming the code gave {status} {interaction:?}"));
    }
    let form = [("prompt", "login"), ("login", login), ("password", "any")];
    let (status, resume, _) = send(http.post(absolute(&interaction)).form(&form))?;
    if status != 303 || resume.is_empty() {
        return Err(format!("signing in gave {status} {resume:?}"));
    }
    let (_, _, done) = send(http.get(absolute(&resume)))?;
    if done.contains("Sign-in Success") {
        Ok(())
    } else {
        Err(format!("the provider did not confirm the sign-in:\n{done}"))
    }
}
