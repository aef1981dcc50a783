//! Routing an export request to collections (pure): which spans belong to which (session,
//! collection), and which carry neither and are rejected. The buffer stores each collection's
//! part as a request of its own, so the log holds OTLP as it was received.
//!
//! ```text
//!  ExportTraceServiceRequest ──split──> { CollectionId -> ExportTraceServiceRequest } + rejected
//! ```

use std::collections::BTreeMap;

use crate::{
    attributes::{self, COLLECTION, SESSION},
    proto::{
        collector::ExportTraceServiceRequest,
        trace::{ResourceSpans, ScopeSpans, Span},
    },
};

/// A collection as spans name it (raw attribute values, not sanitised).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CollectionId {
    pub session: String,
    pub collection: String,
}

impl std::fmt::Display for CollectionId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.session, self.collection)
    }
}

/// A request split by collection.
#[derive(Debug, Default)]
pub struct Split {
    pub groups: BTreeMap<CollectionId, ExportTraceServiceRequest>,
    /// Spans without `nsight.session` or `nsight.collection`.
    pub rejected: u64,
    /// Spans accepted (in `groups`).
    pub accepted: u64,
}

impl Split {
    /// Why spans were rejected, for the client.
    pub fn rejection_message(&self) -> Option<String> {
        (self.rejected > 0).then(|| {
            format!(
                "{} span(s) carry no `{SESSION}` and `{COLLECTION}` attributes (on the span or \
                 its resource): the converter cannot tell which collection they belong to",
                self.rejected
            )
        })
    }
}

/// The collection a span belongs to, from its attributes or its resource's.
fn collection_of(span: &Span, resource: &ResourceSpans) -> Option<CollectionId> {
    let empty = Vec::new();
    let res = resource.resource.as_ref().map_or(&empty, |r| &r.attributes);
    Some(CollectionId {
        session: attributes::text_of(&span.attributes, res, SESSION)?,
        collection: attributes::text_of(&span.attributes, res, COLLECTION)?,
    })
}

/// Splits `request` by collection.
pub fn split(request: ExportTraceServiceRequest) -> Split {
    let mut out = Split::default();
    for rs in request.resource_spans {
        let mut per: BTreeMap<CollectionId, Vec<ScopeSpans>> = BTreeMap::new();
        for ss in &rs.scope_spans {
            let mut by: BTreeMap<CollectionId, Vec<Span>> = BTreeMap::new();
            for span in &ss.spans {
                match collection_of(span, &rs) {
                    Some(id) => {
                        out.accepted += 1;
                        by.entry(id).or_default().push(span.clone());
                    }
                    None => out.rejected += 1,
                }
            }
            for (id, spans) in by {
                per.entry(id).or_default().push(ScopeSpans {
                    scope: ss.scope.clone(),
                    spans,
                    schema_url: ss.schema_url.clone(),
                });
            }
        }
        for (id, scope_spans) in per {
            out.groups
                .entry(id)
                .or_default()
                .resource_spans
                .push(ResourceSpans {
                    resource: rs.resource.clone(),
                    scope_spans,
                    schema_url: rs.schema_url.clone(),
                });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use crate::proto::{
        common::{any_value::Value, AnyValue, KeyValue},
        resource::Resource,
    };

    fn kv(key: &str, value: &str) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(value.into())),
            }),
            ..Default::default()
        }
    }

    fn span(name: &str, attrs: Vec<KeyValue>) -> Span {
        Span {
            name: name.into(),
            attributes: attrs,
            ..Default::default()
        }
    }

    #[test]
    fn spans_go_to_their_collection_and_unnamed_ones_are_rejected() {
        let request = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![kv(SESSION, "s")],
                    ..Default::default()
                }),
                scope_spans: vec![ScopeSpans {
                    spans: vec![
                        span("a", vec![kv(COLLECTION, "1")]),
                        span("b", vec![kv(COLLECTION, "2")]),
                        span("c", vec![kv(COLLECTION, "1")]),
                        span("orphan", vec![]),
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let split = split(request);
        assert_eq!((split.accepted, split.rejected), (3, 1));
        let names = |c: &str| -> Vec<String> {
            split.groups[&CollectionId {
                session: "s".into(),
                collection: c.into(),
            }]
                .resource_spans
                .iter()
                .flat_map(|r| &r.scope_spans)
                .flat_map(|s| &s.spans)
                .map(|s| s.name.clone())
                .collect()
        };
        assert_eq!(names("1"), ["a", "c"]);
        assert_eq!(names("2"), ["b"]);
        assert!(split
            .rejection_message()
            .unwrap()
            .contains("nsight.session"));
    }
}
