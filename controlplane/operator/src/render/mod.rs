//! Pure rendering: one custom resource (+ what it references) -> the Kubernetes objects it
//! should own. No client, no clock, no randomness: the same input always gives the same objects,
//! which the controllers server-side apply and the golden tests compare.
//!
//! ```text
//! NsightCoordinator ─┐
//! NsightAnalysis ────┤  render(cr, &RenderSettings) -> Desired { ServiceAccount, ConfigMap,
//! NsightCloudUI ─────┤                                           Service, Deployment }
//! NsightGateway ─────┘  every object: owner reference to the CR + the common labels
//! ```
//!
//! Owns the common label set ([`labels`]), the owner reference, the naming of objects and the
//! container images. Must not touch the API server (that is `controller`).

pub mod analysis;
pub mod cloud_ui;
pub mod coordinator;
pub mod gateway;
pub mod gateway_token;
pub mod otel_collector;
pub mod otlp_proxy;
pub mod perf_event;
pub mod storage;
pub mod streamer;
pub mod tenant_operator;
mod workload;

pub use workload::Port;

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{DaemonSet, Deployment, StatefulSet},
        core::v1::{ConfigMap, Secret, Service, ServiceAccount},
        networking::v1::NetworkPolicy,
        rbac::v1::{Role, RoleBinding},
    },
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
};
use kube::{Resource, ResourceExt};
use serde::Serialize;

/// The field manager of every server-side apply, and the `managed-by` label value.
pub const MANAGER: &str = "nsight-operator";
/// Label keys of the common set.
pub const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
pub const LABEL_PART_OF: &str = "app.kubernetes.io/part-of";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The kind of the owning custom resource (with `instance`, selects what one CR owns).
pub const LABEL_OWNER_KIND: &str = "nvidia.com/nsight-owner-kind";

/// Cluster-wide rendering choices (flags of `nsight-operator manager`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderSettings {
    /// Registry and path of the component images: `<repository>/<binary>:<tag>`.
    pub image_repository: String,
    pub image_tag: String,
    /// The Envoy image of gateways (default: the project's `nsight-gateway`).
    pub envoy_image: String,
    /// Where gateways' Envoy finds the operator's xDS server (a Service DNS name).
    pub xds_host: String,
    pub xds_port: u16,
    /// The image whose `/plugins` holds the gateway's proxy-wasm filters (`None`: the
    /// operator's own image, so the filters match the configuration this operator writes).
    pub plugins_image: Option<String>,
    /// Where the gateway's Envoy finds the filters: the directory of `--auth-wasm-path`.
    pub wasm_dir: String,
    /// Where the manager itself reaches a managed S3 server to create its bucket (`{name}`,
    /// `{namespace}` replaced); `None`: the generated storage config's endpoint, the Service's
    /// cluster DNS name. For a manager running outside the cluster.
    pub managed_storage_endpoint: Option<String>,
    /// The cluster's DNS domain (certificates the operator issues name Services in it).
    pub cluster_domain: String,
}

impl Default for RenderSettings {
    fn default() -> Self {
        Self {
            image_repository: "nvcr.io/nvidia/devtools".into(),
            image_tag: env!("CARGO_PKG_VERSION").into(),
            envoy_image: Self::gateway_image("nvcr.io/nvidia/devtools", env!("CARGO_PKG_VERSION")),
            xds_host: "nsight-operator-xds.nsight-operator.svc".into(),
            xds_port: 18000,
            plugins_image: None,
            wasm_dir: "/etc/envoy/wasm".into(),
            managed_storage_endpoint: None,
            cluster_domain: "cluster.local".into(),
        }
    }
}

impl RenderSettings {
    /// The project's gateway image (Envoy, `cargo xtask image all`), the default Envoy image.
    pub fn gateway_image(repository: &str, tag: &str) -> String {
        format!("{}/nsight-gateway:{tag}", repository.trim_end_matches('/'))
    }

    /// `<repository>/<binary>:<tag>`.
    pub fn image(&self, binary: &str) -> String {
        format!(
            "{}/{binary}:{}",
            self.image_repository.trim_end_matches('/'),
            self.image_tag
        )
    }

    /// The image the gateway's filters are copied from.
    pub fn plugins_image(&self) -> String {
        self.plugins_image
            .clone()
            .unwrap_or_else(|| self.image("nsight-operator"))
    }
}

/// One object kind the operator creates. Garbage collection lists exactly these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    ServiceAccount,
    ConfigMap,
    Service,
    Deployment,
    /// Created once, never updated (generated credentials) and never pruned.
    Secret,
    Role,
    RoleBinding,
    StatefulSet,
    DaemonSet,
    NetworkPolicy,
}

impl ObjectKind {
    /// Every kind, in apply order (what others mount or run as first).
    pub const ALL: [ObjectKind; 5] = [
        ObjectKind::ServiceAccount,
        ObjectKind::ConfigMap,
        ObjectKind::Service,
        ObjectKind::Deployment,
        ObjectKind::NetworkPolicy,
    ];

    /// A fixed metric/log label.
    pub fn label(self) -> &'static str {
        match self {
            ObjectKind::ServiceAccount => "ServiceAccount",
            ObjectKind::ConfigMap => "ConfigMap",
            ObjectKind::Service => "Service",
            ObjectKind::Deployment => "Deployment",
            ObjectKind::Secret => "Secret",
            ObjectKind::Role => "Role",
            ObjectKind::RoleBinding => "RoleBinding",
            ObjectKind::StatefulSet => "StatefulSet",
            ObjectKind::DaemonSet => "DaemonSet",
            ObjectKind::NetworkPolicy => "NetworkPolicy",
        }
    }
}

/// A desired object.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Object {
    ServiceAccount(ServiceAccount),
    ConfigMap(ConfigMap),
    Service(Box<Service>),
    Deployment(Box<Deployment>),
    Secret(Secret),
    Role(Role),
    RoleBinding(RoleBinding),
    StatefulSet(Box<StatefulSet>),
    DaemonSet(Box<DaemonSet>),
    NetworkPolicy(Box<NetworkPolicy>),
}

impl Object {
    pub fn kind(&self) -> ObjectKind {
        match self {
            Object::ServiceAccount(_) => ObjectKind::ServiceAccount,
            Object::ConfigMap(_) => ObjectKind::ConfigMap,
            Object::Service(_) => ObjectKind::Service,
            Object::Deployment(_) => ObjectKind::Deployment,
            Object::Secret(_) => ObjectKind::Secret,
            Object::Role(_) => ObjectKind::Role,
            Object::RoleBinding(_) => ObjectKind::RoleBinding,
            Object::StatefulSet(_) => ObjectKind::StatefulSet,
            Object::DaemonSet(_) => ObjectKind::DaemonSet,
            Object::NetworkPolicy(_) => ObjectKind::NetworkPolicy,
        }
    }

    pub fn meta(&self) -> &ObjectMeta {
        match self {
            Object::ServiceAccount(o) => &o.metadata,
            Object::ConfigMap(o) => &o.metadata,
            Object::Service(o) => &o.metadata,
            Object::Deployment(o) => &o.metadata,
            Object::Secret(o) => &o.metadata,
            Object::Role(o) => &o.metadata,
            Object::RoleBinding(o) => &o.metadata,
            Object::StatefulSet(o) => &o.metadata,
            Object::DaemonSet(o) => &o.metadata,
            Object::NetworkPolicy(o) => &o.metadata,
        }
    }

    pub fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or_default()
    }
}

/// Everything one custom resource should own. Invariant: names are unique per kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Desired {
    pub objects: Vec<Object>,
}

impl Desired {
    /// Names of the desired objects of `kind`.
    pub fn names(&self, kind: ObjectKind) -> Vec<&str> {
        self.objects
            .iter()
            .filter(|o| o.kind() == kind)
            .map(Object::name)
            .collect()
    }

    /// The desired Deployment of this name.
    pub fn deployment(&self, name: &str) -> Option<&Deployment> {
        self.objects.iter().find_map(|o| match o {
            Object::Deployment(d) if d.metadata.name.as_deref() == Some(name) => Some(&**d),
            _ => None,
        })
    }
}

/// The custom resource cannot be rendered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RenderError {
    #[error("the resource has no {0} (it must come from the API server)")]
    MissingMetadata(&'static str),
    #[error("the name {0:?} is longer than 63 characters, the limit of the label value that marks what it owns; use a shorter name")]
    NameTooLong(String),
    #[error("cannot issue the agent channel's certificates: {0}")]
    Certificate(String),
    /// A spec the schema admits but that cannot work (the message names the field).
    #[error("{0}")]
    Invalid(String),
}

/// The component a custom resource kind deploys: its binary (= image and command name, the same
/// names the local platform runs) and its `component` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    Coordinator,
    Analysis,
    CloudUi,
    Gateway,
    Storage,
    OtelCollector,
    OtlpProxy,
    Streamer,
    TenantOperator,
    PerfEvent,
}

impl Component {
    /// The binary and image name.
    pub fn binary(self) -> &'static str {
        match self {
            Component::Coordinator => coordinator::BINARY,
            Component::Analysis => analysis::BINARY,
            Component::CloudUi => cloud_ui::IMAGE,
            Component::Gateway => gateway::NAME,
            Component::Storage => storage::NAME,
            Component::OtelCollector => otel_collector::NAME,
            Component::OtlpProxy => otlp_proxy::NAME,
            Component::Streamer => streamer::NAME,
            Component::TenantOperator => tenant_operator::NAME,
            Component::PerfEvent => perf_event::NAME,
        }
    }

    /// The `app.kubernetes.io/component` label.
    pub fn label(self) -> &'static str {
        match self {
            Component::Coordinator => "coordinator",
            Component::Analysis => "analysis",
            Component::CloudUi => "cloud-ui",
            Component::Gateway => "gateway",
            Component::Storage => "storage",
            Component::OtelCollector => "otel-collector",
            Component::OtlpProxy => "otlp-proxy",
            Component::Streamer => "streamer",
            Component::TenantOperator => "tenant-operator",
            Component::PerfEvent => "machine-config",
        }
    }
}

/// Identity of the owning custom resource, taken from its metadata.
#[derive(Clone, Debug, PartialEq)]
pub struct Owner {
    pub name: String,
    pub namespace: String,
    pub kind: String,
    pub component: Component,
    reference: OwnerReference,
}

impl Owner {
    /// Fails when the resource lacks a name, namespace or uid (it was not read from the server).
    pub fn of<K: Resource<DynamicType = ()>>(
        cr: &K,
        component: Component,
    ) -> Result<Self, RenderError> {
        let namespace = cr
            .namespace()
            .ok_or(RenderError::MissingMetadata("namespace"))?;
        let reference = cr
            .controller_owner_ref(&())
            .ok_or(RenderError::MissingMetadata("name or uid"))?;
        if reference.name.len() > 63 {
            return Err(RenderError::NameTooLong(reference.name));
        }
        Ok(Self {
            name: cr.name_any(),
            namespace,
            kind: K::kind(&()).into_owned(),
            component,
            reference,
        })
    }

    /// The common label set on every owned object (and its Pods).
    pub fn labels(&self) -> BTreeMap<String, String> {
        labels(self.component, &self.kind, &self.name)
    }

    /// The labels a Deployment selects its Pods by (stable across updates).
    pub fn selector(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_NAME.into(), self.component.binary().into()),
            (LABEL_INSTANCE.into(), self.name.clone()),
        ])
    }

    /// Metadata of an owned object called `name`.
    pub fn meta(&self, name: impl Into<String>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some(self.namespace.clone()),
            labels: Some(self.labels()),
            owner_references: Some(vec![self.reference.clone()]),
            ..ObjectMeta::default()
        }
    }
}

/// The common label set.
pub fn labels(component: Component, owner_kind: &str, owner: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_NAME.into(), component.binary().into()),
        (LABEL_INSTANCE.into(), owner.into()),
        (LABEL_COMPONENT.into(), component.label().into()),
        (LABEL_PART_OF.into(), MANAGER.into()),
        (LABEL_MANAGED_BY.into(), MANAGER.into()),
        (LABEL_OWNER_KIND.into(), owner_kind.into()),
    ])
}

/// The label selector (`k=v,...`) of everything one custom resource owns: what garbage
/// collection lists.
pub fn owned_selector(owner_kind: &str, owner: &str) -> String {
    format!("{LABEL_MANAGED_BY}={MANAGER},{LABEL_OWNER_KIND}={owner_kind},{LABEL_INSTANCE}={owner}")
}
