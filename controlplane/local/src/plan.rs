//! What the local platform will run, decided from its settings before anything starts: ports,
//! directories, the child processes' command lines, and the gateway IR. Pure, so the choices are
//! unit-tested and `local --dry-run` can print them.

use std::{
    net::{IpAddr, SocketAddr},
    path::{Path, PathBuf},
};

use nsight_contracts::gateway_only::GatewayToken;
use nsight_gateway::ir::{AuthFilter, GatewayIr, IrError};
use serde::Serialize;

use crate::oauth2::{OAuth2Plan, OAuth2Secrets, OAuth2Settings};

/// The local platform's settings (the `local` command line).
#[derive(Debug, Clone)]
pub struct Settings {
    pub state_dir: PathBuf,
    /// Where the gateway and the internal services listen (loopback by default).
    pub address: IpAddr,
    pub ports: Ports,
    /// The built Wasm artifacts: `nsight_auth_filter.wasm`, `nsight_auth_filter_lean.wasm`,
    /// `recipes/`, `ui/`.
    pub wasm_dir: PathBuf,
    /// Where `nsight-coordinator` and `nsight-analysis` are.
    pub bin_dir: PathBuf,
    pub envoy_bin: PathBuf,
    /// A storage-config.yaml for S3; `None` keeps reports in `<state>/reports`.
    pub storage_config: Option<PathBuf>,
    /// HTTPS on the gateway and storage ports; `None` serves plain HTTP.
    pub tls: Option<GatewayTls>,
    /// Browser sign-in through an OpenID provider beside the API key; `None`: the API key only.
    pub oauth2: Option<OAuth2Settings>,
}

/// Where the gateway's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatewayTls {
    /// The local certificates (`<state>/tls`, made on first start for `localhost` and
    /// `127.0.0.1`); clients trust `<state>/tls/ca.crt`.
    Local,
    /// The user's own certificate chain and private key (PEM).
    Files { cert: PathBuf, key: PathBuf },
}

/// The gateway certificate's files, as the plan resolves them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// The CA clients must trust (`nsight-cloud configure --ca-cert`); `None` for the user's own
    /// certificate (issued by a CA the clients already trust, or given to them separately).
    pub ca_cert: Option<PathBuf>,
}

/// Every port the platform uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ports {
    pub gateway: u16,
    pub storage: u16,
    pub coordinator_http: u16,
    pub coordinator_grpc: u16,
    pub analysis: u16,
    pub ui: u16,
    pub xds: u16,
    /// The control plane's own status: `/xds/status` (per-node ACK/NACK) and `/metrics`;
    /// loopback only.
    pub status: u16,
}

impl Default for Ports {
    /// The gateway's documented ports, and fixed ports for the parts behind it.
    fn default() -> Self {
        Self {
            gateway: 8888,
            storage: 9000,
            coordinator_http: 18080,
            coordinator_grpc: 18081,
            analysis: 18082,
            ui: 18083,
            xds: 18084,
            // 18085 was Envoy's admin port; the admin interface is a Unix socket now.
            status: 18086,
        }
    }
}

/// A child process to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChildSpec {
    pub name: &'static str,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub log: PathBuf,
    /// Ready when this address accepts connections.
    pub ready_at: SocketAddr,
}

/// Everything decided before starting; also written to `<state>/local.json` for tools (the demo,
/// tests, agents started by hand) to find the platform.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub gateway_url: String,
    pub storage_url: String,
    pub ui_url: String,
    /// What agents connect to (mutual TLS with the certificates in `tls_dir`).
    pub agent_channel: String,
    pub tls_dir: PathBuf,
    /// The gateway's certificate when it serves HTTPS.
    pub gateway_tls: Option<TlsFiles>,
    pub api_key_file: PathBuf,
    /// OAuth2 sign-in, when asked for (no secret in it: the files that hold them).
    pub oauth2: Option<OAuth2Plan>,
    /// The secret the gateway adds to requests to the coordinator and the analysis service,
    /// which refuse requests without it (mode 0600; `nsight_contracts::gateway_only`).
    pub gateway_token_file: PathBuf,
    /// Envoy's admin interface (`/ready`, `/stats`, `/config_dump` with the API key,
    /// `/quitquitquit`): a Unix socket with mode 0600 in a 0700 directory, never a TCP port.
    pub envoy_admin_socket: PathBuf,
    /// `None` when reports go to S3.
    pub reports_dir: Option<PathBuf>,
    pub logs_dir: PathBuf,
    pub ports: Ports,
    #[serde(skip)]
    pub children: Vec<ChildSpec>,
    #[serde(skip)]
    pub ui_dir: PathBuf,
    /// The auth filter's full module (every mode) and its lean one (no response-headers hook,
    /// which the gateway loads for the API-key mode used here: `AuthFilter::module_path`).
    #[serde(skip)]
    pub auth_filter: PathBuf,
    #[serde(skip)]
    pub auth_filter_lean: PathBuf,
    #[serde(skip)]
    pub address: IpAddr,
}

/// The gateway node's ID in the xDS server.
pub const GATEWAY_NODE: &str = "nsight-gateway/local/gateway";

fn host(address: IpAddr) -> String {
    match address {
        IpAddr::V4(v4) if v4.is_unspecified() => "127.0.0.1".into(),
        IpAddr::V6(v6) if v6.is_unspecified() => "[::1]".into(),
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    }
}

fn arg(path: &Path) -> String {
    path.display().to_string()
}

impl Plan {
    /// The plan; refused (with the reason and the fix) when the OAuth2 settings cannot work.
    pub fn new(s: &Settings) -> Result<Plan, String> {
        let h = host(s.address);
        let p = s.ports;
        let at = |port| SocketAddr::new(s.address, port);
        let loopback = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let logs_dir = s.state_dir.join("logs");
        let gateway_token_file = s.state_dir.join("gateway-token");
        let tls_dir = s.state_dir.join("tls");
        let reports_dir = s
            .storage_config
            .is_none()
            .then(|| s.state_dir.join("reports"));
        let gateway_tls = s.tls.as_ref().map(|tls| match tls {
            GatewayTls::Local => TlsFiles {
                cert: tls_dir.join("tls.crt"),
                key: tls_dir.join("tls.key"),
                ca_cert: Some(tls_dir.join("ca.crt")),
            },
            GatewayTls::Files { cert, key } => TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                ca_cert: None,
            },
        });
        let scheme = if gateway_tls.is_some() {
            "https"
        } else {
            "http"
        };
        // The local certificates name `localhost`, so URLs use it rather than the loopback IP.
        let h = match (&s.tls, s.address) {
            (Some(GatewayTls::Local), a) if a.is_loopback() || a.is_unspecified() => {
                "localhost".to_owned()
            }
            _ => h,
        };
        let storage_url = format!("{scheme}://{h}:{}", p.storage);
        let storage_args = match (&s.storage_config, &reports_dir) {
            (Some(config), _) => vec!["--storage-config".into(), arg(config)],
            (None, Some(dir)) => vec!["--storage-dir".into(), arg(dir)],
            (None, None) => Vec::new(),
        };
        // The REST APIs listen on loopback whatever the gateway's address: only Envoy, on this
        // machine, forwards to them (with the gateway token). Agents may be elsewhere: the
        // agent channel listens with the gateway.
        let mut coordinator = vec![
            "--http".into(),
            loopback(p.coordinator_http).to_string(),
            "--grpc".into(),
            at(p.coordinator_grpc).to_string(),
            "--state-dir".into(),
            arg(&s.state_dir.join("coordinator")),
            "--tls-dir".into(),
            arg(&tls_dir),
            "--generate-local-certs".into(),
            "--gateway-token-file".into(),
            arg(&gateway_token_file),
        ];
        // Local reports are downloaded through the storage port; an S3 server configured by the
        // user is not proxied, so its URLs are presigned for its own endpoint.
        if reports_dir.is_some() {
            coordinator.extend(["--storage-public-url".into(), storage_url.clone()]);
        }
        coordinator.extend(storage_args.iter().cloned());
        let mut analysis = vec![
            "--http".into(),
            loopback(p.analysis).to_string(),
            "--gateway-token-file".into(),
            arg(&gateway_token_file),
            "--state-dir".into(),
            arg(&s.state_dir.join("analysis")),
            "--recipes-dir".into(),
            arg(&s.wasm_dir.join("recipes")),
        ];
        analysis.extend(storage_args);
        let children = vec![
            ChildSpec {
                name: "nsight-coordinator",
                program: s.bin_dir.join("nsight-coordinator"),
                args: coordinator,
                log: logs_dir.join("coordinator.log"),
                ready_at: loopback(p.coordinator_http),
            },
            ChildSpec {
                name: "nsight-analysis",
                program: s.bin_dir.join("nsight-analysis"),
                args: analysis,
                log: logs_dir.join("analysis.log"),
                ready_at: loopback(p.analysis),
            },
        ];
        let gateway_url = format!("{scheme}://{h}:{}", p.gateway);
        let oauth2 = s
            .oauth2
            .as_ref()
            .map(|o| {
                o.plan(
                    &gateway_url,
                    s.tls.is_some(),
                    s.state_dir.join("oauth2-cookie-key"),
                )
            })
            .transpose()?;
        Ok(Plan {
            gateway_url,
            storage_url,
            ui_url: format!("{scheme}://{h}:{}/", p.gateway),
            agent_channel: format!("https://localhost:{}", p.coordinator_grpc),
            tls_dir,
            gateway_tls,
            api_key_file: s.state_dir.join("api-key"),
            oauth2,
            gateway_token_file,
            envoy_admin_socket: s.state_dir.join("envoy").join("admin.sock"),
            reports_dir,
            logs_dir,
            ports: p,
            children,
            ui_dir: s.wasm_dir.join("ui"),
            auth_filter: s.wasm_dir.join("nsight_auth_filter.wasm"),
            auth_filter_lean: s.wasm_dir.join("nsight_auth_filter_lean.wasm"),
            address: s.address,
        })
    }

    /// The gateway: API routes behind API-key auth (or OAuth2 sign-in and the API key, with the
    /// identity provider's upstream, when `oauth2` is given), the UI public, and on the storage port only
    /// the coordinator's signed-URL object path (local reports) or everything (an S3 server
    /// configured by the user is not proxied: its own endpoint serves downloads).
    /// `tls` is the certificate chain and key (PEM) when [`Plan::gateway_tls`] is set;
    /// `gateway_token` goes to the coordinator and the analysis service with every request.
    pub fn gateway_ir(
        &self,
        api_key: &str,
        gateway_token: &GatewayToken,
        tls: Option<(&str, &str)>,
        oauth2: Option<&OAuth2Secrets>,
    ) -> Result<GatewayIr, IrError> {
        let internal = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let mut gw = GatewayIr::local()
            .listen(
                &self.address.to_string(),
                self.ports.gateway,
                self.ports.storage,
            )
            .coordinator(internal(self.ports.coordinator_http))
            .coordinator_health_check("/healthz")
            .analysis(internal(self.ports.analysis))
            .ui(internal(self.ports.ui))
            .gateway_token(gateway_token.clone());
        gw = match (&self.oauth2, oauth2) {
            (Some(plan), Some(secrets)) => gw
                .auth(plan.filter(&self.auth_filter, secrets, api_key))
                .upstream(plan.idp_upstream(secrets)),
            _ => gw.auth(
                AuthFilter::api_key(&self.auth_filter, &[api_key])
                    .with_lean_module(&self.auth_filter_lean),
            ),
        };
        if let Some((cert_chain, key)) = tls {
            gw = gw.tls(cert_chain, key);
        }
        if self.reports_dir.is_some() {
            gw = gw
                .storage(internal(self.ports.coordinator_http))
                .storage_prefix(nsight_contracts::routes::STORAGE_OBJECTS);
        }
        gw.build()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn token() -> GatewayToken {
        GatewayToken::parse(&"t".repeat(40)).unwrap()
    }

    fn settings() -> Settings {
        Settings {
            state_dir: "/s".into(),
            address: "127.0.0.1".parse().unwrap(),
            ports: Ports::default(),
            wasm_dir: "/w".into(),
            bin_dir: "/b".into(),
            tls: None,
            envoy_bin: "/e/envoy".into(),
            storage_config: None,
            oauth2: None,
        }
    }

    #[test]
    fn envoy_admin_is_a_socket_in_the_state_dir_not_a_port() {
        let plan = Plan::new(&settings()).unwrap();
        assert_eq!(plan.envoy_admin_socket, Path::new("/s/envoy/admin.sock"));
        let json = serde_json::to_value(&plan).unwrap();
        assert_eq!(json["envoyAdminSocket"], "/s/envoy/admin.sock");
        assert!(json["ports"].get("envoyAdmin").is_none(), "{json}");
    }

    #[test]
    fn local_reports_are_served_through_the_storage_port() {
        let plan = Plan::new(&settings()).unwrap();
        assert_eq!(plan.gateway_url, "http://127.0.0.1:8888");
        assert_eq!(plan.storage_url, "http://127.0.0.1:9000");
        assert_eq!(plan.reports_dir.as_deref(), Some(Path::new("/s/reports")));
        let coordinator = &plan.children[0];
        assert_eq!(coordinator.program, Path::new("/b/nsight-coordinator"));
        let args = coordinator.args.join(" ");
        assert!(args.contains("--storage-dir /s/reports"), "{args}");
        assert!(
            args.contains("--storage-public-url http://127.0.0.1:9000"),
            "{args}"
        );
        assert!(
            args.contains("--tls-dir /s/tls --generate-local-certs"),
            "{args}"
        );
        let analysis = plan.children[1].args.join(" ");
        assert!(analysis.contains("--recipes-dir /w/recipes"), "{analysis}");
        assert!(analysis.contains("--storage-dir /s/reports"), "{analysis}");

        let ir = plan
            .gateway_ir("k".repeat(32).as_str(), &token(), None, None)
            .unwrap();
        assert!(ir.listeners.iter().all(|l| l.tls_secret.is_none()));
        let storage = ir
            .listeners
            .iter()
            .find(|l| l.port == 9000)
            .expect("a storage listener");
        assert_eq!(storage.routes.len(), 1);
        assert_eq!(storage.routes[0].prefix, "/storage/v1/objects/");
        assert!(
            storage.auth.is_none(),
            "signed URLs carry their own authorization"
        );
        let gateway = ir.listeners.iter().find(|l| l.port == 8888).unwrap();
        assert!(gateway.auth.is_some());
    }

    #[test]
    fn an_s3_config_is_passed_to_both_services_and_not_proxied() {
        let mut s = settings();
        s.storage_config = Some("/etc/storage-config.yaml".into());
        let plan = Plan::new(&s).unwrap();
        assert!(plan.reports_dir.is_none());
        for child in &plan.children {
            assert!(child
                .args
                .join(" ")
                .contains("--storage-config /etc/storage-config.yaml"));
        }
        assert!(
            !plan.children[0]
                .args
                .join(" ")
                .contains("--storage-public-url"),
            "S3 URLs are presigned for the S3 endpoint, not for an unproxied port"
        );
        let ir = plan
            .gateway_ir(&"k".repeat(32), &token(), None, None)
            .unwrap();
        assert!(ir.listeners.iter().all(|l| l.port != 9000));
    }

    #[test]
    fn local_tls_serves_https_with_the_local_certificates_on_both_ports() {
        let mut s = settings();
        s.tls = Some(GatewayTls::Local);
        let plan = Plan::new(&s).unwrap();
        assert_eq!(plan.gateway_url, "https://localhost:8888");
        assert_eq!(plan.storage_url, "https://localhost:9000");
        let tls = plan.gateway_tls.clone().unwrap();
        assert_eq!(tls.cert, Path::new("/s/tls/tls.crt"));
        assert_eq!(tls.ca_cert.as_deref(), Some(Path::new("/s/tls/ca.crt")));
        assert!(plan.children[0]
            .args
            .join(" ")
            .contains("--storage-public-url https://localhost:9000"));
        let ir = plan
            .gateway_ir(&"k".repeat(32), &token(), Some(("CERT", "KEY")), None)
            .unwrap();
        for port in [8888, 9000] {
            let listener = ir.listeners.iter().find(|l| l.port == port).unwrap();
            assert!(listener.tls_secret.is_some(), "port {port} serves HTTPS");
        }
    }

    #[test]
    fn own_certificates_keep_the_address_and_name_no_ca() {
        let mut s = settings();
        s.tls = Some(GatewayTls::Files {
            cert: "/c/tls.crt".into(),
            key: "/c/tls.key".into(),
        });
        let plan = Plan::new(&s).unwrap();
        assert_eq!(plan.gateway_url, "https://127.0.0.1:8888");
        let tls = plan.gateway_tls.unwrap();
        assert_eq!(tls.key, Path::new("/c/tls.key"));
        assert_eq!(tls.ca_cert, None);
    }

    #[test]
    fn a_wildcard_address_opens_the_gateway_and_agent_channel_not_the_services() {
        let mut s = settings();
        s.address = "0.0.0.0".parse().unwrap();
        let plan = Plan::new(&s).unwrap();
        assert_eq!(plan.gateway_url, "http://127.0.0.1:8888");
        assert_eq!(plan.children[0].ready_at.to_string(), "127.0.0.1:18080");
        let coordinator = plan.children[0].args.join(" ");
        assert!(
            coordinator.contains("--http 127.0.0.1:18080"),
            "{coordinator}"
        );
        assert!(
            coordinator.contains("--grpc 0.0.0.0:18081"),
            "{coordinator}"
        );
        let analysis = plan.children[1].args.join(" ");
        assert!(analysis.contains("--http 127.0.0.1:18082"), "{analysis}");
        let ir = plan
            .gateway_ir(&"k".repeat(32), &token(), None, None)
            .unwrap();
        assert!(ir.listeners.iter().all(|l| l.address == "0.0.0.0"));
        for u in &ir.upstreams {
            assert_eq!(u.endpoints[0].host, "127.0.0.1", "{}", u.name);
        }
    }

    #[test]
    fn the_gateway_token_goes_to_the_services_and_nowhere_else() {
        let plan = Plan::new(&settings()).unwrap();
        for child in &plan.children {
            assert!(
                child
                    .args
                    .join(" ")
                    .contains("--gateway-token-file /s/gateway-token"),
                "{}",
                child.name
            );
        }
        let ir = plan
            .gateway_ir(&"k".repeat(32), &token(), None, None)
            .unwrap();
        let with_token: Vec<&str> = ir
            .upstreams
            .iter()
            .filter(|u| u.gateway_token.as_ref() == Some(&token()))
            .map(|u| u.name.as_str())
            .collect();
        assert_eq!(with_token, ["coordinator", "analysis"]);
    }

    #[test]
    fn oauth2_signs_browsers_in_beside_the_api_key_and_reaches_the_provider() {
        let mut s = settings();
        s.oauth2 = Some(OAuth2Settings {
            issuer: "http://127.0.0.1:5556".into(),
            client_id: "nsight-web".into(),
            client_secret_file: "/s/client-secret".into(),
            ca_cert: None,
            scopes: Vec::new(),
            audiences: Vec::new(),
            redirect_uri: None,
        });
        let err = Plan::new(&s).unwrap_err();
        assert!(err.contains("add --tls"), "{err}");
        s.tls = Some(GatewayTls::Local);
        let plan = Plan::new(&s).unwrap();
        let o = plan.oauth2.clone().unwrap();
        assert_eq!(o.redirect_uri, "https://localhost:8888/oauth2/callback");
        assert_eq!(o.cookie_key_file, Path::new("/s/oauth2-cookie-key"));
        let secrets = OAuth2Secrets {
            client_secret: "shh".into(),
            cookie_key: "c".repeat(40),
            ca_pem: None,
        };
        let ir = plan
            .gateway_ir(
                &"k".repeat(32),
                &token(),
                Some(("CERT", "KEY")),
                Some(&secrets),
            )
            .unwrap();
        let gateway = ir.listeners.iter().find(|l| l.port == 8888).unwrap();
        let auth = gateway.auth.as_ref().unwrap();
        assert!(auth.signs_in());
        assert_eq!(auth.module_path(), Path::new("/w/nsight_auth_filter.wasm"));
        let idp = ir
            .upstreams
            .iter()
            .find(|u| u.name == crate::oauth2::IDP_CLUSTER)
            .unwrap();
        assert_eq!(idp.endpoints[0].port, 5556);
        assert!(
            idp.gateway_token.is_none(),
            "the provider never sees the token"
        );
        let json = serde_json::to_string(&plan).unwrap();
        assert!(json.contains("\"redirectUri\""), "{json}");
        assert!(!json.contains("shh"), "{json}");
    }
}
