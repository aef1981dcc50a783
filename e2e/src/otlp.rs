//! The OTLP pieces as processes, for the converter's own tests and those of the mirroring: the
//! converter (`nsight-otlp`), a real collector (rotel, from PyPI) and the OTLP proxy sidecar
//! (a real Envoy fed its configuration by our ADS server, as the operator feeds it in a Pod).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use nsight_gateway::{
    cache::node_id,
    otlp_sidecar::{self, Collector},
    server::XdsHandle,
};

use crate::{bin, envoy_bin, free_port, process::Running, wait_for, wait_for_tcp};

/// The converter process: OTLP/gRPC on `grpc`, its own endpoints on `http`.
#[derive(Debug)]
pub struct Converter {
    pub process: Running,
    pub http: SocketAddr,
    pub grpc: SocketAddr,
}

/// Starts the workspace's converter (`cargo build --workspace`), its data under `dir`, its
/// reports in the directory `storage`; waits until both ports listen.
pub fn converter(dir: &Path, storage: &Path) -> Converter {
    converter_with(&bin("nsight-otlp"), dir, storage, &[])
}

/// Starts `program` (a converter binary) with `--data-dir <dir>/data`, `--storage-dir
/// <storage>` and `extra` arguments, its log in `<dir>/converter-<http port>.log` (a restart on
/// the same `dir` keeps the data and both logs); waits until both ports listen.
pub fn converter_with(program: &Path, dir: &Path, storage: &Path, extra: &[&str]) -> Converter {
    let http = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let grpc = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut cmd = Command::new(program);
    cmd.arg("--http-listen")
        .arg(http.to_string())
        .arg("--grpc-listen")
        .arg(grpc.to_string())
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--storage-dir")
        .arg(storage)
        .args(extra);
    let log = dir.join(format!("converter-{}.log", http.port()));
    let process = Running::spawn("nsight-otlp", cmd, &log);
    assert!(
        wait_for_tcp(http, Duration::from_secs(30)) && wait_for_tcp(grpc, Duration::from_secs(5)),
        "the converter did not listen: {}",
        process.log()
    );
    Converter {
        process,
        http,
        grpc,
    }
}

/// rotel's collector binary, as PyPI's `rotel` installs it in the venv.
pub fn rotel_bin() -> PathBuf {
    let lib = crate::cache_dir().join("venv/lib");
    std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .flatten()
        .map(|python| python.path().join("site-packages/rotel/rotel-agent"))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "no rotel-agent under {}: run `cargo xtask setup python`",
                lib.display()
            )
        })
}

/// A real OpenTelemetry collector (rotel) receiving OTLP on `grpc` and `http`, exporting
/// OTLP/gRPC to `export_to` every 100 ms.
#[derive(Debug)]
pub struct RotelCollector {
    pub process: Running,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
}

impl RotelCollector {
    /// Starts it, its files under `dir`; waits until both ports listen.
    pub fn start(dir: &Path, export_to: SocketAddr) -> Self {
        let grpc = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let http = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let mut cmd = Command::new(rotel_bin());
        cmd.arg("start")
            .args(["--otlp-grpc-endpoint", &grpc.to_string()])
            .args(["--otlp-http-endpoint", &http.to_string()])
            .args(["--exporter", "otlp", "--otlp-exporter-protocol", "grpc"])
            .args(["--otlp-exporter-endpoint", &format!("http://{export_to}")])
            .args(["--batch-timeout", "100ms"])
            .arg("--pid-file")
            .arg(dir.join("rotel.pid"))
            .arg("--log-file")
            .arg(dir.join("rotel-agent.log"));
        let process = Running::spawn("rotel", cmd, &dir.join("rotel.log"));
        assert!(
            wait_for_tcp(http, Duration::from_secs(20))
                && wait_for_tcp(grpc, Duration::from_secs(5)),
            "rotel did not listen: {}",
            process.log()
        );
        Self {
            process,
            grpc,
            http,
        }
    }

    /// Where it forwards to, as the sidecar's IR names a collector.
    pub fn as_collector(&self) -> Collector {
        Collector {
            host: "127.0.0.1".into(),
            http_port: self.http.port(),
            grpc_port: self.grpc.port(),
        }
    }
}

/// The OTLP proxy sidecar as a Pod runs it: a real Envoy whose bootstrap holds only our ADS
/// server, naming itself `nsight-otlp-sidecar/<namespace>/<pod>` with its OTLPProxyConfig as
/// node cluster (the webhook's command line), served the config's snapshot. Drop order kills
/// Envoy, then the ADS server, then the runtime.
#[derive(Debug)]
pub struct Sidecar {
    pub envoy: Running,
    xds: XdsHandle,
    /// The sidecar's node id.
    pub node: String,
    /// The snapshot key of its OTLPProxyConfig.
    pub key: String,
    /// The ports it was configured with first (OTLP/HTTP, OTLP/gRPC).
    pub ports: (u16, u16),
    pub runtime: tokio::runtime::Runtime,
}

impl Sidecar {
    /// Publishes the sidecar IR of OTLPProxyConfig `team-a/mirror` forwarding to `collector`,
    /// starts Envoy as Pod `pod`, and waits until both listeners accept connections.
    pub fn start(dir: &Path, pod: &str, collector: &Collector) -> Self {
        let (runtime, xds) = crate::gateway::serve_xds(1);
        let (namespace, config) = ("team-a", "mirror");
        let key = node_id::otlp_proxy(namespace, config);
        let ports = (free_port(), free_port());
        xds.set_ir(&key, &otlp_sidecar::ir(ports, collector))
            .expect("publish the sidecar configuration");
        let bootstrap = dir.join(format!("otlp-sidecar-{pod}.json"));
        let addr = xds.local_addr();
        std::fs::write(
            &bootstrap,
            otlp_sidecar::bootstrap(&addr.ip().to_string(), addr.port())
                .to_json()
                .to_string(),
        )
        .expect("write the bootstrap");
        let node = node_id::otlp_sidecar(namespace, pod);
        let mut cmd = Command::new(envoy_bin());
        cmd.arg("-c")
            .arg(&bootstrap)
            .args(["--service-node", &node, "--service-cluster", config])
            .args(["--disable-hot-restart", "--log-level", "warn"]);
        let envoy = Running::spawn("envoy", cmd, &dir.join(format!("envoy-{pod}.log")));
        let sidecar = Self {
            envoy,
            xds,
            node,
            key,
            ports,
            runtime,
        };
        sidecar.wait_listening(ports);
        sidecar
    }

    /// Waits (30 s) until both ports accept connections.
    pub fn wait_listening(&self, (http, grpc): (u16, u16)) {
        let up = |port| wait_for_tcp(([127, 0, 0, 1], port).into(), Duration::from_secs(30));
        assert!(
            up(http) && up(grpc),
            "the sidecar Envoy did not listen on {http} and {grpc}: {}",
            self.envoy.log()
        );
    }

    /// The ADS server feeding it.
    pub fn xds(&self) -> &XdsHandle {
        &self.xds
    }

    /// Waits (20 s) until the sidecar has accepted the current snapshot of its config.
    pub fn wait_in_sync(&self) {
        let synced = wait_for(Duration::from_secs(20), || {
            self.xds.in_sync(&self.node).then_some(())
        });
        assert!(
            synced.is_some(),
            "the sidecar did not accept its configuration: {:?}\n{}",
            self.xds.node_status(&self.node),
            self.envoy.log()
        );
    }

    /// Its OTLP/gRPC address.
    pub fn grpc(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.ports.1).into()
    }

    /// Its OTLP/HTTP address.
    pub fn http(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.ports.0).into()
    }
}
