//! Helpers for the gateway tests and benchmark: tiny keep-alive HTTP upstreams that answer with
//! their name and the path they saw, and a local gateway (our ADS server in-process plus a
//! supervised real Envoy) on free ports.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    time::Duration,
};

use nsight_gateway::{
    bootstrap::{AdsFlavor, Bootstrap},
    server::{XdsHandle, XdsServer},
    supervisor::{EnvoyConfig, EnvoyHandle, EnvoySupervisor},
};

use crate::{envoy_bin, free_port, TempDir};

/// An HTTP/1.1 server (keep-alive, one thread per connection) answering every request with
/// `200 "<name> <path>"`, until the process ends.
pub fn named_upstream(name: &str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
    let addr = listener.local_addr().expect("upstream address");
    let name = name.to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let name = name.clone();
            std::thread::spawn(move || {
                let _ = serve_connection(&name, stream);
            });
        }
    });
    addr
}

fn serve_connection(name: &str, stream: TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut length = 0usize;
        let mut close = false;
        let mut token = None;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 {
                return Ok(());
            }
            let lower = header.trim().to_ascii_lowercase();
            if lower.is_empty() {
                break;
            }
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            if lower == "connection: close" {
                close = true;
            }
            if let Some(v) = header.trim().strip_prefix("x-nsight-gateway-token:") {
                token = Some(v.trim().to_owned());
            }
        }
        std::io::copy(&mut (&mut reader).take(length as u64), &mut std::io::sink())?;
        let body = match token {
            Some(t) => format!("{name} {path} token={t}"),
            None => format!("{name} {path}"),
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        writer.write_all(head.as_bytes())?;
        writer.write_all(body.as_bytes())?;
        if close {
            return Ok(());
        }
    }
}

/// A tokio runtime of `worker_threads` and our ADS server on a free loopback port, served by it.
pub fn serve_xds(worker_threads: usize) -> (tokio::runtime::Runtime, XdsHandle) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let xds = runtime
        .block_on(XdsServer::serve(([127, 0, 0, 1], 0).into()))
        .expect("start the xDS server");
    (runtime, xds)
}

/// A tokio runtime, our ADS server on a free port and a supervised Envoy bootstrapped from it.
/// Drop order kills Envoy first, then the server, then the runtime.
#[derive(Debug)]
pub struct LocalGateway {
    pub envoy: EnvoyHandle,
    xds: Option<XdsHandle>,
    pub node: String,
    pub dir: TempDir,
    pub runtime: tokio::runtime::Runtime,
}

impl LocalGateway {
    /// Starts both; Envoy is not ready until the caller publishes a configuration for `node`.
    pub fn start(node: &str, flavor: AdsFlavor) -> Self {
        let (runtime, xds) = serve_xds(2);
        let dir = TempDir::new("gateway");
        let admin: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let bootstrap = Bootstrap::new(node, xds.local_addr(), admin).with_flavor(flavor);
        let config = EnvoyConfig {
            envoy_bin: envoy_bin(),
            bootstrap,
            work_dir: dir.path().to_path_buf(),
            log_level: "info".into(),
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(2),
        };
        let envoy = {
            let _guard = runtime.enter();
            EnvoySupervisor::start(config).expect("start Envoy")
        };
        Self {
            envoy,
            xds: Some(xds),
            node: node.into(),
            dir,
            runtime,
        }
    }

    /// The ADS server.
    pub fn xds(&self) -> &XdsHandle {
        self.xds
            .as_ref()
            .expect("the xDS server runs outside restart_xds")
    }

    /// Shuts the ADS server down, runs `while_down`, then serves again on the same address
    /// with an empty cache (as a restarted control plane would).
    pub fn restart_xds(&mut self, while_down: impl FnOnce()) {
        let old = self.xds.take().expect("the xDS server runs");
        let addr = old.local_addr();
        self.runtime.block_on(old.shutdown());
        while_down();
        let new = self
            .runtime
            .block_on(XdsServer::serve(addr))
            .expect("serve xDS again on the same address");
        self.xds = Some(new);
    }

    /// Waits for Envoy's admin `/ready`.
    pub fn wait_ready(&self) {
        let ready = self
            .runtime
            .block_on(self.envoy.wait_ready(Duration::from_secs(30)));
        if let Err(e) = ready {
            panic!("{e}\n{}", self.envoy_log());
        }
    }

    pub fn envoy_log(&self) -> String {
        std::fs::read_to_string(self.envoy.log_path()).unwrap_or_default()
    }
}
