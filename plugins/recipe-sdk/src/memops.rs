//! GPU memory operations of a report, named the way NVIDIA's memory summaries name them:
//! `CUPTI_ACTIVITY_KIND_MEMCPY` rows as `[CUDA memcpy <copy kind>]` and
//! `CUPTI_ACTIVITY_KIND_MEMSET` rows as `[CUDA memset]`. Shared by `cuda_gpu_mem_time_sum`
//! (durations) and `cuda_gpu_mem_size_sum` (bytes).
//!
//! Copy-kind labels come from `ENUM_CUDA_MEMCPY_OPER.label` (`Host-to-Device`, ...) when the
//! report has that table; older exports have none and get CUPTI's short names by number
//! (`HtoD`, `DtoH`, ...). A copy kind without a label is left out with a note.

use std::collections::{BTreeMap, HashMap};

use crate::{Output, Schema, Value, Window};

pub const MEMCPY_TABLE: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
pub const MEMSET_TABLE: &str = "CUPTI_ACTIVITY_KIND_MEMSET";
pub const MEMCPY_KIND_TABLE: &str = "ENUM_CUDA_MEMCPY_OPER";
/// The operation name of every memset.
pub const MEMSET_NAME: &str = "[CUDA memset]";

/// CUPTI's short copy-kind names, for exports without `ENUM_CUDA_MEMCPY_OPER`.
pub fn legacy_copy_kind_label(kind: i64) -> Option<&'static str> {
    Some(match kind {
        1 => "HtoD",
        2 => "DtoH",
        3 => "HtoA",
        4 => "AtoH",
        5 => "AtoA",
        6 => "AtoD",
        7 => "DtoA",
        8 => "DtoD",
        9 => "HtoH",
        10 => "PtoP",
        _ => return None,
    })
}

/// The operation name of a copy with `label`: `[CUDA memcpy <label>]`.
pub fn memcpy_name(label: &str) -> String {
    format!("[CUDA memcpy {label}]")
}

/// The durations (ns) and sizes (bytes) of the operations of one name, in the same order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemOps {
    pub durations: Vec<i64>,
    pub bytes: Vec<i64>,
}

/// Every memory copy and memset inside `window`, by operation name. Missing tables, columns
/// and labels become notes in `out`; `None` when the report has neither table (or neither
/// has the columns needed), so the recipe shows an empty table.
pub fn memory_operations(
    schema: &Schema<'_>,
    window: &Window,
    out: &mut Output,
) -> Result<Option<BTreeMap<String, MemOps>>, String> {
    let needed = ["start", "end", "bytes"];
    let memcpy = schema.require(
        out,
        MEMCPY_TABLE,
        &["start", "end", "bytes", "copyKind"],
        "the profile has no CUDA memory copies",
    );
    let memset = schema.require(
        out,
        MEMSET_TABLE,
        &needed,
        "the profile has no CUDA memsets",
    );
    if memcpy.is_none() && memset.is_none() {
        return Ok(None);
    }
    let report = schema.report();
    let mut ops: BTreeMap<String, MemOps> = BTreeMap::new();
    let mut incomplete = 0u64;
    let mut push =
        |ops: &mut BTreeMap<String, MemOps>, name: &str, d: &Value, b: &Value| match (d, b) {
            (Value::Int(d), Value::Int(b)) => {
                let e = ops.entry(name.to_owned()).or_default();
                e.durations.push(*d);
                e.bytes.push(*b);
            }
            _ => incomplete += 1,
        };
    if memcpy.is_some() {
        let labels = copy_kind_labels(schema)?;
        let mut unlabelled: BTreeMap<i64, u64> = BTreeMap::new();
        let sql = format!(
            "SELECT m.copyKind, m.\"end\" - m.start, m.bytes FROM {MEMCPY_TABLE} AS m WHERE {}",
            window.sql("m")
        );
        report.query(&sql, &[], &mut |row| {
            let [kind, d, b] = row else {
                return Err(format!("unexpected row from {MEMCPY_TABLE}: {row:?}"));
            };
            let kind = kind.as_int().unwrap_or(-1);
            match labels.get(&kind) {
                Some(name) => push(&mut ops, name, d, b),
                None => *unlabelled.entry(kind).or_default() += 1,
            }
            Ok(())
        })?;
        for (kind, n) in unlabelled {
            out.note(format!(
                "{n} memory copies of copyKind {kind} have no label in this report and are left out"
            ));
        }
    }
    if memset.is_some() {
        let sql = format!(
            "SELECT s.\"end\" - s.start, s.bytes FROM {MEMSET_TABLE} AS s WHERE {}",
            window.sql("s")
        );
        report.query(&sql, &[], &mut |row| {
            let [d, b] = row else {
                return Err(format!("unexpected row from {MEMSET_TABLE}: {row:?}"));
            };
            push(&mut ops, MEMSET_NAME, d, b);
            Ok(())
        })?;
    }
    if incomplete > 0 {
        out.note(format!(
            "{incomplete} memory operations have no start, end or size and are left out"
        ));
    }
    Ok(Some(ops))
}

/// copyKind -> operation name, from `ENUM_CUDA_MEMCPY_OPER` when present, else CUPTI's numbers.
fn copy_kind_labels(schema: &Schema<'_>) -> Result<HashMap<i64, String>, String> {
    let mut labels = HashMap::new();
    if schema.has_table(MEMCPY_KIND_TABLE) {
        let columns = schema.columns(MEMCPY_KIND_TABLE);
        let label = if columns.iter().any(|c| c == "label") {
            "coalesce(label, name)"
        } else {
            "name"
        };
        schema.report().query(
            &format!("SELECT id, {label} FROM {MEMCPY_KIND_TABLE}"),
            &[],
            &mut |row| {
                if let [Value::Int(id), Value::Text(label)] = row {
                    labels.insert(*id, memcpy_name(label));
                }
                Ok(())
            },
        )?;
    } else {
        for kind in 1..=10 {
            if let Some(label) = legacy_copy_kind_label(kind) {
                labels.insert(kind, memcpy_name(label));
            }
        }
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_labels_follow_cupti_numbers() {
        let all: Vec<Option<&str>> = (0..=11).map(legacy_copy_kind_label).collect();
        assert_eq!(
            all,
            [
                None,
                Some("HtoD"),
                Some("DtoH"),
                Some("HtoA"),
                Some("AtoH"),
                Some("AtoA"),
                Some("AtoD"),
                Some("DtoA"),
                Some("DtoD"),
                Some("HtoH"),
                Some("PtoP"),
                None
            ]
        );
        assert_eq!(
            memcpy_name("Host-to-Device"),
            "[CUDA memcpy Host-to-Device]"
        );
    }
}
