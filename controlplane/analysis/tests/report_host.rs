//! The host side of the `report` import: which files open, which statements run, and the
//! bounds on them. Tested both directly on `ReportDb` (the function the import calls) and
//! through a guest (the `sql` recipe component, which passes its `--query` to the host).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

mod common;

use std::{path::PathBuf, process::Command, time::Duration};

use common::{recipe, testdata_dir};
use nsight_analysis::{
    Limits, QueryError, QueryLimits, RecipeHost, RecipeHostError, ReportDb, ReportError, Value,
};
use nsight_e2e::TempDir;

fn mock() -> PathBuf {
    testdata_dir().join("nsys-ai/mock.sqlite")
}

/// A copy of the small export that a test may try (and fail) to change.
fn scratch_copy(dir: &TempDir) -> PathBuf {
    let path = dir.path().join("mock.sqlite");
    std::fs::copy(mock(), &path).unwrap();
    path
}

fn args(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The full error chain, for messages that name the cause.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

#[test]
fn a_file_that_is_not_sqlite_is_a_clear_error() {
    let dir = TempDir::new("not-sqlite");
    let path = dir.path().join("report.sqlite");
    std::fs::write(&path, b"this is a text file, not a database\n".repeat(200)).unwrap();
    let err = common::host()
        .run(&recipe("nvtx_sum"), &path, &[])
        .unwrap_err();
    assert!(
        matches!(
            err,
            RecipeHostError::OpenReport {
                source: ReportError::NotADatabase(_),
                ..
            }
        ),
        "{err:?}"
    );
    let text = chain(&err);
    assert!(
        text.contains("report.sqlite") && text.contains("not a SQLite database"),
        "{text}"
    );
}

#[test]
fn a_missing_file_is_a_clear_error_and_is_not_created() {
    let dir = TempDir::new("missing-report");
    let path = dir.path().join("absent.sqlite");
    let err = common::host()
        .run(&recipe("cuda_api_sum"), &path, &[])
        .unwrap_err();
    assert!(
        matches!(
            err,
            RecipeHostError::OpenReport {
                source: ReportError::Open(_),
                ..
            }
        ),
        "{err:?}"
    );
    assert!(chain(&err).contains("absent.sqlite"));
    assert!(!path.exists());
}

#[test]
fn a_sqlite_file_that_is_not_an_nsys_export_gives_notes() {
    let dir = TempDir::new("not-nsys");
    let path = dir.path().join("other.sqlite");
    let status = Command::new("sqlite3")
        .arg(&path)
        .arg("CREATE TABLE people(name TEXT, age INTEGER); INSERT INTO people VALUES ('a', 1);")
        .status()
        .unwrap();
    assert!(status.success());
    for (name, table) in [
        ("nvtx_sum", "NVTX_EVENTS"),
        ("cuda_gpu_kern_sum", "CUPTI_ACTIVITY_KIND_KERNEL"),
        ("cuda_api_sum", "CUPTI_ACTIVITY_KIND_RUNTIME"),
        ("cuda_gpu_mem_time_sum", "CUPTI_ACTIVITY_KIND_MEMCPY"),
        ("osrt_sum", "OSRT_API"),
    ] {
        let out = common::host().run(&recipe(name), &path, &[]).unwrap();
        let notes = out.notes.join("\n");
        assert!(
            notes.contains("does not look like an Nsight Systems"),
            "{name}: {notes}"
        );
        assert!(
            notes.contains(&format!("table {table} not in this report")),
            "{name}: {notes}"
        );
        assert_eq!(out.tables.len(), 1);
        assert!(out.tables[0].rows.is_empty());
        assert_eq!(out.tables[0].columns[1].name, "Total Time (ns)");
    }
}

#[test]
fn write_statements_from_a_recipe_are_refused() {
    let dir = TempDir::new("write-refused");
    let path = scratch_copy(&dir);
    let before = std::fs::read(&path).unwrap();
    let host = common::host();
    let sql = recipe("sql");
    for (statement, want) in [
        ("DELETE FROM StringIds", "not read-only"),
        (
            "INSERT INTO StringIds VALUES (999999, 'x')",
            "not read-only",
        ),
        ("UPDATE StringIds SET value = 'x'", "not read-only"),
        ("CREATE TABLE evil(a)", "not read-only"),
        ("DROP TABLE StringIds", "not read-only"),
        ("PRAGMA query_only = 0", "not read-only"),
        ("PRAGMA journal_mode = DELETE", "not read-only"),
        ("ATTACH DATABASE 'other.sqlite' AS other", "may not ATTACH"),
        ("PRAGMA main.query_only = OFF", "not read-only"),
        ("PRAGMA writable_schema = 1", "not read-only"),
        ("SELECT 1; DELETE FROM StringIds", "only one statement"),
        // Where the service keeps its files is not the user's business (issue 22, item 9).
        ("PRAGMA database_list", "file paths"),
        ("PRAGMA main.database_list", "file paths"),
        ("SELECT file FROM pragma_database_list", "file paths"),
        ("SELECT * FROM PRAGMA_DATABASE_LIST()", "file paths"),
        ("PRAGMA temp_store_directory", "file paths"),
    ] {
        let err = match host.run(&sql, &path, &args(&[("query", statement)])) {
            Ok(out) => panic!("{statement} was allowed: {out:?}"),
            Err(e) => e,
        };
        let text = err.to_string();
        assert!(
            matches!(err, RecipeHostError::Recipe(_)) && text.contains(want),
            "{statement}: {text}"
        );
    }
    assert_eq!(std::fs::read(&path).unwrap(), before, "the report changed");
    assert!(!dir.path().join("other.sqlite").exists());
}

#[test]
fn read_only_statements_from_a_recipe_return_their_rows() {
    let out = common::host()
        .run(
            &recipe("sql"),
            &mock(),
            &args(&[(
                "query",
                "SELECT count(*) AS kernels, 1.5 AS half, 'x' AS t, NULL AS n \
                 FROM CUPTI_ACTIVITY_KIND_KERNEL",
            )]),
        )
        .unwrap();
    let table = out.table("sql").unwrap();
    let names: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["kernels", "half", "t", "n"]);
    assert_eq!(table.rows.len(), 1);
    let row = &table.rows[0];
    assert!(matches!(row[0], Value::Int(2)), "{row:?}");
    assert!(matches!(row[1], Value::Real(r) if r == 1.5), "{row:?}");
    assert!(matches!(&row[2], Value::Text(t) if t == "x"), "{row:?}");
    assert!(matches!(row[3], Value::Null), "{row:?}");
    let csv = nsight_analysis::table_to_csv(table);
    assert_eq!(csv, "kernels,half,t,n\r\n2,1.5,x,\r\n");
}

#[test]
fn a_runaway_query_is_interrupted() {
    let host = RecipeHost::new(Limits {
        query: QueryLimits {
            call_time: Duration::from_millis(300),
            ..QueryLimits::default()
        },
        ..Limits::default()
    })
    .unwrap();
    let component = host
        .load(&nsight_e2e::wasm_artifact("recipes/sql.wasm"))
        .unwrap();
    let started = std::time::Instant::now();
    let err = host
        .run(
            &component,
            &mock(),
            &args(&[(
                "query",
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                 SELECT count(*) FROM c",
            )]),
        )
        .unwrap_err();
    assert!(err.to_string().contains("interrupted"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn the_query_path_refuses_writes_directly() {
    let dir = TempDir::new("db-direct");
    let path = scratch_copy(&dir);
    let db = ReportDb::open(&path, QueryLimits::default()).unwrap();
    let err = db.query("DELETE FROM StringIds", Vec::new()).unwrap_err();
    assert!(matches!(err, QueryError::NotReadOnly(_)), "{err:?}");
    let err = db.query("SELEC nonsense", Vec::new()).unwrap_err();
    assert!(matches!(err, QueryError::Invalid(_)), "{err:?}");
    let err = db
        .query("SELECT * FROM NoSuchTable", Vec::new())
        .unwrap_err();
    assert!(
        matches!(&err, QueryError::Invalid(m) if m.contains("NoSuchTable")),
        "{err:?}"
    );
}

#[test]
fn parameters_bind_and_batches_are_bounded() {
    let db = ReportDb::open(
        &mock(),
        QueryLimits {
            batch_rows: 50,
            ..QueryLimits::default()
        },
    )
    .unwrap();
    let mut cursor = db
        .query(
            "SELECT id, value FROM StringIds WHERE id >= ? ORDER BY id",
            vec![nsight_analysis::report::Value::Integer(0)],
        )
        .unwrap();
    assert_eq!(cursor.columns(), ["id", "value"]);
    let mut total = 0;
    while let Some(batch) = cursor.next_batch(1000).unwrap() {
        assert!(!batch.is_empty() && batch.len() <= 50);
        total += batch.len();
    }
    assert_eq!(total, 164);
    assert_eq!(cursor.next_batch(10).unwrap(), None);
    let err = db.query("SELECT ?", Vec::new()).unwrap_err();
    assert!(matches!(err, QueryError::Invalid(_)), "{err:?}");
}

#[test]
fn open_cursors_are_bounded() {
    let db = ReportDb::open(
        &mock(),
        QueryLimits {
            open_cursors: 2,
            ..QueryLimits::default()
        },
    )
    .unwrap();
    let a = db.query("SELECT 1", Vec::new()).unwrap();
    let _b = db.query("SELECT 2", Vec::new()).unwrap();
    let err = db.query("SELECT 3", Vec::new()).unwrap_err();
    assert!(matches!(err, QueryError::TooManyCursors(_)), "{err:?}");
    drop(a);
    assert!(db.query("SELECT 4", Vec::new()).is_ok());
}

#[test]
fn reading_pragmas_are_allowed() {
    let db = ReportDb::open(&mock(), QueryLimits::default()).unwrap();
    for sql in [
        "PRAGMA table_info(StringIds)",
        "PRAGMA table_info('StringIds')",
        "PRAGMA user_version",
        "SELECT name FROM pragma_table_info('StringIds')",
    ] {
        let mut cursor = db.query(sql, Vec::new()).unwrap();
        assert!(cursor.next_batch(100).unwrap().is_some(), "{sql}");
    }
}

#[test]
fn schema_listing() {
    let db = ReportDb::open(&mock(), QueryLimits::default()).unwrap();
    let tables = db.tables().unwrap();
    assert!(tables.iter().any(|t| t == "CUPTI_ACTIVITY_KIND_KERNEL"));
    assert!(!tables.iter().any(|t| t == "NVTX_EVENTS"));
    assert_eq!(db.columns("StringIds").unwrap(), ["id", "value"]);
    assert!(db.columns("NVTX_EVENTS").unwrap().is_empty());
}

/// A query that makes a huge value fails with the limit named instead of costing the service
/// gigabytes (issue 22, item 6: `randomblob` took it from 1.1 GB to 6 GB).
#[test]
fn a_huge_value_fails_with_the_limit_named() {
    let db = ReportDb::open(&mock(), QueryLimits::default()).unwrap();
    for sql in [
        "SELECT randomblob(3000000000)",
        "SELECT length(zeroblob(100000000))",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 10000000) \
         SELECT length(group_concat(x)) FROM c",
    ] {
        let failed = db
            .query(sql, Vec::new())
            .and_then(|mut cursor| cursor.next_batch(10).map(|_| ()));
        let err = failed.expect_err(sql).to_string();
        assert!(err.contains("32 MiB a query may make"), "{sql}: {err}");
    }
    // Values under the limit are fine.
    let mut cursor = db
        .query("SELECT length(zeroblob(1000000))", Vec::new())
        .unwrap();
    assert!(cursor.next_batch(10).unwrap().is_some());
}

#[test]
fn each_connection_has_the_configured_page_cache() {
    let db = ReportDb::open(
        &mock(),
        QueryLimits {
            page_cache_kib: 128,
            ..QueryLimits::default()
        },
    )
    .unwrap();
    let mut cursor = db.query("PRAGMA cache_size", Vec::new()).unwrap();
    let batch = cursor.next_batch(10).unwrap().unwrap();
    assert_eq!(
        batch,
        [[nsight_analysis::report::Value::Integer(-128)]],
        "KiB, as a negative size"
    );
    let default = QueryLimits::default().page_cache_kib;
    assert!(default < 2_000, "smaller than SQLite's 2,000 KiB default");
    // A recipe cannot raise it: setting a PRAGMA is refused.
    let err = db
        .query("PRAGMA cache_size = -100000", Vec::new())
        .unwrap_err();
    assert!(matches!(err, QueryError::NotReadOnly(_)), "{err:?}");
}
