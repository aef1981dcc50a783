//! `admission.k8s.io/v1` AdmissionReview in and out around [`decide`] and [`patch`]: the whole
//! webhook behaviour as one pure function, [`review`], that the HTTPS shell calls.
//!
//! Every review with a `request.uid` gets an AdmissionReview back with `allowed: true`: a Pod
//! the webhook cannot read is admitted unchanged with a warning (profiling must never block a
//! workload). Only a body that is not an AdmissionReview at all is refused ([`ReviewError`],
//! HTTP 400 in the shell). Never a panic.
//!
//! Side effects (a skip Event, auto-provisioning) are not done here: [`review_with_effects`]
//! returns them as [`Effects`] for the shell, and none for a dry-run request.

use base64::Engine;
use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;
use serde_json::{json, Value};

pub use crate::world::{StaticWorld, World};
use crate::{
    decide::{decide_in, Decision},
    events::{skip_event, SkipEvent},
    patch::{patch, report_storage},
    settings::Settings,
};

/// What the shell does after answering (never on a dry run): both are queued, off the
/// request path.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Effects {
    /// Record why the Pod was skipped.
    pub event: Option<SkipEvent>,
    /// A Pod was injected in this namespace (auto-provisioning).
    pub injected_in: Option<String>,
    /// Secrets of another namespace the injected Pod mounts (single-tenant): copied into its
    /// namespace before the answer, so the Pod finds them when it starts.
    pub copies: Vec<crate::secret_copy::SecretCopy>,
}

/// The body is not an AdmissionReview with a request uid: nothing to answer to.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("the body is not an admission.k8s.io/v1 AdmissionReview")]
    NotAReview(#[source] serde_json::Error),
    #[error("the AdmissionReview has no request")]
    NoRequest,
}

/// `O`: the object, read as a Pod directly (one pass over the body), or as JSON when that
/// fails (so that a Pod the webhook cannot read still gets an answer).
#[derive(Deserialize)]
#[serde(bound = "O: Deserialize<'de>")]
struct ReviewIn<O> {
    request: Option<RequestIn<O>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound = "O: Deserialize<'de>")]
struct RequestIn<O> {
    uid: String,
    #[serde(default)]
    kind: Option<Gvk>,
    #[serde(default)]
    operation: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default = "none")]
    object: Option<O>,
    #[serde(default)]
    dry_run: Option<bool>,
}

#[derive(Deserialize)]
struct Gvk {
    #[serde(default)]
    group: String,
    #[serde(default)]
    kind: String,
}

impl Gvk {
    fn is_pod(&self) -> bool {
        self.group.is_empty() && self.kind == "Pod"
    }
}

/// Answers one AdmissionReview (the raw body) with the AdmissionReview to send back.
pub fn review(body: &[u8], world: &dyn World, settings: &Settings) -> Result<Value, ReviewError> {
    review_with_effects(body, world, settings).map(|(answer, _)| answer)
}

/// [`review`], and what the shell should do besides answering.
pub fn review_with_effects(
    body: &[u8],
    world: &dyn World,
    settings: &Settings,
) -> Result<(Value, Effects), ReviewError> {
    let request = match serde_json::from_slice::<ReviewIn<Pod>>(body) {
        Ok(input) => input.request.ok_or(ReviewError::NoRequest)?,
        Err(_) => {
            let input: ReviewIn<Value> =
                serde_json::from_slice(body).map_err(ReviewError::NotAReview)?;
            let request = input.request.ok_or(ReviewError::NoRequest)?;
            let RequestIn {
                uid,
                kind,
                operation,
                namespace,
                object,
                dry_run,
            } = request;
            let is_pod_create =
                kind.as_ref().is_some_and(Gvk::is_pod) && operation.as_deref() == Some("CREATE");
            // Only a Pod CREATE is read (below); any other object is none of our business.
            let object = match object
                .filter(|_| is_pod_create)
                .map(|o| Pod::deserialize(&o))
            {
                Some(Err(e)) => {
                    let response = json!({"uid": uid, "allowed": true});
                    let answer = warn(response, &format!("could not read the Pod: {e}"));
                    return Ok((envelope(answer), Effects::default()));
                }
                Some(Ok(pod)) => Some(pod),
                None => None,
            };
            RequestIn {
                uid,
                kind,
                operation,
                namespace,
                object,
                dry_run,
            }
        }
    };
    let mut response = json!({"uid": request.uid, "allowed": true});
    let mut effects = Effects::default();
    let is_pod = request.kind.as_ref().is_some_and(Gvk::is_pod);
    let is_create = request.operation.as_deref() == Some("CREATE");
    if !(is_pod && is_create) {
        return Ok((envelope(response), effects));
    }
    let Some(mut pod) = request.object else {
        let answer = warn(response, "the request has no Pod object");
        return Ok((envelope(answer), effects));
    };
    let namespace = request
        .namespace
        .or_else(|| pod.metadata.namespace.clone())
        .unwrap_or_default();
    if pod.metadata.namespace.is_none() {
        pod.metadata.namespace = Some(namespace.clone());
    }
    let view = world.view(&namespace);
    let dry_run = request.dry_run == Some(true);
    match decide_in(&pod, None, &view, &settings.default_tool_config) {
        Decision::Inject { tool, source } => {
            let storage = report_storage(&tool, &view.storage, view.cluster_storage.as_ref());
            let mirroring =
                crate::otlp_sidecar::choose(&tool, &view.otlp_proxies, settings.otlp_xds.as_ref());
            let ops = patch(&pod, &tool, &source, settings, &storage, &mirroring);
            let bytes = serde_json::to_vec(&ops).unwrap_or_default();
            response["patchType"] = json!("JSONPatch");
            response["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(bytes));
            // Recorded on the Pod (annotation); a log line per Pod would be on the request path.
            tracing::debug!(%namespace, tool = %tool.name, %source, "injecting");
            if !dry_run {
                effects.copies = crate::secret_copy::copies_for(&namespace, settings, &storage);
                effects.injected_in = Some(namespace);
            }
        }
        Decision::Skip(reason) => {
            tracing::debug!(%namespace, %reason, "not injecting");
            if !dry_run {
                effects.event = skip_event(&pod, &namespace, &reason, view.namespace_configured());
            }
            if reason.warrants_warning() {
                response = warn(response, &reason.to_string());
            }
        }
    }
    Ok((envelope(response), effects))
}

fn none<O>() -> Option<O> {
    None
}

fn warn(mut response: Value, message: &str) -> Value {
    response["warnings"] = json!([format!("nsight injector: {message}")]);
    response
}

fn envelope(response: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}
