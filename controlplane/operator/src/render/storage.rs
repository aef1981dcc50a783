//! NsightCloudStorageConfig -> the operator-managed S3 server (MinIO by default), or nothing
//! for an external bucket (whose Secret is checked instead) or in-Pod storage.
//!
//! ```text
//! storage_type minio (default) ─> ServiceAccount, Secret <name>-credentials (created once,
//!                                 never overwritten), Service (`s3` 9000), StatefulSet
//!                                 (`data` emptyDir, or a PVC template with persistence;
//!                                 s3s-fs: a TCP readiness probe on `s3`)
//! storage_type s3              ─> nothing; check_secret(secretRef, Secret) -> Ready
//! storage_type local, enabled: false ─> nothing
//! ```
//!
//! Pure: the credentials come in as an argument (the controller draws them at random; the
//! Secret is only created when absent). Must not touch the API server.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{StatefulSet, StatefulSetSpec},
        core::v1::{
            EnvVar, EnvVarSource, KeyToPath, PersistentVolumeClaim, PersistentVolumeClaimSpec,
            Probe, Secret, SecretKeySelector, SecretVolumeSource, TCPSocketAction, Volume,
            VolumeResourceRequirements,
        },
    },
    apimachinery::pkg::{
        api::resource::Quantity, apis::meta::v1::ObjectMeta, util::intstr::IntOrString,
    },
};
use nsight_api::{NsightCloudStorageConfig, SecretRef, StorageType, Workload};

use super::{
    workload::{self, Main, Port},
    Component, Desired, Object, Owner, RenderError, RenderSettings,
};

/// The `app.kubernetes.io/name` of the S3 server.
pub const NAME: &str = "minio";
/// The default managed S3 server: our `nsight-storage` image (`<repository>/nsight-storage:<tag>`,
/// the s3s-fs S3 server; MinIO is AGPL and not buildable from these registries, see
/// docs/storage.md). `minio.image` names a real MinIO image instead, run with MinIO's own
/// command line.
pub const STORAGE_IMAGE: &str = "nsight-storage";
/// The user our storage image runs as.
const STORAGE_UID: i64 = 65532;
pub const S3: Port = Port {
    name: "s3",
    port: 9000,
};
/// The key of the storage Secret (the documented format), in an external Secret and in the
/// generated one.
pub const STORAGE_CONFIG_KEY: &str = "storage-config.yaml";
/// Keys of the generated Secret holding the server's root credentials.
pub const ROOT_USER_KEY: &str = "rootUser";
pub const ROOT_PASSWORD_KEY: &str = "rootPassword";
/// The bucket the generated `storage-config.yaml` names.
pub const BUCKET: &str = "nsight-reports";
/// The volume size with persistence when `minio.persistence.size` is absent.
pub const DEFAULT_SIZE: &str = "10Gi";
const DATA_DIR: &str = "/data";

/// The root credentials of a managed S3 server.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// Where reports go, as the spec says.
#[derive(Clone, Debug, PartialEq)]
pub enum Backend {
    /// The operator runs the S3 server.
    Managed,
    /// An external bucket described by this Secret (`None`: the spec names none).
    External(Option<SecretRef>),
    /// Inside the profiled Pods.
    Local,
    /// `enabled: false`.
    Disabled,
}

/// The backend of a spec: `storage_type` (default `minio`, or `s3` when `minio.enabled: false`).
pub fn backend(cr: &NsightCloudStorageConfig) -> Backend {
    let spec = &cr.spec;
    if spec.enabled == Some(false) {
        return Backend::Disabled;
    }
    let minio_off = spec.minio.as_ref().and_then(|m| m.enabled) == Some(false);
    match spec.storage_type {
        Some(StorageType::Local) => Backend::Local,
        Some(StorageType::S3) => Backend::External(spec.secret_ref.clone()),
        Some(StorageType::Minio) | None if !minio_off => Backend::Managed,
        Some(StorageType::Minio) | None => Backend::External(spec.secret_ref.clone()),
    }
}

/// The generated Secret of a managed server.
pub fn credentials_secret_name(storage: &str) -> String {
    format!("{storage}-credentials")
}

/// The Secret (and key) holding the `storage-config.yaml` that components mount: the
/// external one, or the generated one of a managed server.
pub fn config_secret(cr: &NsightCloudStorageConfig) -> Option<SecretRef> {
    match backend(cr) {
        Backend::External(secret) => secret,
        Backend::Managed => Some(SecretRef {
            name: credentials_secret_name(&cr.metadata.name.clone().unwrap_or_default()),
            key: Some(STORAGE_CONFIG_KEY.into()),
        }),
        Backend::Local | Backend::Disabled => None,
    }
}

/// Mounts `secret`'s storage config read-only in `main`, as `<dir>/storage-config.yaml` (volume
/// `storage-config`), and returns that path for the component's flag or variable.
pub(crate) fn mount_config(main: &mut Main, secret: &SecretRef, dir: &str) -> String {
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
    main.mounts.push(workload::read_only("storage-config", dir));
    format!("{dir}/{STORAGE_CONFIG_KEY}")
}

/// The desired objects; empty unless the server is managed.
pub fn render(
    cr: &NsightCloudStorageConfig,
    credentials: &Credentials,
    settings: &RenderSettings,
) -> Result<Desired, RenderError> {
    let owner = Owner::of(cr, Component::Storage)?;
    if backend(cr) != Backend::Managed {
        return Ok(Desired::default());
    }
    let minio = cr.spec.minio.clone().unwrap_or_default();
    let persistence = minio.persistence.clone().filter(|p| p.enabled);
    let ports = vec![S3];
    let secret_name = credentials_secret_name(&owner.name);
    let from_secret = |name: &str, key: &str| EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret_name.clone(),
                key: key.into(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    };
    let (tmp, tmp_mount) = workload::scratch("tmp", "/tmp");
    let (data, data_mount) = workload::scratch("data", DATA_DIR);
    let env = vec![
        from_secret("MINIO_ROOT_USER", ROOT_USER_KEY),
        from_secret("MINIO_ROOT_PASSWORD", ROOT_PASSWORD_KEY),
    ];
    let (mut main, uid) = match minio.image.clone() {
        // A MinIO image the user chose: MinIO's command line and health endpoint.
        Some(image) => (
            Main {
                image,
                command: vec!["minio".into()],
                args: vec![
                    "server".into(),
                    DATA_DIR.into(),
                    "--address".into(),
                    format!(":{}", S3.port),
                    "--certs-dir".into(),
                    "/tmp/certs".into(),
                ],
                ports: ports.clone(),
                env,
                volumes: vec![tmp],
                mounts: vec![tmp_mount, data_mount],
                health_path: Some("/minio/health/live"),
                run_as_user: Some(1000),
            },
            1000,
        ),
        // Our image: the same Secret, passed as s3s-fs flags (`$(VAR)` is expanded by the
        // kubelet from the container's environment).
        None => (
            Main {
                image: settings.image(STORAGE_IMAGE),
                command: vec!["s3s-fs".into()],
                args: vec![
                    "--host".into(),
                    "0.0.0.0".into(),
                    "--port".into(),
                    S3.port.to_string(),
                    "--access-key".into(),
                    "$(MINIO_ROOT_USER)".into(),
                    "--secret-key".into(),
                    "$(MINIO_ROOT_PASSWORD)".into(),
                    DATA_DIR.into(),
                ],
                ports: ports.clone(),
                env,
                volumes: vec![tmp],
                mounts: vec![tmp_mount, data_mount],
                health_path: None,
                run_as_user: Some(STORAGE_UID),
            },
            STORAGE_UID,
        ),
    };
    if persistence.is_none() {
        main.volumes.push(data);
    }
    let workload = Workload {
        image: None,
        service: minio.service.clone(),
        ..Workload::default()
    };
    let deployment = workload::deployment(&owner, &workload, main);
    let mut template = deployment.spec.unwrap_or_default().template;
    if let Some(pod) = template.spec.as_mut() {
        if let Some(sc) = pod.security_context.as_mut() {
            // The data volume must be writable by the server's user.
            sc.fs_group = Some(uid);
        }
        // s3s-fs answers S3 only (no health path): ready once it accepts connections.
        for c in pod
            .containers
            .iter_mut()
            .filter(|c| c.readiness_probe.is_none())
        {
            c.readiness_probe = Some(Probe {
                tcp_socket: Some(TCPSocketAction {
                    port: IntOrString::String(S3.name.into()),
                    ..TCPSocketAction::default()
                }),
                period_seconds: Some(10),
                ..Probe::default()
            });
        }
    }
    let claims = persistence.map(|p| {
        vec![PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".into()),
                // Only the selector labels: pruning must never select a volume of reports.
                labels: Some(owner.selector()),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".into()]),
                storage_class_name: p.storage_class_name.clone(),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".into(),
                        Quantity(p.size.clone().unwrap_or_else(|| DEFAULT_SIZE.into())),
                    )])),
                    ..VolumeResourceRequirements::default()
                }),
                ..PersistentVolumeClaimSpec::default()
            }),
            status: None,
        }]
    });
    let stateful_set = StatefulSet {
        metadata: owner.meta(owner.name.clone()),
        spec: Some(StatefulSetSpec {
            replicas: Some(1),
            service_name: Some(owner.name.clone()),
            selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some(owner.selector()),
                ..Default::default()
            },
            template,
            volume_claim_templates: claims,
            ..StatefulSetSpec::default()
        }),
        status: None,
    };
    let endpoint = format!(
        "http://{}.{}.svc:{}",
        owner.name,
        owner.namespace,
        minio
            .service
            .as_ref()
            .and_then(|s| s.port)
            .unwrap_or(S3.port)
    );
    let secret = Secret {
        metadata: owner.meta(secret_name.clone()),
        type_: Some("Opaque".into()),
        string_data: Some(BTreeMap::from([
            (ROOT_USER_KEY.into(), credentials.user.clone()),
            (ROOT_PASSWORD_KEY.into(), credentials.password.clone()),
            (
                STORAGE_CONFIG_KEY.into(),
                format!(
                    "storage_type: s3\nbucket_name: {BUCKET}\naws_access_key_id: {}\n\
                     aws_secret_access_key: {}\nregion_name: us-east-1\nendpoint_url: {endpoint}\n",
                    credentials.user, credentials.password
                ),
            ),
        ])),
        ..Secret::default()
    };
    Ok(Desired {
        objects: vec![
            Object::ServiceAccount(workload::service_account(&owner)),
            Object::Secret(secret),
            Object::Service(Box::new(workload::service(
                &owner,
                minio.service.as_ref(),
                &ports,
            ))),
            Object::StatefulSet(Box::new(stateful_set)),
        ],
    })
}

/// The verdict on an external bucket's Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretCheck {
    pub valid: bool,
    /// A fixed condition reason.
    pub reason: &'static str,
    pub message: String,
}

/// Checks the Secret an external backend names: it exists, has the key
/// (`secretRef.key`, default `storage-config.yaml`), and the key holds a valid storage config
/// (the parser the agent and the CLI use). Never echoes a credential.
pub fn check_secret(secret_ref: Option<&SecretRef>, secret: Option<&Secret>) -> SecretCheck {
    let bad = |reason, message: String| SecretCheck {
        valid: false,
        reason,
        message,
    };
    let Some(secret_ref) = secret_ref else {
        return bad(
            "SecretRefMissing",
            "an external bucket needs spec.secretRef naming a Secret with storage-config.yaml"
                .into(),
        );
    };
    let Some(secret) = secret else {
        return bad(
            "SecretMissing",
            format!(
                "Secret {} does not exist in this namespace",
                secret_ref.name
            ),
        );
    };
    let key = secret_ref.key.as_deref().unwrap_or(STORAGE_CONFIG_KEY);
    let text = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(key))
                .cloned()
        });
    let Some(text) = text else {
        return bad(
            "SecretKeyMissing",
            format!("Secret {} has no key {key}", secret_ref.name),
        );
    };
    let origin = format!("key {key} of Secret {}", secret_ref.name);
    match nsight_storage::config::StorageConfig::from_yaml(&text, &origin) {
        Ok(_) => SecretCheck {
            valid: true,
            reason: "SecretValid",
            message: format!("{origin} is a valid storage config"),
        },
        Err(e) => bad("SecretInvalid", e.to_string()),
    }
}
