//! The proxy-wasm HTTP filters (`envoy.filters.http.wasm`) carrying our auth filter and our
//! tenant routing filter.
//!
//! xds-api does not include Envoy's Wasm extension protos, so the three messages needed are
//! declared here with `prost` (field numbers from `envoy/extensions/wasm/v3/wasm.proto` and
//! `envoy/extensions/filters/http/wasm/v3/wasm.proto`). The filter's JSON configuration is
//! passed as a `google.protobuf.StringValue`, which is what the filter reads at configure time.

use xds_api::pb::{
    envoy::{
        config::core::v3::{async_data_source, data_source, AsyncDataSource, DataSource},
        extensions::filters::network::http_connection_manager::v3::{http_filter, HttpFilter},
    },
    google::protobuf::{Any, StringValue},
};

use crate::{
    ir::{AuthFilter, TenantRouting, Upstream},
    resources::any,
};

/// The V8 runtime, the one Envoy's release builds ship.
pub const RUNTIME_V8: &str = "envoy.wasm.runtime.v8";
/// The HTTP filter name Envoy registers the Wasm filter under.
pub const FILTER_NAME: &str = "envoy.filters.http.wasm";

/// `envoy.extensions.filters.http.wasm.v3.Wasm`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Wasm {
    #[prost(message, optional, tag = "1")]
    pub config: Option<PluginConfig>,
}

impl prost::Name for Wasm {
    const NAME: &'static str = "Wasm";
    const PACKAGE: &'static str = "envoy.extensions.filters.http.wasm.v3";
}

/// `envoy.extensions.wasm.v3.PluginConfig` (the fields we set).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PluginConfig {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub root_id: String,
    #[prost(message, optional, tag = "3")]
    pub vm_config: Option<VmConfig>,
    #[prost(message, optional, tag = "4")]
    pub configuration: Option<Any>,
    /// `FailurePolicy`: 0 unspecified, 1 FAIL_CLOSED, 2 FAIL_OPEN, 3 FAIL_RELOAD.
    #[prost(int32, tag = "7")]
    pub failure_policy: i32,
}

impl prost::Name for PluginConfig {
    const NAME: &'static str = "PluginConfig";
    const PACKAGE: &'static str = "envoy.extensions.wasm.v3";
}

/// `envoy.extensions.wasm.v3.VmConfig` (the fields we set).
#[derive(Clone, PartialEq, prost::Message)]
pub struct VmConfig {
    #[prost(string, tag = "1")]
    pub vm_id: String,
    #[prost(string, tag = "2")]
    pub runtime: String,
    #[prost(message, optional, tag = "3")]
    pub code: Option<AsyncDataSource>,
}

impl prost::Name for VmConfig {
    const NAME: &'static str = "VmConfig";
    const PACKAGE: &'static str = "envoy.extensions.wasm.v3";
}

/// FAIL_CLOSED: a crashed filter VM refuses requests instead of letting them through.
pub const FAIL_CLOSED: i32 = 1;

/// The HTTP filter running our auth plugin with its configuration (from the lean module when
/// the configuration allows: [`AuthFilter::module_path`]).
pub fn auth_http_filter(auth: &AuthFilter) -> HttpFilter {
    let wasm = Wasm {
        config: Some(PluginConfig {
            name: "nsight_auth".into(),
            root_id: String::new(),
            vm_config: Some(VmConfig {
                vm_id: "nsight_auth".into(),
                runtime: RUNTIME_V8.into(),
                code: Some(AsyncDataSource {
                    specifier: Some(async_data_source::Specifier::Local(DataSource {
                        specifier: Some(data_source::Specifier::Filename(
                            auth.module_path().display().to_string(),
                        )),
                        ..Default::default()
                    })),
                }),
            }),
            configuration: Some(any(&StringValue {
                value: auth.config_json.clone(),
            })),
            failure_policy: FAIL_CLOSED,
        }),
    };
    HttpFilter {
        name: FILTER_NAME.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(&wasm))),
        ..Default::default()
    }
}

/// The HTTP filter name of our tenant routing filter (distinct from the auth filter's, so each
/// can be disabled per route on its own).
pub const ROUTING_FILTER_NAME: &str = "nsight.filters.http.routing";

/// The routing table with `gateway_tokens`: for each upstream it names that has a gateway
/// token, the token the filter sets on requests it routes there (a `cluster_header` route
/// cannot add a header per cluster). Added here, not in the IR, so the IR never holds them.
fn routing_config_with_tokens(routing: &TenantRouting, upstreams: &[Upstream]) -> String {
    let tokens: serde_json::Map<String, serde_json::Value> = upstreams
        .iter()
        .filter(|u| routing.upstreams.contains(&u.name))
        .filter_map(|u| Some((u.name.clone(), u.gateway_token.as_ref()?.expose().into())))
        .collect();
    if tokens.is_empty() {
        return routing.config_json.clone();
    }
    match serde_json::from_str::<serde_json::Value>(&routing.config_json) {
        Ok(mut config) if config.is_object() => {
            config["gateway_tokens"] = serde_json::Value::Object(tokens);
            config.to_string()
        }
        // Not ours to repair: the filter refuses it and says why.
        _ => routing.config_json.clone(),
    }
}

/// The HTTP filter running our tenant routing plugin (its own VM) with its routing table.
pub fn routing_http_filter(routing: &TenantRouting, upstreams: &[Upstream]) -> HttpFilter {
    let wasm = Wasm {
        config: Some(PluginConfig {
            name: "nsight_routing".into(),
            root_id: String::new(),
            vm_config: Some(VmConfig {
                vm_id: "nsight_routing".into(),
                runtime: RUNTIME_V8.into(),
                code: Some(AsyncDataSource {
                    specifier: Some(async_data_source::Specifier::Local(DataSource {
                        specifier: Some(data_source::Specifier::Filename(
                            routing.wasm_path.display().to_string(),
                        )),
                        ..Default::default()
                    })),
                }),
            }),
            configuration: Some(any(&StringValue {
                value: routing_config_with_tokens(routing, upstreams),
            })),
            failure_policy: FAIL_CLOSED,
        }),
    };
    HttpFilter {
        name: ROUTING_FILTER_NAME.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(&wasm))),
        ..Default::default()
    }
}
