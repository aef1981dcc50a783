//! Human-readable rendering of translated resources (YAML, Envoy's JSON field names) for the
//! golden tests and for debugging.
//!
//! xds-api's pbjson `Serialize` expands the top-level types but prints any other `Any` as raw
//! bytes; this module decodes the extension types we emit (router, Wasm, TLS context, per-route
//! filter config, string value) so the golden files show what Envoy will read. Private keys and
//! the OAuth2 client secret and cookie key in the auth filter's configuration are redacted.

use serde_json::{json, Value};
use xds_api::pb::{
    envoy::{
        config::{
            cluster::v3::Cluster, listener::v3::Listener, route::v3::FilterConfig,
            route::v3::RouteConfiguration,
        },
        extensions::{
            filters::{
                http::router::v3::Router,
                network::http_connection_manager::v3::HttpConnectionManager,
            },
            transport_sockets::tls::v3::Secret,
        },
    },
    google::protobuf::{Any, StringValue},
};

use crate::{
    resources::{ResourceType, Resources},
    translate::{
        tls::{DownstreamTlsContext, UpstreamTlsContext},
        wasm::Wasm,
    },
};

#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("cannot decode {type_url}")]
    Decode {
        type_url: String,
        #[source]
        source: prost::DecodeError,
    },
    #[error("cannot serialize a resource to JSON")]
    Json(#[from] serde_json::Error),
    #[error("cannot write YAML")]
    Yaml(#[from] serde_norway::Error),
}

/// All resources as one YAML document: `{cluster: {name: ..}, secret: .., listener: .., route: ..}`.
/// Secrets' private keys are replaced by `<redacted>`.
pub fn to_yaml(resources: &Resources) -> Result<String, RenderError> {
    Ok(serde_norway::to_string(&to_json(resources)?)?)
}

pub fn to_json(resources: &Resources) -> Result<Value, RenderError> {
    let mut out = serde_json::Map::new();
    for (kind, by_name) in resources {
        let mut items = serde_json::Map::new();
        for (name, r) in by_name {
            let mut v = any_to_json(&r.body)?;
            if *kind == ResourceType::Secret {
                if let Some(key) = v.pointer_mut("/tls_certificate/private_key") {
                    *key = json!({ "inline_string": "<redacted>" });
                }
            }
            items.insert(name.clone(), v);
        }
        out.insert(kind.label().to_string(), Value::Object(items));
    }
    Ok(Value::Object(out))
}

fn decode<M: prost::Message + Default>(any: &Any) -> Result<M, RenderError> {
    M::decode(any.value.as_slice()).map_err(|source| RenderError::Decode {
        type_url: any.type_url.clone(),
        source,
    })
}

fn typed<T: serde::Serialize>(type_url: &str, message: &T) -> Result<Value, RenderError> {
    let mut v = serde_json::to_value(message)?;
    if let Value::Object(map) = &mut v {
        map.insert("@type".into(), json!(type_url));
    }
    Ok(v)
}

/// One `Any` as JSON with its nested `Any`s expanded.
fn any_to_json(any: &Any) -> Result<Value, RenderError> {
    let url = any.type_url.as_str();
    let name = url.rsplit('/').next().unwrap_or(url);
    let mut v = match name {
        "envoy.config.cluster.v3.Cluster" => typed(url, &decode::<Cluster>(any)?)?,
        "envoy.config.listener.v3.Listener" => typed(url, &decode::<Listener>(any)?)?,
        "envoy.config.route.v3.RouteConfiguration" => {
            typed(url, &decode::<RouteConfiguration>(any)?)?
        }
        "envoy.extensions.transport_sockets.tls.v3.Secret" => typed(url, &decode::<Secret>(any)?)?,
        "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager" => {
            typed(url, &decode::<HttpConnectionManager>(any)?)?
        }
        "envoy.extensions.filters.http.router.v3.Router" => typed(url, &decode::<Router>(any)?)?,
        "envoy.config.route.v3.FilterConfig" => typed(url, &decode::<FilterConfig>(any)?)?,
        "google.protobuf.StringValue" => {
            json!({ "@type": url, "value": redact_filter_config(decode::<StringValue>(any)?.value) })
        }
        "envoy.extensions.filters.http.wasm.v3.Wasm" => wasm_json(url, &decode::<Wasm>(any)?)?,
        "envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext" => {
            let c = decode::<DownstreamTlsContext>(any)?;
            let common = c.common_tls_context.unwrap_or_default();
            json!({
                "@type": url,
                "common_tls_context": {
                    "alpn_protocols": common.alpn_protocols,
                    "tls_certificate_sds_secret_configs":
                        serde_json::to_value(&common.tls_certificate_sds_secret_configs)?,
                }
            })
        }
        "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext" => {
            let c = decode::<UpstreamTlsContext>(any)?;
            let common = c.common_tls_context.unwrap_or_default();
            json!({
                "@type": url,
                "sni": c.sni,
                "common_tls_context": {
                    "validation_context": serde_json::to_value(&common.validation_context)?,
                }
            })
        }
        _ => json!({ "@type": url, "bytes": any.value.len() }),
    };
    expand(&mut v)?;
    Ok(v)
}

/// The auth filter's JSON with the OAuth2 client secret and cookie key replaced by
/// `<redacted>`; any other string as it is.
fn redact_filter_config(text: String) -> String {
    let Ok(mut v) = serde_json::from_str::<Value>(&text) else {
        return text;
    };
    let Some(oauth2) = v.get_mut("oauth2").and_then(Value::as_object_mut) else {
        return text;
    };
    for key in ["client_secret", "cookie_key"] {
        if let Some(secret) = oauth2.get_mut(key) {
            *secret = json!("<redacted>");
        }
    }
    v.to_string()
}

fn wasm_json(url: &str, w: &Wasm) -> Result<Value, RenderError> {
    let c = w.config.clone().unwrap_or_default();
    let vm = c.vm_config.unwrap_or_default();
    let configuration = c.configuration.as_ref().map(any_to_json).transpose()?;
    Ok(json!({
        "@type": url,
        "config": {
            "name": c.name,
            "root_id": c.root_id,
            "vm_config": {
                "vm_id": vm.vm_id,
                "runtime": vm.runtime,
                "code": serde_json::to_value(&vm.code)?,
            },
            "configuration": configuration,
            "failure_policy": c.failure_policy,
        }
    }))
}

/// Replaces every `{"@type": .., "value": [bytes]}` inside `v` by its decoded form.
fn expand(v: &mut Value) -> Result<(), RenderError> {
    match v {
        Value::Object(map) => {
            let raw = match (map.get("@type"), map.get("value")) {
                (Some(Value::String(url)), Some(Value::Array(bytes))) => Some(Any {
                    type_url: url.clone(),
                    value: bytes
                        .iter()
                        .filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
                        .collect(),
                }),
                _ => None,
            };
            if let Some(any) = raw {
                *v = any_to_json(&any)?;
                return Ok(());
            }
            for child in map.values_mut() {
                expand(child)?;
            }
        }
        Value::Array(items) => {
            for child in items {
                expand(child)?;
            }
        }
        _ => {}
    }
    Ok(())
}
