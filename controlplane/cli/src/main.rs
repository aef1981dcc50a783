//! `nsight-cloud`: the user's CLI for profiling sessions. This file owns the command line (clap
//! definitions), dispatch, printing and exit codes only; the configuration file lives in
//! [`config`], HTTP in [`api`], and what is printed is decided by the pure functions in
//! [`render`].
//!
//! ```text
//! argv --clap--> Cli --dispatch--> config::load --> api::Client --> gateway
//!                                  stdout/stderr <-- render::* <-- Reply
//! ```
//!
//! Exit codes: 0 ok, 1 the server refused (4xx/5xx) or answered nonsense, 2 usage or
//! configuration error, 3 the gateway could not be reached.

mod analysis;
mod analysis_flags;
mod analysis_inputs;
mod analysis_local;
mod api;
mod argv;
mod autoconfigure;
mod config;
mod download;
mod login;
mod login_code;
mod render;
mod trust;

use std::error::Error as _;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand, ValueEnum};
use nsight_contracts::coordinator::{ReportListing, SessionList, TagStatus};
use reqwest::StatusCode;
use uuid::Uuid;

use crate::api::{ApiError, Client, Reply};
use crate::config::{Auth, ConfigError, ConfigureRequest, OAuthFlow};
use crate::render::Rendered;

/// Manage Nsight Operator profiling sessions through the Nsight gateway.
///
/// Global options go before the action: nsight-cloud [--tag TAG] [-v] [--output json|table]
/// [--config PATH] ACTION [ACTION OPTIONS]
#[derive(Debug, Parser)]
#[command(name = "nsight-cloud", version)]
struct Cli {
    /// Tag of the agents and sessions to control (before or after the action).
    #[arg(long, value_name = "TAG", default_value = "default", global = true)]
    tag: String,
    /// Debug logging to stderr.
    #[arg(short = 'v')]
    verbose: bool,
    /// Output format: human-readable lines, or the server's JSON answer.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = OutputFormat::Table)]
    output: OutputFormat,
    /// Configuration file [default: ~/.nsight-cloud.conf].
    #[arg(long, value_name = "PATH", env = "NSIGHT_CLOUD_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OutputFormat {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Configure the CLI from the cluster with your kubeconfig: the gateway URL from its
    /// Service, the credentials from its NsightGateway, the CA from its TLS Secret, and for a
    /// ClusterIP Service a port-forward that later commands reuse.
    Autoconfigure(AutoconfigureArgs),
    /// Store the gateway URL and credentials in the configuration file (mode 0600).
    Configure(ConfigureArgs),
    /// The port-forward autoconfigure started: `status` (default) or `stop`.
    PortForward {
        #[command(subcommand)]
        action: Option<PortForwardAction>,
    },
    /// Log in to the configured OAuth2/OIDC issuer; the token is stored in the configuration.
    Login,
    /// Open a new profiling session, optionally titled (profiler-start opens one if needed).
    SessionBegin {
        /// Human-readable title; names the session's download directory.
        #[arg(short, long, value_name = "TITLE")]
        title: Option<String>,
    },
    /// Start a collection (opens a session if none is active).
    ProfilerStart(SessionArg),
    /// Stop the active collection; the session stays open.
    ProfilerStop(SessionArg),
    /// End the session (stopping its collection if one is running).
    SessionEnd(SessionArg),
    /// Show the tag's agents, active session and active collection.
    Status,
    /// List the session's report files (default: the active session, else the latest one).
    Ls(SessionArg),
    /// Download the session's reports into <dir>/<YYYYMMDDHHMMSS>-<title>/<collection>/...
    Download(DownloadArgs),
    /// Run analysis recipes on the session's reports and manage their jobs.
    #[command(subcommand)]
    Analysis(analysis::AnalysisCommand),
}

#[derive(Debug, Args)]
struct AutoconfigureArgs {
    /// Namespace of the gateway.
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    namespace: String,
    /// The gateway's Kubernetes Service.
    #[arg(short = 's', long = "servicename", alias = "service", value_name = "NAME", default_value = autoconfigure::DEFAULT_SERVICE)]
    servicename: String,
    /// Loopback ports a ClusterIP gateway is forwarded to: HTTP,STORAGE.
    #[arg(long, value_name = "HTTP,STORAGE", default_value = "8888,9000", value_parser = parse_port_pair)]
    local_ports: (u16, u16),
}

fn parse_port_pair(value: &str) -> Result<(u16, u16), String> {
    let parse = |p: &str| p.trim().parse::<u16>().ok().filter(|p| *p > 0);
    match value.split_once(',') {
        Some((a, b)) => match (parse(a), parse(b)) {
            (Some(a), Some(b)) if a != b => Ok((a, b)),
            _ => Err("two different ports from 1 to 65535, e.g. 8888,9000".into()),
        },
        None => Err("HTTP,STORAGE ports, e.g. 8888,9000".into()),
    }
}

#[derive(Debug, Clone, Copy, Subcommand)]
enum PortForwardAction {
    /// Whether the helper is running, and its ports.
    Status,
    /// Stop the helper (later commands start it again; `configure` removes it for good).
    Stop,
    /// The helper itself (started by the CLI).
    #[command(hide = true)]
    Run,
}

#[derive(Debug, Args)]
struct DownloadArgs {
    /// Download this session instead of the active (or latest) one.
    #[arg(long, value_name = "UUID", value_parser = parse_session_id)]
    session: Option<Uuid>,
    /// Directory to download into [default: the current directory].
    #[arg(
        short = 'o',
        long = "output-dir",
        value_name = "DIR",
        default_value = "."
    )]
    output_dir: PathBuf,
    /// Put every file directly in the output directory with a flattened name.
    #[arg(long)]
    flat: bool,
}

#[derive(Debug, Args)]
struct SessionArg {
    /// Target this session instead of the tag's active one.
    #[arg(long, value_name = "UUID", value_parser = parse_session_id)]
    session: Option<Uuid>,
}

#[derive(Debug, Args)]
struct ConfigureArgs {
    /// Full URL of the gateway, e.g. https://gateway.example.com:8888
    #[arg(long = "gw", value_name = "URL")]
    gw: String,
    /// API key sent as a bearer token; excludes the OAuth2 options [env: NSIGHT_API_KEY, read
    /// only when no OAuth2 option is given].
    #[arg(
        long,
        value_name = "KEY",
        conflicts_with_all = ["issuer", "clientid", "oauth_flow_type", "authorization_endpoint", "token_endpoint", "scope"]
    )]
    apikey: Option<String>,
    /// OIDC issuer URL for OAuth2 (requires --clientid).
    #[arg(long, value_name = "URL", requires = "clientid")]
    issuer: Option<String>,
    /// OAuth2 client ID (requires --issuer).
    #[arg(long, value_name = "ID", requires = "issuer")]
    clientid: Option<String>,
    /// OAuth2 login flow [default: code].
    #[arg(long, value_enum, value_name = "FLOW", requires = "issuer")]
    oauth_flow_type: Option<FlowArg>,
    /// OAuth2 authorization endpoint, when the issuer has no discovery document.
    #[arg(long, value_name = "URL", requires = "issuer")]
    authorization_endpoint: Option<String>,
    /// OAuth2 token endpoint, when the issuer has no discovery document.
    #[arg(long, value_name = "URL", requires = "issuer")]
    token_endpoint: Option<String>,
    /// Space-separated OAuth2 scopes to request at login [default: "openid offline_access" for
    /// code and device, none for client-credentials].
    #[arg(long, value_name = "SCOPES", requires = "issuer")]
    scope: Option<String>,
    /// A CA certificate (PEM) to trust for an https:// gateway, e.g. a self-signed gateway's
    /// ca.crt or the local mode's <state>/tls/ca.crt; its text is stored in the configuration.
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FlowArg {
    /// Authorization Code flow in a browser.
    Code,
    /// Device Authorization Grant.
    Device,
    /// Client Credentials grant (machines; secret in NSIGHT_OAUTH_CLIENT_SECRET).
    ClientCredentials,
}

impl ConfigureArgs {
    fn any_oauth(&self) -> bool {
        self.issuer.is_some()
            || self.clientid.is_some()
            || self.oauth_flow_type.is_some()
            || self.authorization_endpoint.is_some()
            || self.token_endpoint.is_some()
            || self.scope.is_some()
    }

    /// The request to validate. Without --apikey and OAuth2 options the API key comes from
    /// `env_api_key` (NSIGHT_API_KEY).
    fn to_request(&self, env_api_key: Option<String>) -> ConfigureRequest {
        ConfigureRequest {
            gateway: self.gw.clone(),
            api_key: self.apikey.clone().or_else(|| {
                // The environment is only a fallback: explicit OAuth2 options win over it.
                env_api_key.filter(|k| !k.is_empty() && !self.any_oauth())
            }),
            issuer: self.issuer.clone(),
            client_id: self.clientid.clone(),
            flow: self.oauth_flow_type.map(|f| match f {
                FlowArg::Code => OAuthFlow::Code,
                FlowArg::Device => OAuthFlow::Device,
                FlowArg::ClientCredentials => OAuthFlow::ClientCredentials,
            }),
            authorization_endpoint: self.authorization_endpoint.clone(),
            token_endpoint: self.token_endpoint.clone(),
            scope: self.scope.clone(),
            ca_cert: None,
        }
    }
}

fn parse_session_id(value: &str) -> Result<Uuid, String> {
    Uuid::parse_str(value).map_err(|_| {
        "not a session ID; session IDs are UUIDs such as 67e55044-10b1-426f-9247-bb680e5fe0c8"
            .to_owned()
    })
}

/// Why a command failed; decides the message and the exit code.
#[derive(Debug)]
pub(crate) enum Failure {
    Config(ConfigError),
    Api(ApiError),
    /// OAuth2 login or token refresh failed.
    Login(login::LoginError),
    /// `login` with a configuration that has no OAuth2 issuer.
    NoOAuth,
    /// No session to act on (exit 1).
    NoSession {
        tag: String,
    },
    /// Some downloads failed (exit 1); the others completed.
    Downloads(Vec<download::DownloadError>),
    /// The storage client could not be set up.
    Http(reqwest::Error),
    /// `configure --ca-cert` names an unusable file.
    CaCert(trust::CaCertError),
    /// `analysis run --wait`: the job ended without succeeding (already printed).
    JobFailed,
    /// `analysis run --input`: the local run failed (its own exit code).
    Local(nsight_recipe_host::local::LocalError),
    /// `autoconfigure` could not configure the CLI.
    Autoconfigure(autoconfigure::AutoconfigureError),
    /// The port-forward helper could not be started (exit 3: the gateway is unreachable).
    Forward(autoconfigure::forward::ForwardError),
    /// Flags that do not go together (exit 2); the message says what to write.
    Usage(String),
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        Failure::Config(e)
    }
}

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        Failure::Api(e)
    }
}

impl Failure {
    fn exit_code(&self) -> u8 {
        match self {
            Failure::Config(_)
            | Failure::CaCert(_)
            | Failure::Usage(_)
            | Failure::NoOAuth
            | Failure::Login(
                login::LoginError::NotLoggedIn { .. }
                | login::LoginError::Expired { .. }
                | login::LoginError::NoClientSecret
                | login::LoginError::Callback { .. },
            ) => 2,
            Failure::Login(_) => 1,
            Failure::Api(e) => e.exit_code(),
            Failure::NoSession { .. }
            | Failure::Downloads(_)
            | Failure::Http(_)
            | Failure::JobFailed => 1,
            Failure::Local(e) => e.exit_code(),
            Failure::Autoconfigure(e) => e.exit_code(),
            Failure::Forward(_) => 3,
        }
    }
}

/// What every command needs besides its own arguments.
#[derive(Debug)]
struct Ctx<'a> {
    tag: &'a str,
    output: OutputFormat,
    config_path: PathBuf,
    /// ` --config PATH` when the path is not the default one, for hints.
    config_flag: String,
}

fn main() -> ExitCode {
    let mut cli = Cli::parse_from(argv::session_after_action(std::env::args_os().collect()));
    if let Command::Analysis(analysis::AnalysisCommand::Run(run)) = &mut cli.command {
        let given = std::mem::replace(run, analysis::RunArgs::empty());
        match analysis_flags::lift_trailing_flags(given) {
            Ok(lifted) => *run = lifted,
            Err(message) => return fail(&cli, None, &Failure::Usage(message)),
        }
    }
    if cli.verbose {
        let _ = tracing_subscriber::fmt()
            .with_writer(io::stderr)
            .with_max_level(tracing::Level::DEBUG)
            .with_target(false)
            .with_ansi(io::stderr().is_terminal())
            .try_init();
    }
    let home = std::env::var_os("HOME");
    let default_path = config::default_path(home).ok();
    let config_path = match (&cli.config, &default_path) {
        (Some(path), _) => path.clone(),
        (None, Some(path)) => path.clone(),
        (None, None) => return fail(&cli, None, &Failure::Config(ConfigError::NoHome)),
    };
    let config_flag = if default_path.as_ref() == Some(&config_path) {
        String::new()
    } else {
        format!(" --config {}", config_path.display())
    };
    let ctx = Ctx {
        tag: &cli.tag,
        output: cli.output,
        config_path,
        config_flag,
    };
    match dispatch(&ctx, &cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => fail(&cli, Some(&ctx), &failure),
    }
}

fn dispatch(ctx: &Ctx<'_>, command: &Command) -> Result<(), Failure> {
    let tag = ctx.tag;
    match command {
        Command::Autoconfigure(args) => autoconfigure_command(ctx, args),
        Command::PortForward { action } => {
            port_forward_command(ctx, action.unwrap_or(PortForwardAction::Status))
        }
        Command::Configure(args) => configure(ctx, args),
        Command::Login => login_command(ctx),
        Command::SessionBegin { title } => call(
            ctx,
            |c| c.begin_session(tag, title.as_deref()),
            |r| Ok(render::session_begun(&r.parse()?)),
        ),
        Command::ProfilerStart(s) => call(
            ctx,
            |c| c.start(tag, s.session),
            |r| Ok(render::started(tag, &r.parse()?)),
        ),
        Command::ProfilerStop(s) => call(
            ctx,
            |c| c.stop(tag, s.session),
            |r| Ok(render::stopped(&r.parse()?)),
        ),
        Command::SessionEnd(s) => call(
            ctx,
            |c| c.end(tag, s.session),
            |r| Ok(render::ended(&r.parse()?)),
        ),
        Command::Status => call(
            ctx,
            |c| c.status(tag),
            |r| Ok(render::status(&r.parse()?, now_millis())),
        ),
        Command::Ls(s) => ls(ctx, s.session),
        Command::Download(args) => download(ctx, args),
        Command::Analysis(command) => {
            if let Some(request) = analysis_local::local_request(command) {
                return analysis_local::run(request, ctx.output == OutputFormat::Json)
                    .map_err(Failure::Local);
            }
            let outcome = match analysis_local::catalog_request(command, ctx.config_path.exists()) {
                Some((catalog, only)) => {
                    analysis_local::catalog(catalog, only).map_err(Failure::Local)?
                }
                None => {
                    let client = connect(ctx)?;
                    analysis::run(&client, tag, command, |given| {
                        resolve_session(ctx, &client, given)
                    })?
                }
            };
            match ctx.output {
                OutputFormat::Json => out(&format!(
                    "{}\n",
                    serde_json::to_string_pretty(&outcome.json).unwrap_or_default()
                )),
                OutputFormat::Table => print_rendered(&outcome.table),
            }
            if outcome.failed {
                Err(Failure::JobFailed)
            } else {
                Ok(())
            }
        }
    }
}

/// The session a report command acts on: the given one, else the tag's active session, else
/// its most recent one.
fn resolve_session(ctx: &Ctx<'_>, client: &Client, given: Option<Uuid>) -> Result<Uuid, Failure> {
    if let Some(id) = given {
        return Ok(id);
    }
    let status: TagStatus = client.status(ctx.tag)?.parse()?;
    if let Some(active) = status.active_session {
        return Ok(active.id.0);
    }
    let sessions: SessionList = client.sessions(ctx.tag)?.parse()?;
    sessions
        .sessions
        .iter()
        .max_by_key(|s| s.created_at)
        .map(|s| s.id.0)
        .ok_or_else(|| Failure::NoSession {
            tag: ctx.tag.to_owned(),
        })
}

fn ls(ctx: &Ctx<'_>, session: Option<Uuid>) -> Result<(), Failure> {
    let client = connect(ctx)?;
    let session = resolve_session(ctx, &client, session)?;
    let reply = client.reports(session)?;
    match ctx.output {
        OutputFormat::Json => out(&format!("{}\n", render::pretty_json(&reply.body))),
        OutputFormat::Table => print_rendered(&render::reports(&reply.parse()?)),
    }
    Ok(())
}

fn download(ctx: &Ctx<'_>, args: &DownloadArgs) -> Result<(), Failure> {
    let client = connect(ctx)?;
    let session = resolve_session(ctx, &client, args.session)?;
    let listing: ReportListing = client.reports(session)?.parse()?;
    let config = config::load(&ctx.config_path)?;
    let http = download::storage_client(config.ca_cert.as_ref()).map_err(Failure::Http)?;
    let json = ctx.output == OutputFormat::Json;
    let progress = download::show_progress(json);
    let mut fetched = Vec::new();
    let mut failed = Vec::new();
    for entry in &listing.reports {
        match download::fetch(
            &http,
            &args.output_dir,
            entry,
            args.flat,
            listing.url_error.as_deref(),
            progress,
        ) {
            Ok(f) => fetched.push(f),
            Err(e) => failed.push(e),
        }
    }
    if json {
        let value = render::downloaded_json(&listing, &fetched);
        out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        ));
    } else {
        print_rendered(&render::downloaded(&listing, &fetched, &args.output_dir));
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::Downloads(failed))
    }
}

fn configure(ctx: &Ctx<'_>, args: &ConfigureArgs) -> Result<(), Failure> {
    let env_key = std::env::var("NSIGHT_API_KEY").ok();
    let mut request = args.to_request(env_key);
    if let Some(path) = &args.ca_cert {
        request.ca_cert = Some(trust::CaCert::read(path).map_err(Failure::CaCert)?);
    }
    let config = request.validate()?;
    // A port-forward of an earlier autoconfigure is not wanted any more.
    if let Some(old) = config::load(&ctx.config_path)
        .ok()
        .and_then(|c| c.port_forward)
    {
        autoconfigure::forward::stop(&old);
    }
    config::save(&ctx.config_path, &config)?;
    match ctx.output {
        OutputFormat::Table => print_rendered(&render::configured(&ctx.config_path, &config)),
        OutputFormat::Json => {
            let value = render::configured_json(&ctx.config_path, &config);
            let text = serde_json::to_string_pretty(&value).unwrap_or_default();
            out(&format!("{text}\n"));
        }
    }
    Ok(())
}

/// `autoconfigure`: configures the CLI from the cluster and says what it found.
fn autoconfigure_command(ctx: &Ctx<'_>, args: &AutoconfigureArgs) -> Result<(), Failure> {
    let request = autoconfigure::Request {
        namespace: args.namespace.clone(),
        service: args.servicename.clone(),
        local_ports: args.local_ports,
    };
    let outcome = autoconfigure::run(&ctx.config_path, &request).map_err(Failure::Autoconfigure)?;
    match ctx.output {
        OutputFormat::Table => print_rendered(&autoconfigure::summary(
            &ctx.config_path,
            &request,
            &outcome,
        )),
        OutputFormat::Json => out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&autoconfigure::summary_json(&ctx.config_path, &outcome))
                .unwrap_or_default()
        )),
    }
    Ok(())
}

/// `port-forward [status|stop|run]`.
fn port_forward_command(ctx: &Ctx<'_>, action: PortForwardAction) -> Result<(), Failure> {
    let config = config::load(&ctx.config_path)?;
    let Some(pf) = config.port_forward else {
        return Err(Failure::Usage(
            "no port-forward is configured (autoconfigure sets one up for a ClusterIP gateway)"
                .into(),
        ));
    };
    let ports = pf
        .ports
        .iter()
        .map(|p| format!("127.0.0.1:{} -> {}", p.local, p.remote))
        .collect::<Vec<_>>()
        .join(", ");
    match action {
        PortForwardAction::Status => {
            let state = if autoconfigure::forward::is_up(&pf) {
                "running"
            } else {
                "not running (the next command starts it)"
            };
            out(&format!(
                "port-forward to {}/svc/{}: {ports}: {state}\n",
                pf.namespace, pf.service
            ));
            Ok(())
        }
        PortForwardAction::Stop => {
            let stopped = autoconfigure::forward::stop(&pf);
            out(&format!(
                "port-forward {}\n",
                if stopped {
                    "stopped"
                } else {
                    "was not running"
                }
            ));
            Ok(())
        }
        PortForwardAction::Run => {
            let _ = tracing_subscriber::fmt()
                .with_writer(io::stderr)
                .with_max_level(tracing::Level::INFO)
                .with_ansi(false)
                .try_init();
            autoconfigure::forward::run(&pf).map_err(Failure::Forward)
        }
    }
}

/// Loads the configuration, sends one request and prints its answer.
fn call(
    ctx: &Ctx<'_>,
    send: impl FnOnce(&Client) -> Result<Reply, ApiError>,
    table: impl FnOnce(&Reply) -> Result<Rendered, ApiError>,
) -> Result<(), Failure> {
    let client = connect(ctx)?;
    let reply = send(&client)?;
    match ctx.output {
        OutputFormat::Json => out(&format!("{}\n", render::pretty_json(&reply.body))),
        OutputFormat::Table => print_rendered(&table(&reply)?),
    }
    Ok(())
}

/// Loads the configuration (warning when a file holding a key is readable by others) and builds
/// the gateway client.
fn connect(ctx: &Ctx<'_>) -> Result<Client, Failure> {
    let mut config = config::load(&ctx.config_path)?;
    autoconfigure::ensure_forward(&ctx.config_path, &mut config).map_err(Failure::Forward)?;
    match &config.auth {
        Auth::OAuth2(_) => {
            let token = oauth_bearer(ctx, &config)?;
            return Ok(Client::new(
                &config.gateway,
                Some(&token),
                config.ca_cert.as_ref(),
            )?);
        }
        Auth::ApiKey { .. } => {
            if let Some(mode) = config::file_mode(&ctx.config_path) {
                if config::mode_too_open(mode) {
                    err(&format!(
                        "warning: {} holds an API key but is accessible to other users (mode {mode:o}); run: chmod 600 {}",
                        ctx.config_path.display(),
                        ctx.config_path.display()
                    ));
                }
            }
        }
        Auth::None => {}
    }
    Ok(Client::new(
        &config.gateway,
        config.api_key(),
        config.ca_cert.as_ref(),
    )?)
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `login`: obtains a token with the configured flow and stores it in the configuration.
fn login_command(ctx: &Ctx<'_>) -> Result<(), Failure> {
    let mut config = config::load(&ctx.config_path)?;
    let Auth::OAuth2(o) = &mut config.auth else {
        return Err(Failure::NoOAuth);
    };
    let secret = std::env::var(login::CLIENT_SECRET_ENV).ok();
    let token = login::login(o, secret, now_s, &mut |msg| err(msg)).map_err(Failure::Login)?;
    let expires_at = token.expires_at;
    o.token = Some(token);
    let issuer = o.issuer.to_string();
    config::save(&ctx.config_path, &config)?;
    let in_s = expires_at.saturating_sub(now_s());
    match ctx.output {
        OutputFormat::Table => out(&format!(
            "Logged in to {issuer}; the token is valid for {in_s} s (refreshed automatically); stored in {}\n",
            ctx.config_path.display()
        )),
        OutputFormat::Json => out(&format!(
            "{}\n",
            serde_json::json!({"issuer": issuer, "expiresAt": expires_at,
                               "config": ctx.config_path.display().to_string()})
        )),
    }
    Ok(())
}

/// The stored OAuth2 access token, refreshed (and saved) first when it expires within 30 s.
fn oauth_bearer(ctx: &Ctx<'_>, config: &config::Config) -> Result<config::ApiKey, Failure> {
    let Auth::OAuth2(o) = &config.auth else {
        return Err(Failure::NoOAuth);
    };
    let Some(token) = &o.token else {
        return Err(Failure::Login(login::LoginError::NotLoggedIn {
            issuer: o.issuer.to_string(),
            config_flag: ctx.config_flag.clone(),
        }));
    };
    if !login::needs_refresh(token, now_s()) {
        return Ok(token.access_token.clone());
    }
    let secret = std::env::var(login::CLIENT_SECRET_ENV).ok();
    let fresh = login::refresh(o, token, secret, now_s).map_err(|e| {
        Failure::Login(login::LoginError::Expired {
            issuer: o.issuer.to_string(),
            reason: api::chain(&e),
            config_flag: ctx.config_flag.clone(),
        })
    })?;
    tracing::debug!("refreshed the OAuth2 access token");
    let bearer = fresh.access_token.clone();
    let mut updated = config.clone();
    if let Auth::OAuth2(o) = &mut updated.auth {
        o.token = Some(fresh);
    }
    config::save(&ctx.config_path, &updated)?;
    Ok(bearer)
}

/// Prints `failure` on stderr (and a problem body on stdout in JSON mode); the exit code.
fn fail(cli: &Cli, ctx: Option<&Ctx<'_>>, failure: &Failure) -> ExitCode {
    let config_flag = ctx.map_or("", |c| c.config_flag.as_str());
    match failure {
        Failure::Config(ConfigError::NotFound { path }) => {
            err(&format!(
                "error: no configuration at {}\nhint: create it with: nsight-cloud{config_flag} configure --gw https://<gateway-host>:<port> [--apikey KEY]",
                path.display()
            ));
        }
        Failure::Config(e) => err(&format!("error: {}", api::chain(e))),
        Failure::Login(e) => err(&format!("error: {}", api::chain(e))),
        Failure::NoOAuth => err(&format!(
            "error: no OAuth2 issuer is configured\nhint: nsight-cloud{config_flag} configure --gw URL --issuer URL --clientid ID [--oauth-flow-type device]"
        )),
        Failure::Api(ApiError::Refused(refusal)) => {
            let api::Refusal {
                status,
                problem,
                body,
                ..
            } = refusal.as_ref();
            if cli.output == OutputFormat::Json
                && serde_json::from_str::<serde::de::IgnoredAny>(body).is_ok()
            {
                out(&format!("{}\n", render::pretty_json(body)));
            }
            err(&format!("error: {} (HTTP {status})", problem.message()));
            if matches!(*status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
                err(&format!("hint: the gateway did not accept the credentials; set an API key with: nsight-cloud{config_flag} configure --gw URL --apikey KEY"));
            }
        }
        Failure::Api(e @ ApiError::Unreachable { url, source }) => {
            let what = if e.is_timeout() {
                "did not answer in time"
            } else {
                "could not be reached"
            };
            // reqwest's own message repeats the URL; its causes say what went wrong.
            let cause = source.source().map_or_else(|| api::chain(source), api::chain);
            let hint = trust::untrusted_hint(&cause).map_or_else(
                || format!("check that the gateway is running and reachable from here (for a ClusterIP service, `kubectl port-forward` it), or point the CLI at it with: nsight-cloud{config_flag} configure --gw URL"),
                str::to_owned,
            );
            err(&format!("error: the gateway {what} at {url}: {cause}\nhint: {hint}"));
        }
        Failure::Api(e) => err(&format!("error: {}", api::chain(e))),
        Failure::NoSession { tag } => err(&format!(
            "error: tag {tag} has no session yet\nhint: start one with: nsight-cloud --tag {tag} profiler-start"
        )),
        Failure::Downloads(errors) => {
            for e in errors {
                err(&format!("error: {}", api::chain(e)));
            }
            err(&format!(
                "error: {} file(s) could not be downloaded; run the same command again to resume",
                errors.len()
            ));
        }
        Failure::Http(e) => err(&format!("error: {}", api::chain(e))),
        Failure::CaCert(e) => err(&format!("error: {}", api::chain(e))),
        Failure::JobFailed => err("error: the analysis job did not succeed (see its reason above)"),
        Failure::Local(e) => err(&format!("error: {e}")),
        Failure::Usage(message) => err(&format!("error: {message}")),
        Failure::Autoconfigure(e) => err(&format!("error: {e}")),
        Failure::Forward(e) => err(&format!(
            "error: {e}\nhint: run `nsight-cloud{config_flag} autoconfigure -n <namespace>` again, or `port-forward stop` and use `configure --gw URL`"
        )),
    }
    ExitCode::from(failure.exit_code())
}

fn print_rendered(r: &Rendered) {
    out(&r.out);
    for w in &r.warnings {
        err(&format!("warning: {w}"));
    }
}

/// Writes to stdout, ignoring a closed pipe (`nsight-cloud status | head`).
fn out(text: &str) {
    let mut stdout = io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Writes one line to stderr.
fn err(text: &str) {
    let _ = writeln!(io::stderr().lock(), "{text}");
}

fn now_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use clap::error::ErrorKind;

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("nsight-cloud").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_and_global_options_before_the_action() {
        let cli = parse(&["status"]).unwrap();
        assert_eq!(cli.tag, "default");
        assert_eq!(cli.output, OutputFormat::Table);
        assert!(!cli.verbose);
        assert!(matches!(cli.command, Command::Status));

        let cli = parse(&[
            "--tag",
            "gpu",
            "-v",
            "--output",
            "json",
            "--config",
            "/tmp/c",
            "profiler-start",
        ])
        .unwrap();
        assert_eq!(cli.tag, "gpu");
        assert!(cli.verbose);
        assert_eq!(cli.output, OutputFormat::Json);
        assert_eq!(cli.config, Some(PathBuf::from("/tmp/c")));
        assert!(matches!(
            cli.command,
            Command::ProfilerStart(SessionArg { session: None })
        ));
        // --tag and --session before or after the action, as the guide's syntax allows.
        assert_eq!(parse(&["status", "--tag", "x"]).unwrap().tag, "x");
        let id = "67e55044-10b1-426f-9247-bb680e5fe0c8";
        let args = argv::session_after_action(
            ["nsight-cloud", "--session", id, "ls", "--tag", "gpu"]
                .map(std::ffi::OsString::from)
                .to_vec(),
        );
        let cli = Cli::try_parse_from(args).unwrap();
        assert_eq!(cli.tag, "gpu");
        assert!(
            matches!(cli.command, Command::Ls(SessionArg { session: Some(s) }) if s.to_string() == id)
        );
        assert_eq!(
            parse(&["--output", "yaml", "status"]).unwrap_err().kind(),
            ErrorKind::InvalidValue
        );
    }

    #[test]
    fn session_must_be_a_uuid() {
        let err = parse(&["profiler-stop", "--session", "not-a-uuid"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ValueValidation);
        assert!(err.to_string().contains("not a session ID"), "{err}");
        assert_eq!(err.exit_code(), 2);

        let cli = parse(&[
            "session-end",
            "--session",
            "67e55044-10b1-426f-9247-bb680e5fe0c8",
        ])
        .unwrap();
        let Command::SessionEnd(SessionArg { session: Some(id) }) = cli.command else {
            panic!("{:?}", cli.command)
        };
        assert_eq!(id.to_string(), "67e55044-10b1-426f-9247-bb680e5fe0c8");
    }

    #[test]
    fn session_begin_title() {
        let cli = parse(&["session-begin", "-t", "baseline"]).unwrap();
        assert!(
            matches!(cli.command, Command::SessionBegin { title: Some(ref t) } if t == "baseline")
        );
        let cli = parse(&["session-begin", "--title", "x y"]).unwrap();
        assert!(matches!(cli.command, Command::SessionBegin { title: Some(ref t) } if t == "x y"));
    }

    #[test]
    fn configure_refuses_apikey_with_oauth() {
        let err = parse(&[
            "configure",
            "--gw",
            "https://gw",
            "--apikey",
            "k",
            "--issuer",
            "https://idp",
            "--clientid",
            "c",
        ])
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ArgumentConflict);
        let err = parse(&["configure", "--gw", "https://gw", "--clientid", "c"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument);
        let err = parse(&["configure", "--apikey", "k"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument);
        let err = parse(&[
            "configure",
            "--gw",
            "https://gw",
            "--oauth-flow-type",
            "device",
        ])
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn configure_api_key_from_env_is_only_a_fallback() {
        let cli = parse(&["configure", "--gw", "https://gw"]).unwrap();
        let Command::Configure(args) = &cli.command else {
            panic!()
        };
        let config = args.to_request(Some("envkey".into())).validate().unwrap();
        assert_eq!(config.api_key().unwrap().expose(), "envkey");
        assert_eq!(
            args.to_request(Some(String::new()))
                .validate()
                .unwrap()
                .auth,
            Auth::None
        );

        let cli = parse(&[
            "configure",
            "--gw",
            "https://gw",
            "--issuer",
            "https://idp",
            "--clientid",
            "c",
            "--oauth-flow-type",
            "device",
        ])
        .unwrap();
        let Command::Configure(args) = &cli.command else {
            panic!()
        };
        let config = args.to_request(Some("envkey".into())).validate().unwrap();
        assert!(config.api_key().is_none());
        let Auth::OAuth2(o) = config.auth else {
            panic!()
        };
        assert_eq!(o.flow, OAuthFlow::Device);
    }

    #[test]
    fn every_action_has_help() {
        for action in [
            "configure",
            "session-begin",
            "profiler-start",
            "profiler-stop",
            "session-end",
            "status",
        ] {
            let err = parse(&[action, "-h"]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::DisplayHelp, "{action}");
        }
        assert_eq!(parse(&["-h"]).unwrap_err().kind(), ErrorKind::DisplayHelp);
    }

    #[test]
    fn analysis_run_takes_several_sessions_before_the_recipe_arguments() {
        const A: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";
        let b = format!("{A}:2");
        let cli = parse(&[
            "analysis",
            "run",
            "diff",
            "--session",
            A,
            "--session",
            &b,
            "--wait",
            "--",
            "--name",
            "base",
        ])
        .unwrap();
        let Command::Analysis(analysis::AnalysisCommand::Run(run)) = cli.command else {
            panic!("analysis run");
        };
        let sessions: Vec<String> = run.session.iter().map(ToString::to_string).collect();
        assert_eq!(sessions, [A.to_owned(), b]);
        assert!(run.wait);
        assert_eq!(run.args, ["--name", "base"]);
        let err = parse(&["analysis", "run", "diff", "--session", "latest"]).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ValueValidation);
        assert!(err.to_string().contains("is not a session ID"), "{err}");
    }

    #[test]
    fn clap_definitions_are_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
