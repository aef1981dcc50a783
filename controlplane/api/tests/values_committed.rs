//! The chart's `values.schema.json` is what `nsight_api::chart::Values` generates, the chart's
//! `values.yaml` is a `Values` (every key known, every type right), and the schema refuses
//! unknown keys at every level the types deny them.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use std::path::PathBuf;

use nsight_api::chart::{self, InjectorToolConfig, MachineConfig, Values};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn committed_values_schema_is_up_to_date() {
    let path = root().join(chart::VALUES_SCHEMA_PATH);
    let have = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run `cargo xtask codegen`", path.display()));
    assert!(
        have == chart::values_schema(),
        "{} is stale; run `cargo xtask codegen`",
        path.display()
    );
}

#[test]
fn values_yaml_is_the_types_defaults() {
    let text = std::fs::read_to_string(root().join("charts/nsight-operator/values.yaml")).unwrap();
    let values: Values = serde_norway::from_str(&text).unwrap_or_else(|e| {
        panic!("charts/nsight-operator/values.yaml is not a nsight_api::chart::Values: {e}")
    });
    assert_eq!(values.gateway.port, 8888);
    assert_eq!(values.gateway.routing.coordinator_prefix, "/coordinator/");
    assert!(values.cloud_storage.minio.enabled && !values.multi_tenant.enabled);
    assert_eq!(
        values.machine_config,
        Some(MachineConfig::default()),
        "the documented perf_event_paranoid default"
    );
    assert_eq!(values.tenant_operator.streamer_launch.max_active, 10);
    assert!(values.cloud_ui.enabled && !values.tenant_operator.enabled);
}

#[test]
fn the_schema_closes_every_object_of_the_values() {
    let schema: serde_json::Value = serde_json::from_str(&chart::values_schema()).unwrap();
    assert_eq!(schema["additionalProperties"], false);
    let gateway = &schema["$defs"]["GatewayValues"];
    assert_eq!(gateway["additionalProperties"], false, "{gateway}");
    assert!(
        gateway["properties"]["tlsSecretRef"]
            .to_string()
            .contains("null"),
        "tlsSecretRef may be null: {}",
        gateway["properties"]["tlsSecretRef"]
    );
}

#[test]
fn the_injector_values_become_the_default_tool_config() {
    let tool = InjectorToolConfig::parse_flag(
        r#"{"nsightToolArgs": "-t cuda,nvtx", "injectionIncludePatterns": ["python.*"],
            "injectionExcludePatterns": [], "coordinator": false,
            "otlpMirroringEnabled": false, "duration": 20}"#,
    )
    .unwrap();
    assert_eq!(tool.name, "default");
    assert_eq!(
        tool.nsight_tool_args.as_deref(),
        Some("-t cuda,nvtx --duration=20")
    );
    assert_eq!(tool.injection_include_patterns, ["python.*"]);
    assert!(!tool.coordinator_mode());
    let none = InjectorToolConfig::parse_flag("{}").unwrap();
    assert_eq!(none.nsight_tool_args, None);
    assert!(none.coordinator_mode());
    let typo = InjectorToolConfig::parse_flag(r#"{"nsightToolArg": "-t nvtx"}"#).unwrap_err();
    assert!(typo.contains("nsightToolArg"), "{typo}");
}
