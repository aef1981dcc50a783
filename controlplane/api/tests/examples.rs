//! The documented manifest shapes (small fixtures under `tests/data/`, our own values) parse
//! into the CRD types, and nothing is dropped: typed and re-serialized, each equals its input.
#![allow(clippy::unwrap_used, reason = "tests")]

use std::path::PathBuf;

use nsight_api::{
    NsightCloudStorageConfig, NsightCoordinator, NsightGateway, NsightOperatorProfileConfig,
    NsightTenantOperator, StorageType,
};
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_norway::from_str(&text).unwrap()
}

/// Parses `name` as `T` and checks that serializing it back gives the same document.
fn round_trip<T: DeserializeOwned + Serialize>(name: &str) -> T {
    let input = fixture(name);
    let typed: T = serde_json::from_value(input.clone()).unwrap();
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(back, input, "{name}: a field was dropped or renamed");
    typed
}

#[test]
fn profile_config_with_storage_ref() {
    let p: NsightOperatorProfileConfig = round_trip("profile-team.yaml");
    let tool = &p.spec.nsight_tool_configs[0];
    assert_eq!(tool.name, "research-profile");
    assert_eq!(
        tool.cloud_storage_config_ref.as_deref(),
        Some("research-bucket")
    );
    assert!(tool.coordinator_mode(), "coordinator mode is the default");
}

#[test]
fn profile_config_with_every_field_and_rules() {
    let p: NsightOperatorProfileConfig = round_trip("profile-rules.yaml");
    let tool = &p.spec.nsight_tool_configs[0];
    assert!(!tool.coordinator_mode());
    assert_eq!(tool.otlp_mirroring_enabled, Some(true));
    assert_eq!(tool.injection_include_patterns, [r".*train\.py.*"]);
    assert_eq!(tool.volumes[0].name, "scratch");
    let rule = &p.spec.injection_rules[0];
    assert_eq!(rule.nsight_tool_config, "torch");
    assert_eq!(
        rule.label_selector
            .as_ref()
            .unwrap()
            .match_labels
            .as_ref()
            .unwrap()["app"],
        "trainer"
    );
    assert!(rule.cel_expression.as_ref().unwrap().contains("size()"));
}

#[test]
fn gateway_oauth2_jwt_tls_routing() {
    let g: NsightGateway = round_trip("gateway-oauth2.yaml");
    let auth = g.spec.authentication.as_ref().unwrap();
    let oauth2 = auth.oauth2.as_ref().unwrap();
    assert!(oauth2.enabled);
    assert_eq!(oauth2.client_id.as_deref(), Some("profiler-ui"));
    assert_eq!(
        oauth2.client_secret_ref.as_ref().unwrap().name,
        "edge-oauth2"
    );
    assert_eq!(auth.jwt.as_ref().unwrap().audiences, ["profiler"]);
    assert_eq!(g.spec.tls_secret_ref.as_ref().unwrap().name, "edge-tls");
    let routing = g.spec.routing.as_ref().unwrap();
    assert_eq!(routing.coordinator_prefix.as_deref(), Some("/coord/"));
    assert_eq!(g.spec.cloud_storage_ref.as_deref(), Some("shared-storage"));
}

#[test]
fn gateway_apikey_from_secret_and_inline_jwks() {
    let g: NsightGateway = round_trip("gateway-apikey.yaml");
    let auth = g.spec.authentication.as_ref().unwrap();
    let key = auth.apikey.as_ref().unwrap();
    assert_eq!(
        key.key_secret_ref.as_ref().unwrap().key.as_deref(),
        Some("token")
    );
    assert_eq!(
        auth.jwt.as_ref().unwrap().verification_jwks.as_deref(),
        Some(r#"{"keys": []}"#)
    );
    assert_eq!(g.spec.port, Some(8888));
}

#[test]
fn shared_gateway_with_tenants() {
    let g: NsightGateway = round_trip("gateway-shared.yaml");
    let t = g.spec.tenants.as_ref().unwrap();
    assert_eq!(t.namespaces, ["team-a", "team-b"]);
    let selector = t.namespace_selector.as_ref().unwrap();
    assert_eq!(
        selector.match_labels.as_ref().unwrap()["nsight.nvidia.com/tenant"],
        "true"
    );
    assert_eq!(t.identities["team-a"], ["alice", "ml-platform"]);
    assert_eq!(t.identity_is_namespace, Some(true));
    assert_eq!(
        t.api_key_secret_ref.as_ref().unwrap().name,
        "nsight-tenant-key"
    );
}

#[test]
fn api_key_debug_redacts_the_inline_key() {
    let g: NsightGateway = serde_json::from_value(serde_json::json!({
        "apiVersion": "nvidia.com/v1alpha1", "kind": "NsightGateway",
        "metadata": {"name": "g"},
        "spec": {"authentication": {"apikey": {"enabled": true, "key": "very-secret-value"}}}
    }))
    .unwrap();
    let shown = format!("{g:?}");
    assert!(!shown.contains("very-secret-value"), "{shown}");
    assert!(shown.contains("redacted"));
}

#[test]
fn storage_configs_keep_snake_case_storage_type() {
    let s3: NsightCloudStorageConfig = round_trip("storage-s3.yaml");
    assert_eq!(s3.spec.storage_type, Some(StorageType::S3));
    assert_eq!(s3.spec.secret_ref.as_ref().unwrap().name, "research-s3");
    let minio: NsightCloudStorageConfig = round_trip("storage-minio.yaml");
    let persistence = minio.spec.minio.unwrap().persistence.unwrap();
    assert_eq!(persistence.size.as_deref(), Some("50Gi"));
    let bad = serde_json::json!({"apiVersion": "nvidia.com/v1alpha1",
        "kind": "NsightCloudStorageConfig", "metadata": {"name": "x"},
        "spec": {"storage_type": "ftp"}});
    assert!(serde_json::from_value::<NsightCloudStorageConfig>(bad).is_err());
}

#[test]
fn coordinator_and_tenant_operator() {
    let c: NsightCoordinator = round_trip("coordinator.yaml");
    let service = c.spec.workload.service.as_ref().unwrap();
    assert_eq!(service.type_.as_deref(), Some("NodePort"));
    assert_eq!(
        c.spec.curve_encryption.as_ref().map(|t| t.enabled),
        Some(false)
    );
    let t: NsightTenantOperator = round_trip("tenant.yaml");
    assert_eq!(t.spec.streamer_launch.unwrap().max_active, Some(4));
}
