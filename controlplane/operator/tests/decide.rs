//! The injection decision over small built inputs: labels, namespace labels, rules, opt-out,
//! idempotency, misconfiguration; and malformed reviews answered without a panic.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use nsight_api::NsightOperatorProfileConfig;
use nsight_operator::{
    admission::{review, review_with_effects, ReviewError, StaticWorld},
    decide::{decide, decide_in, Decision, SkipReason},
    settings::Settings,
};
use serde_json::{json, Value};

fn pod(labels: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "research", "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "python"}]}
    }))
    .unwrap()
}

fn config(name: &str, spec: Value) -> NsightOperatorProfileConfig {
    serde_json::from_value(json!({
        "apiVersion": "nvidia.com/v1", "kind": "NsightOperatorProfileConfig",
        "metadata": {"name": name, "namespace": "research"}, "spec": spec
    }))
    .unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn tool_name(d: &Decision) -> &str {
    match d {
        Decision::Inject { tool, .. } => &tool.name,
        Decision::Skip(r) => panic!("skipped: {r}"),
    }
}

fn default_tool() -> nsight_api::NsightToolConfig {
    Settings::default().default_tool_config
}

#[test]
fn pod_label_injects_with_cluster_default() {
    let d = decide(
        &pod(json!({"nvidia-nsight-profile": "enabled"})),
        &labels(&[]),
        &[],
        &default_tool(),
    );
    assert_eq!(tool_name(&d), "default");
    let Decision::Inject { source, .. } = d else {
        unreachable!()
    };
    assert!(
        source.contains("pod label") && source.contains("cluster default"),
        "{source}"
    );
}

#[test]
fn namespace_label_injects_with_first_profile_tool_config() {
    let configs = [config(
        "team",
        json!({"nsightToolConfigs": [{"name": "team-profile"}]}),
    )];
    let ns = labels(&[("nvidia-nsight-profile", "enabled")]);
    let d = decide(&pod(json!({})), &ns, &configs, &default_tool());
    assert_eq!(tool_name(&d), "team-profile");
}

#[test]
fn unlabelled_pod_is_not_selected() {
    let d = decide(
        &pod(json!({"app": "x"})),
        &labels(&[]),
        &[],
        &default_tool(),
    );
    assert_eq!(d, Decision::Skip(SkipReason::NotSelected));
    let d = decide(
        &pod(json!({"nvidia-nsight-profile": "yes"})),
        &labels(&[]),
        &[],
        &default_tool(),
    );
    assert_eq!(d, Decision::Skip(SkipReason::NotSelected));
}

#[test]
fn rules_select_by_pod_and_namespace_labels() {
    let configs = [config(
        "rules",
        json!({
            "nsightToolConfigs": [{"name": "a"}, {"name": "b"}],
            "injectionRules": [
                {"name": "r1", "nsightToolConfig": "b",
                 "labelSelector": {"matchLabels": {"app": "trainer"}},
                 "namespaceSelector": {"matchLabels": {"team": "research"}}}
            ]
        }),
    )];
    let ns = labels(&[("team", "research")]);
    let d = decide(
        &pod(json!({"app": "trainer"})),
        &ns,
        &configs,
        &default_tool(),
    );
    assert_eq!(tool_name(&d), "b");
    let Decision::Inject { source, .. } = d else {
        unreachable!()
    };
    assert_eq!(source, "profile config rules, rule r1");
    // Namespace selector not satisfied: not selected.
    let d = decide(
        &pod(json!({"app": "trainer"})),
        &labels(&[]),
        &configs,
        &default_tool(),
    );
    assert_eq!(d, Decision::Skip(SkipReason::NotSelected));
}

#[test]
fn rule_naming_a_missing_tool_config_is_explained() {
    let configs = [config(
        "rules",
        json!({"nsightToolConfigs": [{"name": "a"}],
               "injectionRules": [{"name": "r", "nsightToolConfig": "zzz",
                                   "labelSelector": {"matchLabels": {"app": "x"}}}]}),
    )];
    let d = decide(
        &pod(json!({"app": "x"})),
        &labels(&[]),
        &configs,
        &default_tool(),
    );
    assert_eq!(
        d,
        Decision::Skip(SkipReason::UnknownToolConfig {
            rule: "r".into(),
            tool: "zzz".into()
        })
    );
}

#[test]
fn cel_rules_select_by_expression_over_the_pod() {
    let configs = [config(
        "rules",
        json!({"nsightToolConfigs": [{"name": "a"}, {"name": "b"}],
               "injectionRules": [
                   {"name": "broken", "nsightToolConfig": "a", "celExpression": "object.("},
                   {"name": "by-name", "nsightToolConfig": "b",
                    "labelSelector": {"matchLabels": {"app": "x"}},
                    "celExpression": "object.metadata.name.startsWith('p')"}]}),
    )];
    let d = decide(
        &pod(json!({"app": "x"})),
        &labels(&[]),
        &configs,
        &default_tool(),
    );
    assert_eq!(tool_name(&d), "b");
    // The expression is false for this Pod; the broken rule is the explanation.
    let mut other = pod(json!({"app": "x"}));
    other.metadata.name = Some("q".into());
    let d = decide(&other, &labels(&[]), &configs, &default_tool());
    let Decision::Skip(SkipReason::CelFailed { rule, error }) = d else {
        panic!("{d:?}")
    };
    assert_eq!(rule, "broken");
    assert!(error.contains("parse"), "{error}");
}

#[test]
fn opt_out_and_already_injected() {
    let d = decide(
        &pod(json!({"nvidia-nsight-profile": "disabled"})),
        &labels(&[("nvidia-nsight-profile", "enabled")]),
        &[],
        &default_tool(),
    );
    assert_eq!(d, Decision::Skip(SkipReason::OptedOut));
    let mut p = pod(json!({"nvidia-nsight-profile": "enabled"}));
    p.spec.as_mut().unwrap().init_containers = Some(vec![serde_json::from_value(
        json!({"name": "nsight-tools"}),
    )
    .unwrap()]);
    let d = decide(&p, &labels(&[]), &[], &default_tool());
    assert_eq!(d, Decision::Skip(SkipReason::AlreadyInjected));
}

fn answer(body: &[u8]) -> Result<Value, ReviewError> {
    review(body, &StaticWorld::default(), &Settings::default())
}

#[test]
fn malformed_reviews_never_panic() {
    assert!(matches!(
        answer(b"not json"),
        Err(ReviewError::NotAReview(_))
    ));
    assert!(matches!(
        answer(b"{\"kind\":\"AdmissionReview\"}"),
        Err(ReviewError::NoRequest)
    ));
    // A Pod that does not parse: admitted unchanged, with a warning.
    let bad_pod = json!({"request": {"uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE", "namespace": "n", "object": {"spec": {"containers": "oops"}}}});
    let a = answer(&serde_json::to_vec(&bad_pod).unwrap()).unwrap();
    assert_eq!(a["response"]["uid"], "u1");
    assert_eq!(a["response"]["allowed"], true);
    assert!(a["response"].get("patch").is_none());
    assert!(a["response"]["warnings"][0]
        .as_str()
        .unwrap()
        .contains("could not read the Pod"));
    // Not a Pod CREATE: admitted unchanged, silently.
    let update = json!({"request": {"uid": "u2", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "UPDATE", "object": {}}});
    let a = answer(&serde_json::to_vec(&update).unwrap()).unwrap();
    assert_eq!(a["response"], json!({"uid": "u2", "allowed": true}));
}

/// A world with `team` (its own config) and cluster-wide rules in `nsight-operator`.
fn world() -> StaticWorld {
    serde_json::from_value(json!({
        "namespaces": {"team": {"tier": "gpu"}},
        "clusterNamespace": "nsight-operator",
        "configs": [
            {"metadata": {"name": "team-rules", "namespace": "team"},
             "spec": {"nsightToolConfigs": [{"name": "team-tool"}],
                      "injectionRules": [{"name": "gpu", "nsightToolConfig": "team-tool",
                          "labelSelector": {"matchLabels": {"app": "trainer"}},
                          "namespaceSelector": {"matchLabels": {"tier": "gpu"}}}]}},
            {"metadata": {"name": "global", "namespace": "nsight-operator"},
             "spec": {"nsightToolConfigs": [{"name": "cluster-tool"}],
                      "injectionRules": [{"name": "any-trainer", "nsightToolConfig": "cluster-tool",
                          "labelSelector": {"matchLabels": {"app": "trainer"}}}]}}
        ]
    }))
    .unwrap()
}

#[test]
fn namespace_rules_come_before_cluster_wide_rules() {
    use nsight_operator::world::World;
    let world = world();
    let trainer = pod(json!({"app": "trainer"}));
    let d = decide_in(&trainer, None, &world.view("team"), &default_tool());
    assert_eq!(tool_name(&d), "team-tool");
    // Another namespace: only the cluster-wide rule applies.
    let d = decide_in(&trainer, None, &world.view("other"), &default_tool());
    let Decision::Inject { tool, source } = d else {
        panic!("{d:?}")
    };
    assert_eq!(tool.name, "cluster-tool");
    assert_eq!(
        source,
        "cluster-wide profile config nsight-operator/global, rule any-trainer"
    );
    // A labelled Pod with no rule of its own namespace takes the first cluster-wide tool.
    let labelled = pod(json!({"nvidia-nsight-profile": "enabled"}));
    let d = decide_in(&labelled, None, &world.view("other"), &default_tool());
    assert_eq!(tool_name(&d), "cluster-tool");
}

fn pod_review(namespace: &str, labels: Value, dry_run: bool) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "operation": "CREATE", "namespace": namespace, "dryRun": dry_run,
            "object": {"metadata": {"name": "p", "labels": labels},
                       "spec": {"containers": [{"name": "main", "image": "python"}]}}}}),
    )
    .unwrap()
}

#[test]
fn effects_are_asked_for_real_requests_only() {
    let world = world();
    let settings = Settings::default();
    let (answer, effects) = review_with_effects(
        &pod_review("team", json!({"app": "trainer"}), false),
        &world,
        &settings,
    )
    .unwrap();
    assert_eq!(answer["response"]["patchType"], "JSONPatch");
    assert_eq!(effects.injected_in.as_deref(), Some("team"));
    assert!(effects.event.is_none());
    // Not selected in a namespace with configs of its own: an Event regarding the Pod.
    let (_, effects) = review_with_effects(
        &pod_review("team", json!({"app": "web"}), false),
        &world,
        &settings,
    )
    .unwrap();
    let event = effects.event.unwrap();
    assert_eq!(event.reason, "NotSelected");
    assert_eq!(event.regarding.name.as_deref(), Some("p"));
    assert_eq!(event.regarding.namespace.as_deref(), Some("team"));
    // ... and none in a namespace nobody configured.
    let (_, effects) = review_with_effects(
        &pod_review("other", json!({"app": "web"}), false),
        &world,
        &settings,
    )
    .unwrap();
    assert_eq!(effects, Default::default());
    // A dry run: the same answers, no side effects.
    for labels in [
        json!({"app": "trainer"}),
        json!({"nvidia-nsight-profile": "disabled"}),
    ] {
        let (_, effects) =
            review_with_effects(&pod_review("team", labels, true), &world, &settings).unwrap();
        assert_eq!(effects, Default::default());
    }
}

#[test]
fn an_unreadable_object_of_an_update_is_not_read() {
    let update = json!({"request": {"uid": "u3", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "UPDATE", "object": {"spec": {"containers": "oops"}}}});
    let a = answer(&serde_json::to_vec(&update).unwrap()).unwrap();
    assert_eq!(a["response"], json!({"uid": "u3", "allowed": true}));
}
