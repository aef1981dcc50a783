//! `cuda_gpu_trace` on every report against its oracle (tests/oracle/cuda_gpu_trace.sql, run
//! in current SQLite): every kernel, memcpy and memset in the same order with every field
//! equal; unfiltered, with `--name base --timeunit usec` and with `--filter-time`.

use std::path::Path;

use nsight_analysis::Value;
use serde_json::{Map, Value as Json};

use super::common::{
    has_column, has_table,
    oracle::{run, ALL},
    reports, short, sqlite3_json,
};

const ORACLE: &str = include_str!("cuda_gpu_trace.sql");
const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
const MEMCPY: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
const MEMSET: &str = "CUPTI_ACTIVITY_KIND_MEMSET";
/// The names NVIDIA's older reports printed, by copy kind (issue 23).
const LEGACY_COPY: &str = "VALUES (0, '[CUDA memcpy Unknown]'), (1, '[CUDA memcpy HtoD]'), \
    (2, '[CUDA memcpy DtoH]'), (3, '[CUDA memcpy HtoA]'), (4, '[CUDA memcpy AtoH]'), \
    (5, '[CUDA memcpy AtoA]'), (6, '[CUDA memcpy AtoD]'), (7, '[CUDA memcpy DtoA]'), \
    (8, '[CUDA memcpy DtoD]'), (9, '[CUDA memcpy HtoH]'), (10, '[CUDA memcpy PtoP]'), \
    (11, '[CUDA Unified Memory memcpy HtoD]'), (12, '[CUDA Unified Memory memcpy DtoH]'), \
    (13, '[CUDA Unified Memory memcpy DtoD]')";
const KINDS: &str = "VALUES (0, 'Pageable'), (1, 'Pinned'), (2, 'Device'), (3, 'Array'), \
    (4, 'Managed'), (5, 'Device Static'), (6, 'Managed Static'), (7, 'Unknown')";

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Real(x), Value::Real(y)) => x == y,
        (Value::Text(x), Value::Text(y)) => x == y,
        _ => false,
    }
}

/// The oracle SQL for `report`, its placeholders filled.
fn oracle_sql(report: &Path, name_column: &str) -> String {
    let col = |table: &str, c: &str| {
        if has_column(report, table, c) {
            format!("t.\"{c}\"")
        } else {
            "NULL".to_owned()
        }
    };
    let common = |t: &str| {
        ["deviceId", "contextId", "greenContextId", "streamId"]
            .map(|c| col(t, c))
            .join(", ")
    };
    let mut events = vec![
        "SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
        NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0"
            .to_owned(),
    ];
    if has_table(report, KERNEL) {
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
        .map(|c| col(KERNEL, c))
        .join(", ");
        let named = col(KERNEL, name_column);
        events.push(format!(
            "SELECT 0, t.rowid, t.start, t.\"end\" - t.start, t.correlationId, {launch}, NULL, \
             NULL, NULL, {}, coalesce((SELECT value FROM StringIds WHERE id = {named}), \
             (SELECT value FROM StringIds WHERE id = t.demangledName), '') FROM {KERNEL} AS t",
            common(KERNEL)
        ));
    }
    if has_table(report, MEMCPY) {
        events.push(format!(
            "SELECT 1, t.rowid, t.start, t.\"end\" - t.start, t.correlationId, NULL, NULL, NULL, \
             NULL, NULL, NULL, NULL, NULL, NULL, t.bytes, t.srcKind, t.dstKind, {}, \
             (SELECT name FROM copy WHERE id = t.copyKind) FROM {MEMCPY} AS t",
            common(MEMCPY)
        ));
    }
    if has_table(report, MEMSET) {
        events.push(format!(
            "SELECT 2, t.rowid, t.start, t.\"end\" - t.start, t.correlationId, NULL, NULL, NULL, \
             NULL, NULL, NULL, NULL, NULL, NULL, t.bytes, {}, NULL, {}, '[CUDA memset]' \
             FROM {MEMSET} AS t",
            col(MEMSET, "memKind"),
            common(MEMSET)
        ));
    }
    let copy = if has_table(report, "ENUM_CUDA_MEMCPY_OPER") {
        "SELECT id, '[CUDA memcpy ' || label || ']' FROM ENUM_CUDA_MEMCPY_OPER"
    } else {
        LEGACY_COPY
    };
    let kinds = if has_table(report, "ENUM_CUDA_MEM_KIND") {
        "SELECT id, label FROM ENUM_CUDA_MEM_KIND"
    } else {
        KINDS
    };
    let gpu_id = ["id", "deviceId"]
        .into_iter()
        .find(|c| has_column(report, "TARGET_INFO_GPU", c));
    let gpus = match gpu_id {
        Some(id) => format!(
            "SELECT {id}, name FROM TARGET_INFO_GPU WHERE rowid IN \
             (SELECT min(rowid) FROM TARGET_INFO_GPU GROUP BY {id})"
        ),
        None => "SELECT NULL, NULL WHERE 0".to_owned(),
    };
    ORACLE
        .replace("@EVENTS@", &events.join(" UNION ALL "))
        .replace("@COPY@", copy)
        .replace("@KINDS@", kinds)
        .replace("@GPUS@", &gpus)
}

fn expected(o: &Map<String, Json>, unit: f64) -> Vec<Value> {
    let int = |k: &str| o[k].as_i64().map_or(Value::Null, Value::Int);
    let real = |k: &str| o[k].as_f64().map_or(Value::Null, Value::Real);
    let text = |k: &str| {
        o[k].as_str()
            .map_or(Value::Null, |s| Value::Text(s.to_owned()))
    };
    let time = |k: &str| {
        let v = o[k].as_i64().unwrap();
        if unit == 1.0 {
            Value::Int(v)
        } else {
            Value::Real(v as f64 / unit)
        }
    };
    let mut row = vec![time("start"), time("dur"), int("corr")];
    row.extend(["gx", "gy", "gz", "bx", "by", "bz", "regs"].map(int));
    row.extend(["ssmem_mb", "dsmem_mb", "bytes_mb", "mbps"].map(real));
    row.extend(["srckind", "dstkind", "device"].map(text));
    row.extend(["ctx", "green", "strm"].map(int));
    row.push(text("name"));
    row
}

fn check(report: &Path, args: &[(&str, &str)], name_column: &str, (lo, hi): (i64, i64)) -> usize {
    let unit = if args.contains(&("timeunit", "usec")) {
        1e3
    } else {
        1.0
    };
    let out = run("cuda_gpu_trace", report, args);
    let table = &out.tables[0];
    assert_eq!(table.columns.len(), 21);
    let at = format!("cuda_gpu_trace {args:?} on {}", short(report));
    for t in [KERNEL, MEMCPY, MEMSET] {
        let noted = out
            .notes
            .iter()
            .any(|n| n.contains(&format!("table {t} not in")));
        assert_eq!(noted, !has_table(report, t), "{at}: {:?}", out.notes);
    }
    let want = sqlite3_json(
        report,
        &format!(
            ".parameter set :lo {lo}\n.parameter set :hi {hi}\n{}",
            oracle_sql(report, name_column)
        ),
    );
    assert_eq!(table.rows.len(), want.len(), "{at}: row count");
    for (i, (got, want)) in table.rows.iter().zip(&want).enumerate() {
        let want = expected(want, unit);
        let equal = got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| same(a, b));
        assert!(equal, "{at}: row {i}\n   got {got:?}\n  want {want:?}");
    }
    want.len()
}

#[test]
fn cuda_gpu_trace_matches_the_oracle_on_every_report() {
    for report in reports() {
        let n = check(&report, &[], "demangledName", ALL);
        println!("cuda_gpu_trace {:<45} {n} rows", short(&report));
        // Every report in testdata ran kernels.
        assert!(n > 0, "{}", short(&report));
        let base = if has_column(&report, KERNEL, "shortName") {
            "shortName"
        } else {
            "demangledName"
        };
        check(
            &report,
            &[("name", "base"), ("timeunit", "usec")],
            base,
            ALL,
        );
        let span = sqlite3_json(
            &report,
            &format!("SELECT min(start) AS lo, max(\"end\") AS hi FROM {KERNEL}"),
        );
        let (lo, hi) = (
            span[0]["lo"].as_i64().unwrap(),
            span[0]["hi"].as_i64().unwrap(),
        );
        let (lo, hi) = (lo + (hi - lo) / 4, hi - (hi - lo) / 4);
        check(
            &report,
            &[("filter-time", &format!("{lo}/{hi}"))],
            "demangledName",
            (lo, hi),
        );
    }
}
