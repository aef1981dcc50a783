//! NsightGateway -> ServiceAccount, ConfigMap `<name>-envoy` (the Envoy bootstrap: node
//! `nsight-gateway/<namespace>/<name>`, ADS at the operator's xDS server), Service (`http` on
//! `spec.port`, default 8888; `storage` 9000) and the Envoy Deployment.
//!
//! Listeners, routes, TLS and auth are not here: they reach Envoy over xDS. The proxy-wasm
//! filters the xDS configuration names (`--auth-wasm-path`) are: the init container
//! `nsight-plugins` (the operator's image, `nsight-operator install-plugins`) copies
//! `/plugins/*.wasm` into the `wasm` emptyDir that Envoy mounts read-only at
//! `RenderSettings::wasm_dir`.
//!
//! ```text
//! init nsight-plugins: /plugins/*.wasm ──copy──> emptyDir wasm ──ro──> envoy:<wasm_dir>/
//! envoy: -c /etc/envoy/bootstrap/envoy.json (ConfigMap <name>-envoy)
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, SecurityContext, Volume,
};
use nsight_api::NsightGateway;
use nsight_gateway::bootstrap::{AdsFlavor, Bootstrap};

use super::{
    workload::{self, Main, Port},
    Component, Desired, Object, Owner, RenderError, RenderSettings,
};

/// The component name (Envoy runs as `envoy`).
pub const NAME: &str = "nsight-gateway";
/// The documented ports.
pub const DEFAULT_PORT: u16 = 8888;
pub const STORAGE: Port = Port {
    name: "storage",
    port: 9000,
};
/// Envoy's admin interface, loopback only inside the Pod.
pub const ADMIN_PORT: u16 = 9901;
/// The bootstrap file in the ConfigMap.
pub const BOOTSTRAP_KEY: &str = "envoy.json";
/// Beside (not above) the filters' directory: a volume cannot be mounted inside a ConfigMap's.
const BOOTSTRAP_DIR: &str = "/etc/envoy/bootstrap";
/// The init container that installs the proxy-wasm filters.
pub const PLUGINS_INIT_CONTAINER: &str = "nsight-plugins";
/// Where the plugins image keeps the filters.
pub const PLUGINS_SOURCE_DIR: &str = "/plugins";
const WASM_VOLUME: &str = "wasm";
/// The `envoy` user of the Envoy image (the gateway and the OTLP proxy sidecar).
pub const ENVOY_UID: i64 = 101;

/// The xDS node ID of a gateway (the local platform's is `nsight-gateway/local/gateway`): the
/// one the manager's xDS controller publishes to (`nsight_gateway::cache::node_id`).
pub fn node_id(namespace: &str, name: &str) -> String {
    nsight_gateway::cache::node_id::gateway(namespace, name)
}

pub fn config_map_name(gateway: &str) -> String {
    format!("{gateway}-envoy")
}

pub fn render(cr: &NsightGateway, settings: &RenderSettings) -> Result<Desired, RenderError> {
    let owner = Owner::of(cr, Component::Gateway)?;
    let http = Port {
        name: "http",
        port: cr.spec.port.unwrap_or(DEFAULT_PORT),
    };
    let ports = vec![http, STORAGE];
    let bootstrap = Bootstrap {
        node_id: node_id(&owner.namespace, &owner.name),
        node_cluster: NAME.into(),
        xds_host: settings.xds_host.clone(),
        xds_port: settings.xds_port,
        admin: ([127, 0, 0, 1], ADMIN_PORT).into(),
        flavor: AdsFlavor::Sotw,
    };
    // A `serde_json::Value` always serializes.
    let bootstrap = serde_json::to_string_pretty(&bootstrap.to_json()).unwrap_or_default();
    let config_map = ConfigMap {
        metadata: owner.meta(config_map_name(&owner.name)),
        data: Some(BTreeMap::from([(BOOTSTRAP_KEY.into(), bootstrap)])),
        ..ConfigMap::default()
    };
    let (tmp, tmp_mount) = workload::scratch("tmp", "/tmp");
    let (wasm, wasm_mount) = workload::scratch(WASM_VOLUME, &settings.wasm_dir);
    let main = Main {
        image: settings.envoy_image.clone(),
        command: vec!["envoy".into()],
        args: vec![
            "-c".into(),
            format!("{BOOTSTRAP_DIR}/{BOOTSTRAP_KEY}"),
            "--service-node".into(),
            node_id(&owner.namespace, &owner.name),
            "--service-cluster".into(),
            NAME.into(),
        ],
        ports: ports.clone(),
        volumes: vec![
            Volume {
                name: "bootstrap".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: config_map_name(&owner.name),
                    ..ConfigMapVolumeSource::default()
                }),
                ..Volume::default()
            },
            tmp,
            wasm,
        ],
        mounts: vec![
            workload::read_only("bootstrap", BOOTSTRAP_DIR),
            tmp_mount,
            workload::read_only(WASM_VOLUME, &settings.wasm_dir),
        ],
        run_as_user: Some(ENVOY_UID),
        ..Main::default()
    };
    let workload = nsight_api::Workload {
        service: cr.spec.service.clone(),
        ..nsight_api::Workload::default()
    };
    let mut deployment = workload::deployment(&owner, &workload, main);
    if let Some(pod) = deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    {
        pod.init_containers = Some(vec![plugins_init_container(settings, wasm_mount)]);
    }
    Ok(Desired {
        objects: vec![
            Object::ServiceAccount(workload::service_account(&owner)),
            Object::ConfigMap(config_map),
            Object::Service(Box::new(workload::service(
                &owner,
                cr.spec.service.as_ref(),
                &ports,
            ))),
            Object::Deployment(Box::new(deployment)),
        ],
    })
}

/// Copies the filters from the plugins image into the `wasm` volume (`mount`, writable here).
fn plugins_init_container(
    settings: &RenderSettings,
    mount: k8s_openapi::api::core::v1::VolumeMount,
) -> Container {
    Container {
        name: PLUGINS_INIT_CONTAINER.into(),
        image: Some(settings.plugins_image()),
        command: Some(vec![
            "nsight-operator".into(),
            "install-plugins".into(),
            format!("--from={PLUGINS_SOURCE_DIR}"),
            format!("--to={}", settings.wasm_dir),
        ]),
        volume_mounts: Some(vec![mount]),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            ..SecurityContext::default()
        }),
        ..Container::default()
    }
}
