//! The OTLP converter (`nsight-otlp`) as a process, for its own tests and those of the agent's
//! NVTX mirroring.

use std::{net::SocketAddr, path::Path, process::Command, time::Duration};

use crate::{bin, free_port, process::Running, wait_for_tcp};

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
