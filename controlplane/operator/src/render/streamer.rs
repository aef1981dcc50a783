//! NsightStreamer -> ServiceAccount, Service (`http` 8080) and the `nsight-streamer`
//! Deployment: the browser-based Nsight Systems GUI for one session's reports.
//!
//! The session comes in as `NSIGHT_SESSION_ID`; the storage config (the external Secret or the
//! managed server's generated one, see `storage::config_secret`) is mounted and named by
//! `NSIGHT_CLOUD_STORAGE_CONFIG_FILE`; the media settings (`nsight_api::StreamerMedia`, checked
//! first) add the WebRTC `mediaPorts` to the container and the Service, the TURN relay's
//! `NSIGHT_STREAMER_TURN*` variables (credentials by Secret reference) and the image's own `env`;
//! `runtimeClassName` becomes the Pod's (a GPU runtime for a streamer that encodes on one). While the
//! Deployment is available, `status.url` is the Service's in-cluster URL ([`url`]).
//!
//! With a session and a storage config, the Pod's init container `report-sync`
//! (`nsight-report-sync`, our image) copies the session's reports (or only the one in the
//! `nsight.nvidia.com/report` annotation, with its SQLite export) into an emptyDir mounted at
//! [`REPORTS_DIR`] in both containers (`NSIGHT_REPORTS_DIR`); the streamer starts once they are
//! all there, each checked against its listed size. Pure.

use k8s_openapi::{
    api::core::v1::{
        Container, ContainerPort, EnvVar, EnvVarSource, SecretKeySelector, SecurityContext,
        ServicePort,
    },
    apimachinery::pkg::util::intstr::IntOrString,
};
use nsight_api::{NsightCloudStorageConfig, NsightStreamer, Turn};
use nsight_contracts::tenant::REPORT_ANNOTATION;

use super::{
    storage,
    workload::{self, Main, Port},
    Component, Desired, Object, Owner, RenderError, RenderSettings,
};

/// The image (and container) name.
pub const NAME: &str = "nsight-streamer";
pub const HTTP: Port = Port {
    name: "http",
    port: 8080,
};
const STORAGE_DIR: &str = "/etc/nsight/storage";
/// Where the streamer finds the synced reports.
pub const REPORTS_DIR: &str = "/reports";
/// The init container's image (and program) name.
pub const SYNC_IMAGE: &str = "nsight-report-sync";

fn env(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        ..EnvVar::default()
    }
}

/// Where the streamer is served: its Service's in-cluster URL (`http://<name>.<namespace>.svc:<port>/`,
/// the port of `spec.service.port` or 8080). `None` without a namespace.
pub fn url(cr: &NsightStreamer) -> Option<String> {
    let namespace = cr.metadata.namespace.as_deref()?;
    let name = cr.metadata.name.as_deref()?;
    let port = cr
        .spec
        .workload
        .service
        .as_ref()
        .and_then(|s| s.port)
        .unwrap_or(HTTP.port);
    Some(format!("http://{name}.{namespace}.svc:{port}/"))
}

/// `storage` is the NsightCloudStorageConfig `spec.cloudStorageRef` names, when it exists.
pub fn render(
    cr: &NsightStreamer,
    storage: Option<&NsightCloudStorageConfig>,
    settings: &RenderSettings,
) -> Result<Desired, RenderError> {
    let owner = Owner::of(cr, Component::Streamer)?;
    cr.spec.media.check("spec").map_err(RenderError::Invalid)?;
    let ports = vec![HTTP];
    let (tmp, tmp_mount) = workload::scratch("tmp", "/tmp");
    let mut main = Main {
        image: settings.image(NAME),
        ports: ports.clone(),
        env: vec![env(
            "NSIGHT_STREAMER_HTTP",
            format!("0.0.0.0:{}", HTTP.port),
        )],
        volumes: vec![tmp],
        mounts: vec![tmp_mount],
        health_path: Some("/healthz"),
        ..Main::default()
    };
    if let Some(session) = &cr.spec.session_id {
        main.env.push(env("NSIGHT_SESSION_ID", session.clone()));
    }
    main.env.extend(turn_env(cr.spec.media.turn.as_ref()));
    let mut sync = None;
    if let Some(secret) = storage.and_then(storage::config_secret) {
        let file = storage::mount_config(&mut main, &secret, STORAGE_DIR);
        main.env
            .push(env("NSIGHT_CLOUD_STORAGE_CONFIG_FILE", file.clone()));
        if let Some(session) = &cr.spec.session_id {
            let (reports, reports_mount) = workload::scratch("reports", REPORTS_DIR);
            main.volumes.push(reports);
            main.mounts.push(reports_mount.clone());
            main.env.push(env("NSIGHT_REPORTS_DIR", REPORTS_DIR));
            let mut args = vec![
                "--storage-config".into(),
                file,
                "--session".into(),
                session.clone(),
                "--dest".into(),
                REPORTS_DIR.into(),
            ];
            if let Some(report) = cr
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(REPORT_ANNOTATION))
            {
                args.extend(["--report".into(), report.clone()]);
            }
            sync = Some(Container {
                name: "report-sync".into(),
                image: Some(settings.image(SYNC_IMAGE)),
                args: Some(args),
                volume_mounts: Some(vec![
                    workload::read_only("storage-config", STORAGE_DIR),
                    reports_mount,
                ]),
                security_context: Some(SecurityContext {
                    allow_privilege_escalation: Some(false),
                    read_only_root_filesystem: Some(true),
                    ..SecurityContext::default()
                }),
                ..Container::default()
            });
        }
    }
    // The image's own settings last: none of them is an NSIGHT_ name (checked above).
    main.env.extend(cr.spec.media.env.iter().cloned());
    let mut deployment = workload::deployment(&owner, &cr.spec.workload, main);
    if let Some(pod) = deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    {
        pod.init_containers = sync.map(|c| vec![c]);
        pod.runtime_class_name = cr.spec.runtime_class_name.clone();
        if let Some(container) = pod.containers.first_mut() {
            container.ports.get_or_insert_with(Vec::new).extend(
                cr.spec.media.media_ports.iter().map(|p| ContainerPort {
                    name: Some(p.name.clone()),
                    container_port: i32::from(p.port),
                    protocol: Some(p.protocol.as_str().into()),
                    ..ContainerPort::default()
                }),
            );
        }
    }
    let mut service = workload::service(&owner, cr.spec.workload.service.as_ref(), &ports);
    if let Some(spec) = service.spec.as_mut() {
        spec.ports
            .get_or_insert_with(Vec::new)
            .extend(cr.spec.media.media_ports.iter().map(|p| ServicePort {
                name: Some(p.name.clone()),
                port: i32::from(p.port),
                target_port: Some(IntOrString::String(p.name.clone())),
                protocol: Some(p.protocol.as_str().into()),
                ..ServicePort::default()
            }));
    }
    Ok(Desired {
        objects: vec![
            Object::ServiceAccount(workload::service_account(&owner)),
            Object::Service(Box::new(service)),
            Object::Deployment(Box::new(deployment)),
        ],
    })
}

/// The TURN relay's environment: `NSIGHT_STREAMER_TURN=1` when enabled,
/// `NSIGHT_STREAMER_TURN_URLS` (comma-separated), and `NSIGHT_STREAMER_TURN_USERNAME` /
/// `NSIGHT_STREAMER_TURN_PASSWORD` from the credentials Secret's `username` and `password`
/// keys (a reference: the values never enter the Deployment).
fn turn_env(turn: Option<&Turn>) -> Vec<EnvVar> {
    let Some(turn) = turn.filter(|t| t.enabled) else {
        return Vec::new();
    };
    let mut vars = vec![env("NSIGHT_STREAMER_TURN", "1")];
    if !turn.urls.is_empty() {
        vars.push(env("NSIGHT_STREAMER_TURN_URLS", turn.urls.join(",")));
    }
    if let Some(secret) = &turn.credentials_secret {
        for (name, key) in [
            ("NSIGHT_STREAMER_TURN_USERNAME", "username"),
            ("NSIGHT_STREAMER_TURN_PASSWORD", "password"),
        ] {
            vars.push(EnvVar {
                name: name.into(),
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: secret.clone(),
                        key: key.into(),
                        optional: Some(false),
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            });
        }
    }
    vars
}
