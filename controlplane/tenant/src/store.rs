//! The thin kube-rs shell over the `NsightStreamer` resources of the tenant API's own namespace:
//! list, get, create, record activity (an annotation), delete. It decides nothing (the rules are
//! in `core`) and touches nothing else: no other kind, no other namespace (the Role the operator
//! renders for the tenant operator allows exactly this).
//!
//! ```text
//!  api / reaper ──> Streamers ──(list by label, get, create, merge patch, delete with
//!                                preconditions)──> kube-apiserver: nsightstreamers in <ns>
//! ```

use kube::{
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions},
    core::{ApiResource, DynamicObject},
    Api, Client,
};
use nsight_api::NsightStreamer;
use nsight_contracts::{coordinator::Millis, Problem};
use serde_json::{json, Value};

use crate::core::{ObjectParts, Record, CREATED_BY, CREATED_BY_LABEL, LAST_ACTIVE_ANNOTATION};

/// A request to the API server that failed. The API server's own refusals keep their status.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("listing streamers failed")]
    List(#[source] kube::Error),
    #[error("reading streamer {name} failed")]
    Get {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("creating a streamer failed")]
    Create(#[source] kube::Error),
    #[error("recording activity on streamer {name} failed")]
    Touch {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting streamer {name} failed")]
    Delete {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the API server answered a streamer without a name")]
    Unnamed,
}

impl StoreError {
    fn source_error(&self) -> Option<&kube::Error> {
        match self {
            Self::List(e) | Self::Create(e) => Some(e),
            Self::Get { source, .. } | Self::Touch { source, .. } | Self::Delete { source, .. } => {
                Some(source)
            }
            Self::Unnamed => None,
        }
    }
}

/// The API server failed or refused (a 503 for the caller, with the API server's message: the
/// tenant operator's Role or the cluster needs fixing, not the request).
impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Self {
        let cause = match e.source_error() {
            Some(kube::Error::Api(status)) => format!(": {} ({})", status.message, status.code),
            Some(other) => format!(": {other}"),
            None => String::new(),
        };
        tracing::warn!(error = %e, %cause, "kube request failed");
        Problem::new(503, format!("{e}{cause}"))
    }
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// The streamers of one namespace.
#[derive(Clone)]
pub struct Streamers {
    api: Api<DynamicObject>,
}

impl std::fmt::Debug for Streamers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streamers").finish_non_exhaustive()
    }
}

fn millis(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Millis {
    Millis(u64::try_from(t.0.as_millisecond()).unwrap_or_default())
}

/// The record of an object the tenant API created (`None` otherwise).
fn record(o: &DynamicObject) -> Option<Record> {
    let null = Value::Null;
    Record::from_object(&ObjectParts {
        name: o.metadata.name.as_deref()?,
        uid: o.metadata.uid.as_deref(),
        resource_version: o.metadata.resource_version.as_deref(),
        annotations: o.metadata.annotations.as_ref(),
        labels: o.metadata.labels.as_ref(),
        created: o.metadata.creation_timestamp.as_ref().map(millis),
        spec: o.data.get("spec").unwrap_or(&null),
        status: o.data.get("status").unwrap_or(&null),
    })
}

impl Streamers {
    pub fn new(client: Client, namespace: &str) -> Self {
        let resource = ApiResource::erase::<NsightStreamer>(&());
        Self {
            api: Api::namespaced_with(client, namespace, &resource),
        }
    }

    /// Every streamer the tenant API created (by its label), in no particular order.
    pub async fn list(&self) -> Result<Vec<Record>, StoreError> {
        let params = ListParams::default().labels(&format!("{CREATED_BY_LABEL}={CREATED_BY}"));
        let list = self.api.list(&params).await.map_err(StoreError::List)?;
        Ok(list.items.iter().filter_map(record).collect())
    }

    /// One streamer the tenant API created; `None` when there is none of that name (or it was
    /// not created by the tenant API).
    pub async fn get(&self, name: &str) -> Result<Option<Record>, StoreError> {
        match self.api.get(name).await {
            Ok(o) => Ok(record(&o)),
            Err(e) if is_status(&e, 404) => Ok(None),
            Err(source) => Err(StoreError::Get {
                name: name.into(),
                source,
            }),
        }
    }

    /// Creates `object` (an `NsightStreamer` with `generateName`); its record.
    pub async fn create(&self, object: Value) -> Result<Record, StoreError> {
        let object: DynamicObject = serde_json::from_value(object)
            .map_err(|e| StoreError::Create(kube::Error::SerdeError(e)))?;
        let created = self
            .api
            .create(&PostParams::default(), &object)
            .await
            .map_err(StoreError::Create)?;
        record(&created).ok_or(StoreError::Unnamed)
    }

    /// Records activity at `now` (the last-active annotation).
    pub async fn touch(&self, name: &str, now: Millis) -> Result<(), StoreError> {
        let patch =
            json!({"metadata": {"annotations": {LAST_ACTIVE_ANNOTATION: now.0.to_string()}}});
        self.api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|source| StoreError::Touch {
                name: name.into(),
                source,
            })
    }

    /// Deletes the streamer `record` was read from, only if it is still that object and, with
    /// `unchanged`, still that version of it (a reaper's decision must not delete a streamer
    /// someone opened since). `false` when it was gone or had changed.
    pub async fn delete(&self, record: &Record, unchanged: bool) -> Result<bool, StoreError> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: record.uid.clone(),
                resource_version: record.resource_version.clone().filter(|_| unchanged),
            }),
            ..DeleteParams::default()
        };
        match self.api.delete(&record.name, &params).await {
            Ok(_) => Ok(true),
            Err(e) if is_status(&e, 404) || is_status(&e, 409) => Ok(false),
            Err(source) => Err(StoreError::Delete {
                name: record.name.clone(),
                source,
            }),
        }
    }
}
