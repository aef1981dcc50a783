//! The analysis service's I/O shell around the pure parts: the recipe catalog, durable job
//! records, the runners and the REST API. [`serve`] wires them together.
//!
//! ```text
//!  REST (rest.rs) ──> Service (jobs.rs) ──save──> Records (redb)
//!                        │ spawn, Semaphore(max concurrent jobs)
//!                        v
//!                     runner.rs ──list/get/put──> Store (S3 or directory)
//!                        │ spawn_blocking
//!                        v
//!                     RecipeHost::run_cancellable ──> render.rs (CSV, notebook, HTML)
//! ```
//!
//! Pure parts: `job` (lifecycle, request checks), `inputs` (report selection, output keys),
//! `render` (notebook and HTML).

pub mod catalog;
pub mod inputs;
pub mod job;
pub mod jobs;
pub mod openapi;
pub mod problem;
pub mod records;
pub use nsight_recipe_host::render;
pub mod rest;
mod rest_timeline;
pub mod runner;
pub mod timelines;

use std::{net::SocketAddr, path::PathBuf};

use nsight_storage::Store;
use tokio::net::TcpListener;

use crate::{Limits, RecipeHost, RecipeHostError};

pub use nsight_recipe_host::error_chain;

/// How the service is set up.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub http_addr: SocketAddr,
    /// Job records (`analysis.redb`) and the work directory; `None` keeps records in memory.
    pub state_dir: Option<PathBuf>,
    /// Every `*.wasm` here is a recipe.
    pub recipes_dir: PathBuf,
    pub store: Store,
    pub max_concurrent_jobs: usize,
    pub limits: Limits,
    /// The REST API answers only requests carrying this secret, which the gateway adds
    /// (`nsight_contracts::gateway_only`); `None`: any client.
    pub gateway_token: Option<nsight_contracts::gateway_only::GatewayToken>,
}

/// A running service. Dropping it does not stop it; the tasks run until the process ends.
#[derive(Debug, Clone)]
pub struct Running {
    pub http_addr: SocketAddr,
    pub recipes: Vec<String>,
    /// Recipe files that were left out, and why.
    pub warnings: Vec<String>,
    /// Queued jobs restarted from the records.
    pub requeued: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot set up the recipe host")]
    Host(#[source] RecipeHostError),
    #[error(transparent)]
    Catalog(#[from] catalog::CatalogError),
    #[error("cannot create the directory {0}")]
    Dir(String, #[source] std::io::Error),
    #[error("cannot load the job records")]
    Records(#[from] records::RecordsError),
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("loading the recipes failed: {0}")]
    Load(String),
}

/// Loads the recipes and the records, restarts queued jobs, binds and serves.
pub async fn serve(config: ServiceConfig) -> Result<Running, ServeError> {
    // With a state directory, compiled components are kept in <state-dir>/compiled, so a
    // restart loads them instead of compiling again.
    let host = match &config.state_dir {
        Some(dir) => RecipeHost::with_cache_dir(config.limits, &dir.join("compiled")),
        None => RecipeHost::new(config.limits),
    }
    .map_err(ServeError::Host)?;
    let dir = config.recipes_dir.clone();
    // Compiling components takes a while: off the runtime.
    let (host, catalog, warnings) = tokio::task::spawn_blocking(move || {
        catalog::Catalog::load(&host, &dir).map(|(c, w)| (host, c, w))
    })
    .await
    .map_err(|e| ServeError::Load(e.to_string()))??;
    for w in &warnings {
        tracing::warn!(warning = %w, "recipe left out");
    }
    // Job inputs, outputs and saved indexes are user data: 0700 (docs/security.md).
    let mkdir = |dir: &PathBuf| {
        nsight_storage::private::state_dir(dir)
            .map_err(|e| ServeError::Dir(dir.display().to_string(), e))
    };
    let (records, work_dir) = match &config.state_dir {
        Some(dir) => {
            mkdir(dir)?;
            (records::Records::open(dir)?, dir.join("work"))
        }
        None => (
            records::Records::memory(),
            std::env::temp_dir().join(format!("nsight-analysis-{}", std::process::id())),
        ),
    };
    // Whatever a previous process left half-fetched is useless now.
    let _ = std::fs::remove_dir_all(&work_dir);
    mkdir(&work_dir)?;
    let recipes = catalog.names().iter().map(|s| s.to_string()).collect();
    // Saved timeline indexes outlive a restart when there is a state directory.
    let timeline_dir = match &config.state_dir {
        Some(dir) => dir.join("timeline"),
        None => work_dir.join("timeline"),
    };
    let (svc, queued) = jobs::Service::restore(
        catalog,
        host,
        config.store,
        records,
        work_dir,
        timeline_dir,
        config.max_concurrent_jobs,
    )?;
    let requeued = queued.len();
    for id in queued {
        svc.spawn(id);
    }
    let listener = TcpListener::bind(config.http_addr)
        .await
        .map_err(|source| ServeError::Bind {
            addr: config.http_addr,
            source,
        })?;
    let http_addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: config.http_addr,
        source,
    })?;
    let app = rest::router(svc, config.gateway_token.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "REST server stopped");
        }
    });
    tracing::info!(http = %http_addr, "analysis service serving");
    Ok(Running {
        http_addr,
        recipes,
        warnings,
        requeued,
    })
}
