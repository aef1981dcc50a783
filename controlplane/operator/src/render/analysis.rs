//! NsightAnalysis -> ServiceAccount, Service (`http` 8090) and the `nsight-analysis` Deployment.
//!
//! Storage: when `cloudStorageRef` names an NsightCloudStorageConfig with a `secretRef`, that
//! Secret's `storage-config.yaml` (or `secretRef.key`) is mounted and passed as
//! `--storage-config`; otherwise reports are read from a local directory (`--storage-dir`).

use k8s_openapi::api::core::v1::{KeyToPath, SecretVolumeSource, Volume};
use nsight_api::{NsightAnalysis, NsightCloudStorageConfig};

use super::{
    workload::{self, Main, Port},
    Component, Desired, Object, Owner, RenderError, RenderSettings,
};

/// The binary (and image) name, as the local platform runs it.
pub const BINARY: &str = "nsight-analysis";
pub const HTTP: Port = Port {
    name: "http",
    port: 8090,
};
/// The key of the storage Secret (the documented format).
pub const STORAGE_CONFIG_KEY: &str = "storage-config.yaml";
const STATE_DIR: &str = "/var/lib/nsight";
const STORAGE_DIR: &str = "/etc/nsight/storage";
/// Where the image holds the compiled recipes.
pub const RECIPES_DIR: &str = "/opt/nsight/recipes";

/// `storage` is the NsightCloudStorageConfig `spec.cloudStorageRef` names, when it exists.
pub fn render(
    cr: &NsightAnalysis,
    storage: Option<&NsightCloudStorageConfig>,
    settings: &RenderSettings,
) -> Result<Desired, RenderError> {
    let owner = Owner::of(cr, Component::Analysis)?;
    let ports = vec![HTTP];
    let (state, state_mount) = workload::scratch("state", STATE_DIR);
    let mut main = Main {
        image: settings.image(BINARY),
        command: vec![BINARY.into()],
        args: vec![
            "--http".into(),
            format!("0.0.0.0:{}", HTTP.port),
            "--state-dir".into(),
            format!("{STATE_DIR}/analysis"),
            "--recipes-dir".into(),
            RECIPES_DIR.into(),
            "--max-concurrent-jobs".into(),
            cr.spec.max_concurrent_jobs.unwrap_or(2).to_string(),
        ],
        ports: ports.clone(),
        volumes: vec![state],
        mounts: vec![state_mount],
        health_path: Some("/healthz"),
        ..Main::default()
    };
    match storage.and_then(|s| s.spec.secret_ref.as_ref()) {
        Some(secret) => {
            let key = secret
                .key
                .clone()
                .unwrap_or_else(|| STORAGE_CONFIG_KEY.into());
            main.volumes.push(Volume {
                name: "storage-config".into(),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret.name.clone()),
                    items: Some(vec![KeyToPath {
                        key,
                        path: STORAGE_CONFIG_KEY.into(),
                        ..KeyToPath::default()
                    }]),
                    ..SecretVolumeSource::default()
                }),
                ..Volume::default()
            });
            main.mounts
                .push(workload::read_only("storage-config", STORAGE_DIR));
            main.args.extend([
                "--storage-config".into(),
                format!("{STORAGE_DIR}/{STORAGE_CONFIG_KEY}"),
            ]);
        }
        None => main
            .args
            .extend(["--storage-dir".into(), format!("{STATE_DIR}/reports")]),
    }
    Ok(Desired {
        objects: vec![
            Object::ServiceAccount(workload::service_account(&owner)),
            Object::Service(Box::new(workload::service(
                &owner,
                cr.spec.workload.service.as_ref(),
                &ports,
            ))),
            Object::Deployment(Box::new(workload::deployment(
                &owner,
                &cr.spec.workload,
                main,
            ))),
        ],
    })
}
