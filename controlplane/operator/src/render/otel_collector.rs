//! NsightOtelCollector -> ServiceAccount, ConfigMap `<name>-config` (the collector's
//! `collector.yaml`), Service (`otlp-grpc` 4317, `otlp-http` 4318) and a Deployment of the
//! OpenTelemetry Collector.
//!
//! ```text
//! OTLP proxy sidecars ──OTLP──> receivers.otlp ─> processors.batch ─> exporters: debug
//!                                                                     + otlp/<name> per spec.exporters[]
//! ```
//!
//! The Pod template carries a hash of the config, so a config change rolls the Pods. Pure.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{ConfigMap, ConfigMapVolumeSource, HTTPGetAction, Probe, Volume},
    apimachinery::pkg::util::intstr::IntOrString,
};
use nsight_api::NsightOtelCollector;
use serde_json::{json, Value};

use super::{
    workload::{self, Main, Port},
    Component, Desired, Object, Owner, RenderError, RenderSettings,
};

/// The `app.kubernetes.io/name` (and container name) of the collector.
pub const NAME: &str = "otel-collector";
/// The collector image unless `spec.image` says otherwise.
pub const DEFAULT_IMAGE: &str = "docker.io/otel/opentelemetry-collector:0.139.0";
pub const OTLP_GRPC: Port = Port {
    name: "otlp-grpc",
    port: 4317,
};
pub const OTLP_HTTP: Port = Port {
    name: "otlp-http",
    port: 4318,
};
/// The `health_check` extension.
pub const HEALTH: Port = Port {
    name: "health",
    port: 13133,
};
/// The key of the collector config in the ConfigMap.
pub const CONFIG_KEY: &str = "collector.yaml";
/// The Pod-template annotation that changes with the config.
pub const CONFIG_HASH_ANNOTATION: &str = "nvidia.com/nsight-config-hash";
const CONFIG_DIR: &str = "/etc/otelcol";

/// The ConfigMap holding a collector's config.
pub fn config_map_name(collector: &str) -> String {
    format!("{collector}-config")
}

/// The collector config (JSON is YAML): OTLP in, batched, to the debug exporter and to every
/// `spec.exporters[]` endpoint over OTLP/gRPC.
pub fn config(cr: &NsightOtelCollector) -> Value {
    let mut exporters = serde_json::Map::new();
    exporters.insert("debug".into(), json!({"verbosity": "basic"}));
    let mut names = vec!["debug".to_owned()];
    for e in &cr.spec.exporters {
        let name = format!("otlp/{}", e.name);
        let insecure = e.endpoint.starts_with("http://") || !e.endpoint.contains("://");
        exporters.insert(
            name.clone(),
            json!({"endpoint": e.endpoint, "tls": {"insecure": insecure}}),
        );
        names.push(name);
    }
    json!({
        "extensions": {"health_check": {"endpoint": format!("0.0.0.0:{}", HEALTH.port)}},
        "receivers": {"otlp": {"protocols": {
            "grpc": {"endpoint": format!("0.0.0.0:{}", OTLP_GRPC.port)},
            "http": {"endpoint": format!("0.0.0.0:{}", OTLP_HTTP.port)},
        }}},
        "processors": {"batch": {}},
        "exporters": exporters,
        "service": {
            "extensions": ["health_check"],
            "pipelines": {"traces": {
                "receivers": ["otlp"],
                "processors": ["batch"],
                "exporters": names,
            }},
        },
    })
}

/// FNV-1a, 64 bits: a stable hash of the config for the roll-out annotation.
pub(crate) fn fnv1a(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

pub fn render(cr: &NsightOtelCollector, settings: &RenderSettings) -> Result<Desired, RenderError> {
    let _ = settings;
    let owner = Owner::of(cr, Component::OtelCollector)?;
    let text = serde_json::to_string_pretty(&config(cr)).unwrap_or_default();
    let config_map = ConfigMap {
        metadata: owner.meta(config_map_name(&owner.name)),
        data: Some(BTreeMap::from([(CONFIG_KEY.into(), text.clone())])),
        ..ConfigMap::default()
    };
    let ports = vec![OTLP_GRPC, OTLP_HTTP, HEALTH];
    let main = Main {
        image: DEFAULT_IMAGE.into(),
        args: vec![format!("--config={CONFIG_DIR}/{CONFIG_KEY}")],
        ports: ports.clone(),
        volumes: vec![Volume {
            name: "config".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_map_name(&owner.name),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        }],
        mounts: vec![workload::read_only("config", CONFIG_DIR)],
        run_as_user: Some(10001),
        ..Main::default()
    };
    let mut deployment = workload::deployment(&owner, &cr.spec.workload, main);
    if let Some(spec) = deployment.spec.as_mut() {
        spec.replicas = Some(cr.spec.replicas.unwrap_or(1));
        if let Some(meta) = spec.template.metadata.as_mut() {
            meta.annotations = Some(BTreeMap::from([(
                CONFIG_HASH_ANNOTATION.into(),
                fnv1a(&text),
            )]));
        }
        let probe = Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/".into()),
                port: IntOrString::String(HEALTH.name.into()),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(10),
            ..Probe::default()
        };
        for c in spec
            .template
            .spec
            .iter_mut()
            .flat_map(|p| p.containers.iter_mut())
        {
            c.readiness_probe = Some(probe.clone());
            c.liveness_probe = Some(Probe {
                failure_threshold: Some(6),
                ..probe.clone()
            });
        }
    }
    Ok(Desired {
        objects: vec![
            Object::ServiceAccount(workload::service_account(&owner)),
            Object::ConfigMap(config_map),
            Object::Service(Box::new(workload::service(
                &owner,
                cr.spec.workload.service.as_ref(),
                &ports,
            ))),
            Object::Deployment(Box::new(deployment)),
        ],
    })
}
