//! The GPU events of a report, one per kernel, memory copy and memset, with what
//! `cuda_gpu_trace` lists for each. Names are resolved here: kernels by name id (the `--name`
//! column, else the demangled one), copies by copy kind (`memops::copy_kind_labels`), memsets
//! as `[CUDA memset]`; memory kinds by `memops::memory_kind_labels`. A column a report lacks
//! reads as NULL. This module reads rows; the table is built in lib.rs.

use std::collections::{BTreeSet, HashMap};

use nsight_recipe_sdk::{
    memops::{copy_kind_labels, memory_kind_labels, MEMCPY_TABLE, MEMSET_NAME, MEMSET_TABLE},
    string_values, Schema, Value, Window,
};

pub const KERNEL_TABLE: &str = "CUPTI_ACTIVITY_KIND_KERNEL";

/// Which table an event came from, in the order ties on start are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    Kernel,
    Memcpy,
    Memset,
}

/// One event. `None` where the event has no such value (a kernel has no bytes, a copy no grid).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Event {
    pub start: i64,
    pub duration: i64,
    pub correlation: Option<i64>,
    /// gridX, gridY, gridZ, blockX, blockY, blockZ.
    pub launch: [Option<i64>; 6],
    pub registers: Option<i64>,
    pub static_shared: Option<i64>,
    pub dynamic_shared: Option<i64>,
    pub bytes: Option<i64>,
    pub src_kind: Option<String>,
    pub dst_kind: Option<String>,
    pub device: Option<i64>,
    pub context: Option<i64>,
    pub green_context: Option<i64>,
    pub stream: Option<i64>,
    /// `None` for a copy kind without a label (NVIDIA's concatenation with NULL).
    pub name: Option<String>,
}

/// `t.<column>` when the table has it, else `NULL`.
fn column(columns: &[String], name: &str) -> String {
    if columns.iter().any(|c| c == name) {
        format!("t.\"{name}\"")
    } else {
        "NULL".to_owned()
    }
}

/// The columns every event has, after start and duration: correlationId, deviceId,
/// contextId, greenContextId, streamId.
fn common(columns: &[String]) -> String {
    [
        "correlationId",
        "deviceId",
        "contextId",
        "greenContextId",
        "streamId",
    ]
    .map(|c| column(columns, c))
    .join(", ")
}

/// Reads the ints of `row` from `at` on.
fn ints<const N: usize>(row: &[Value], at: usize) -> [Option<i64>; N] {
    std::array::from_fn(|i| row.get(at + i).and_then(Value::as_int))
}

/// The rowid and the fields every event has, from `rowid, start, end` and the [`common`]
/// columns at `tail`; `None` without a start or end.
fn base(row: &[Value], tail: usize) -> Option<(i64, Event)> {
    let [rowid, start, end] = ints::<3>(row, 0);
    let [correlation, device, context, green, stream] = ints::<5>(row, tail);
    let (rowid, start, end) = (rowid?, start?, end?);
    Some((
        rowid,
        Event {
            start,
            duration: end - start,
            correlation,
            device,
            context,
            green_context: green,
            stream,
            ..Event::default()
        },
    ))
}

/// Every event inside `window`, with its source and rowid, unsorted.
pub fn read_events(
    schema: &Schema<'_>,
    name_column: &str,
    window: &Window,
) -> Result<Vec<(Source, i64, Event)>, String> {
    let report = schema.report();
    let mut events: Vec<(Source, i64, Event)> = Vec::new();
    let kinds = memory_kind_labels(schema)?;
    let kind = |k: Option<i64>| k.and_then(|k| kinds.get(&k).cloned());
    let mut kernel_names: Vec<(usize, Option<i64>, Option<i64>)> = Vec::new();
    if schema.has_table(KERNEL_TABLE) {
        let columns = schema.columns(KERNEL_TABLE);
        let launch = [
            "gridX",
            "gridY",
            "gridZ",
            "blockX",
            "blockY",
            "blockZ",
            "registersPerThread",
            "staticSharedMemory",
            "dynamicSharedMemory",
        ]
        .map(|c| column(&columns, c))
        .join(", ");
        let sql = format!(
            "SELECT t.rowid, t.start, t.\"end\", {}, {launch}, {}, {} FROM {KERNEL_TABLE} AS t \
             WHERE {}",
            common(&columns),
            column(&columns, name_column),
            column(&columns, "demangledName"),
            window.sql("t")
        );
        report.query(&sql, &[], &mut |row| {
            if let Some((rowid, mut e)) = base(row, 3) {
                let values = ints::<9>(row, 8);
                let [name, demangled] = ints::<2>(row, 17);
                e.launch = std::array::from_fn(|i| values[i]);
                [e.registers, e.static_shared, e.dynamic_shared] =
                    [values[6], values[7], values[8]];
                kernel_names.push((events.len(), name, demangled));
                events.push((Source::Kernel, rowid, e));
            }
            Ok(())
        })?;
    }
    if schema.has_table(MEMCPY_TABLE) {
        let columns = schema.columns(MEMCPY_TABLE);
        let names = copy_kind_labels(schema)?;
        let sql = format!(
            "SELECT t.rowid, t.start, t.\"end\", {}, {}, {}, {}, {} FROM {MEMCPY_TABLE} AS t \
             WHERE {}",
            common(&columns),
            column(&columns, "bytes"),
            column(&columns, "srcKind"),
            column(&columns, "dstKind"),
            column(&columns, "copyKind"),
            window.sql("t")
        );
        report.query(&sql, &[], &mut |row| {
            if let Some((rowid, mut e)) = base(row, 3) {
                let [bytes, src, dst, copy] = ints::<4>(row, 8);
                e.bytes = bytes;
                e.src_kind = kind(src);
                e.dst_kind = kind(dst);
                e.name = copy.and_then(|k| names.get(&k).cloned());
                events.push((Source::Memcpy, rowid, e));
            }
            Ok(())
        })?;
    }
    if schema.has_table(MEMSET_TABLE) {
        let columns = schema.columns(MEMSET_TABLE);
        let sql = format!(
            "SELECT t.rowid, t.start, t.\"end\", {}, {}, {} FROM {MEMSET_TABLE} AS t WHERE {}",
            common(&columns),
            column(&columns, "bytes"),
            column(&columns, "memKind"),
            window.sql("t")
        );
        report.query(&sql, &[], &mut |row| {
            if let Some((rowid, mut e)) = base(row, 3) {
                let [bytes, memory] = ints::<2>(row, 8);
                e.bytes = bytes;
                e.src_kind = kind(memory);
                e.name = Some(MEMSET_NAME.to_owned());
                events.push((Source::Memset, rowid, e));
            }
            Ok(())
        })?;
    }
    let ids: BTreeSet<i64> = kernel_names
        .iter()
        .flat_map(|&(_, n, d)| [n, d].into_iter().flatten())
        .collect();
    let strings: HashMap<i64, String> = string_values(report, &ids)?;
    for (at, name, demangled) in kernel_names {
        let lookup = |id: Option<i64>| id.and_then(|i| strings.get(&i));
        events[at].2.name = Some(
            lookup(name)
                .or_else(|| lookup(demangled))
                .cloned()
                .unwrap_or_default(),
        );
    }
    Ok(events)
}

/// GPU names by device id from `TARGET_INFO_GPU` (`id`, or `deviceId` in older exports); the
/// first row of an id when there are several.
pub fn gpu_names(schema: &Schema<'_>) -> Result<HashMap<i64, String>, String> {
    const TABLE: &str = "TARGET_INFO_GPU";
    let mut names = HashMap::new();
    if !schema.has_table(TABLE) {
        return Ok(names);
    }
    let columns = schema.columns(TABLE);
    let has = |c: &str| columns.iter().any(|have| have == c);
    let Some(id) = ["id", "deviceId"].into_iter().find(|c| has(c)) else {
        return Ok(names);
    };
    if !has("name") {
        return Ok(names);
    }
    schema.report().query(
        &format!("SELECT {id}, name FROM {TABLE} ORDER BY rowid"),
        &[],
        &mut |row| {
            if let [Value::Int(id), Value::Text(name)] = row {
                names.entry(*id).or_insert_with(|| name.clone());
            }
            Ok(())
        },
    )?;
    Ok(names)
}
