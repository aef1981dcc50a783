//! `nsight-operator probe URL...`: what the chart's `helm test` Pod runs. Each URL must answer
//! a 2xx to a GET within the deadline (retried every second: a fresh install's gateway may
//! still be starting), with an optional bearer token (the gateway's API key, from a mounted
//! Secret) and CA (the gateway's TLS Secret's `ca.crt`). The operator image has no shell or
//! curl, so the check lives here.

use std::{path::Path, time::Duration};

/// Why a probe failed; the message names the URL and what it answered.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Client(String),
    #[error("{url} did not answer 2xx within {secs} s; last: {last}")]
    Failed {
        url: String,
        secs: u64,
        last: String,
    },
}

/// GETs each URL until it answers 2xx or `deadline` passes.
pub async fn run(
    urls: &[String],
    bearer_file: Option<&Path>,
    ca_file: Option<&Path>,
    deadline: Duration,
) -> Result<(), ProbeError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| ProbeError::Read {
            path: path.display().to_string(),
            source,
        })
    };
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(10));
    if let Some(ca) = ca_file {
        let cert = reqwest::Certificate::from_pem(&read(ca)?)
            .map_err(|e| ProbeError::Client(format!("{}: {e}", ca.display())))?;
        builder = builder.add_root_certificate(cert);
    }
    let client = builder
        .build()
        .map_err(|e| ProbeError::Client(e.to_string()))?;
    let token = match bearer_file {
        Some(path) => Some(String::from_utf8_lossy(&read(path)?).trim().to_owned()),
        None => None,
    };
    let start = tokio::time::Instant::now();
    for url in urls {
        loop {
            let mut request = client.get(url);
            if let Some(token) = &token {
                request = request.bearer_auth(token);
            }
            let last = match request.send().await {
                Ok(r) if r.status().is_success() => {
                    tracing::info!(%url, status = %r.status(), "ok");
                    break;
                }
                Ok(r) => format!("HTTP {}", r.status()),
                Err(e) => format!("{e}"),
            };
            if start.elapsed() >= deadline {
                return Err(ProbeError::Failed {
                    url: url.clone(),
                    secs: deadline.as_secs(),
                    last,
                });
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    Ok(())
}
