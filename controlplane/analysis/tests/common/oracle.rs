//! The summary recipes and their oracles (SQL in tests/oracle/, run in current SQLite), and
//! the comparison of a recipe's table with an oracle's rows: the same rows in the same order,
//! integers equal, each rounded value exactly the double nearest to the oracle's value.

use std::path::Path;

use nsight_analysis::{RecipeOutput, Table, Value};

use super::{has_table, recipe, short, sqlite3_json};

/// What a summary's numbers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Time (%), times in the time unit (ns: Total, Min, Max integers).
    Time,
    /// Sizes in MB (1e6 bytes, rounded to three decimals), no Time (%).
    Size,
}

/// One summary recipe and its oracle.
pub struct Case {
    pub recipe: &'static str,
    pub oracle: &'static str,
    /// The tables the recipe reads; each one a report lacks must be named in a note, and a
    /// report with none of them gives an empty table.
    pub tables: &'static [&'static str],
    /// The JSON keys of the label columns, in column order.
    pub labels: &'static [&'static str],
    pub kind: Kind,
    /// Fills the oracle's placeholders for one report.
    pub fill: fn(&Path, &str) -> String,
}

fn as_is(_: &Path, sql: &str) -> String {
    sql.to_owned()
}

fn demangled(_: &Path, sql: &str) -> String {
    sql.replace("NAME_COLUMN", "demangledName")
}

/// `@LABELS@` and `@OPS@` of tests/oracle/cuda_gpu_mem_sum.sql for `report`.
fn mem_ops(report: &Path, sql: &str) -> String {
    // What NVIDIA's reports printed for exports without ENUM_CUDA_MEMCPY_OPER: CUPTI's copy
    // kinds 0-10 and nsys's Unified Memory kinds 11-13 (issue 23).
    const LEGACY: &str = "VALUES (0, '[CUDA memcpy Unknown]'), (1, '[CUDA memcpy HtoD]'), \
        (2, '[CUDA memcpy DtoH]'), (3, '[CUDA memcpy HtoA]'), (4, '[CUDA memcpy AtoH]'), \
        (5, '[CUDA memcpy AtoA]'), (6, '[CUDA memcpy AtoD]'), (7, '[CUDA memcpy DtoA]'), \
        (8, '[CUDA memcpy DtoD]'), (9, '[CUDA memcpy HtoH]'), (10, '[CUDA memcpy PtoP]'), \
        (11, '[CUDA Unified Memory memcpy HtoD]'), (12, '[CUDA Unified Memory memcpy DtoH]'), \
        (13, '[CUDA Unified Memory memcpy DtoD]')";
    let labels = if has_table(report, "ENUM_CUDA_MEMCPY_OPER") {
        "SELECT id, '[CUDA memcpy ' || label || ']' FROM ENUM_CUDA_MEMCPY_OPER"
    } else {
        LEGACY
    };
    let mut parts = vec!["SELECT NULL, NULL, NULL, NULL WHERE 0".to_owned()];
    if has_table(report, "CUPTI_ACTIVITY_KIND_MEMCPY") {
        parts.push(
            "SELECT l.name, m.start, m.\"end\", m.bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY AS m \
             JOIN labels AS l ON l.id = m.copyKind"
                .to_owned(),
        );
    }
    if has_table(report, "CUPTI_ACTIVITY_KIND_MEMSET") {
        parts.push(
            "SELECT '[CUDA memset]', start, \"end\", bytes FROM CUPTI_ACTIVITY_KIND_MEMSET"
                .to_owned(),
        );
    }
    sql.replace("@LABELS@", labels)
        .replace("@OPS@", &parts.join(" UNION ALL "))
}

fn mem_time(report: &Path, sql: &str) -> String {
    mem_ops(report, sql).replace("@VALUE@", "dur")
}

fn mem_size(report: &Path, sql: &str) -> String {
    mem_ops(report, sql).replace("@VALUE@", "bytes")
}

const MEM_TABLES: &[&str] = &["CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"];

/// `@OPS@` of tests/oracle/cuda_api_gpu_sum.sql for `report`: (category, name, dur) of the
/// calls, kernels, memcpys and memsets it has, wholly inside [:lo, :hi].
fn api_gpu_ops(report: &Path, sql: &str) -> String {
    let inside = "start >= :lo AND \"end\" <= :hi";
    let mut parts = vec!["SELECT NULL, NULL, NULL WHERE 0".to_owned()];
    if has_table(report, "CUPTI_ACTIVITY_KIND_RUNTIME") {
        parts.push(format!(
            "SELECT 'CUDA_API', CASE WHEN length(s.value) >= 6 AND substr(s.value, -6, 2) = '_v' \
             THEN substr(s.value, 1, length(s.value) - 6) ELSE s.value END, \"end\" - start \
             FROM CUPTI_ACTIVITY_KIND_RUNTIME JOIN StringIds AS s ON s.id = nameId \
             WHERE eventClass IS NOT 67 AND {inside}"
        ));
    }
    if has_table(report, "CUPTI_ACTIVITY_KIND_KERNEL") {
        parts.push(format!(
            "SELECT 'CUDA_KERNEL', coalesce((SELECT value FROM StringIds \
             WHERE id = demangledName), ''), \"end\" - start FROM CUPTI_ACTIVITY_KIND_KERNEL \
             WHERE {inside}"
        ));
    }
    // The memory summaries' rows (mem_ops), named by their copy-kind labels.
    let mem = mem_ops(report, "@OPS@");
    let labels = mem_ops(report, "@LABELS@");
    if MEM_TABLES.iter().any(|t| has_table(report, t)) {
        parts.push(format!(
            "SELECT 'MEMORY_OPER', name, \"end\" - start FROM (WITH labels(id, name) AS \
             ({labels}), ops(name, start, \"end\", bytes) AS ({mem}) SELECT * FROM ops) \
             WHERE {inside} AND bytes IS NOT NULL"
        ));
    }
    sql.replace("@OPS@", &parts.join(" UNION ALL "))
}

pub const NVTX: Case = Case {
    recipe: "nvtx_sum",
    oracle: include_str!("../oracle/nvtx_sum.sql"),
    tables: &["NVTX_EVENTS"],
    labels: &["style", "name"],
    kind: Kind::Time,
    fill: as_is,
};
pub const KERN: Case = Case {
    recipe: "cuda_gpu_kern_sum",
    oracle: include_str!("../oracle/cuda_gpu_kern_sum.sql"),
    tables: &["CUPTI_ACTIVITY_KIND_KERNEL"],
    labels: &["name"],
    kind: Kind::Time,
    fill: demangled,
};
pub const API: Case = Case {
    recipe: "cuda_api_sum",
    oracle: include_str!("../oracle/cuda_api_sum.sql"),
    tables: &["CUPTI_ACTIVITY_KIND_RUNTIME"],
    labels: &["name"],
    kind: Kind::Time,
    fill: as_is,
};
pub const MEM_TIME: Case = Case {
    recipe: "cuda_gpu_mem_time_sum",
    oracle: include_str!("../oracle/cuda_gpu_mem_sum.sql"),
    tables: MEM_TABLES,
    labels: &["name"],
    kind: Kind::Time,
    fill: mem_time,
};
pub const MEM_SIZE: Case = Case {
    recipe: "cuda_gpu_mem_size_sum",
    oracle: include_str!("../oracle/cuda_gpu_mem_sum.sql"),
    tables: MEM_TABLES,
    labels: &["name"],
    kind: Kind::Size,
    fill: mem_size,
};
pub const OSRT: Case = Case {
    recipe: "osrt_sum",
    oracle: include_str!("../oracle/osrt_sum.sql"),
    tables: &["OSRT_API"],
    labels: &["name"],
    kind: Kind::Time,
    fill: as_is,
};

pub const API_GPU: Case = Case {
    recipe: "cuda_api_gpu_sum",
    oracle: include_str!("../oracle/cuda_api_gpu_sum.sql"),
    tables: &[
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
    ],
    labels: &["category", "name"],
    kind: Kind::Time,
    fill: api_gpu_ops,
};

/// Every summary recipe.
pub const STATS: [&Case; 7] = [&NVTX, &KERN, &API, &MEM_TIME, &MEM_SIZE, &OSRT, &API_GPU];
/// The summaries with time columns (`--timeunit`).
pub const TIMED: [&Case; 6] = [&NVTX, &KERN, &API, &MEM_TIME, &OSRT, &API_GPU];

/// The whole clock: every event is inside.
pub const ALL: (i64, i64) = (i64::MIN, i64::MAX);

/// Runs `recipe_name` on `report` with `args` through the shared host.
pub fn run(recipe_name: &str, report: &Path, args: &[(&str, &str)]) -> RecipeOutput {
    let args: Vec<(String, String)> = args
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    super::host()
        .run(&recipe(recipe_name), report, &args)
        .unwrap_or_else(|e| panic!("{recipe_name} on {}: {e:?}", short(report)))
}

/// The oracle's rows for `report` with the window `[lo, hi]` bound to `:lo` and `:hi`.
pub fn oracle_rows(
    case: &Case,
    report: &Path,
    sql: &str,
    (lo, hi): (i64, i64),
) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let sql = format!(
        ".parameter set :lo {lo}\n.parameter set :hi {hi}\n{}",
        (case.fill)(report, sql)
    );
    sqlite3_json(report, &sql)
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Real(x), Value::Real(y)) => x == y,
        (Value::Text(x), Value::Text(y)) => x == y,
        _ => false,
    }
}

/// The row the recipe must produce for one oracle row. `unit`: ns per time unit (1 for nsec,
/// where Total, Min and Max stay integers); ignored for sizes, which are always MB.
pub fn expected_row(
    oracle: &serde_json::Map<String, serde_json::Value>,
    case: &Case,
    unit: f64,
) -> Vec<Value> {
    let int = |k: &str| {
        oracle[k]
            .as_i64()
            .unwrap_or_else(|| panic!("{k} in {oracle:?}"))
    };
    let tenths = |k: &str| int(k) as f64 / 10.0;
    let mut row = match case.kind {
        Kind::Time => {
            let whole = |k: &str| {
                if unit == 1.0 {
                    Value::Int(int(k))
                } else {
                    Value::Real(int(k) as f64 / unit)
                }
            };
            vec![
                if oracle["pct10"].is_null() {
                    Value::Null
                } else {
                    Value::Real(tenths("pct10"))
                },
                whole("total"),
                Value::Int(int("num")),
                Value::Real(tenths("avg10") / unit),
                Value::Real(tenths("med10") / unit),
                whole("min"),
                whole("max"),
                Value::Real(tenths("sd10") / unit),
            ]
        }
        Kind::Size => {
            let mb = |k: &str| {
                Value::Real(
                    oracle[k]
                        .as_f64()
                        .unwrap_or_else(|| panic!("{k} in {oracle:?}")),
                )
            };
            vec![
                mb("total_mb"),
                Value::Int(int("num")),
                mb("avg_mb"),
                mb("med_mb"),
                mb("min_mb"),
                mb("max_mb"),
                mb("sd_mb"),
            ]
        }
    };
    row.extend(
        case.labels
            .iter()
            .map(|k| Value::Text(oracle[*k].as_str().unwrap().to_owned())),
    );
    row
}

/// Asserts that `table` equals the oracle's rows for the window, row by row; returns the row
/// count.
pub fn assert_matches(
    case: &Case,
    report: &Path,
    table: &Table,
    oracle_sql: &str,
    window: (i64, i64),
    unit: f64,
) -> usize {
    let oracle = oracle_rows(case, report, oracle_sql, window);
    let at = format!("{} on {} in {window:?}", case.recipe, short(report));
    assert_eq!(table.rows.len(), oracle.len(), "{at}: row count");
    for (i, (row, want)) in table.rows.iter().zip(&oracle).enumerate() {
        let want = expected_row(want, case, unit);
        assert_eq!(row.len(), want.len(), "{at}: row {i} width");
        let equal = row.iter().zip(&want).all(|(a, b)| same(a, b));
        assert!(equal, "{at}: row {i}\n   got {row:?}\n  want {want:?}");
    }
    oracle.len()
}

/// Checks one run of `case` on `report`: the notes for missing tables, and the rows against
/// the oracle in `window`. Returns the row count (0 when the report has none of the tables).
pub fn check_output(
    case: &Case,
    report: &Path,
    out: &RecipeOutput,
    window: (i64, i64),
    unit: f64,
) -> usize {
    assert_eq!(out.tables.len(), 1, "{}: {:?}", short(report), out.notes);
    let table = &out.tables[0];
    assert_eq!(table.name, case.recipe);
    let mut present = 0;
    for t in case.tables {
        if has_table(report, t) {
            present += 1;
            continue;
        }
        let note = format!("table {t} not in this report");
        assert!(
            out.notes.iter().any(|n| n.contains(&note)),
            "{} on {}: expected the note {note:?}, got {:?}",
            case.recipe,
            short(report),
            out.notes
        );
    }
    if present == 0 {
        assert!(table.rows.is_empty());
        return 0;
    }
    assert_matches(case, report, table, case.oracle, window, unit)
}
