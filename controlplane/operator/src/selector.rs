//! Kubernetes label-selector semantics (`matchLabels` + `matchExpressions` with `In`, `NotIn`,
//! `Exists`, `DoesNotExist`) over a label map. Pure; an unknown operator never matches.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `labels` satisfy `selector`. An empty selector matches everything, as in Kubernetes.
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_label = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expr = selector.match_expressions.iter().flatten().all(|e| {
        let value = labels.get(&e.key);
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    by_label && by_expr
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expr(key: &str, op: &str, values: &[&str]) -> LabelSelector {
        LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: op.into(),
                values: Some(values.iter().map(|v| v.to_string()).collect()),
            }]),
            match_labels: None,
        }
    }

    #[test]
    fn match_labels_needs_every_pair() {
        let s = LabelSelector {
            match_labels: Some(labels(&[("app", "a"), ("tier", "gpu")])),
            match_expressions: None,
        };
        assert!(matches(
            &s,
            &labels(&[("app", "a"), ("tier", "gpu"), ("x", "y")])
        ));
        assert!(!matches(&s, &labels(&[("app", "a")])));
        assert!(matches(&LabelSelector::default(), &labels(&[])));
    }

    #[test]
    fn expressions() {
        let l = labels(&[("team", "research")]);
        assert!(matches(&expr("team", "In", &["research", "x"]), &l));
        assert!(!matches(&expr("team", "NotIn", &["research"]), &l));
        assert!(matches(&expr("other", "NotIn", &["research"]), &l));
        assert!(matches(&expr("team", "Exists", &[]), &l));
        assert!(!matches(&expr("team", "DoesNotExist", &[]), &l));
        assert!(!matches(&expr("team", "Like", &["research"]), &l));
    }
}
