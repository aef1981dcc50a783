//! `nsight-operator`: `manager` runs the controllers (with leader election, health and
//! metrics); `webhook` serves the injector over HTTPS; `install-plugins` is the gateway Pod's
//! init container (copies the proxy-wasm filters of this image next to Envoy).

use std::{path::PathBuf, sync::Arc};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use nsight_operator::{
    admission::{StaticWorld, World},
    events::EventSink,
    leader::Elector,
    manager::{self, Health},
    provision::Provisioner,
    render::RenderSettings,
    server::{self, Shell, Webhook},
    settings::{MachineConfig, Settings, XdsServer},
    webhook_tls,
    world::KubeWorld,
    xds::translate::XdsSettings,
};

#[derive(Parser)]
#[command(name = "nsight-operator", about = "The Nsight operator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once at start-up; boxing the manager's flags buys nothing"
)]
enum Command {
    /// Reconcile the Nsight custom resources into Deployments, Services, ConfigMaps and
    /// ServiceAccounts; serve /healthz, /readyz and /metrics.
    Manager(ManagerArgs),
    /// Serve the injector webhook (POST /mutate, GET /healthz) over HTTPS.
    Webhook {
        #[arg(long, default_value = "0.0.0.0:8443")]
        listen: std::net::SocketAddr,
        /// PEM certificate chain (with --key; else --issue-tls-secret).
        #[arg(long, requires = "key")]
        cert: Option<PathBuf>,
        /// PEM private key.
        #[arg(long, requires = "cert")]
        key: Option<PathBuf>,
        #[command(flatten)]
        issue: IssueArgs,
        /// Image of the tools init container.
        #[arg(long, env = "NSIGHT_AGENT_IMAGE")]
        agent_image: Option<String>,
        /// Image of the OTLP proxy sidecar of Pods whose tool config has otlpMirroringEnabled
        /// (an Envoy with `envoy` on PATH) [default: nvcr.io/nvidia/devtools/nsight-gateway:<version>].
        #[arg(long, env = "NSIGHT_OTLP_PROXY_IMAGE")]
        otlp_proxy_image: Option<String>,
        /// The manager's xDS Service, where OTLP proxy sidecars fetch their listeners and
        /// clusters over ADS (e.g. `nsight-operator-xds.nsight.svc`); without it no sidecar
        /// is injected and the Pod's annotation says why.
        #[arg(long = "xds-host", env = "NSIGHT_XDS_HOST")]
        otlp_xds_host: Option<String>,
        #[arg(long = "xds-port", env = "NSIGHT_XDS_PORT", default_value_t = RenderSettings::default().xds_port)]
        otlp_xds_port: u16,
        /// Coordinator URL given to agents.
        #[arg(long, env = "NSIGHT_COORDINATOR_URL")]
        coordinator_url: Option<String>,
        #[arg(long, default_value = "default")]
        tag: String,
        /// The tool config of labelled Pods no profile config names one for (chart value
        /// `nsight-injector.nsightToolConfig`), as JSON: `{"nsightToolArgs",
        /// "injectionIncludePatterns", "injectionExcludePatterns", "coordinator",
        /// "otlpMirroringEnabled", "duration"}` [default: every process, no arguments].
        #[arg(long, env = "NSIGHT_DEFAULT_TOOL_CONFIG", value_parser = parse_tool_config)]
        default_tool_config: Option<ToolConfigArg>,
        /// Where Pods whose tool config asks for Nsight Systems (`backend: nsys`) get nsys
        /// (chart value `nsight-injector.nsys`), as JSON: `{"hostPath": DIR}` (a node directory
        /// mounted read-only) or `{"image": IMAGE, "imageDir": DIR}` (copied by an init
        /// container) [default: the container's own PATH].
        #[arg(long, env = "NSIGHT_NSYS_SOURCE", value_parser = parse_nsys)]
        nsys: Option<NsysArg>,
        /// A fixed world (namespace labels and NsightOperatorProfileConfigs) as JSON instead of
        /// the API server's: see `world::StaticWorld`. Without it the webhook watches the
        /// cluster (in-cluster or KUBECONFIG), records skip Events and may auto-provision.
        #[arg(long)]
        world: Option<PathBuf>,
        /// Threads serving reviews: 1 is one thread for everything (tokio's current-thread
        /// scheduler: a review never hops threads, no idle worker is woken for it); more uses
        /// the multi-thread scheduler, for more reviews at once than one core answers.
        #[arg(long, env = "NSIGHT_WEBHOOK_WORKER_THREADS", default_value_t = 1)]
        worker_threads: usize,
        #[command(flatten)]
        cluster: WebhookClusterArgs,
    },
    /// GET each URL until it answers 2xx (the chart's `helm test`); exit 1 naming the one that
    /// did not.
    Probe {
        #[arg(required = true)]
        urls: Vec<String>,
        /// Send this file's content as `Authorization: Bearer ...`.
        #[arg(long)]
        bearer_file: Option<PathBuf>,
        /// Trust this CA (PEM) for https URLs.
        #[arg(long)]
        ca_file: Option<PathBuf>,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 60)]
        timeout_secs: u64,
    },
    /// Copy the gateway's proxy-wasm filters (`FROM/*.wasm`) into `TO` (the gateway Pod's
    /// init container).
    InstallPlugins {
        #[arg(long, default_value = nsight_operator::render::gateway::PLUGINS_SOURCE_DIR)]
        from: PathBuf,
        #[arg(long)]
        to: PathBuf,
    },
}

/// The webhook issues its own serving certificate (`webhook_tls`), instead of --cert/--key.
#[derive(clap::Args)]
struct IssueArgs {
    /// Keep the issued certificate in this Secret of --namespace (shared by every replica
    /// and restart); set the caBundle of --webhook-configuration to its CA.
    #[arg(long, conflicts_with = "cert", requires_all = ["service", "webhook_configuration", "namespace"])]
    issue_tls_secret: Option<String>,
    /// The webhook's Service (the certificate names `<service>.<namespace>.svc`).
    #[arg(long)]
    service: Option<String>,
    /// The MutatingWebhookConfiguration whose caBundle is set.
    #[arg(long)]
    webhook_configuration: Option<String>,
    /// The webhook's own namespace.
    #[arg(long, env = "POD_NAMESPACE")]
    namespace: Option<String>,
    #[arg(long, default_value = "cluster.local")]
    cluster_domain: String,
}

/// The webhook's use of the API server (ignored with `--world`).
#[derive(clap::Args)]
struct WebhookClusterArgs {
    /// Namespace whose NsightOperatorProfileConfigs apply to Pods of every namespace (the
    /// cluster-wide rules) [default: none].
    #[arg(long, env = "NSIGHT_CLUSTER_CONFIG_NAMESPACE")]
    cluster_config_namespace: Option<String>,
    /// Multi-tenant: the first Pod injected in a namespace creates its NsightCloudStorageConfig,
    /// NsightCoordinator, NsightOtelCollector, OTLPProxyConfig, NsightAnalysis and NsightGateway
    /// (each kind only when the namespace has none).
    #[arg(long)]
    auto_provision: bool,
    /// Seconds to wait for the caches before listening anyway (then `/readyz` says 503).
    #[arg(long, default_value_t = 30)]
    sync_timeout_secs: u64,
}

/// `--default-tool-config`.
#[derive(Clone, Debug)]
struct ToolConfigArg(Box<nsight_api::NsightToolConfig>);

fn parse_tool_config(text: &str) -> Result<ToolConfigArg, String> {
    nsight_api::chart::InjectorToolConfig::parse_flag(text).map(|c| ToolConfigArg(Box::new(c)))
}

/// `--nsys`: where nsys comes from, or nowhere (`{}`).
#[derive(Clone, Debug)]
struct NsysArg(Option<nsight_api::chart::NsysSource>);

fn parse_nsys(text: &str) -> Result<NsysArg, String> {
    nsight_api::chart::NsysValues::parse_flag(text).map(NsysArg)
}

/// `--machine-config`: a setting, or `null` for none.
#[derive(Clone, Debug)]
struct MachineArg(Option<Box<MachineConfig>>);

fn parse_machine_config(text: &str) -> Result<MachineArg, String> {
    MachineConfig::parse_setting(text).map(|c| MachineArg(c.map(Box::new)))
}

#[derive(clap::Args)]
struct ManagerArgs {
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    metrics_addr: std::net::SocketAddr,
    /// Watch only this namespace [default: all namespaces].
    #[arg(long, env = "NSIGHT_WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// Registry and path of the component images (`<repository>/nsight-coordinator:<tag>`).
    #[arg(long, env = "NSIGHT_IMAGE_REPOSITORY", default_value_t = RenderSettings::default().image_repository)]
    image_repository: String,
    #[arg(long, env = "NSIGHT_IMAGE_TAG", default_value_t = RenderSettings::default().image_tag)]
    image_tag: String,
    /// The Envoy image of gateways [default: `<image-repository>/nsight-gateway:<image-tag>`,
    /// the Envoy build `cargo xtask image all` packages].
    #[arg(long, env = "NSIGHT_ENVOY_IMAGE")]
    envoy_image: Option<String>,
    /// Where gateways reach the operator's xDS server.
    #[arg(long, default_value_t = RenderSettings::default().xds_host)]
    xds_host: String,
    #[arg(long, default_value_t = RenderSettings::default().xds_port)]
    xds_port: u16,
    /// Where the manager serves ADS to gateways [default: 0.0.0.0:<xds-port>].
    #[arg(long)]
    xds_listen: Option<std::net::SocketAddr>,
    /// The auth filter's `.wasm` path inside the gateway's Envoy container (its directory is
    /// where the gateway's init container installs the filters).
    #[arg(long, env = "NSIGHT_AUTH_WASM_PATH", default_value_os_t = XdsSettings::default().wasm_path)]
    auth_wasm_path: PathBuf,
    /// The image whose `/plugins/*.wasm` the gateways' init container installs [default:
    /// this operator's image, `<image-repository>/nsight-operator:<image-tag>`].
    #[arg(long, env = "NSIGHT_PLUGINS_IMAGE")]
    plugins_image: Option<String>,
    /// Where the manager reaches a managed S3 server to create its bucket, `{name}` and
    /// `{namespace}` replaced [default: the Service's cluster DNS name, as in the generated
    /// storage config]. For a manager running outside the cluster.
    #[arg(long)]
    managed_storage_endpoint: Option<String>,
    /// DNS suffix of Services, for the gateway's upstreams.
    #[arg(long, default_value_t = XdsSettings::default().cluster_domain)]
    cluster_domain: String,
    /// Namespaces whose NsightGateways may route other namespaces (`spec.tenants`), comma
    /// separated [default: the operator's namespace].
    #[arg(long, env = "NSIGHT_SHARED_GATEWAY_NAMESPACES", value_delimiter = ',')]
    shared_gateway_namespaces: Vec<String>,
    /// The cluster-wide node setting (chart value `machineConfig`) as JSON: the
    /// `kernel.perf_event_paranoid` value the operator writes on every node with one
    /// DaemonSet, `{"perfEventParanoid": 2, "image"?, "nodeSelector"?, "tolerations"?}`, or
    /// `null` for none (the DaemonSet is deleted; the cluster manages the value out of band).
    #[arg(
        long,
        env = "NSIGHT_MACHINE_CONFIG",
        default_value = r#"{"perfEventParanoid":2}"#,
        value_parser = parse_machine_config
    )]
    machine_config: MachineArg,
    /// Namespace of the perf_event_paranoid DaemonSet (the operator's) [default: the watched
    /// namespace, else `nsight-operator`].
    #[arg(long, env = "POD_NAMESPACE")]
    operator_namespace: Option<String>,
    /// Run the controllers only while holding the leader Lease.
    #[arg(long)]
    leader_elect: bool,
    /// Namespace of the Lease [default: the watched namespace, else `nsight-operator`].
    #[arg(long, env = "POD_NAMESPACE")]
    lease_namespace: Option<String>,
    #[arg(long, default_value = "nsight-operator-leader")]
    lease_name: String,
    /// This replica's identity in the Lease [default: $POD_NAME, else $HOSTNAME, else the pid].
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Lease validity without renewal, seconds.
    #[arg(long, default_value_t = 15)]
    lease_duration_secs: u64,
    /// Renewal and retry period, seconds.
    #[arg(long, default_value_t = 2)]
    lease_retry_secs: u64,
}

async fn run_manager(args: ManagerArgs) -> Result<()> {
    let client = kube::Client::try_default()
        .await
        .context("no Kubernetes client configuration (in-cluster or KUBECONFIG)")?;
    let health = Health::default();
    let listener = manager::bind(args.metrics_addr)
        .await
        .with_context(|| format!("cannot listen on {}", args.metrics_addr))?;
    tracing::info!(addr = %listener.local_addr()?, "health and metrics listening");
    tokio::spawn(manager::serve_health(listener, health.clone()));
    let elector = args.leader_elect.then(|| {
        let namespace = args
            .lease_namespace
            .clone()
            .or_else(|| args.namespace.clone())
            .unwrap_or_else(|| "nsight-operator".into());
        let identity = args
            .identity
            .clone()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| format!("nsight-operator-{}", std::process::id()));
        let mut elector = Elector::new(client.clone(), &namespace, &args.lease_name, &identity);
        elector.duration = std::time::Duration::from_secs(args.lease_duration_secs);
        elector.retry = std::time::Duration::from_secs(args.lease_retry_secs);
        elector
    });
    let machine = manager::MachineSetting {
        machine_config: args.machine_config.0.map(|c| *c),
        namespace: args
            .operator_namespace
            .or_else(|| args.namespace.clone())
            .unwrap_or_else(|| "nsight-operator".into()),
    };
    let shared_gateway_namespaces = if args.shared_gateway_namespaces.is_empty() {
        vec![machine.namespace.clone()]
    } else {
        args.shared_gateway_namespaces
    };
    let config = manager::Config {
        settings: RenderSettings {
            envoy_image: args.envoy_image.unwrap_or_else(|| {
                RenderSettings::gateway_image(&args.image_repository, &args.image_tag)
            }),
            image_repository: args.image_repository,
            image_tag: args.image_tag,
            xds_host: args.xds_host,
            xds_port: args.xds_port,
            plugins_image: args.plugins_image,
            managed_storage_endpoint: args.managed_storage_endpoint,
            cluster_domain: args.cluster_domain.clone(),
            wasm_dir: args
                .auth_wasm_path
                .parent()
                .filter(|d| d.is_absolute())
                .with_context(|| {
                    format!(
                        "--auth-wasm-path {} is not an absolute file path",
                        args.auth_wasm_path.display()
                    )
                })?
                .display()
                .to_string(),
        },
        namespace: args.namespace,
    };
    let xds_listen = args
        .xds_listen
        .unwrap_or_else(|| ([0, 0, 0, 0], args.xds_port).into());
    let xds = nsight_gateway::server::XdsServer::serve(xds_listen)
        .await
        .with_context(|| format!("cannot serve xDS on {xds_listen}"))?;
    tracing::info!(addr = %xds.local_addr(), "xDS (ADS) listening for gateways");
    let xds_settings = XdsSettings {
        wasm_path: args.auth_wasm_path,
        cluster_domain: args.cluster_domain,
        shared_gateway_namespaces,
        ..XdsSettings::default()
    };
    manager::run_with_machine(
        client,
        config,
        health,
        elector,
        Some((Arc::new(xds), xds_settings)),
        Some(machine),
    )
    .await
    .context("stopping: another replica takes over")?;
    Ok(())
}

/// The webhook's World from the API server, its skip Events and (when asked) provisioning;
/// waits up to `--sync-timeout-secs` for the caches.
async fn cluster_world(args: WebhookClusterArgs) -> Result<(Arc<dyn World>, Shell)> {
    let client = kube::Client::try_default().await.context(
        "no Kubernetes client configuration (in-cluster or KUBECONFIG); pass --world FILE to run without the API server",
    )?;
    let (world, watch) = KubeWorld::start(client.clone(), args.cluster_config_namespace);
    tokio::spawn(watch);
    let (events, publish) = EventSink::start(client.clone());
    tokio::spawn(publish);
    let copier = Arc::new(nsight_operator::secret_copy::SecretCopier::new(
        client.clone(),
    ));
    // Renewed agent-channel certificates reach the namespaces they were copied to.
    tokio::spawn(copier.clone().keep_fresh());
    let provisioner = args.auto_provision.then(|| {
        let (provisioner, work) = Provisioner::start(client);
        tokio::spawn(work);
        provisioner
    });
    let deadline =
        std::time::Instant::now() + std::time::Duration::from_secs(args.sync_timeout_secs);
    while !world.synced() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    if !world.synced() {
        tracing::warn!("the webhook's caches are not synced yet; serving (readyz says 503)");
    }
    let ready = world.clone();
    let shell = Shell {
        events: Some(events),
        provisioner,
        copier: Some(copier),
        ready: Some(Arc::new(move || ready.synced())),
    };
    Ok((Arc::new(world), shell))
}

/// The webhook's TLS: the given files (never rotated), or the certificate it issues and renews
/// itself (and whose CA it puts into its webhook configuration before listening).
async fn webhook_tls_config(
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    issue: IssueArgs,
) -> Result<tokio_rustls::rustls::ServerConfig> {
    if let (Some(cert), Some(key)) = (&cert, &key) {
        return Ok(server::tls_config(cert, key)?);
    }
    let (Some(secret), Some(service), Some(configuration), Some(namespace)) = (
        issue.issue_tls_secret,
        issue.service,
        issue.webhook_configuration,
        issue.namespace,
    ) else {
        anyhow::bail!(
            "the webhook needs a serving certificate: --cert and --key, or --issue-tls-secret \
             with --service, --webhook-configuration and --namespace"
        );
    };
    let issue = webhook_tls::Issue {
        namespace,
        secret,
        service,
        configuration,
        cluster_domain: issue.cluster_domain,
    };
    let client = kube::Client::try_default()
        .await
        .context("the webhook issues its certificate through the API server")?;
    let serving = webhook_tls::ensure_certificate(&client, &issue).await?;
    webhook_tls::set_ca_bundle(&client, &issue, &serving.ca).await?;
    let (config, swappable) = server::tls_config_swappable(&serving.cert, &serving.key)?;
    webhook_tls::keep_current(client, issue, serving, swappable);
    Ok(config)
}

fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NSIGHT_OPERATOR_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let command = Cli::parse().command;
    let runtime = match &command {
        Command::Webhook { worker_threads, .. } => server::runtime(*worker_threads),
        _ => tokio::runtime::Runtime::new(),
    }
    .context("cannot start the tokio runtime")?;
    runtime.block_on(run(command))
}

async fn run(command: Command) -> Result<()> {
    let (
        listen,
        (cert, key, issue),
        (agent_image, otlp_proxy_image, otlp_xds),
        (coordinator_url, tag, tool, nsys),
        world,
        cluster,
    ) = match command {
        Command::Manager(args) => return run_manager(args).await,
        Command::Probe {
            urls,
            bearer_file,
            ca_file,
            timeout_secs,
        } => {
            nsight_operator::probe::run(
                &urls,
                bearer_file.as_deref(),
                ca_file.as_deref(),
                std::time::Duration::from_secs(timeout_secs),
            )
            .await?;
            return Ok(());
        }
        Command::InstallPlugins { from, to } => {
            let installed = nsight_operator::plugins::install(&from, &to)?;
            for path in installed {
                tracing::info!(path = %path.display(), "filter installed");
            }
            return Ok(());
        }
        Command::Webhook {
            listen,
            cert,
            key,
            issue,
            agent_image,
            otlp_proxy_image,
            otlp_xds_host,
            otlp_xds_port,
            coordinator_url,
            tag,
            default_tool_config,
            nsys,
            world,
            worker_threads: _,
            cluster,
        } => (
            listen,
            (cert, key, issue),
            (
                agent_image,
                otlp_proxy_image,
                otlp_xds_host.map(|host| XdsServer {
                    host,
                    port: otlp_xds_port,
                }),
            ),
            (coordinator_url, tag, default_tool_config, nsys),
            world,
            cluster,
        ),
    };
    let (world, shell): (Arc<dyn World>, Shell) = match world {
        None => cluster_world(cluster).await?,
        Some(path) => {
            let text = std::fs::read(&path)
                .with_context(|| format!("cannot read the world file {}", path.display()))?;
            let world = serde_json::from_slice::<StaticWorld>(&text).with_context(|| {
                format!(
                    "{} is not a world: {{\"namespaces\": {{ns: {{labels}}}}, \"configs\": [NsightOperatorProfileConfig]}}",
                    path.display()
                )
            })?;
            (Arc::new(world), Shell::default())
        }
    };
    let mut settings = Settings {
        coordinator_url,
        tag,
        otlp_xds,
        nsys: nsys.and_then(|NsysArg(source)| source),
        ..Settings::default()
    };
    if let Some(image) = agent_image {
        settings.agent_image = image;
    }
    if let Some(image) = otlp_proxy_image {
        settings.otlp_proxy_image = image;
    }
    if let Some(ToolConfigArg(tool)) = tool {
        settings.default_tool_config = *tool;
    }
    let tls = webhook_tls_config(cert, key, issue).await?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    tracing::info!(addr = %listener.local_addr()?, "injector webhook listening");
    let webhook = Webhook {
        world,
        settings: Arc::new(settings),
    };
    server::serve(listener, Arc::new(tls), server::router_with(webhook, shell)).await?;
    Ok(())
}
