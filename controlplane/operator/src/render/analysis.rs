//! NsightAnalysis -> ServiceAccount, Service (`http` 8090) and the `nsight-analysis` Deployment.
//!
//! Storage: when `cloudStorageRef` names an NsightCloudStorageConfig, its storage config (the
//! external Secret's `storage-config.yaml` or `secretRef.key`, or the managed S3 server's
//! generated Secret: `storage::config_secret`) is mounted and passed as `--storage-config`;
//! otherwise (no reference, in-Pod or disabled storage) reports are read from a local directory
//! (`--storage-dir`).
//!
//! Its API answers only the gateway: the Secret `<name>-gateway-token` is mounted as
//! `--gateway-token-file` (`gateway_token`).

use nsight_api::{NsightAnalysis, NsightCloudStorageConfig};

use super::{
    gateway_token, storage,
    workload::{self, Main, Port},
    Component, Desired, Object, Owner, RenderError, RenderSettings,
};

/// The binary (and image) name, as the local platform runs it.
pub const BINARY: &str = "nsight-analysis";
pub const HTTP: Port = Port {
    name: "http",
    port: 8090,
};
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
    gateway_token::mount(&mut main, &owner);
    match storage.and_then(storage::config_secret) {
        Some(secret) => {
            let file = storage::mount_config(&mut main, &secret, STORAGE_DIR);
            main.args.extend(["--storage-config".into(), file]);
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
            Object::NetworkPolicy(Box::new(workload::network_policy(&owner, &[HTTP], &[]))),
        ],
    })
}
