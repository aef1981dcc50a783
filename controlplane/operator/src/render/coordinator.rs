//! NsightCoordinator -> ServiceAccount, Service (REST `http` 8080, agent channel `grpc` 8081)
//! and the `nsight-coordinator` Deployment.
//!
//! The agent channel is mutual TLS unless `curveEncryption.enabled: false` (the documented
//! switch; CURVE in the original, TLS here): the certificates come from the Secret
//! `<name>-agent-tls`, which the operator issues and renews ([`agent_tls_secret`],
//! `certs::rotation`); the coordinator mounts its `ca.crt`, `tls.crt`, `tls.key` (never
//! `ca.key`). The Pod template carries [`TLS_ANNOTATION`], a fingerprint of the served
//! certificate and the CA bundle, so a renewal rolls the coordinator onto the new files.
//! Durable state lives in an emptyDir.
//!
//! Reports: the NsightCloudStorageConfig the controller resolved (`cloudStorageRef`, else the
//! namespace's only one) is mounted as `--storage-config`, so `ls` and `download` serve what
//! the agents uploaded; `storagePublicUrl` becomes `--storage-public-url`.
//!
//! Its REST API answers only the gateway: the Secret `<name>-gateway-token` is mounted as
//! `--gateway-token-file` (`gateway_token`); the agent channel has its own mutual TLS.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{KeyToPath, Secret, SecretVolumeSource, Volume},
    ByteString,
};
use nsight_api::{NsightCloudStorageConfig, NsightCoordinator};

use super::{
    gateway_token, storage,
    workload::{self, Main, Port},
    Component, Desired, Object, Owner, RenderError, RenderSettings,
};
use crate::certs::{self, rotation::Files};

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
const STORAGE_DIR: &str = "/etc/nsight/storage";
/// The Pod-template annotation with `certs::fingerprint` of the agent-channel Secret.
pub const TLS_ANNOTATION: &str = "nvidia.com/nsight-agent-tls";

/// The Secret with the agent channel's certificates.
pub fn tls_secret_name(coordinator: &str) -> String {
    format!("{coordinator}-agent-tls")
}

/// A Secret volume's projection of `keys`, each under its own name (the rest stays out).
pub fn key_items(keys: &[&str]) -> Vec<KeyToPath> {
    keys.iter()
        .map(|k| KeyToPath {
            key: (*k).into(),
            path: (*k).into(),
            ..KeyToPath::default()
        })
        .collect()
}

/// Whether the agent channel is mutual TLS (the default).
pub fn encrypted(cr: &NsightCoordinator) -> bool {
    cr.spec.curve_encryption.as_ref().is_none_or(|t| t.enabled)
}

/// The Secret `<name>-agent-tls` holding `files` (created by `apply::create_once`, renewed by
/// the coordinator controller).
pub fn agent_tls_secret(cr: &NsightCoordinator, files: &Files) -> Result<Secret, RenderError> {
    let owner = Owner::of(cr, Component::Coordinator)?;
    let data: BTreeMap<String, ByteString> = files
        .iter()
        .map(|(k, pem)| (k.clone(), ByteString(pem.as_bytes().to_vec())))
        .collect();
    Ok(Secret {
        metadata: owner.meta(tls_secret_name(&owner.name)),
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Secret::default()
    })
}

/// The DNS names agents reach the coordinator `cr` by (its Service's).
pub fn server_names(cr: &NsightCoordinator, settings: &RenderSettings) -> Vec<String> {
    let name = cr.metadata.name.clone().unwrap_or_default();
    let namespace = cr.metadata.namespace.clone().unwrap_or_default();
    certs::service_names(&name, &namespace, &settings.cluster_domain)
}

/// `storage` is the NsightCloudStorageConfig the controller resolved for `cr`, if any;
/// `tls_fingerprint` is `certs::fingerprint` of its agent-channel Secret (encrypted channel);
/// `converters` the OTLP converters of the namespace's collectors
/// (`otel_collector::converter_url`), told when a collection ends.
pub fn render(
    cr: &NsightCoordinator,
    storage: Option<&NsightCloudStorageConfig>,
    tls_fingerprint: Option<&str>,
    converters: &[String],
    settings: &RenderSettings,
) -> Result<Desired, RenderError> {
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
    gateway_token::mount(&mut main, &owner);
    if encrypted(cr) {
        main.args.extend(["--tls-dir".into(), TLS_DIR.into()]);
        main.volumes.push(Volume {
            name: "agent-tls".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(tls_secret_name(&owner.name)),
                items: Some(key_items(&certs::SERVER_KEYS)),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
        main.mounts.push(workload::read_only("agent-tls", TLS_DIR));
    } else {
        main.args.push("--insecure-agent-channel".into());
    }
    if let Some(secret) = storage.and_then(storage::config_secret) {
        let file = storage::mount_config(&mut main, &secret, STORAGE_DIR);
        main.args.extend(["--storage-config".into(), file]);
        if let Some(url) = &cr.spec.storage_public_url {
            main.args
                .extend(["--storage-public-url".into(), url.clone()]);
        }
    }
    for url in converters {
        main.args.extend(["--otlp-converter".into(), url.clone()]);
    }
    let mut deployment = workload::deployment(&owner, &cr.spec.workload, main);
    if let (true, Some(fingerprint), Some(meta)) = (
        encrypted(cr),
        tls_fingerprint,
        deployment
            .spec
            .as_mut()
            .and_then(|s| s.template.metadata.as_mut()),
    ) {
        meta.annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(TLS_ANNOTATION.into(), fingerprint.to_owned());
    }
    Ok(Desired {
        objects: vec![
            Object::ServiceAccount(workload::service_account(&owner)),
            Object::Service(Box::new(workload::service(
                &owner,
                cr.spec.workload.service.as_ref(),
                &ports,
            ))),
            Object::Deployment(Box::new(deployment)),
            Object::NetworkPolicy(Box::new(workload::network_policy(
                &owner,
                &[HTTP],
                &[AGENT],
            ))),
        ],
    })
}
