//! The injection decision: given a Pod, its namespace's labels and the namespace's
//! NsightOperatorProfileConfigs, inject (with which tool config, and why) or skip (and why).
//!
//! ```text
//! already injected? ── yes ─> Skip(AlreadyInjected)
//! label =disabled?  ── yes ─> Skip(OptedOut)
//! first rule whose selectors all match ─> Inject(its tool config)
//! pod or namespace labelled nvidia-nsight-profile=enabled ─> Inject(first tool config, else default)
//! otherwise ─> Skip(NotSelected)
//! ```
//!
//! The configs are the namespace's (by name), then the cluster-wide ones (by name); the
//! first rule that matches wins, and the label fallback takes the first tool config found.
//!
//! Pure: no I/O, no clock. A rule's `celExpression` is evaluated with the Pod as `object`
//! (`cel`); one that fails to evaluate does not match, and the reason says why.

use std::{collections::BTreeMap, fmt};

use k8s_openapi::api::core::v1::Pod;
use nsight_api::{
    NsightOperatorProfileConfig, NsightToolConfig, PROFILE_LABEL, PROFILE_LABEL_ENABLED,
};

use serde_json::Value;

use crate::{cel, selector, world::View, INJECTED_ANNOTATION, TOOLS_INIT_CONTAINER};

/// What the webhook does with a Pod.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Inject with `tool`; `source` says where it came from (recorded on the Pod).
    Inject {
        tool: NsightToolConfig,
        source: String,
    },
    Skip(SkipReason),
}

/// Why a Pod is left alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// The marker annotation or the tools init container is already there.
    AlreadyInjected,
    /// `nvidia-nsight-profile=disabled` on the Pod.
    OptedOut,
    /// No label and no rule selects the Pod.
    NotSelected,
    /// A rule matched but names a tool config that does not exist.
    UnknownToolConfig { rule: String, tool: String },
    /// Not selected, and a rule's CEL expression could not be evaluated.
    CelFailed { rule: String, error: String },
}

impl SkipReason {
    /// Skips the user asked for, or a misconfiguration, deserve a warning on the request.
    pub fn warrants_warning(&self) -> bool {
        matches!(
            self,
            Self::UnknownToolConfig { .. } | Self::CelFailed { .. }
        )
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::AlreadyInjected => write!(f, "already injected"),
            Self::OptedOut => write!(f, "{PROFILE_LABEL}=disabled on the pod"),
            Self::NotSelected => write!(
                f,
                "not selected: no {PROFILE_LABEL}={PROFILE_LABEL_ENABLED} label and no injection rule matched"
            ),
            Self::UnknownToolConfig { rule, tool } => write!(
                f,
                "injection rule {rule} names tool config {tool}, which does not exist"
            ),
            Self::CelFailed { rule, error } => {
                write!(
                    f,
                    "not selected; the celExpression of injection rule {rule} {error}"
                )
            }
        }
    }
}

/// Decides for `pod`. `configs` are the profile configs of the Pod's namespace (any order:
/// they are taken by name).
pub fn decide(
    pod: &Pod,
    namespace_labels: &BTreeMap<String, String>,
    configs: &[NsightOperatorProfileConfig],
    default_tool: &NsightToolConfig,
) -> Decision {
    let mut sorted: Vec<&NsightOperatorProfileConfig> = configs.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    decide_ordered(
        pod,
        None,
        namespace_labels,
        sorted.iter().map(|c| (false, *c)),
        default_tool,
    )
}

/// Decides for `pod` over a [`View`] of its namespace: the namespace's configs, then the
/// cluster-wide ones. `pod_json`, when the caller has the Pod as JSON already, is what CEL
/// rules see (otherwise they read the typed Pod, which has the same fields).
pub fn decide_in(
    pod: &Pod,
    pod_json: Option<&Value>,
    view: &View,
    default_tool: &NsightToolConfig,
) -> Decision {
    let configs = view
        .configs
        .iter()
        .map(|c| (false, &**c))
        .chain(view.cluster.iter().map(|c| (true, &**c)));
    decide_ordered(pod, pod_json, &view.labels, configs, default_tool)
}

/// The decision over configs in precedence order, each flagged cluster-wide or not.
fn decide_ordered<'a>(
    pod: &Pod,
    pod_json: Option<&Value>,
    namespace_labels: &BTreeMap<String, String>,
    configs: impl Iterator<Item = (bool, &'a NsightOperatorProfileConfig)> + Clone,
    default_tool: &NsightToolConfig,
) -> Decision {
    let empty = BTreeMap::new();
    let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
    if is_injected(pod) {
        return Decision::Skip(SkipReason::AlreadyInjected);
    }
    if labels.get(PROFILE_LABEL).is_some_and(|v| v == "disabled") {
        return Decision::Skip(SkipReason::OptedOut);
    }
    let mut cel_failure = None;
    for (cluster, config) in configs.clone() {
        for rule in &config.spec.injection_rules {
            if !selectors_match(rule, labels, namespace_labels) {
                continue;
            }
            if let Some(expression) = &rule.cel_expression {
                // The typed Pod goes straight into CEL's values (no JSON tree in between).
                let verdict = match pod_json {
                    Some(v) => cel::evaluate(expression, v),
                    None => cel::evaluate(expression, pod),
                };
                match verdict {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        cel_failure.get_or_insert_with(|| (rule.name.clone(), e.to_string()));
                        continue;
                    }
                }
            }
            let found = config
                .spec
                .nsight_tool_configs
                .iter()
                .find(|t| t.name == rule.nsight_tool_config);
            return match found {
                Some(tool) => Decision::Inject {
                    tool: tool.clone(),
                    source: format!("{}, rule {}", describe(cluster, config), rule.name),
                },
                None => Decision::Skip(SkipReason::UnknownToolConfig {
                    rule: rule.name.clone(),
                    tool: rule.nsight_tool_config.clone(),
                }),
            };
        }
    }
    let enabled = |l: &BTreeMap<String, String>| {
        l.get(PROFILE_LABEL)
            .is_some_and(|v| v == PROFILE_LABEL_ENABLED)
    };
    if enabled(labels) || enabled(namespace_labels) {
        let by = if enabled(labels) { "pod" } else { "namespace" };
        let first = configs
            .clone()
            .find_map(|(cluster, c)| Some((cluster, c, c.spec.nsight_tool_configs.first()?)));
        return match first {
            Some((cluster, config, tool)) => Decision::Inject {
                tool: tool.clone(),
                source: format!(
                    "{by} label {PROFILE_LABEL}={PROFILE_LABEL_ENABLED}, {}",
                    describe(cluster, config)
                ),
            },
            None => Decision::Inject {
                tool: default_tool.clone(),
                source: format!(
                    "{by} label {PROFILE_LABEL}={PROFILE_LABEL_ENABLED}, cluster default"
                ),
            },
        };
    }
    match cel_failure {
        Some((rule, error)) => Decision::Skip(SkipReason::CelFailed { rule, error }),
        None => Decision::Skip(SkipReason::NotSelected),
    }
}

/// `profile config NAME`, or `cluster-wide profile config NAMESPACE/NAME`.
fn describe(cluster: bool, config: &NsightOperatorProfileConfig) -> String {
    let name = config.metadata.name.as_deref().unwrap_or_default();
    if cluster {
        let namespace = config.metadata.namespace.as_deref().unwrap_or_default();
        format!("cluster-wide profile config {namespace}/{name}")
    } else {
        format!("profile config {name}")
    }
}

/// The rule's label and namespace selectors (those that are set) all match; a rule with no
/// selector and no CEL expression matches nothing.
fn selectors_match(
    rule: &nsight_api::InjectionRule,
    labels: &BTreeMap<String, String>,
    namespace_labels: &BTreeMap<String, String>,
) -> bool {
    if rule.label_selector.is_none()
        && rule.namespace_selector.is_none()
        && rule.cel_expression.is_none()
    {
        return false;
    }
    rule.label_selector
        .as_ref()
        .is_none_or(|s| selector::matches(s, labels))
        && rule
            .namespace_selector
            .as_ref()
            .is_none_or(|s| selector::matches(s, namespace_labels))
}

/// The marker annotation, or (if someone removed it) the tools init container.
pub fn is_injected(pod: &Pod) -> bool {
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(INJECTED_ANNOTATION));
    let has_init = pod.spec.as_ref().is_some_and(|s| {
        s.init_containers
            .iter()
            .flatten()
            .any(|c| c.name == TOOLS_INIT_CONTAINER)
    });
    annotated || has_init
}
