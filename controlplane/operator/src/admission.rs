//! `admission.k8s.io/v1` AdmissionReview in and out around [`decide`] and [`patch`]: the whole
//! webhook behaviour as one pure function, [`review`], that the HTTPS shell calls.
//!
//! Every review with a `request.uid` gets an AdmissionReview back with `allowed: true`: a Pod
//! the webhook cannot read is admitted unchanged with a warning (profiling must never block a
//! workload). Only a body that is not an AdmissionReview at all is refused ([`ReviewError`],
//! HTTP 400 in the shell). Never a panic.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::api::core::v1::Pod;
use nsight_api::NsightOperatorProfileConfig;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::{
    decide::{decide, Decision},
    patch::patch,
    settings::Settings,
};

/// What the webhook knows about the cluster: namespace labels and profile configs. The shell
/// provides it (a static set today; the operator's caches later).
pub trait World: Send + Sync {
    fn namespace_labels(&self, namespace: &str) -> BTreeMap<String, String>;
    fn profile_configs(&self, namespace: &str) -> Vec<NsightOperatorProfileConfig>;
}

/// A fixed world, for tests and for running without the API server (`nsight-operator webhook
/// --world FILE` reads one from JSON: `{"namespaces": {"ns": {"label": "value"}}, "configs":
/// [NsightOperatorProfileConfig, ...]}`, each config with its `metadata.namespace`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct StaticWorld {
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub configs: Vec<NsightOperatorProfileConfig>,
}

impl World for StaticWorld {
    fn namespace_labels(&self, namespace: &str) -> BTreeMap<String, String> {
        self.namespaces.get(namespace).cloned().unwrap_or_default()
    }

    fn profile_configs(&self, namespace: &str) -> Vec<NsightOperatorProfileConfig> {
        self.configs
            .iter()
            .filter(|c| c.metadata.namespace.as_deref() == Some(namespace))
            .cloned()
            .collect()
    }
}

/// The body is not an AdmissionReview with a request uid: nothing to answer to.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("the body is not an admission.k8s.io/v1 AdmissionReview")]
    NotAReview(#[source] serde_json::Error),
    #[error("the AdmissionReview has no request")]
    NoRequest,
}

#[derive(Deserialize)]
struct ReviewIn {
    request: Option<RequestIn>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RequestIn {
    uid: String,
    #[serde(default)]
    kind: Option<Gvk>,
    #[serde(default)]
    operation: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    object: Option<Value>,
}

#[derive(Deserialize)]
struct Gvk {
    #[serde(default)]
    group: String,
    #[serde(default)]
    kind: String,
}

/// Answers one AdmissionReview (the raw body) with the AdmissionReview to send back.
pub fn review(body: &[u8], world: &dyn World, settings: &Settings) -> Result<Value, ReviewError> {
    let input: ReviewIn = serde_json::from_slice(body).map_err(ReviewError::NotAReview)?;
    let request = input.request.ok_or(ReviewError::NoRequest)?;
    let mut response = json!({"uid": request.uid, "allowed": true});
    let is_pod = request
        .kind
        .as_ref()
        .is_some_and(|k| k.group.is_empty() && k.kind == "Pod");
    let is_create = request.operation.as_deref() == Some("CREATE");
    if !(is_pod && is_create) {
        return Ok(envelope(response));
    }
    let pod: Pod = match request.object.map(serde_json::from_value).transpose() {
        Ok(Some(pod)) => pod,
        Ok(None) => return Ok(envelope(warn(response, "the request has no Pod object"))),
        Err(e) => {
            return Ok(envelope(warn(
                response,
                &format!("could not read the Pod: {e}"),
            )))
        }
    };
    let namespace = request
        .namespace
        .or_else(|| pod.metadata.namespace.clone())
        .unwrap_or_default();
    let configs = world.profile_configs(&namespace);
    let labels = world.namespace_labels(&namespace);
    match decide(&pod, &labels, &configs, &settings.default_tool_config) {
        Decision::Inject { tool, source } => {
            let ops = patch(&pod, &tool, &source, settings);
            let bytes = serde_json::to_vec(&ops).unwrap_or_default();
            response["patchType"] = json!("JSONPatch");
            response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
            tracing::info!(%namespace, tool = %tool.name, %source, "injecting");
        }
        Decision::Skip(reason) => {
            tracing::debug!(%namespace, %reason, "not injecting");
            if reason.warrants_warning() {
                response = warn(response, &reason.to_string());
            }
        }
    }
    Ok(envelope(response))
}

fn warn(mut response: Value, message: &str) -> Value {
    response["warnings"] = json!([format!("nsight injector: {message}")]);
    response
}

fn envelope(response: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}
