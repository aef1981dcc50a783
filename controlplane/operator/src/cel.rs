//! CEL injection rules: evaluates a rule's `celExpression` with the Pod bound to `object`
//! (the convention of Kubernetes admission CEL), using the `cel` interpreter with the
//! Kubernetes string and list functions (kube-cel).
//!
//! The expression must yield a bool; anything else, a parse error or an evaluation error is a
//! [`CelError`] (the rule then does not match, and the webhook warns).
//!
//! On the webhook's request path: each worker thread keeps one root context with the functions
//! registered and the programs it compiled (by expression text, bounded), so a review pays only
//! for converting the Pod and running the program. Results depend only on the expression and
//! the object.

use std::{
    cell::RefCell,
    collections::HashMap,
    panic::{catch_unwind, AssertUnwindSafe},
    rc::Rc,
};

use kube_cel::{cel, KubeCelExt};
use serde::Serialize;

/// Compiled programs kept per thread; past this the cache starts again (configs are few).
const MAX_PROGRAMS: usize = 256;

thread_local! {
    static ROOT: cel::Context<'static> = cel::Context::default().with_all();
    static PROGRAMS: RefCell<HashMap<String, Rc<Result<cel::Program, CelError>>>> =
        RefCell::new(HashMap::new());
}

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

/// Evaluates `expression` with `object` = `pod` (the Pod, typed or as JSON: the same fields).
pub fn evaluate<T: Serialize + ?Sized>(expression: &str, pod: &T) -> Result<bool, CelError> {
    // The interpreter is third-party code over user input: a panic in it must not take the
    // webhook's connection down, it is one more reason for the rule not to match.
    catch_unwind(AssertUnwindSafe(|| evaluate_inner(expression, pod)))
        .unwrap_or_else(|_| Err(CelError::Evaluate("the CEL interpreter panicked".into())))
}

/// The compiled program of `expression` (or why it does not parse), from this thread's cache.
fn program(expression: &str) -> Rc<Result<cel::Program, CelError>> {
    PROGRAMS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(found) = cache.get(expression) {
            return found.clone();
        }
        if cache.len() >= MAX_PROGRAMS {
            cache.clear();
        }
        let compiled =
            Rc::new(cel::Program::compile(expression).map_err(|e| CelError::Parse(e.to_string())));
        cache.insert(expression.to_owned(), compiled.clone());
        compiled
    })
}

fn evaluate_inner<T: Serialize + ?Sized>(expression: &str, pod: &T) -> Result<bool, CelError> {
    let program = program(expression);
    let program = program.as_ref().as_ref().map_err(Clone::clone)?;
    ROOT.with(|root| {
        let mut context = root.new_inner_scope();
        context
            .add_variable("object", pod)
            .map_err(|e| CelError::Evaluate(e.to_string()))?;
        match program.execute(&context) {
            Ok(cel::Value::Bool(b)) => Ok(b),
            Ok(other) => Err(CelError::NotBool(format!("{other:?}"))),
            Err(e) => Err(CelError::Evaluate(e.to_string())),
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use k8s_openapi::api::core::v1::Pod;
    use serde_json::{json, Value};

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
    fn a_typed_pod_reads_like_its_json() {
        let typed: Pod = serde_json::from_value(pod()).unwrap();
        for expression in [
            "object.metadata.name.startsWith('train')",
            "object.spec.containers.exists(c, c.image.contains('torch'))",
            "object.metadata.labels.team == 'ml'",
        ] {
            assert_eq!(
                evaluate(expression, &typed).unwrap(),
                evaluate(expression, &pod()).unwrap(),
                "{expression}"
            );
        }
    }

    #[test]
    fn cached_programs_see_each_object() {
        // The same expression, compiled once, over two different Pods.
        let e = "object.metadata.name == 'train-7'";
        assert!(evaluate(e, &pod()).unwrap());
        let mut other = pod();
        other["metadata"]["name"] = json!("other");
        assert!(!evaluate(e, &other).unwrap());
        assert!(evaluate(e, &pod()).unwrap());
    }

    #[test]
    fn errors_are_reported() {
        assert!(matches!(
            evaluate("object.(", &pod()),
            Err(CelError::Parse(_))
        ));
        // Cached parse errors stay errors.
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
