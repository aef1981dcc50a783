//! NsightOtelCollector -> ServiceAccount, ConfigMap `<name>-config` (the collector's
//! `collector.yaml`), Service (`otlp-grpc` 4317, `otlp-http` 4318, with the converter
//! `converter` 14318) and a Deployment of the OpenTelemetry Collector, with the OTLP converter
//! (`nsight-otlp`) as a second container when `spec.converter.enabled`.
//!
//! ```text
//! OTLP proxy sidecars ──OTLP──> receivers.otlp ─> processors.batch ─> exporters: debug
//!                                                                     + otlp/<name> per spec.exporters[]
//!                                                                     + otlp/nsight-converter (127.0.0.1:14317)
//! converter: spans ─> data dir (emptyDir) ─> at the collection's stop ─> reports in the storage config
//! coordinator ──POST :14318/v1/collections/<s>/<c>/stop──> converter (`converter_url`)
//! ```
//!
//! The converter needs a storage config (`spec.cloudStorageRef`, else the namespace's only one,
//! resolved by the controller) and one replica (a collection's spans must meet in one converter).
//! Its buffer is on an emptyDir: it survives the converter's restarts, not the Pod's deletion.
//! The Pod template carries a hash of the config, so a config change rolls the Pods. Pure.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{ConfigMap, ConfigMapVolumeSource, HTTPGetAction, Probe, Volume},
    apimachinery::pkg::util::intstr::IntOrString,
};
use nsight_api::{NsightCloudStorageConfig, NsightOtelCollector, Workload};
use serde_json::{json, Value};

use super::{
    storage,
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
/// The converter's own endpoints (stop, status, health; OTLP/HTTP too), on the Service.
pub const CONVERTER_HTTP: Port = Port {
    name: "converter",
    port: 14318,
};
/// The converter's OTLP/gRPC port, on the Pod's loopback: only the collector sends there.
pub const CONVERTER_GRPC_PORT: u16 = 14317;
/// The converter's container (and image) name.
pub const CONVERTER: &str = "nsight-otlp";
/// The collector's exporter to the converter.
pub const CONVERTER_EXPORTER: &str = "otlp/nsight-converter";
const CONVERTER_DATA_DIR: &str = "/var/lib/nsight-otlp";
const CONVERTER_STORAGE_DIR: &str = "/etc/nsight/storage";

/// Whether `cr` runs the OTLP converter beside the collector.
pub fn converter_enabled(cr: &NsightOtelCollector) -> bool {
    cr.spec.converter.as_ref().is_some_and(|t| t.enabled)
}

/// Where a coordinator of the namespace stops collections on the converter of collector
/// `name` (`nsight-coordinator --otlp-converter`).
pub fn converter_url(name: &str, namespace: &str) -> String {
    format!("http://{name}.{namespace}.svc:{}", CONVERTER_HTTP.port)
}

/// The ConfigMap holding a collector's config.
pub fn config_map_name(collector: &str) -> String {
    format!("{collector}-config")
}

/// The collector config (JSON is YAML): OTLP in, batched, to the debug exporter, to every
/// `spec.exporters[]` endpoint over OTLP/gRPC, and to the converter when it runs.
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
    if converter_enabled(cr) {
        exporters.insert(
            CONVERTER_EXPORTER.into(),
            json!({"endpoint": format!("127.0.0.1:{CONVERTER_GRPC_PORT}"), "tls": {"insecure": true}}),
        );
        names.push(CONVERTER_EXPORTER.into());
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

/// The converter container and its volumes: spans on loopback from the collector, reports to
/// the storage config in Secret `secret`.
fn converter(
    owner: &Owner,
    secret: &nsight_api::SecretRef,
    settings: &RenderSettings,
) -> (k8s_openapi::api::core::v1::Container, Vec<Volume>) {
    let (data, data_mount) = workload::scratch("converter-data", CONVERTER_DATA_DIR);
    let mut main = Main {
        image: settings.image(CONVERTER),
        command: vec![CONVERTER.into()],
        args: vec![
            "--http-listen".into(),
            format!("0.0.0.0:{}", CONVERTER_HTTP.port),
            "--grpc-listen".into(),
            format!("127.0.0.1:{CONVERTER_GRPC_PORT}"),
            "--data-dir".into(),
            CONVERTER_DATA_DIR.into(),
        ],
        ports: vec![CONVERTER_HTTP],
        volumes: vec![data],
        mounts: vec![data_mount],
        health_path: Some("/healthz"),
        ..Main::default()
    };
    let file = storage::mount_config(&mut main, secret, CONVERTER_STORAGE_DIR);
    main.args.extend(["--storage-config".into(), file]);
    // The same container shape as every component's (probes, read-only root, no escalation),
    // without the collector's image override.
    let shaped = workload::deployment(owner, &Workload::default(), main);
    let pod = shaped
        .spec
        .and_then(|s| s.template.spec)
        .unwrap_or_default();
    let mut container = pod.containers.into_iter().next().unwrap_or_default();
    container.name = CONVERTER.into();
    (container, pod.volumes.unwrap_or_default())
}

/// `storage` is the NsightCloudStorageConfig the controller resolved for the converter
/// (`spec.cloudStorageRef`, else the namespace's only one); unused without the converter.
pub fn render(
    cr: &NsightOtelCollector,
    storage: Option<&NsightCloudStorageConfig>,
    settings: &RenderSettings,
) -> Result<Desired, RenderError> {
    let owner = Owner::of(cr, Component::OtelCollector)?;
    let converter = if converter_enabled(cr) {
        let replicas = cr.spec.replicas.unwrap_or(1);
        if replicas != 1 {
            return Err(RenderError::Invalid(format!(
                "spec.converter.enabled needs spec.replicas 1 (not {replicas}): a collection's \
                 spans must reach one converter"
            )));
        }
        let secret = storage.and_then(storage::config_secret).ok_or_else(|| {
            RenderError::Invalid(
                "spec.converter.enabled needs report storage: set spec.cloudStorageRef, or \
                 create one NsightCloudStorageConfig (with its Secret) in the namespace"
                    .into(),
            )
        })?;
        Some(converter(&owner, &secret, settings))
    } else {
        None
    };
    let text = serde_json::to_string_pretty(&config(cr)).unwrap_or_default();
    let config_map = ConfigMap {
        metadata: owner.meta(config_map_name(&owner.name)),
        data: Some(BTreeMap::from([(CONFIG_KEY.into(), text.clone())])),
        ..ConfigMap::default()
    };
    let ports = vec![OTLP_GRPC, OTLP_HTTP, HEALTH];
    let mut service_ports = ports.clone();
    if converter.is_some() {
        service_ports.push(CONVERTER_HTTP);
    }
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
        if let (Some((container, volumes)), Some(pod)) = (converter, spec.template.spec.as_mut()) {
            pod.containers.push(container);
            pod.volumes.get_or_insert_with(Vec::new).extend(volumes);
        }
    }
    Ok(Desired {
        objects: vec![
            Object::ServiceAccount(workload::service_account(&owner)),
            Object::ConfigMap(config_map),
            Object::Service(Box::new(workload::service(
                &owner,
                cr.spec.workload.service.as_ref(),
                &service_ports,
            ))),
            Object::Deployment(Box::new(deployment)),
        ],
    })
}
