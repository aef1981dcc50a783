//! OTLP/JSON (`application/json` on `/v1/traces`) read into the protobuf types (pure): the
//! subset of the trace request the converter uses, with the OTLP/JSON rules: lowerCamelCase
//! names, trace and span ids as hex, 64-bit integers as strings or numbers, enums as integers,
//! unknown fields ignored. The span log stores the protobuf encoding, as for OTLP/protobuf.

use serde::Deserialize;

use crate::proto::{
    collector::ExportTraceServiceRequest,
    common::{
        any_value::Value, AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList,
    },
    resource::Resource,
    trace::{span::Event, ResourceSpans, ScopeSpans, Span},
};

/// A 64-bit integer as OTLP/JSON writes it: a decimal string or a number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Int {
    Num(i64),
    Text(String),
}

impl Int {
    fn get(&self) -> Result<i64, String> {
        match self {
            Int::Num(n) => Ok(*n),
            Int::Text(t) => t
                .parse::<i64>()
                .or_else(|_| t.parse::<u64>().map(|u| u as i64))
                .map_err(|_| format!("`{t}` is not an integer")),
        }
    }

    fn unsigned(v: &Option<Int>) -> Result<u64, String> {
        v.as_ref().map_or(Ok(0), |i| i.get().map(|n| n as u64))
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JRequest {
    #[serde(default)]
    resource_spans: Vec<JResourceSpans>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JResourceSpans {
    resource: Option<JAttributes>,
    #[serde(default)]
    scope_spans: Vec<JScopeSpans>,
    #[serde(default)]
    schema_url: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JAttributes {
    #[serde(default)]
    attributes: Vec<JKeyValue>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JScope {
    #[serde(default)]
    name: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    attributes: Vec<JKeyValue>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JScopeSpans {
    scope: Option<JScope>,
    #[serde(default)]
    spans: Vec<JSpan>,
    #[serde(default)]
    schema_url: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JSpan {
    #[serde(default)]
    trace_id: String,
    #[serde(default)]
    span_id: String,
    #[serde(default)]
    parent_span_id: String,
    #[serde(default)]
    name: String,
    kind: Option<Int>,
    start_time_unix_nano: Option<Int>,
    end_time_unix_nano: Option<Int>,
    #[serde(default)]
    attributes: Vec<JKeyValue>,
    #[serde(default)]
    events: Vec<JEvent>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JEvent {
    time_unix_nano: Option<Int>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    attributes: Vec<JKeyValue>,
}

#[derive(Debug, Deserialize)]
struct JKeyValue {
    key: String,
    value: Option<JAnyValue>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JAnyValue {
    string_value: Option<String>,
    bool_value: Option<bool>,
    int_value: Option<Int>,
    double_value: Option<f64>,
    array_value: Option<JArray>,
    kvlist_value: Option<JKvList>,
    bytes_value: Option<String>,
}

#[derive(Debug, Deserialize)]
struct JArray {
    #[serde(default)]
    values: Vec<JAnyValue>,
}

#[derive(Debug, Deserialize)]
struct JKvList {
    #[serde(default)]
    values: Vec<JKeyValue>,
}

fn id(hex_text: &str, what: &str) -> Result<Vec<u8>, String> {
    hex::decode(hex_text).map_err(|e| format!("{what} `{hex_text}` is not hex: {e}"))
}

fn value(v: JAnyValue) -> Result<Option<Value>, String> {
    Ok(Some(if let Some(s) = v.string_value {
        Value::StringValue(s)
    } else if let Some(b) = v.bool_value {
        Value::BoolValue(b)
    } else if let Some(i) = v.int_value {
        Value::IntValue(i.get()?)
    } else if let Some(d) = v.double_value {
        Value::DoubleValue(d)
    } else if let Some(a) = v.array_value {
        Value::ArrayValue(ArrayValue {
            values: a
                .values
                .into_iter()
                .map(|v| Ok(AnyValue { value: value(v)? }))
                .collect::<Result<_, String>>()?,
        })
    } else if let Some(kv) = v.kvlist_value {
        Value::KvlistValue(KeyValueList {
            values: attributes(kv.values)?,
        })
    } else if let Some(b) = v.bytes_value {
        use base64::Engine as _;
        Value::BytesValue(
            base64::engine::general_purpose::STANDARD
                .decode(&b)
                .map_err(|e| format!("bytesValue is not base64: {e}"))?,
        )
    } else {
        return Ok(None);
    }))
}

fn attributes(list: Vec<JKeyValue>) -> Result<Vec<KeyValue>, String> {
    list.into_iter()
        .map(|kv| {
            Ok(KeyValue {
                key: kv.key,
                value: match kv.value {
                    Some(v) => Some(AnyValue { value: value(v)? }),
                    None => None,
                },
                ..Default::default()
            })
        })
        .collect()
}

fn span(s: JSpan) -> Result<Span, String> {
    Ok(Span {
        trace_id: id(&s.trace_id, "traceId")?,
        span_id: id(&s.span_id, "spanId")?,
        parent_span_id: id(&s.parent_span_id, "parentSpanId")?,
        name: s.name,
        kind: s
            .kind
            .as_ref()
            .map_or(Ok(0), Int::get)
            .map(|k| i32::try_from(k).unwrap_or(0))?,
        start_time_unix_nano: Int::unsigned(&s.start_time_unix_nano)?,
        end_time_unix_nano: Int::unsigned(&s.end_time_unix_nano)?,
        attributes: attributes(s.attributes)?,
        events: s
            .events
            .into_iter()
            .map(|e| {
                Ok(Event {
                    time_unix_nano: Int::unsigned(&e.time_unix_nano)?,
                    name: e.name,
                    attributes: attributes(e.attributes)?,
                    ..Default::default()
                })
            })
            .collect::<Result<_, String>>()?,
        ..Default::default()
    })
}

/// Reads an OTLP/JSON `ExportTraceServiceRequest`; the error says what was wrong.
pub fn decode(body: &[u8]) -> Result<ExportTraceServiceRequest, String> {
    let request: JRequest = serde_json::from_slice(body)
        .map_err(|e| format!("the body is not an OTLP/JSON ExportTraceServiceRequest: {e}"))?;
    let resource_spans = request
        .resource_spans
        .into_iter()
        .map(|rs| {
            Ok(ResourceSpans {
                resource: match rs.resource {
                    Some(r) => Some(Resource {
                        attributes: attributes(r.attributes)?,
                        ..Default::default()
                    }),
                    None => None,
                },
                scope_spans: rs
                    .scope_spans
                    .into_iter()
                    .map(|ss| {
                        Ok(ScopeSpans {
                            scope: match ss.scope {
                                Some(s) => Some(InstrumentationScope {
                                    name: s.name,
                                    version: s.version,
                                    attributes: attributes(s.attributes)?,
                                    ..Default::default()
                                }),
                                None => None,
                            },
                            spans: ss.spans.into_iter().map(span).collect::<Result<_, _>>()?,
                            schema_url: ss.schema_url,
                        })
                    })
                    .collect::<Result<_, String>>()?,
                schema_url: rs.schema_url,
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(ExportTraceServiceRequest { resource_spans })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    /// The trace example of the opentelemetry-proto repository (examples/trace.json), with our
    /// attributes and an event added.
    const EXAMPLE: &str = r#"{"resourceSpans":[{"resource":{"attributes":[
        {"key":"service.name","value":{"stringValue":"my.service"}},
        {"key":"nsight.session","value":{"stringValue":"s"}},
        {"key":"process.pid","value":{"intValue":"42"}}]},
      "scopeSpans":[{"scope":{"name":"my.library","version":"1.0.0","attributes":[
        {"key":"my.scope.attribute","value":{"stringValue":"some scope attribute"}}]},
      "spans":[{"traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174",
        "parentSpanId":"EEE19B7EC3C1B173","name":"I'm a server span",
        "startTimeUnixNano":"1544712660000000000","endTimeUnixNano":1544712661000000000,
        "kind":2,"attributes":[{"key":"nsight.collection","value":{"intValue":3}},
        {"key":"nvtx.payload","value":{"doubleValue":1.5}},
        {"key":"list","value":{"arrayValue":{"values":[{"boolValue":true}]}}}],
        "events":[{"timeUnixNano":"1544712660500000000","name":"e"}],
        "unknownField":{"ignored":true}}]}]}]}"#;

    #[test]
    fn the_spec_example_reads_into_the_protobuf_types() {
        let request = decode(EXAMPLE.as_bytes()).unwrap();
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.name, "I'm a server span");
        assert_eq!(span.trace_id.len(), 16);
        assert_eq!(span.span_id, hex::decode("EEE19B7EC3C1B174").unwrap());
        assert_eq!(span.start_time_unix_nano, 1_544_712_660_000_000_000);
        assert_eq!(span.end_time_unix_nano, 1_544_712_661_000_000_000);
        assert_eq!(span.kind, 2);
        assert_eq!(span.events[0].time_unix_nano, 1_544_712_660_500_000_000);
        let split = crate::group::split(request);
        assert_eq!((split.accepted, split.rejected), (1, 0));
        let rows = crate::convert::rows(&split.groups.into_values().collect::<Vec<_>>());
        assert_eq!(rows[0].process.pid, 42);
        assert_eq!(rows[0].end - rows[0].start, 1_000_000_000);
    }

    #[test]
    fn bad_json_says_what_is_wrong() {
        let e = decode(b"{\"resourceSpans\": 3}").unwrap_err();
        assert!(e.contains("not an OTLP/JSON"), "{e}");
        let e = decode(br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}"#)
            .unwrap_err();
        assert!(e.contains("traceId `zz` is not hex"), "{e}");
    }
}
