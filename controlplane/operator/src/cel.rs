//! CEL injection rules: evaluates a rule's `celExpression` with the Pod bound to `object`
//! (the convention of Kubernetes admission CEL), using the `cel` interpreter with the
//! Kubernetes string and list functions (kube-cel).
//!
//! Pure. The expression must yield a bool; anything else, a parse error or an evaluation error
//! is an [`CelError`] (the rule then does not match, and the webhook warns).

use std::panic::{catch_unwind, AssertUnwindSafe};

use kube_cel::{cel, KubeCelExt};
use serde_json::Value;

/// Why a CEL rule could not be decided.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    #[error("does not parse: {0}")]
    Parse(String),
    #[error("failed to evaluate: {0}")]
    Evaluate(String),
    #[error("yields {0}, not a bool")]
    NotBool(String),
}

/// Evaluates `expression` with `object` = `pod` (the Pod as JSON).
pub fn evaluate(expression: &str, pod: &Value) -> Result<bool, CelError> {
    // The interpreter is third-party code over user input: a panic in it must not take the
    // webhook's connection down, it is one more reason for the rule not to match.
    catch_unwind(AssertUnwindSafe(|| evaluate_inner(expression, pod)))
        .unwrap_or_else(|_| Err(CelError::Evaluate("the CEL interpreter panicked".into())))
}

fn evaluate_inner(expression: &str, pod: &Value) -> Result<bool, CelError> {
    let program = cel::Program::compile(expression).map_err(|e| CelError::Parse(e.to_string()))?;
    let mut context = cel::Context::default().with_all();
    context
        .add_variable("object", pod.clone())
        .map_err(|e| CelError::Evaluate(e.to_string()))?;
    match program.execute(&context) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(CelError::NotBool(format!("{other:?}"))),
        Err(e) => Err(CelError::Evaluate(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use serde_json::json;

    use super::*;

    fn pod() -> Value {
        json!({"metadata": {"name": "train-7", "labels": {"team": "ml"}},
               "spec": {"containers": [{"name": "main", "image": "pytorch:2"}]}})
    }

    #[test]
    fn expressions_over_the_pod() {
        assert!(evaluate("object.metadata.name.startsWith('train')", &pod()).unwrap());
        assert!(evaluate("object.spec.containers.size() == 1", &pod()).unwrap());
        assert!(evaluate("object.metadata.labels.team == 'ml'", &pod()).unwrap());
        assert!(!evaluate(
            "object.spec.containers.exists(c, c.image.contains('cuda'))",
            &pod()
        )
        .unwrap());
    }

    #[test]
    fn errors_are_reported() {
        assert!(matches!(
            evaluate("object.(", &pod()),
            Err(CelError::Parse(_))
        ));
        assert!(matches!(
            evaluate("object.metadata.name", &pod()),
            Err(CelError::NotBool(_))
        ));
        assert!(matches!(
            evaluate("object.nope.deeper == 1", &pod()),
            Err(CelError::Evaluate(_))
        ));
    }
}
