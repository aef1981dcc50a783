//! The coordinator's view of report storage: it writes each session's `session.json` (so a
//! listing alone names the download directories), lists a session's reports with their download
//! paths, and hands out download URLs: S3 presigned URLs (signed for the public storage endpoint,
//! e.g. the gateway's storage proxy on 9000), or, for a local directory store, URLs signed by this
//! process and served by [`nsight_storage::object_server`] on the REST port.

use std::{collections::HashMap, path::Path, sync::Arc, time::Duration};

use axum::Router;
use nsight_storage::{
    layout::{self, SessionMeta},
    signed_url::UrlSigner,
    ObjectInfo, ReportStore, S3Settings, S3Store, StorageConfig, Store,
};
use time::OffsetDateTime;
use tokio::task::JoinSet;

pub use nsight_contracts::coordinator::{ReportEntry, ReportKind, ReportListing};

use super::problem::Problem;
use crate::state::{Millis, Session};

/// How long a download URL stays valid.
pub const URL_LIFETIME: Duration = Duration::from_secs(3600);

/// Where reports are stored and where users download them from.
#[derive(Debug, Clone)]
pub struct StorageSpec {
    pub config: StorageConfig,
    /// The base URL users reach storage at (the gateway's storage proxy, e.g.
    /// `http://localhost:9000`). S3 URLs are signed for this host; `None` signs for the
    /// configured endpoint (S3) or the coordinator's own REST address (local).
    pub public_url: Option<String>,
}

/// The coordinator's storage access.
#[derive(Debug)]
pub struct Reports {
    store: Arc<Store>,
    /// The store whose presigned URLs users get (S3 with the public endpoint).
    presigner: Arc<Store>,
    signer: Option<Arc<UrlSigner>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReportsError {
    #[error("report storage")]
    Storage(#[from] nsight_storage::StorageError),
    #[error("the URL-signing key {0}")]
    Key(String, #[source] std::io::Error),
}

impl Reports {
    /// Opens the store; `own_base` is the coordinator's REST base URL; `key_dir` (the state
    /// directory) keeps the URL-signing key across restarts.
    pub fn open(
        spec: &StorageSpec,
        own_base: &str,
        key_dir: Option<&Path>,
    ) -> Result<Self, ReportsError> {
        match &spec.config {
            StorageConfig::S3(s3) => {
                let store = Arc::new(Store::S3(S3Store::new(S3Settings::from_config(s3))?));
                let presigner = match &spec.public_url {
                    Some(public) => {
                        let mut settings = S3Settings::from_config(s3);
                        settings.endpoint_url = Some(public.trim_end_matches('/').to_owned());
                        settings.force_path_style = true;
                        Arc::new(Store::S3(S3Store::new(settings)?))
                    }
                    None => store.clone(),
                };
                Ok(Self {
                    store,
                    presigner,
                    signer: None,
                })
            }
            StorageConfig::Local(local) => {
                let base = spec.public_url.as_deref().unwrap_or(own_base);
                let signer = Arc::new(UrlSigner::new(base, signing_key(key_dir)?));
                let store = Arc::new(Store::Local(
                    nsight_storage::LocalStore::open(&local.root)?.with_url_signer(signer.clone()),
                ));
                Ok(Self {
                    presigner: store.clone(),
                    store,
                    signer: Some(signer),
                })
            }
        }
    }

    pub fn describe(&self) -> String {
        self.store.describe()
    }

    /// The signed-URL object server, for a local store (mounted on the REST port).
    pub fn object_router(&self) -> Option<Router> {
        self.signer
            .as_ref()
            .map(|signer| nsight_storage::object_server::router(self.store.clone(), signer.clone()))
    }

    /// Writes `session.json`; a failure is logged, never fatal (the listing falls back to the
    /// oldest object's time).
    pub async fn record_session(&self, session: &Session) {
        let meta = session_meta(session);
        if let Err(e) = self.store.put_bytes(&meta.key(), &meta.to_json()).await {
            tracing::warn!(session = %session.id, error = %e.chain(), "could not write session.json");
        }
    }

    /// The session's reports with download paths and URLs.
    pub async fn list(&self, session: &Session) -> Result<ReportListing, Problem> {
        let meta = session_meta(session);
        let prefix = layout::session_prefix(&meta.tag, &meta.session);
        let listing: Vec<ObjectInfo> = self.store.list(&prefix).await.map_err(|e| {
            tracing::warn!(error = %e.chain(), "listing reports");
            Problem::new(
                if e.is_transient() { 503 } else { 502 },
                format!("report storage: {}", e.chain()),
            )
        })?;
        let tree = layout::plan_download(&listing, std::slice::from_ref(&meta), false);
        let flat = layout::plan_download(&listing, std::slice::from_ref(&meta), true);
        let keys: Vec<String> = tree.items.iter().map(|i| i.key.clone()).collect();
        let mut digests = stored_digests(&self.store, keys).await;
        let mut reports = Vec::with_capacity(tree.items.len());
        let mut url_error = None;
        for (item, flat_item) in tree.items.iter().zip(&flat.items) {
            let Ok(report) = layout::ReportKey::parse(&item.key) else {
                continue;
            };
            let info = listing.iter().find(|o| o.key == item.key);
            let url = match self.presigner.presign_get(&item.key, URL_LIFETIME).await {
                Ok(url) => Some(url),
                Err(e) => {
                    url_error.get_or_insert_with(|| e.chain());
                    None
                }
            };
            reports.push(ReportEntry {
                key: item.key.clone(),
                collection: report.collection.clone(),
                process: report.process.clone(),
                instance: report.instance.clone(),
                kind: report.kind,
                size: item.size,
                last_modified: info.and_then(|o| o.last_modified).map(OffsetDateTime::from),
                path: item.path.display().to_string(),
                flat_path: flat_item.path.display().to_string(),
                url,
                url_expires_in_s: URL_LIFETIME.as_secs(),
                sha256: digests.remove(&item.key),
            });
        }
        Ok(ReportListing {
            session: meta.session.clone(),
            tag: meta.tag.clone(),
            directory: meta.dir_name(),
            reports,
            url_error,
        })
    }
}

/// How many HEAD requests a listing has in flight at once.
const HEADS_IN_FLIGHT: usize = 8;

/// The stored SHA-256 of each key that has one, from a HEAD per object (a listing carries no
/// user metadata). A failed HEAD only leaves that digest out: the download then verifies what
/// the object itself says, or the size.
async fn stored_digests(store: &Arc<Store>, keys: Vec<String>) -> HashMap<String, String> {
    let mut digests = HashMap::new();
    let mut pending = keys.into_iter();
    let mut heads = JoinSet::new();
    loop {
        while heads.len() < HEADS_IN_FLIGHT {
            let Some(key) = pending.next() else { break };
            let store = store.clone();
            heads.spawn(async move {
                let head = store.head(&key).await;
                (key, head)
            });
        }
        let Some(done) = heads.join_next().await else {
            return digests;
        };
        match done {
            Ok((key, Ok(info))) => {
                if let Some(sha256) = info.sha256 {
                    digests.insert(key, sha256);
                }
            }
            Ok((key, Err(e))) => {
                tracing::debug!(%key, error = %e.chain(), "no stored digest");
            }
            Err(e) => tracing::warn!(error = %e, "a HEAD task failed"),
        }
    }
}

fn to_time(ms: Millis) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms.0) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// The storage metadata of a session (keys sanitised the way the agents' uploads are).
pub fn session_meta(session: &Session) -> SessionMeta {
    SessionMeta {
        tag: layout::sanitize_component(session.tag.as_str()),
        session: layout::sanitize_component(&session.id.to_string()),
        title: session.title.as_ref().map(|t| t.as_str().to_owned()),
        created: to_time(session.created_at),
        ended: session.ended_at.map(to_time),
    }
}

/// The key that signs local download URLs: kept in `<dir>/url-signing.key` (mode 0600) so URLs
/// survive a restart, or random per process without a state directory.
fn signing_key(dir: Option<&Path>) -> Result<[u8; 32], ReportsError> {
    let fresh = || {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key
    };
    let Some(dir) = dir else {
        return Ok(fresh());
    };
    let path = dir.join("url-signing.key");
    let err = |e| ReportsError::Key(path.display().to_string(), e);
    match std::fs::read(&path) {
        Ok(bytes) if bytes.len() == 32 => {
            let mut key = [0u8; 32];
            key.copy_from_slice(&bytes);
            Ok(key)
        }
        Ok(_) | Err(_) => {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            let key = fresh();
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&path)
                .map_err(err)?;
            file.write_all(&key).map_err(err)?;
            Ok(key)
        }
    }
}
