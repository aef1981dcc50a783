//! GPU memory operations of a report, named the way NVIDIA's memory summaries name them:
//! `CUPTI_ACTIVITY_KIND_MEMCPY` rows as `[CUDA memcpy <copy kind>]` and
//! `CUPTI_ACTIVITY_KIND_MEMSET` rows as `[CUDA memset]`. Shared by `cuda_gpu_mem_time_sum`
//! (durations) and `cuda_gpu_mem_size_sum` (bytes).
//!
//! Copy-kind labels come from `ENUM_CUDA_MEMCPY_OPER.label` (`Host-to-Device`, ...,
//! `Unified Host-to-Device`) when the report has that table; older exports have none and get
//! the names NVIDIA's reports printed for them, by CUPTI's and nsys's copy-kind numbers
//! (`[CUDA memcpy HtoD]`, ..., `[CUDA Unified Memory memcpy HtoD]`). A kind the report's table
//! lacks gets the built-in name of the same style; a kind outside both is left out with a note.
//! Memory kinds (`srcKind`, `dstKind`, `memKind`) are labelled by [`memory_kind_labels`].

use std::collections::{BTreeMap, HashMap};

use crate::{Output, Schema, Value, Window};

pub const MEMCPY_TABLE: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
pub const MEMSET_TABLE: &str = "CUPTI_ACTIVITY_KIND_MEMSET";
pub const MEMCPY_KIND_TABLE: &str = "ENUM_CUDA_MEMCPY_OPER";
/// The operation name of every memset.
pub const MEMSET_NAME: &str = "[CUDA memset]";

/// Every copy kind CUPTI (`CUpti_ActivityMemcpyKind`, 0-10) and nsys (Unified Memory, 11-13)
/// define: (kind, the `ENUM_CUDA_MEMCPY_OPER` label of 2023 and later exports, the operation
/// name older reports printed).
const COPY_KINDS: [(i64, &str, &str); 14] = [
    (0, "Unknown", "[CUDA memcpy Unknown]"),
    (1, "Host-to-Device", "[CUDA memcpy HtoD]"),
    (2, "Device-to-Host", "[CUDA memcpy DtoH]"),
    (3, "Host-to-Array", "[CUDA memcpy HtoA]"),
    (4, "Array-to-Host", "[CUDA memcpy AtoH]"),
    (5, "Array-to-Array", "[CUDA memcpy AtoA]"),
    (6, "Array-to-Device", "[CUDA memcpy AtoD]"),
    (7, "Device-to-Array", "[CUDA memcpy DtoA]"),
    (8, "Device-to-Device", "[CUDA memcpy DtoD]"),
    (9, "Host-to-Host", "[CUDA memcpy HtoH]"),
    (10, "Peer-to-Peer", "[CUDA memcpy PtoP]"),
    (
        11,
        "Unified Host-to-Device",
        "[CUDA Unified Memory memcpy HtoD]",
    ),
    (
        12,
        "Unified Device-to-Host",
        "[CUDA Unified Memory memcpy DtoH]",
    ),
    (
        13,
        "Unified Device-to-Device",
        "[CUDA Unified Memory memcpy DtoD]",
    ),
];

/// The operation name older reports (no `ENUM_CUDA_MEMCPY_OPER`) printed for a copy kind.
pub fn legacy_copy_kind_name(kind: i64) -> Option<&'static str> {
    COPY_KINDS
        .iter()
        .find(|(k, _, _)| *k == kind)
        .map(|(_, _, name)| *name)
}

/// The `ENUM_CUDA_MEMCPY_OPER` label current exports give a copy kind.
pub fn copy_kind_label(kind: i64) -> Option<&'static str> {
    COPY_KINDS
        .iter()
        .find(|(k, _, _)| *k == kind)
        .map(|(_, label, _)| *label)
}

/// The operation name of a copy with `label`: `[CUDA memcpy <label>]`.
pub fn memcpy_name(label: &str) -> String {
    format!("[CUDA memcpy {label}]")
}

pub const MEMORY_KIND_TABLE: &str = "ENUM_CUDA_MEM_KIND";

/// nsys's memory kinds (`srcKind`, `dstKind`, `memKind`), as `ENUM_CUDA_MEM_KIND.label` names
/// them. Exports without that table number them the same way (a 2022.1 export's host-to-device
/// copies from pinned memory are 1 -> 2).
const MEMORY_KINDS: [(i64, &str); 8] = [
    (0, "Pageable"),
    (1, "Pinned"),
    (2, "Device"),
    (3, "Array"),
    (4, "Managed"),
    (5, "Device Static"),
    (6, "Managed Static"),
    (7, "Unknown"),
];

/// Memory kind -> label: the report's `ENUM_CUDA_MEM_KIND` where it has one, the built-in
/// labels for the rest.
pub fn memory_kind_labels(schema: &Schema<'_>) -> Result<HashMap<i64, String>, String> {
    let mut labels = HashMap::new();
    if schema.has_table(MEMORY_KIND_TABLE) {
        let label = if schema
            .columns(MEMORY_KIND_TABLE)
            .iter()
            .any(|c| c == "label")
        {
            "coalesce(label, name)"
        } else {
            "name"
        };
        schema.report().query(
            &format!("SELECT id, {label} FROM {MEMORY_KIND_TABLE}"),
            &[],
            &mut |row| {
                if let [Value::Int(id), Value::Text(l)] = row {
                    labels.insert(*id, l.clone());
                }
                Ok(())
            },
        )?;
    }
    for (id, label) in MEMORY_KINDS {
        labels.entry(id).or_insert_with(|| label.to_owned());
    }
    Ok(labels)
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

/// copyKind -> operation name: from `ENUM_CUDA_MEMCPY_OPER` when present (kinds it lacks from
/// the built-in labels), else the names older reports printed.
pub fn copy_kind_labels(schema: &Schema<'_>) -> Result<HashMap<i64, String>, String> {
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
        for (kind, label, _) in COPY_KINDS {
            labels.entry(kind).or_insert_with(|| memcpy_name(label));
        }
    } else {
        for (kind, _, name) in COPY_KINDS {
            labels.insert(kind, name.to_owned());
        }
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_copy_kind_has_both_names() {
        let legacy: Vec<Option<&str>> = (-1..=14).map(legacy_copy_kind_name).collect();
        assert_eq!(
            legacy,
            [
                None,
                Some("[CUDA memcpy Unknown]"),
                Some("[CUDA memcpy HtoD]"),
                Some("[CUDA memcpy DtoH]"),
                Some("[CUDA memcpy HtoA]"),
                Some("[CUDA memcpy AtoH]"),
                Some("[CUDA memcpy AtoA]"),
                Some("[CUDA memcpy AtoD]"),
                Some("[CUDA memcpy DtoA]"),
                Some("[CUDA memcpy DtoD]"),
                Some("[CUDA memcpy HtoH]"),
                Some("[CUDA memcpy PtoP]"),
                Some("[CUDA Unified Memory memcpy HtoD]"),
                Some("[CUDA Unified Memory memcpy DtoH]"),
                Some("[CUDA Unified Memory memcpy DtoD]"),
                None
            ]
        );
        assert_eq!(copy_kind_label(11), Some("Unified Host-to-Device"));
        assert_eq!(copy_kind_label(0), Some("Unknown"));
        assert_eq!(copy_kind_label(14), None);
        assert_eq!(
            memcpy_name("Host-to-Device"),
            "[CUDA memcpy Host-to-Device]"
        );
    }
}
