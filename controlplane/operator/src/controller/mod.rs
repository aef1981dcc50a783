//! One kube-runtime `Controller` per custom resource kind, all sharing one reconcile:
//!
//! ```text
//! watch CR (+ owned objects, filtered by label) ─> reconcile(cr)
//!   render(cr, inputs)            pure: desired objects        (render::*)
//!   apply::apply_all              server-side apply, field manager `nsight-operator`
//!   apply::collect_garbage        delete owned objects (by label) no longer desired
//!   conditions::applied           Reconciled + Ready, observedGeneration
//!   apply::patch_status           status subresource
//! error ─> Reconciled=False (best effort) ─> requeue with per-object exponential backoff
//! ```
//!
//! Deletion of the CR needs no finalizer: every owned object carries an owner reference, so
//! Kubernetes' garbage collector removes them. Owns the per-kind glue ([`Managed`]) and the
//! retry policy; must not decide what objects look like.

pub mod apply;
pub mod bucket;
mod kinds;

use std::{
    collections::HashMap,
    fmt::Debug,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::{future::BoxFuture, FutureExt, StreamExt};
use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::{ConfigMap, Secret, Service, ServiceAccount},
    },
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::Timestamp,
    NamespaceResourceScope,
};
use kube::{
    runtime::{
        controller::Action,
        events::{Event, EventType, Recorder, Reporter},
        reflector::ObjectRef,
        watcher, Controller,
    },
    Api, Client, Resource, ResourceExt,
};
use nsight_api::{
    NsightAnalysis, NsightCloudStorageConfig, NsightCloudUI, NsightCoordinator, NsightGateway,
    NsightOtelCollector, NsightStatus,
};
use serde::{de::DeserializeOwned, Serialize};

use crate::{
    certs,
    conditions::{self, Cond},
    metrics::Metrics,
    render::{
        self, Component, Desired, Object, ObjectKind, RenderError, RenderSettings,
        LABEL_MANAGED_BY, LABEL_OWNER_KIND, MANAGER,
    },
};

/// What every reconcile shares.
pub struct Context {
    pub client: Client,
    /// Events on the reconciled resources (`events.k8s.io/v1`).
    recorder: Recorder,
    pub settings: RenderSettings,
    pub metrics: Arc<Metrics>,
    /// Consecutive failures per object (`kind/namespace/name`), for the backoff.
    failures: Mutex<HashMap<String, u32>>,
}

impl Context {
    pub fn new(client: Client, settings: RenderSettings, metrics: Arc<Metrics>) -> Self {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: MANAGER.into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        );
        Self {
            client,
            recorder,
            settings,
            metrics,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn failures<T>(&self, f: impl FnOnce(&mut HashMap<String, u32>) -> T) -> T {
        f(&mut self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

impl Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// A reconcile failed; the variant names the step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot render the desired objects")]
    Render(#[source] RenderError),
    #[error("cannot read NsightCloudStorageConfig {name}")]
    ReadStorage {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot apply {kind} {name}")]
    Apply {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("{kind} {name} exists and is controlled by {owner}; rename one of the two resources")]
    Conflict {
        kind: String,
        name: String,
        owner: String,
    },
    #[error("cannot list owned {kind} objects")]
    List {
        kind: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot delete {kind} {name}, no longer desired")]
    Delete {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot update the status")]
    Status(#[source] kube::Error),
    #[error("cannot read {kind} {name}")]
    ReadReference {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// The failed step, a fixed metric label.
    pub fn step(&self) -> &'static str {
        match self {
            Error::Render(_) => "render",
            Error::ReadStorage { .. } | Error::ReadReference { .. } => "read",
            Error::Apply { .. } => "apply",
            Error::Conflict { .. } => "conflict",
            Error::List { .. } | Error::Delete { .. } => "prune",
            Error::Status(_) => "status",
        }
    }

    /// The `Reconciled=False` reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Render(_) => "RenderFailed",
            Error::ReadStorage { .. } => "StorageUnreadable",
            Error::ReadReference { .. } => "ReferenceUnreadable",
            Error::Apply { .. } => "ApplyFailed",
            Error::Conflict { .. } => "NameConflict",
            Error::List { .. } | Error::Delete { .. } => "PruneFailed",
            Error::Status(_) => "StatusFailed",
        }
    }

    /// The message with its causes, for the condition and the log.
    pub fn chain(&self) -> String {
        let mut out = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(s) = source {
            out.push_str(": ");
            out.push_str(&s.to_string());
            source = s.source();
        }
        out
    }
}

/// A custom resource kind the manager reconciles into a Deployment and friends.
pub trait Managed:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The kind, as a fixed metric label.
    const KIND: &'static str;

    /// The object kinds this kind's render can produce: what garbage collection lists.
    const OWNS: &'static [ObjectKind] = &ObjectKind::ALL;

    fn status(&self) -> Option<&NsightStatus>;

    /// Reads what the render needs besides the CR, then renders.
    fn desired<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Result<Desired, Error>>;

    /// The conditions besides `Reconciled` after a successful apply; by default `Ready` from
    /// the (first) Deployment.
    fn ready<'a>(
        &'a self,
        _ctx: &'a Context,
        applied: &'a [apply::Applied],
    ) -> BoxFuture<'a, Result<Vec<Cond>, Error>> {
        let deployment = applied.iter().find_map(apply::Applied::deployment);
        async move { Ok(vec![conditions::ready(deployment)]) }.boxed()
    }

    /// Status members of this kind besides the common ones, from the conditions after an apply
    /// (a streamer's `url` while Ready); none by default.
    fn status_extra(&self, _ready: &[Cond]) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }

    /// The members of [`Managed::status_extra`] the object has now.
    fn current_status_extra(&self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }

    /// A sooner reconcile than [`RESYNC`] after these conditions (a reference that is not
    /// watched is missing or invalid).
    fn recheck(_ready: &[Cond]) -> Option<Duration> {
        None
    }

    /// The watches of owned objects (label-filtered caches); by default Deployments,
    /// Services, ConfigMaps and ServiceAccounts.
    fn watch_owned(
        controller: Controller<Self>,
        client: &Client,
        namespace: Option<&str>,
    ) -> Controller<Self> {
        controller
            .owns(api::<Deployment>(client, namespace), owned_config::<Self>())
            .owns(api::<Service>(client, namespace), owned_config::<Self>())
            .owns(api::<ConfigMap>(client, namespace), owned_config::<Self>())
            .owns(
                api::<ServiceAccount>(client, namespace),
                owned_config::<Self>(),
            )
    }

    /// Extra watches: objects the render reads, mapped back to the CRs that read them.
    fn watch_inputs(
        controller: Controller<Self>,
        _client: &Client,
        _namespace: Option<&str>,
    ) -> Controller<Self> {
        controller
    }
}

impl Managed for NsightCoordinator {
    const KIND: &'static str = "NsightCoordinator";

    fn status(&self) -> Option<&NsightStatus> {
        self.status.as_ref()
    }

    /// Resolves the storage config (`cloudStorageRef`, else the namespace's only one) and, for
    /// a TLS agent channel, issues its certificates when the Secret does not exist yet, or
    /// renews them when `certs::rotation` says they are due (checked on every reconcile, at
    /// least every [`RESYNC`]).
    fn desired<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Result<Desired, Error>> {
        async move {
            let namespace = self.namespace().unwrap_or_default();
            let storage =
                storage_or_only(ctx, &namespace, self.spec.cloud_storage_ref.as_ref()).await?;
            let converters = otlp_converters(ctx, &namespace).await?;
            if !render::coordinator::encrypted(self) {
                let desired = render::coordinator::render(
                    self,
                    storage.as_ref(),
                    None,
                    &converters,
                    &ctx.settings,
                )
                .map_err(Error::Render)?;
                return with_gateway_token(desired, self, Component::Coordinator);
            }
            let (files, create) = agent_tls(ctx, self, &namespace).await?;
            let fingerprint = certs::fingerprint(&files);
            let mut desired = render::coordinator::render(
                self,
                storage.as_ref(),
                Some(&fingerprint),
                &converters,
                &ctx.settings,
            )
            .map_err(Error::Render)?;
            if let Some(secret) = create {
                desired.objects.insert(0, Object::Secret(secret));
            }
            with_gateway_token(desired, self, Component::Coordinator)
        }
        .boxed()
    }

    /// A storage config that appears or changes re-renders the coordinators naming it; a
    /// collector of the namespace, every coordinator there (its converter's URL).
    fn watch_inputs(
        controller: Controller<Self>,
        client: &Client,
        namespace: Option<&str>,
    ) -> Controller<Self> {
        let controller =
            watch_referrers::<Self, NsightCloudStorageConfig>(controller, client, namespace, |c| {
                c.spec.cloud_storage_ref.as_deref()
            });
        watch_namespace::<Self, NsightOtelCollector>(controller, client, namespace)
    }
}

/// The converters of the namespace's NsightOtelCollectors that run one, by collector name.
async fn otlp_converters(ctx: &Context, namespace: &str) -> Result<Vec<String>, Error> {
    let collectors = Api::<NsightOtelCollector>::namespaced(ctx.client.clone(), namespace)
        .list(&Default::default())
        .await
        .map_err(|source| Error::ReadReference {
            kind: "NsightOtelCollector",
            name: format!("(the list of namespace {namespace})"),
            source,
        })?;
    let mut urls: Vec<String> = collectors
        .items
        .iter()
        .filter(|c| render::otel_collector::converter_enabled(c))
        .map(|c| render::otel_collector::converter_url(&c.name_any(), namespace))
        .collect();
    urls.sort();
    Ok(urls)
}

/// `desired` with the gateway-token Secret of `cr` first (a fresh token: `create_once` keeps
/// the one that exists), so the Deployment that mounts it never waits for it.
pub(crate) fn with_gateway_token<K: Resource<DynamicType = ()>>(
    mut desired: Desired,
    cr: &K,
    component: Component,
) -> Result<Desired, Error> {
    let token = render::gateway_token::generate();
    let secret = render::gateway_token::secret(cr, component, &token).map_err(Error::Render)?;
    desired.objects.insert(0, Object::Secret(secret));
    Ok(desired)
}

/// The agent-channel files of `cr` as they will be after this reconcile, and the Secret to
/// create when there is none. A Secret that exists is renewed in place (replace, guarded by
/// its resourceVersion) when something is due; the reasons are logged, never the keys.
async fn agent_tls(
    ctx: &Context,
    cr: &NsightCoordinator,
    namespace: &str,
) -> Result<(certs::rotation::Files, Option<Secret>), Error> {
    let name = render::coordinator::tls_secret_name(&cr.name_any());
    let api = Api::<Secret>::namespaced(ctx.client.clone(), namespace);
    let wanted = certs::agent_channel_wanted(
        &format!("{namespace}/{}", cr.name_any()),
        render::coordinator::server_names(cr, &ctx.settings),
    );
    let issue_failed = |e: certs::rotation::Error| {
        Error::Render(RenderError::Certificate(format!(
            "{e}: {}",
            std::error::Error::source(&e).map_or_else(String::new, ToString::to_string)
        )))
    };
    let read = |source| Error::ReadReference {
        kind: "Secret",
        name: name.clone(),
        source,
    };
    let Some(existing) = api.get_opt(&name).await.map_err(read)? else {
        let files = certs::issue(&wanted, certs::now()).map_err(issue_failed)?;
        let secret = render::coordinator::agent_tls_secret(cr, &files).map_err(Error::Render)?;
        return Ok((files, Some(secret)));
    };
    let data = existing
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    let files = certs::files_of(&data);
    let Some((renewed, reasons)) =
        certs::rotation::rotate(&files, &wanted, certs::now()).map_err(issue_failed)?
    else {
        return Ok((files, None));
    };
    let mut secret = render::coordinator::agent_tls_secret(cr, &renewed).map_err(Error::Render)?;
    secret.metadata.resource_version = existing.metadata.resource_version.clone();
    // Keep what others put on the Secret (labels, annotations) besides our own.
    secret.metadata.labels = merged(existing.metadata.labels, secret.metadata.labels);
    secret.metadata.annotations = existing.metadata.annotations;
    secret.type_ = existing.type_;
    api.replace(&name, &Default::default(), &secret)
        .await
        .map_err(|source| Error::Apply {
            kind: "Secret".into(),
            name: name.clone(),
            source,
        })?;
    let why = certs::rotation::describe(&reasons);
    tracing::info!(%namespace, secret = %name, reasons = %why, "renewed the agent-channel certificates");
    record(
        ctx,
        cr,
        EventType::Normal,
        "CertificatesRenewed",
        format!("renewed the agent-channel certificates in Secret {name}: {why}"),
    )
    .await;
    Ok((renewed, None))
}

fn merged(
    base: Option<std::collections::BTreeMap<String, String>>,
    ours: Option<std::collections::BTreeMap<String, String>>,
) -> Option<std::collections::BTreeMap<String, String>> {
    match (base, ours) {
        (None, ours) => ours,
        (Some(mut base), ours) => {
            base.extend(ours.unwrap_or_default());
            Some(base)
        }
    }
}

/// The storage config a resource names (`cloudStorageRef`), else the namespace's only one.
pub(super) async fn storage_or_only(
    ctx: &Context,
    namespace: &str,
    reference: Option<&String>,
) -> Result<Option<NsightCloudStorageConfig>, Error> {
    let api = Api::<NsightCloudStorageConfig>::namespaced(ctx.client.clone(), namespace);
    let read = |name: String| move |source| Error::ReadStorage { name, source };
    match reference {
        Some(name) => api.get_opt(name).await.map_err(read(name.clone())),
        None => {
            let mut all = api
                .list(&Default::default())
                .await
                .map_err(read("(any)".into()))?
                .items;
            Ok((all.len() == 1).then(|| all.remove(0)))
        }
    }
}

impl Managed for NsightCloudUI {
    const KIND: &'static str = "NsightCloudUI";

    fn status(&self) -> Option<&NsightStatus> {
        self.status.as_ref()
    }

    fn desired<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Result<Desired, Error>> {
        async move { render::cloud_ui::render(self, &ctx.settings).map_err(Error::Render) }.boxed()
    }
}

impl Managed for NsightGateway {
    const KIND: &'static str = "NsightGateway";

    fn status(&self) -> Option<&NsightStatus> {
        self.status.as_ref()
    }

    fn desired<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Result<Desired, Error>> {
        async move { render::gateway::render(self, &ctx.settings).map_err(Error::Render) }.boxed()
    }
}

impl Managed for NsightAnalysis {
    const KIND: &'static str = "NsightAnalysis";

    fn status(&self) -> Option<&NsightStatus> {
        self.status.as_ref()
    }

    /// Reads the NsightCloudStorageConfig `cloudStorageRef` names; a missing one renders the
    /// local-directory fallback (and is picked up on the next periodic reconcile).
    fn desired<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Result<Desired, Error>> {
        async move {
            let storage = match (&self.spec.cloud_storage_ref, self.namespace()) {
                (Some(name), Some(ns)) => {
                    Api::<NsightCloudStorageConfig>::namespaced(ctx.client.clone(), &ns)
                        .get_opt(name)
                        .await
                        .map_err(|source| Error::ReadStorage {
                            name: name.clone(),
                            source,
                        })?
                }
                _ => None,
            };
            let desired = render::analysis::render(self, storage.as_ref(), &ctx.settings)
                .map_err(Error::Render)?;
            with_gateway_token(desired, self, Component::Analysis)
        }
        .boxed()
    }

    /// A storage config that appears, changes or goes re-renders the analyses naming it.
    fn watch_inputs(
        controller: Controller<Self>,
        client: &Client,
        namespace: Option<&str>,
    ) -> Controller<Self> {
        watch_referrers::<Self, NsightCloudStorageConfig>(controller, client, namespace, |a| {
            a.spec.cloud_storage_ref.as_deref()
        })
    }
}

/// How long to wait after the `failures`-th consecutive failure: 1 s doubling, at most 5 min.
pub fn backoff(failures: u32) -> Duration {
    let secs = 1u64 << failures.saturating_sub(1).min(9);
    Duration::from_secs(secs.min(300))
}

/// A successful reconcile is repeated this often (drift the watches did not see, referenced
/// objects that are not watched).
pub const RESYNC: Duration = Duration::from_secs(300);

fn now() -> Time {
    Time(Timestamp::now())
}

fn key<K: Managed>(cr: &K) -> String {
    format!(
        "{}/{}/{}",
        K::KIND,
        cr.namespace().unwrap_or_default(),
        cr.name_any()
    )
}

/// Returns when to reconcile again.
async fn reconcile_inner<K: Managed>(cr: &K, ctx: &Context) -> Result<Duration, Error> {
    if cr.meta().deletion_timestamp.is_some() {
        // Owner references hand the cleanup to Kubernetes' garbage collector.
        return Ok(RESYNC);
    }
    let namespace = cr.namespace().unwrap_or_default();
    let name = cr.name_any();
    let desired = cr.desired(ctx).await?;
    let applied = apply::apply_objects(&ctx.client, &namespace, &desired).await?;
    let deleted =
        apply::collect_garbage_of(&ctx.client, &namespace, K::KIND, &name, &desired, K::OWNS)
            .await?;
    let ready = cr.ready(ctx, &applied).await?;
    let status = conditions::applied_with(
        cr.status(),
        desired.objects.len(),
        &ready,
        cr.meta().generation,
        &now(),
    );
    let extra = cr.status_extra(&ready);
    if cr.status() != Some(&status) || cr.current_status_extra() != extra {
        apply::patch_status::<K>(&ctx.client, &namespace, &name, &status, &extra).await?;
    }
    if deleted > 0 {
        record(
            ctx,
            cr,
            EventType::Normal,
            "Pruned",
            format!("deleted {deleted} owned objects no longer desired"),
        )
        .await;
    }
    tracing::debug!(kind = K::KIND, %namespace, %name, objects = desired.objects.len(), deleted, "reconciled");
    Ok(K::recheck(&ready).unwrap_or(RESYNC))
}

/// Publishes an Event about `cr`; a failure to do so is only logged.
async fn record<K: Managed>(
    ctx: &Context,
    cr: &K,
    type_: EventType,
    reason: &'static str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        // The API limit of a note.
        note: Some(note.chars().take(1024).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &cr.object_ref(&())).await {
        tracing::debug!(error = %e, "cannot publish an event");
    }
}

/// One reconcile of `cr`: apply, prune, status. On failure, records `Reconciled=False` (best
/// effort) and returns the error for [`error_policy`].
pub async fn reconcile<K: Managed>(cr: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    ctx.metrics.started(K::KIND);
    let result = reconcile_inner(&*cr, &ctx).await;
    let took = started.elapsed();
    ctx.metrics
        .finished(K::KIND, took, result.as_ref().err().map(Error::step));
    // Exact durations for `cargo xtask bench operator` (the histogram has coarse buckets).
    tracing::debug!(
        kind = K::KIND,
        took_us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
        ok = result.is_ok(),
        "reconcile timing"
    );
    match result {
        Ok(after) => {
            ctx.failures(|f| f.remove(&key(&*cr)));
            Ok(Action::requeue(after))
        }
        Err(e) => {
            record(&ctx, &*cr, EventType::Warning, e.reason(), e.chain()).await;
            let status = conditions::failed(
                cr.status(),
                e.reason(),
                e.chain(),
                cr.meta().generation,
                &now(),
            );
            let namespace = cr.namespace().unwrap_or_default();
            // Not Ready after a failure: no kind-specific members (a streamer's `url`).
            let none = serde_json::Map::new();
            if let Err(status_error) =
                apply::patch_status::<K>(&ctx.client, &namespace, &cr.name_any(), &status, &none)
                    .await
            {
                tracing::debug!(error = %status_error.chain(), "cannot record the failure in the status");
            }
            Err(e)
        }
    }
}

/// Requeue a failed object after [`backoff`] of its consecutive failures.
pub fn error_policy<K: Managed>(cr: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    let failures = ctx.failures(|f| {
        let n = f.entry(key(&*cr)).or_insert(0);
        *n = n.saturating_add(1);
        *n
    });
    let wait = backoff(failures);
    tracing::warn!(kind = K::KIND, name = %cr.name_any(), error = %error.chain(), failures, retry_in = ?wait, "reconcile failed");
    Action::requeue(wait)
}

/// The watch of the objects owned by `K` (a filtered cache: only what this kind labelled).
pub(crate) fn owned_config<K: Managed>() -> watcher::Config {
    watcher::Config::default().labels(&format!(
        "{LABEL_MANAGED_BY}={MANAGER},{LABEL_OWNER_KIND}={}",
        K::KIND
    ))
}

/// `controller` re-reconciles every one of its objects in the namespace of an `R` that appears,
/// changes or goes.
pub(crate) fn watch_namespace<K, R>(
    controller: Controller<K>,
    client: &Client,
    namespace: Option<&str>,
) -> Controller<K>
where
    K: Managed,
    R: Watched,
{
    watch_related(controller, client, namespace, |_: &K, _: &R| true)
}

/// `controller` re-reconciles its objects whose `reference` names an `R` of their namespace
/// when that `R` appears, changes or goes.
pub(crate) fn watch_referrers<K, R>(
    controller: Controller<K>,
    client: &Client,
    namespace: Option<&str>,
    reference: fn(&K) -> Option<&str>,
) -> Controller<K>
where
    K: Managed,
    R: Watched,
{
    watch_related(controller, client, namespace, move |k: &K, r: &R| {
        reference(k) == Some(r.name_any().as_str())
    })
}

/// A namespaced kind a controller may watch beside its own.
pub(crate) trait Watched:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<R> Watched for R where
    R: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// `controller` re-reconciles its objects of the namespace of an `R` that appears, changes or
/// goes, when `related` says they depend on it.
fn watch_related<K, R>(
    controller: Controller<K>,
    client: &Client,
    namespace: Option<&str>,
    related: impl Fn(&K, &R) -> bool + Send + Sync + 'static,
) -> Controller<K>
where
    K: Managed,
    R: Watched,
{
    let store = controller.store();
    controller.watches(
        api::<R>(client, namespace),
        watcher::Config::default(),
        move |changed: R| {
            let ns = changed.namespace();
            store
                .state()
                .into_iter()
                .filter(|k| k.namespace() == ns && related(k, &changed))
                .map(|k| ObjectRef::from_obj(&*k))
                .collect::<Vec<_>>()
        },
    )
}

/// Where the controllers watch: every namespace, or one.
pub(crate) fn api<T>(client: &Client, namespace: Option<&str>) -> Api<T>
where
    T: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Runs the controller of `K` until its watches end (never, in practice).
pub async fn run<K: Managed>(ctx: Arc<Context>, namespace: Option<&str>) {
    let client = ctx.client.clone();
    let controller = Controller::new(api::<K>(&client, namespace), watcher::Config::default());
    let controller = K::watch_inputs(controller, &client, namespace);
    K::watch_owned(controller, &client, namespace)
        .run(reconcile::<K>, error_policy::<K>, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(kind = K::KIND, error = %e, "controller event");
            }
        })
        .await;
}

/// Runs every controller of the manager concurrently.
pub async fn run_all(ctx: Arc<Context>, namespace: Option<String>) {
    let ns = namespace.as_deref();
    futures::join!(
        run::<NsightCoordinator>(ctx.clone(), ns),
        run::<NsightAnalysis>(ctx.clone(), ns),
        run::<NsightCloudUI>(ctx.clone(), ns),
        run::<NsightGateway>(ctx.clone(), ns),
        kinds::run_more(ctx.clone(), ns),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(16));
        assert_eq!(backoff(9), Duration::from_secs(256));
        assert_eq!(backoff(10), Duration::from_secs(300));
        assert_eq!(backoff(u32::MAX), Duration::from_secs(300));
    }
}
