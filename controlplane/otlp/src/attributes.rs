//! The span and resource attributes the converter reads (ours are defined in
//! `nsight_contracts::otlp::attributes`, shared with the agent's mirroring; docs/otlp.md lists
//! them), and typed access to OTLP attribute lists. Pure: no I/O.
//!
//! A span attribute wins over the resource attribute of the same name, so one process can send
//! spans of several collections.

use crate::proto::common::{any_value::Value, AnyValue, KeyValue};

pub use nsight_contracts::otlp::attributes::*;

pub use nsight_contracts::otlp::semconv;

/// The value of `key` in `attrs`, if present.
pub fn find<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

/// A text attribute (an integer is accepted and written in decimal).
pub fn text(attrs: &[KeyValue], key: &str) -> Option<String> {
    match find(attrs, key)? {
        Value::StringValue(s) if !s.is_empty() => Some(s.clone()),
        Value::IntValue(i) => Some(i.to_string()),
        _ => None,
    }
}

/// An integer attribute (a decimal string is accepted).
pub fn int(attrs: &[KeyValue], key: &str) -> Option<i64> {
    match find(attrs, key)? {
        Value::IntValue(i) => Some(*i),
        Value::StringValue(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The span's attribute, else the resource's.
pub fn text_of(span: &[KeyValue], resource: &[KeyValue], key: &str) -> Option<String> {
    text(span, key).or_else(|| text(resource, key))
}

/// A colour: an ARGB integer or `#RRGGBB` (opaque) / `#AARRGGBB` / `0x...` text.
pub fn color(attrs: &[KeyValue]) -> Option<u32> {
    match find(attrs, NVTX_COLOR)? {
        Value::IntValue(i) => u32::try_from(*i & 0xffff_ffff).ok(),
        Value::StringValue(s) => {
            let hex = s
                .strip_prefix('#')
                .or_else(|| s.strip_prefix("0x"))
                .unwrap_or(s);
            let v = u32::from_str_radix(hex, 16).ok()?;
            Some(if hex.len() <= 6 { 0xff00_0000 | v } else { v })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn kv(key: &str, value: Value) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(value) }),
            ..Default::default()
        }
    }

    #[test]
    fn span_attributes_win_over_the_resource() {
        let span = [kv(SESSION, Value::StringValue("s2".into()))];
        let resource = [
            kv(SESSION, Value::StringValue("s1".into())),
            kv(COLLECTION, Value::IntValue(3)),
        ];
        assert_eq!(text_of(&span, &resource, SESSION).unwrap(), "s2");
        assert_eq!(text_of(&span, &resource, COLLECTION).unwrap(), "3");
        assert_eq!(text_of(&span, &resource, TAG), None);
    }

    #[test]
    fn colours_accept_integers_and_hex_text() {
        assert_eq!(
            color(&[kv(NVTX_COLOR, Value::IntValue(0x12345678))]),
            Some(0x12345678)
        );
        assert_eq!(
            color(&[kv(NVTX_COLOR, Value::StringValue("#00ff00".into()))]),
            Some(0xff00ff00)
        );
        assert_eq!(
            color(&[kv(NVTX_COLOR, Value::StringValue("0x8000ff00".into()))]),
            Some(0x8000ff00)
        );
        assert_eq!(
            color(&[kv(NVTX_COLOR, Value::StringValue("red".into()))]),
            None
        );
    }
}
