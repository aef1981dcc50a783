//! NsightCoordinator -> ServiceAccount, Service (REST `http` 8080, agent channel `grpc` 8081)
//! and the `nsight-coordinator` Deployment.
//!
//! The agent channel is mutual TLS unless `curveEncryption.enabled: false` (the documented
//! switch; CURVE in the original, TLS here): the certificates come from the Secret
//! `<name>-agent-tls` (`ca.crt`, `tls.crt`, `tls.key`). Durable state lives in an emptyDir.

use k8s_openapi::api::core::v1::{SecretVolumeSource, Volume};
use nsight_api::NsightCoordinator;

use super::{
    workload::{self, Main, Port},
    Component, Desired, Object, Owner, RenderError, RenderSettings,
};

/// The binary (and image) name, as the local platform runs it.
pub const BINARY: &str = "nsight-coordinator";
pub const HTTP: Port = Port {
    name: "http",
    port: 8080,
};
pub const AGENT: Port = Port {
    name: "grpc",
    port: 8081,
};
const STATE_DIR: &str = "/var/lib/nsight";
const TLS_DIR: &str = "/etc/nsight/agent-tls";

/// The Secret with the agent channel's certificates.
pub fn tls_secret_name(coordinator: &str) -> String {
    format!("{coordinator}-agent-tls")
}

pub fn render(cr: &NsightCoordinator, settings: &RenderSettings) -> Result<Desired, RenderError> {
    let owner = Owner::of(cr, Component::Coordinator)?;
    let ports = vec![HTTP, AGENT];
    let (state, state_mount) = workload::scratch("state", STATE_DIR);
    let mut main = Main {
        image: settings.image(BINARY),
        command: vec![BINARY.into()],
        args: vec![
            "--http".into(),
            format!("0.0.0.0:{}", HTTP.port),
            "--grpc".into(),
            format!("0.0.0.0:{}", AGENT.port),
            "--state-dir".into(),
            format!("{STATE_DIR}/coordinator"),
        ],
        ports: ports.clone(),
        volumes: vec![state],
        mounts: vec![state_mount],
        health_path: Some("/healthz"),
        ..Main::default()
    };
    let encrypted = cr.spec.curve_encryption.as_ref().is_none_or(|t| t.enabled);
    if encrypted {
        main.args.extend(["--tls-dir".into(), TLS_DIR.into()]);
        main.volumes.push(Volume {
            name: "agent-tls".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(tls_secret_name(&owner.name)),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
        main.mounts.push(workload::read_only("agent-tls", TLS_DIR));
    } else {
        main.args.push("--insecure-agent-channel".into());
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
