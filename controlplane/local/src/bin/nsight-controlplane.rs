//! `nsight-controlplane`: runs the platform's control plane. `local` starts the whole platform on
//! this machine (see docs/local-mode.md).

use std::{net::IpAddr, path::PathBuf};

use clap::{Args, Parser, Subcommand};
use nsight_local::{
    oauth2::OAuth2Settings,
    plan::{GatewayTls, Plan, Ports, Settings},
    platform,
};

#[derive(Debug, Parser)]
#[command(version, about = "The Nsight Operator control plane")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the whole platform on this machine: coordinator, analysis, UI, report storage, the
    /// xDS server and an Envoy gateway on :8888 (API key auth, OAuth2 sign-in too when asked)
    /// and :9000 (downloads).
    Local(LocalArgs),
}

#[derive(Debug, Args)]
struct LocalArgs {
    /// State, reports, logs, certificates and the API key [default: $XDG_DATA_HOME/nsight-operator
    /// or ~/.local/share/nsight-operator].
    #[arg(long, env = "NSIGHT_LOCAL_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// Address to listen on (use 0.0.0.0 to reach the gateway from other machines).
    #[arg(long, default_value = "127.0.0.1")]
    address: IpAddr,
    #[arg(long, default_value_t = Ports::default().gateway)]
    gateway_port: u16,
    #[arg(long, default_value_t = Ports::default().storage)]
    storage_port: u16,
    /// First of seven consecutive internal ports: coordinator REST, agent channel, analysis, UI,
    /// xDS, (unused: Envoy's admin interface is the socket <state>/envoy/admin.sock),
    /// control-plane status.
    #[arg(long, default_value_t = Ports::default().coordinator_http)]
    internal_ports_from: u16,
    /// Store reports in S3 (a storage-config.yaml) instead of <state>/reports.
    #[arg(long, env = "NSIGHT_CLOUD_STORAGE_CONFIG_FILE")]
    storage_config: Option<PathBuf>,
    /// The built Wasm artifacts (auth filter, recipes/, ui/), from `cargo xtask build-wasm`.
    #[arg(long, env = "NSIGHT_WASM_DIR")]
    wasm_dir: PathBuf,
    /// Where nsight-coordinator and nsight-analysis are [default: beside this program].
    #[arg(long, env = "NSIGHT_BIN_DIR")]
    bin_dir: Option<PathBuf>,
    /// The Envoy binary [default: `envoy` on PATH].
    #[arg(long, env = "NSIGHT_ENVOY_BIN")]
    envoy_bin: Option<PathBuf>,
    /// Serve HTTPS on the gateway and storage ports with the local certificates (made on first
    /// start in <state>/tls for localhost); clients trust <state>/tls/ca.crt.
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"])]
    tls: bool,
    /// Serve HTTPS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    #[command(flatten)]
    oauth2: OAuth2Args,
    /// Print the plan (ports, paths, command lines) as JSON and exit.
    #[arg(long)]
    dry_run: bool,
}

/// Browser sign-in through an OpenID provider, beside the API key (docs/local-mode.md, "OAuth2
/// sign-in"); needs HTTPS on the gateway.
#[derive(Debug, Args)]
struct OAuth2Args {
    /// The provider's issuer URL, as its discovery document names it (https://; http:// only on
    /// this machine's loopback).
    #[arg(long, requires_all = ["oauth2_client_id", "oauth2_client_secret_file"])]
    oauth2_issuer: Option<String>,
    /// The client registered at the provider for the gateway (its redirect URI:
    /// <gateway URL>/oauth2/callback).
    #[arg(long, requires = "oauth2_issuer")]
    oauth2_client_id: Option<String>,
    /// A file (mode 0600) holding the client's secret.
    #[arg(
        long,
        env = "NSIGHT_OAUTH2_CLIENT_SECRET_FILE",
        requires = "oauth2_issuer"
    )]
    oauth2_client_secret_file: Option<PathBuf>,
    /// The CA (PEM) that issued the provider's certificate [default: the system's CAs].
    #[arg(long, requires = "oauth2_issuer")]
    oauth2_ca_cert: Option<PathBuf>,
    /// Scopes asked for at sign-in, comma-separated; must include `openid` [default: openid].
    #[arg(long, value_delimiter = ',', requires = "oauth2_issuer")]
    oauth2_scopes: Vec<String>,
    /// `aud` accepted in bearer tokens from the provider, comma-separated [default: the client
    /// id].
    #[arg(long, value_delimiter = ',', requires = "oauth2_issuer")]
    oauth2_audiences: Vec<String>,
    /// The redirect URI registered at the provider [default: <gateway URL>/oauth2/callback].
    #[arg(long, requires = "oauth2_issuer")]
    oauth2_redirect_uri: Option<String>,
}

impl OAuth2Args {
    fn settings(&self) -> Option<OAuth2Settings> {
        Some(OAuth2Settings {
            issuer: self.oauth2_issuer.clone()?,
            client_id: self.oauth2_client_id.clone()?,
            client_secret_file: self.oauth2_client_secret_file.clone()?,
            ca_cert: self.oauth2_ca_cert.clone(),
            scopes: self.oauth2_scopes.clone(),
            audiences: self.oauth2_audiences.clone(),
            redirect_uri: self.oauth2_redirect_uri.clone(),
        })
    }
}

fn default_state_dir() -> PathBuf {
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("/tmp"))
        .join("nsight-operator")
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|p| p.is_file())
    })
}

fn settings(args: &LocalArgs) -> anyhow::Result<Settings> {
    let bin_dir = match &args.bin_dir {
        Some(dir) => dir.clone(),
        None => std::env::current_exe()?
            .parent()
            .map(PathBuf::from)
            .unwrap_or_default(),
    };
    let envoy_bin = args
        .envoy_bin
        .clone()
        .or_else(|| on_path("envoy"))
        .unwrap_or_else(|| PathBuf::from("envoy"));
    let base = args.internal_ports_from;
    let port = |offset: u16| base.saturating_add(offset);
    Ok(Settings {
        state_dir: args.state_dir.clone().unwrap_or_else(default_state_dir),
        address: args.address,
        ports: Ports {
            gateway: args.gateway_port,
            storage: args.storage_port,
            coordinator_http: port(0),
            coordinator_grpc: port(1),
            analysis: port(2),
            ui: port(3),
            xds: port(4),
            status: port(6),
        },
        wasm_dir: args.wasm_dir.clone(),
        bin_dir,
        envoy_bin,
        storage_config: args.storage_config.clone(),
        tls: match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(GatewayTls::Files {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => args.tls.then_some(GatewayTls::Local),
        },
        oauth2: args.oauth2.settings(),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let Command::Local(args) = Cli::parse().command;
    let settings = settings(&args)?;
    if args.dry_run {
        let plan = Plan::new(&settings).map_err(anyhow::Error::msg)?;
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(());
    }
    let mut running = platform::start(&settings).await?;
    let plan = &running.plan;
    // What a person needs; the last line is what tools wait for.
    println!(
        "Nsight Operator is running locally (state in {})",
        settings.state_dir.display()
    );
    println!("  gateway   {}", plan.gateway_url);
    println!("  UI        {}", plan.ui_url);
    println!("  downloads {}", plan.storage_url);
    println!(
        "  API key   {}  (in {})",
        running.api_key,
        plan.api_key_file.display()
    );
    let trust = plan
        .gateway_tls
        .as_ref()
        .and_then(|tls| tls.ca_cert.as_ref())
        .map(|ca| format!(" --ca-cert {}", ca.display()))
        .unwrap_or_default();
    println!(
        "  CLI       nsight-cloud configure --gw {}{trust} --apikey \"$(cat {})\"",
        plan.gateway_url,
        plan.api_key_file.display()
    );
    if let Some(o) = &plan.oauth2 {
        println!(
            "  sign-in   OAuth2 through {} (client {}, redirect URI {})",
            o.issuer, o.client_id, o.redirect_uri
        );
    }
    println!(
        "  agents    nsight-agent run --coordinator {} --tls-dir {} -- <program>",
        plan.agent_channel,
        plan.tls_dir.display()
    );
    println!("  logs      {}", plan.logs_dir.display());
    println!(
        "  status    http://127.0.0.1:{}/xds/status  http://127.0.0.1:{}/metrics",
        plan.ports.status, plan.ports.status
    );
    println!("nsight-controlplane ready gateway={}", plan.gateway_url);
    let result = running.wait().await;
    running.stop().await;
    result
}
