//! The [`Managed`] glue of the storage, telemetry and viewing kinds:
//!
//! ```text
//! NsightCloudStorageConfig    render::storage         Ready: StatefulSet, or the external Secret checked;
//!                                                     managed: BucketReady (`bucket`, CreateBucket)
//! NsightOtelCollector         render::otel_collector  Ready: Deployment
//! OTLPProxyConfig             render::otlp_proxy      Ready: the collector it names exists
//! NsightStreamer              render::streamer        Ready: Deployment (reads its storage config);
//!                                                     `status.url` while Ready
//! NsightTenantOperator        render::tenant_operator Ready: Deployment
//! NsightOperatorProfileConfig (nothing rendered)      Ready: nsys accepts every nsightToolArgs
//!                                                     (`tool_args`; Warning Event when refused)
//! ```
//!
//! (The perf_event_paranoid DaemonSet is not here: it is a cluster-wide setting of the
//! manager, `manager::apply_machine_config`.)
//!
//! Reads what a render or a condition needs (a Secret, a collector, a storage config) and
//! nothing else; what the objects look like is decided in `render`.

use std::time::Duration;

use futures::{future::BoxFuture, FutureExt};
use k8s_openapi::api::{
    apps::v1::StatefulSet,
    core::v1::{ConfigMap, Secret, Service, ServiceAccount},
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    runtime::{events::EventType, Controller},
    Api, Client, ResourceExt,
};
use nsight_api::{
    common::CONDITION_READY, NsightCloudStorageConfig, NsightOperatorProfileConfig,
    NsightOtelCollector, NsightStatus, NsightStreamer, NsightTenantOperator, OTLPProxyConfig,
};

use super::{
    api, apply::Applied, bucket, owned_config, record, run, watch_referrers, Context, Error,
    Managed,
};
use crate::{
    conditions::{self, Cond},
    render::{
        self,
        storage::{Backend, Credentials},
        Component, Desired, ObjectKind,
    },
    tool_args,
};

/// How soon a resource whose reference is missing or invalid is looked at again (Secrets are
/// not watched: that would need the right to list every Secret).
pub const RECHECK: Duration = Duration::from_secs(15);

/// Fresh random root credentials (only used when the Secret does not exist yet).
fn credentials() -> Credentials {
    Credentials {
        user: format!(
            "nsight-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        ),
        password: format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        ),
    }
}

/// `BucketReady` of a managed server: its bucket created once the server is `ready`.
async fn managed_bucket(
    cr: &NsightCloudStorageConfig,
    ctx: &Context,
    ready: &Cond,
) -> Result<Cond, Error> {
    {
        if !ready.status {
            return Ok(bucket::not_attempted(bucket::NotAttempted {
                reason: "ServerNotReady",
                message: format!(
                    "bucket {} is created once the S3 server is ready ({})",
                    render::storage::BUCKET,
                    ready.message
                ),
            }));
        }
        let (name, namespace) = (cr.name_any(), cr.namespace().unwrap_or_default());
        let secret_name = render::storage::credentials_secret_name(&name);
        let secret = Api::<Secret>::namespaced(ctx.client.clone(), &namespace)
            .get_opt(&secret_name)
            .await
            .map_err(|source| Error::ReadReference {
                kind: "Secret",
                name: secret_name,
                source,
            })?;
        let endpoint = ctx.settings.managed_storage_endpoint.as_deref();
        Ok(
            match bucket::settings_from_secret(secret.as_ref(), endpoint, &name, &namespace) {
                Ok(settings) => bucket::ensure(settings).await,
                Err(why) => bucket::not_attempted(why),
            },
        )
    }
}

impl Managed for NsightCloudStorageConfig {
    const KIND: &'static str = "NsightCloudStorageConfig";
    const OWNS: &'static [ObjectKind] = &[
        ObjectKind::ServiceAccount,
        ObjectKind::Secret,
        ObjectKind::Service,
        ObjectKind::StatefulSet,
    ];

    fn status(&self) -> Option<&NsightStatus> {
        self.status.as_ref()
    }

    fn desired<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Result<Desired, Error>> {
        async move {
            render::storage::render(self, &credentials(), &ctx.settings).map_err(Error::Render)
        }
        .boxed()
    }

    /// Managed: the StatefulSet's readiness; external: the Secret checked; local: ready.
    fn ready<'a>(
        &'a self,
        ctx: &'a Context,
        applied: &'a [Applied],
    ) -> BoxFuture<'a, Result<Vec<Cond>, Error>> {
        async move {
            let cond = match render::storage::backend(self) {
                Backend::Managed => {
                    let ready =
                        conditions::ready_stateful_set(applied.iter().find_map(|a| match a {
                            Applied::StatefulSet(s) => Some(&**s),
                            _ => None,
                        }));
                    let bucket = managed_bucket(self, ctx, &ready).await?;
                    return Ok(vec![ready, bucket]);
                }
                Backend::External(secret_ref) => {
                    let secret = match (&secret_ref, self.namespace()) {
                        (Some(r), Some(ns)) => Api::<Secret>::namespaced(ctx.client.clone(), &ns)
                            .get_opt(&r.name)
                            .await
                            .map_err(|source| Error::ReadReference {
                                kind: "Secret",
                                name: r.name.clone(),
                                source,
                            })?,
                        _ => None,
                    };
                    let check = render::storage::check_secret(secret_ref.as_ref(), secret.as_ref());
                    conditions::cond(CONDITION_READY, check.valid, check.reason, check.message)
                }
                Backend::Local => conditions::cond(
                    CONDITION_READY,
                    true,
                    "LocalStorage",
                    "reports stay in the profiled Pods".into(),
                ),
                Backend::Disabled => conditions::cond(
                    CONDITION_READY,
                    false,
                    "Disabled",
                    "spec.enabled is false".into(),
                ),
            };
            Ok(vec![cond])
        }
        .boxed()
    }

    fn recheck(ready: &[Cond]) -> Option<Duration> {
        ready
            .iter()
            .any(|c| {
                !c.status
                    && (c.reason.starts_with("Secret")
                        || (c.type_ == bucket::CONDITION_BUCKET && c.reason != "ServerNotReady"))
            })
            .then_some(RECHECK)
    }

    fn watch_owned(
        controller: Controller<Self>,
        client: &Client,
        namespace: Option<&str>,
    ) -> Controller<Self> {
        controller
            .owns(
                api::<StatefulSet>(client, namespace),
                owned_config::<Self>(),
            )
            .owns(api::<Service>(client, namespace), owned_config::<Self>())
            .owns(
                api::<ServiceAccount>(client, namespace),
                owned_config::<Self>(),
            )
    }
}

impl Managed for NsightOtelCollector {
    const KIND: &'static str = "NsightOtelCollector";

    fn status(&self) -> Option<&NsightStatus> {
        self.status.as_ref()
    }

    /// With the converter: the NsightCloudStorageConfig `cloudStorageRef` names, else the
    /// namespace's only one (where its reports go).
    fn desired<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Result<Desired, Error>> {
        async move {
            let storage = if render::otel_collector::converter_enabled(self) {
                let namespace = self.namespace().unwrap_or_default();
                super::storage_or_only(ctx, &namespace, self.spec.cloud_storage_ref.as_ref())
                    .await?
            } else {
                None
            };
            render::otel_collector::render(self, storage.as_ref(), &ctx.settings)
                .map_err(Error::Render)
        }
        .boxed()
    }

    /// A storage config that appears or changes re-renders the collectors naming it.
    fn watch_inputs(
        controller: Controller<Self>,
        client: &Client,
        namespace: Option<&str>,
    ) -> Controller<Self> {
        watch_referrers::<Self, NsightCloudStorageConfig>(controller, client, namespace, |c| {
            c.spec.cloud_storage_ref.as_deref()
        })
    }
}

impl Managed for OTLPProxyConfig {
    const KIND: &'static str = "OTLPProxyConfig";
    const OWNS: &'static [ObjectKind] = &[ObjectKind::ConfigMap];

    fn status(&self) -> Option<&NsightStatus> {
        self.status.as_ref()
    }

    fn desired<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Result<Desired, Error>> {
        async move { render::otlp_proxy::render(self, &ctx.settings).map_err(Error::Render) }
            .boxed()
    }

    /// Ready when the NsightOtelCollector `collectorRef` names exists.
    fn ready<'a>(
        &'a self,
        ctx: &'a Context,
        _applied: &'a [Applied],
    ) -> BoxFuture<'a, Result<Vec<Cond>, Error>> {
        async move {
            let cond = match (&self.spec.collector_ref, self.namespace()) {
                (Some(name), Some(ns)) => {
                    let found = Api::<NsightOtelCollector>::namespaced(ctx.client.clone(), &ns)
                        .get_opt(name)
                        .await
                        .map_err(|source| Error::ReadReference {
                            kind: "NsightOtelCollector",
                            name: name.clone(),
                            source,
                        })?
                        .is_some();
                    if found {
                        conditions::cond(
                            CONDITION_READY,
                            true,
                            "CollectorFound",
                            format!("spans go to NsightOtelCollector {name}"),
                        )
                    } else {
                        conditions::cond(
                            CONDITION_READY,
                            false,
                            "CollectorMissing",
                            format!("NsightOtelCollector {name} does not exist in this namespace"),
                        )
                    }
                }
                _ => conditions::cond(
                    CONDITION_READY,
                    false,
                    "CollectorRefMissing",
                    "spec.collectorRef names no NsightOtelCollector".into(),
                ),
            };
            Ok(vec![cond])
        }
        .boxed()
    }

    fn watch_owned(
        controller: Controller<Self>,
        client: &Client,
        namespace: Option<&str>,
    ) -> Controller<Self> {
        controller.owns(api::<ConfigMap>(client, namespace), owned_config::<Self>())
    }

    /// A collector that appears or goes re-evaluates the proxy configs naming it.
    fn watch_inputs(
        controller: Controller<Self>,
        client: &Client,
        namespace: Option<&str>,
    ) -> Controller<Self> {
        watch_referrers::<Self, NsightOtelCollector>(controller, client, namespace, |p| {
            p.spec.collector_ref.as_deref()
        })
    }
}

impl Managed for NsightStreamer {
    const KIND: &'static str = "NsightStreamer";

    fn status(&self) -> Option<&NsightStatus> {
        self.status.as_ref().map(|s| &s.common)
    }

    /// `url` (the Service's in-cluster URL) while Ready.
    fn status_extra(&self, ready: &[Cond]) -> serde_json::Map<String, serde_json::Value> {
        let is_ready = ready.iter().any(|c| c.type_ == CONDITION_READY && c.status);
        let mut extra = serde_json::Map::new();
        if let (true, Some(url)) = (is_ready, render::streamer::url(self)) {
            extra.insert("url".into(), url.into());
        }
        extra
    }

    fn current_status_extra(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut extra = serde_json::Map::new();
        if let Some(url) = self.status.as_ref().and_then(|s| s.url.clone()) {
            extra.insert("url".into(), url.into());
        }
        extra
    }

    /// Reads the NsightCloudStorageConfig `cloudStorageRef` names, else the namespace's only one
    /// (none: no storage mounted, no reports synced).
    fn desired<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Result<Desired, Error>> {
        async move {
            // The named storage config, else the namespace's only one (as the coordinator's):
            // streamers the tenant API launches name none.
            let namespace = self.namespace().unwrap_or_default();
            let storage =
                super::storage_or_only(ctx, &namespace, self.spec.cloud_storage_ref.as_ref())
                    .await?;
            render::streamer::render(self, storage.as_ref(), &ctx.settings).map_err(Error::Render)
        }
        .boxed()
    }

    /// A storage config that appears or changes re-renders the streamers naming it.
    fn watch_inputs(
        controller: Controller<Self>,
        client: &Client,
        namespace: Option<&str>,
    ) -> Controller<Self> {
        watch_referrers::<Self, NsightCloudStorageConfig>(controller, client, namespace, |s| {
            s.spec.cloud_storage_ref.as_deref()
        })
    }
}

impl Managed for NsightTenantOperator {
    const KIND: &'static str = "NsightTenantOperator";
    const OWNS: &'static [ObjectKind] = &[
        ObjectKind::ServiceAccount,
        ObjectKind::Secret,
        ObjectKind::NetworkPolicy,
        ObjectKind::Role,
        ObjectKind::RoleBinding,
        ObjectKind::Service,
        ObjectKind::Deployment,
    ];

    fn status(&self) -> Option<&NsightStatus> {
        self.status.as_ref()
    }

    fn desired<'a>(&'a self, ctx: &'a Context) -> BoxFuture<'a, Result<Desired, Error>> {
        async move {
            let desired =
                render::tenant_operator::render(self, &ctx.settings).map_err(Error::Render)?;
            super::with_gateway_token(desired, self, Component::TenantOperator)
        }
        .boxed()
    }

    fn watch_owned(
        controller: Controller<Self>,
        client: &Client,
        namespace: Option<&str>,
    ) -> Controller<Self> {
        controller
            .owns(
                api::<k8s_openapi::api::apps::v1::Deployment>(client, namespace),
                owned_config::<Self>(),
            )
            .owns(api::<Service>(client, namespace), owned_config::<Self>())
            .owns(
                api::<ServiceAccount>(client, namespace),
                owned_config::<Self>(),
            )
            .owns(api::<Role>(client, namespace), owned_config::<Self>())
            .owns(
                api::<RoleBinding>(client, namespace),
                owned_config::<Self>(),
            )
    }
}

impl Managed for NsightOperatorProfileConfig {
    const KIND: &'static str = "NsightOperatorProfileConfig";
    /// Renders nothing, so owns nothing.
    const OWNS: &'static [ObjectKind] = &[];

    fn status(&self) -> Option<&NsightStatus> {
        self.status.as_ref()
    }

    fn desired<'a>(&'a self, _ctx: &'a Context) -> BoxFuture<'a, Result<Desired, Error>> {
        async move { Ok(Desired::default()) }.boxed()
    }

    /// Ready when nsys accepts every tool config's arguments; a Warning Event when that
    /// turns false (or the refusal changes).
    fn ready<'a>(
        &'a self,
        ctx: &'a Context,
        _applied: &'a [Applied],
    ) -> BoxFuture<'a, Result<Vec<Cond>, Error>> {
        async move {
            let ready = tool_args::ready(&self.spec);
            if tool_args::event_due(self.status(), &ready) {
                record(
                    ctx,
                    self,
                    EventType::Warning,
                    tool_args::REASON_INVALID,
                    ready.message.clone(),
                )
                .await;
            }
            Ok(vec![ready])
        }
        .boxed()
    }

    fn watch_owned(
        controller: Controller<Self>,
        _client: &Client,
        _namespace: Option<&str>,
    ) -> Controller<Self> {
        controller
    }
}

/// Runs the controllers of this module's kinds concurrently.
pub async fn run_more(ctx: std::sync::Arc<Context>, ns: Option<&str>) {
    futures::join!(
        run::<NsightCloudStorageConfig>(ctx.clone(), ns),
        run::<NsightOtelCollector>(ctx.clone(), ns),
        run::<OTLPProxyConfig>(ctx.clone(), ns),
        run::<NsightStreamer>(ctx.clone(), ns),
        run::<NsightTenantOperator>(ctx.clone(), ns),
        run::<NsightOperatorProfileConfig>(ctx.clone(), ns),
    );
}
