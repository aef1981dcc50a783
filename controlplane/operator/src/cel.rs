//! CEL injection rules: evaluates a rule's `celExpression` with the Pod bound to `object`
//! (the convention of Kubernetes admission CEL), using the `cel` interpreter with the
//! Kubernetes string and list functions (kube-cel).
//!
//! The expression must yield a bool; anything else, a parse error or an evaluation error is a
//! [`CelError`] (the rule then does not match, and the webhook warns).
//!
//! On the webhook's request path: each worker thread keeps one root context with the functions
//! registered and the programs it compiled (by expression text, bounded), so a review pays only
//! for converting the Pod and running the program. Converting is most of that cost (a whole
//! Pod is thousands of CEL values), so each compiled program also records which top-level
//! fields of `object` it reads ([`ObjectUse`], from its syntax tree): a rule over
//! `object.metadata` gets an `object` holding only `metadata`, built from the same
//! serialization, so it cannot tell the difference. An expression that uses `object` other
//! than through a field (`size(object)`, `object['spec']`, `object.?spec`) gets the whole Pod.
//! Results depend only on the expression and the object.

use std::{
    cell::RefCell,
    collections::{BTreeSet, HashMap},
    panic::{catch_unwind, AssertUnwindSafe},
    rc::Rc,
};

use k8s_openapi::{api::core::v1::Pod, Resource};
use kube_cel::{
    cel,
    cel::common::ast::{EntryExpr, Expr, IdedExpr},
    KubeCelExt,
};
use serde::Serialize;
use serde_json::Value;

/// Compiled programs kept per thread; past this the cache starts again (configs are few).
const MAX_PROGRAMS: usize = 256;

/// The variable a rule's expression sees the Pod as.
const OBJECT: &str = "object";

/// A compiled rule and what it reads of `object`.
struct Compiled {
    program: cel::Program,
    object: ObjectUse,
}

thread_local! {
    static ROOT: cel::Context<'static> = cel::Context::default().with_all();
    static PROGRAMS: RefCell<HashMap<String, Rc<Result<Compiled, CelError>>>> =
        RefCell::new(HashMap::new());
}

/// How an expression uses `object`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectUse {
    /// Only through these top-level fields (`object.metadata`, `has(object.spec)`).
    Fields(BTreeSet<String>),
    /// As a value of its own: it needs every field.
    Whole,
}

impl ObjectUse {
    /// What the parsed `expression` reads of `object`.
    fn of(expression: &IdedExpr) -> Self {
        let mut fields = BTreeSet::new();
        if reads_only_fields(expression, &mut fields) {
            Self::Fields(fields)
        } else {
            Self::Whole
        }
    }
}

/// Collects the fields selected directly on `object`; false when `object` appears anywhere
/// else (then the whole object is needed). A comprehension variable that shadows `object` only
/// makes the answer larger than needed, never smaller.
fn reads_only_fields(e: &IdedExpr, fields: &mut BTreeSet<String>) -> bool {
    match &e.expr {
        Expr::Ident(name) => name != OBJECT,
        Expr::Select(select) => match &select.operand.expr {
            Expr::Ident(name) if name == OBJECT => {
                fields.insert(select.field.clone());
                true
            }
            _ => reads_only_fields(&select.operand, fields),
        },
        Expr::Call(call) => {
            let target = call.target.iter().map(|t| &**t);
            all_read_only_fields(target.chain(&call.args), fields)
        }
        Expr::Comprehension(c) => all_read_only_fields(
            [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ],
            fields,
        ),
        Expr::List(list) => all_read_only_fields(&list.elements, fields),
        Expr::Map(map) => all_read_only_fields(
            map.entries.iter().flat_map(|e| entry_exprs(&e.expr)),
            fields,
        ),
        Expr::Struct(st) => {
            all_read_only_fields(st.entries.iter().flat_map(|e| entry_exprs(&e.expr)), fields)
        }
        Expr::Literal(_) | Expr::Unspecified => true,
    }
}

fn all_read_only_fields<'a>(
    es: impl IntoIterator<Item = &'a IdedExpr>,
    fields: &mut BTreeSet<String>,
) -> bool {
    es.into_iter().all(|e| reads_only_fields(e, fields))
}

fn entry_exprs(entry: &EntryExpr) -> Vec<&IdedExpr> {
    match entry {
        EntryExpr::StructField(field) => vec![&field.value],
        EntryExpr::MapEntry(entry) => vec![&entry.key, &entry.value],
    }
}

/// What CEL can bind as `object`: serializable as a whole, and field by field exactly as the
/// whole would serialize them (an absent field is `None`, not null).
pub trait CelObject: Serialize {
    /// The top-level field `name` as a CEL value; `None` when the object has no such field.
    fn field(&self, name: &str) -> Result<Option<cel::Value>, cel::SerializationError>;
}

impl CelObject for Pod {
    fn field(&self, name: &str) -> Result<Option<cel::Value>, cel::SerializationError> {
        // As k8s-openapi's `Serialize` for Pod writes them.
        Ok(match name {
            "apiVersion" => Some(cel::to_value(Pod::API_VERSION)?),
            "kind" => Some(cel::to_value(Pod::KIND)?),
            "metadata" => Some(cel::to_value(&self.metadata)?),
            "spec" => self.spec.as_ref().map(cel::to_value).transpose()?,
            "status" => self.status.as_ref().map(cel::to_value).transpose()?,
            _ => None,
        })
    }
}

impl CelObject for Value {
    fn field(&self, name: &str) -> Result<Option<cel::Value>, cel::SerializationError> {
        self.get(name).map(cel::to_value).transpose()
    }
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
pub fn evaluate<T: CelObject>(expression: &str, pod: &T) -> Result<bool, CelError> {
    // The interpreter is third-party code over user input: a panic in it must not take the
    // webhook's connection down, it is one more reason for the rule not to match.
    catch_unwind(AssertUnwindSafe(|| evaluate_inner(expression, pod)))
        .unwrap_or_else(|_| Err(CelError::Evaluate("the CEL interpreter panicked".into())))
}

/// The compiled program of `expression` (or why it does not parse), from this thread's cache.
fn program(expression: &str) -> Rc<Result<Compiled, CelError>> {
    PROGRAMS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(found) = cache.get(expression) {
            return found.clone();
        }
        if cache.len() >= MAX_PROGRAMS {
            cache.clear();
        }
        let compiled = Rc::new(
            cel::Program::compile(expression)
                .map(|program| Compiled {
                    object: ObjectUse::of(program.expression()),
                    program,
                })
                .map_err(|e| CelError::Parse(e.to_string())),
        );
        cache.insert(expression.to_owned(), compiled.clone());
        compiled
    })
}

fn evaluate_inner<T: CelObject>(expression: &str, pod: &T) -> Result<bool, CelError> {
    let compiled = program(expression);
    let compiled = compiled.as_ref().as_ref().map_err(Clone::clone)?;
    let object = bind(&compiled.object, pod).map_err(|e| CelError::Evaluate(e.to_string()))?;
    execute(&compiled.program, object)
}

/// Runs `program` with `object` bound.
fn execute(program: &cel::Program, object: cel::Value) -> Result<bool, CelError> {
    ROOT.with(|root| {
        let mut context = root.new_inner_scope();
        context.add_variable_from_value(OBJECT, object);
        match program.execute(&context) {
            Ok(cel::Value::Bool(b)) => Ok(b),
            Ok(other) => Err(CelError::NotBool(format!("{other:?}"))),
            Err(e) => Err(CelError::Evaluate(e.to_string())),
        }
    })
}

/// `pod` as the expression needs it: the fields it reads, or all of it.
fn bind<T: CelObject>(uses: &ObjectUse, pod: &T) -> Result<cel::Value, cel::SerializationError> {
    match uses {
        ObjectUse::Whole => cel::to_value(pod),
        ObjectUse::Fields(names) => {
            let mut fields = HashMap::with_capacity(names.len());
            for name in names {
                if let Some(value) = pod.field(name)? {
                    fields.insert(name.clone(), value);
                }
            }
            Ok(fields.into())
        }
    }
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
    fn an_expression_reads_only_the_fields_it_names() {
        let uses = |e: &str| ObjectUse::of(cel::Program::compile(e).unwrap().expression());
        let fields =
            |names: &[&str]| ObjectUse::Fields(names.iter().map(|n| (*n).to_owned()).collect());
        assert_eq!(
            uses("object.metadata.name.startsWith('gpu-job-')"),
            fields(&["metadata"])
        );
        assert_eq!(
            uses("has(object.spec) && object.metadata.labels.team == 'ml'"),
            fields(&["metadata", "spec"])
        );
        assert_eq!(
            uses("object.spec.containers.exists(c, c.image.contains('cuda'))"),
            fields(&["spec"])
        );
        assert_eq!(uses("1 == 1"), fields(&[]));
        for whole in [
            "size(object) > 0",
            "object['spec'].containers.size() == 1",
            "[object].size() == 1",
            "{'o': object}.o.kind == 'Pod'",
        ] {
            assert_eq!(uses(whole), ObjectUse::Whole, "{whole}");
        }
    }

    #[test]
    fn the_fields_alone_answer_like_the_whole_pod() {
        let mut json = pod();
        json["apiVersion"] = json!("v1");
        json["kind"] = json!("Pod");
        json["metadata"]["annotations"] = json!({"a": "b"});
        json["spec"]["containers"][0]["env"] = json!([{"name": "X", "value": "1"}]);
        let typed: Pod = serde_json::from_value(json.clone()).unwrap();
        for expression in [
            "object.metadata.name.startsWith('train')",
            "object.kind == 'Pod' && object.apiVersion == 'v1'",
            "has(object.status)",
            "has(object.spec) && object.spec.containers.exists(c, c.env.exists(e, e.name == 'X'))",
            "object.metadata.annotations.a == 'b'",
            "object.spec.containers.map(c, c.name) == ['main']",
            "[1, 2].exists(object, object == 2)",
            "size(object) == 3",
        ] {
            let program = cel::Program::compile(expression).unwrap();
            let uses = ObjectUse::of(program.expression());
            let whole = execute(&program, bind(&ObjectUse::Whole, &typed).unwrap());
            let part = execute(&program, bind(&uses, &typed).unwrap());
            assert_eq!(part, whole, "{expression} ({uses:?})");
            let part_json = execute(&program, bind(&uses, &json).unwrap());
            assert_eq!(part_json, whole, "{expression} as JSON");
        }
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
