//! `NsightCloudStorageConfig` (`nvidia.com/v1alpha1`): where reports are stored: the
//! operator-managed MinIO (default), an external S3-compatible bucket (a Secret holding
//! `storage-config.yaml`), or inside the profiled Pod (`local`).
//!
//! Field names follow the documented resource, including the snake_case `storage_type`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{NsightStatus, SecretRef, ServiceSpec};

#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "nvidia.com",
    version = "v1alpha1",
    kind = "NsightCloudStorageConfig",
    namespaced,
    status = "NsightStatus",
    shortname = "nsightstorage",
    category = "nsight",
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.storage_type"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NsightCloudStorageConfigSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// `minio` (default), `s3` or `local`.
    #[serde(
        default,
        rename = "storage_type",
        skip_serializing_if = "Option::is_none"
    )]
    pub storage_type: Option<StorageType>,
    /// A Secret whose `storage-config.yaml` key holds the storage configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minio: Option<MinioSpec>,
}

/// The storage backends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StorageType {
    Minio,
    S3,
    Local,
}

/// The operator-managed MinIO.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MinioSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The S3 server image (default: the operator's MinIO image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistence: Option<Persistence>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceSpec>,
}

/// A PersistentVolumeClaim instead of an emptyDir.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Persistence {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// A quantity such as `20Gi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
}
