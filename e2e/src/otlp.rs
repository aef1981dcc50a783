//! The OTLP converter (`nsight-otlp`, built by `cargo build --workspace`) as a process, for the
//! tests of the agent's NVTX mirroring.

use std::{net::SocketAddr, path::Path, process::Command, time::Duration};

use crate::{bin, free_port, process::Running, wait_for_tcp};

/// The converter process: OTLP/gRPC on `grpc`, its own endpoints on `http`.
#[derive(Debug)]
pub struct Converter {
    pub process: Running,
    pub http: SocketAddr,
    pub grpc: SocketAddr,
}

/// Starts the converter, its data under `dir`, its reports in the directory `storage`; waits
/// until both ports listen.
pub fn converter(dir: &Path, storage: &Path) -> Converter {
    let http = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let grpc = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut cmd = Command::new(bin("nsight-otlp"));
    cmd.arg("--http-listen")
        .arg(http.to_string())
        .arg("--grpc-listen")
        .arg(grpc.to_string())
        .arg("--data-dir")
        .arg(dir.join("converter-data"))
        .arg("--storage-dir")
        .arg(storage);
    let process = Running::spawn("nsight-otlp", cmd, &dir.join("converter.log"));
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
