//! `nsight-agent init`: the injected Pod's init container. It copies the agent and its two
//! libraries into the shared tools volume, then waits (bounded) until the services profiling
//! needs answer on TCP: the coordinator's agent channel and the report storage.
//!
//! ```text
//! /opt/nsight/{nsight-agent,libnsight_hook.so,libnsight_nvtx.so} --copy--> <tools>/  (0755)
//! --wait host:port (repeatable) --timeout-seconds N: poll each until it accepts or N passes
//! ```
//!
//! It never blocks a workload for good: past the timeout it prints which service did not
//! answer and exits 0, and the agent runs the program unprofiled if profiling still cannot
//! work (see `unprofiled`). Only a failed copy exits non-zero, since the hook would then point
//! at files that are not there (the webhook's failure policy keeps that visible).

use std::{
    net::{SocketAddr, TcpStream, ToSocketAddrs as _},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

/// The files the init container copies (the webhook's `TOOL_FILES`).
pub const TOOL_FILES: [&str; 3] = ["nsight-agent", "libnsight_hook.so", "libnsight_nvtx.so"];

/// Why `init` failed.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error("cannot copy {from} to {to}")]
    Copy {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("`{0}` is not host:port")]
    BadAddress(String),
}

/// Copies [`TOOL_FILES`] from `from` into `to` (created if missing), executable by everyone.
pub fn copy_tools(from: &Path, to: &Path) -> Result<Vec<PathBuf>, InitError> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(to).map_err(|source| InitError::Copy {
        from: from.to_path_buf(),
        to: to.to_path_buf(),
        source,
    })?;
    let mut copied = Vec::new();
    for name in TOOL_FILES {
        let (src, dst) = (from.join(name), to.join(name));
        let result = std::fs::copy(&src, &dst)
            .and_then(|_| std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o755)));
        result.map_err(|source| InitError::Copy {
            from: src.clone(),
            to: dst.clone(),
            source,
        })?;
        copied.push(dst);
    }
    Ok(copied)
}

/// A `host:port` (or a URL such as `https://coordinator.ns.svc:8081`) to wait for.
pub fn parse_target(s: &str) -> Result<(String, u16), InitError> {
    let rest = s.split_once("://").map_or(s, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or_default();
    let (host, port) = authority
        .rsplit_once(':')
        .ok_or_else(|| InitError::BadAddress(s.to_owned()))?;
    let port: u16 = port
        .parse()
        .map_err(|_| InitError::BadAddress(s.to_owned()))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(InitError::BadAddress(s.to_owned()));
    }
    Ok((host.to_owned(), port))
}

/// Waits until every target accepts a TCP connection or `timeout` passes; returns the ones
/// that never answered (with the last error seen for each).
pub fn wait_reachable(targets: &[(String, u16)], timeout: Duration) -> Vec<(String, String)> {
    let deadline = Instant::now() + timeout;
    let mut pending: Vec<(String, u16, String)> = targets
        .iter()
        .map(|(h, p)| (h.clone(), *p, "not tried".to_owned()))
        .collect();
    loop {
        pending.retain_mut(|(host, port, last)| match connect(host, *port) {
            Ok(()) => false,
            Err(e) => {
                *last = e;
                true
            }
        });
        if pending.is_empty() || Instant::now() >= deadline {
            return pending
                .into_iter()
                .map(|(h, p, e)| (format!("{h}:{p}"), e))
                .collect();
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn connect(host: &str, port: u16) -> Result<(), String> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    let mut last = format!("{host} has no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("{addr}: {e}"),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn targets_are_host_port_or_urls() {
        assert_eq!(
            parse_target("coord.ns.svc:8081").unwrap(),
            ("coord.ns.svc".into(), 8081)
        );
        assert_eq!(
            parse_target("https://coord.ns.svc:8081/x").unwrap(),
            ("coord.ns.svc".into(), 8081)
        );
        assert_eq!(parse_target("[::1]:9000").unwrap(), ("::1".into(), 9000));
        for bad in ["coord", "coord:http", ":80", "http://coord"] {
            assert!(
                matches!(parse_target(bad), Err(InitError::BadAddress(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_listening_port_is_reachable_and_a_closed_one_is_reported_after_the_timeout() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = listener.local_addr().unwrap().port();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let left = wait_reachable(
            &[("127.0.0.1".into(), open), ("127.0.0.1".into(), closed)],
            Duration::from_millis(600),
        );
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!(left[0].0, format!("127.0.0.1:{closed}"));
    }

    #[test]
    fn the_tools_are_copied_executable() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("nsight-init-test-{}", std::process::id()));
        let (from, to) = (dir.join("from"), dir.join("to"));
        std::fs::create_dir_all(&from).unwrap();
        for f in TOOL_FILES {
            std::fs::write(from.join(f), f).unwrap();
        }
        let copied = copy_tools(&from, &to).unwrap();
        assert_eq!(copied.len(), 3);
        for f in &copied {
            assert_eq!(
                std::fs::metadata(f).unwrap().permissions().mode() & 0o777,
                0o755
            );
        }
        std::fs::remove_file(from.join("libnsight_nvtx.so")).unwrap();
        let err = copy_tools(&from, &to).unwrap_err();
        assert!(err.to_string().contains("libnsight_nvtx.so"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
