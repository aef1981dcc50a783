//! `cuda_memcpy_sync` against its oracle (tests/oracle/cuda_memcpy_sync.sql, run in current
//! SQLite) on every report (only the 2023.1 export has synchronous copies: seven device to host
//! ones), and on a copy of a real export given synchronous and asynchronous copies of every
//! case the rule tells apart: host to device above and at 64 KB, device to host, device to
//! device within one device and across two, and a cudaMemcpy2D call.

use std::path::{Path, PathBuf};

use super::{
    common::{
        has_table,
        oracle::{run, ALL},
        reports, short, testdata_dir,
    },
    memcpy_async::{check_time_figure, expected, oracle_rows, same},
};

const ORACLE: &str = include_str!("cuda_memcpy_sync.sql");

/// Runs the recipe and compares its rows with the oracle's first `rows` (all when `None`);
/// the oracle's row count.
fn check(report: &Path, args: &[(&str, &str)], rows: Option<usize>) -> usize {
    let out = run("cuda_memcpy_sync", report, args);
    let table = &out.tables[0];
    let tables = ["CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_RUNTIME"];
    if let Some(missing) = tables.iter().find(|t| !has_table(report, t)) {
        assert!(table.rows.is_empty());
        let note = format!("table {missing} not in this report");
        assert!(
            out.notes.iter().any(|n| n.contains(&note)),
            "{:?}",
            out.notes
        );
        return 0;
    }
    let all = oracle_rows(report, ORACLE, ALL);
    let want: Vec<_> = all.iter().take(rows.unwrap_or(usize::MAX)).collect();
    let at = format!("cuda_memcpy_sync {args:?} on {}", short(report));
    assert_eq!(table.rows.len(), want.len(), "{at}: row count");
    for (i, (got, want)) in table.rows.iter().zip(want).enumerate() {
        let want = expected(want, 1.0);
        let equal = got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| same(a, b));
        assert!(equal, "{at}: row {i}\n   got {got:?}\n  want {want:?}");
    }
    let advice = out
        .notes
        .iter()
        .any(|n| n.contains("cudaMemcpy*Async() APIs instead"));
    assert_eq!(advice, !all.is_empty(), "{at}: {:?}", out.notes);
    check_time_figure(&out, &all, 1.0, &at);
    all.len()
}

/// A copy of `nsys-ai/mock.sqlite` whose memcpys and runtime calls are replaced by one
/// (call, copy) pair per case, in `dir`.
fn sync_cases_export(dir: &Path) -> PathBuf {
    let path = dir.join("sync.sqlite");
    std::fs::copy(testdata_dir().join("nsys-ai/mock.sqlite"), &path).unwrap();
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch(
        "PRAGMA foreign_keys = OFF;
         INSERT INTO StringIds (id, value) VALUES (900001, 'cudaMemcpy_v3020'),
             (900002, 'cudaMemcpyAsync_v3020'), (900003, 'cudaMemcpy2D_v3020');
         CREATE TEMP TABLE call AS SELECT * FROM CUPTI_ACTIVITY_KIND_RUNTIME LIMIT 1;
         CREATE TEMP TABLE copy AS SELECT * FROM CUPTI_ACTIVITY_KIND_MEMCPY LIMIT 1;
         DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME;
         DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY;",
    )
    .unwrap();
    // (name id, copyKind, bytes, source device, destination device)
    let cases: [(i64, i64, i64, i64, i64); 9] = [
        (900001, 1, 65_537, 0, 0),
        (900001, 1, 65_536, 0, 0),
        (900001, 2, 4_096, 0, 0),
        (900001, 8, 1_000_000, 0, 0),
        (900001, 8, 1_000_000, 0, 1),
        (900003, 2, 2_000_000, 0, 0),
        (900003, 1, 100, 0, 0),
        (900002, 2, 8_000_000, 0, 0),
        (900002, 1, 8_000_000, 0, 0),
    ];
    for (i, (name, kind, bytes, src, dst)) in cases.into_iter().enumerate() {
        let i = i as i64;
        let start = 1_000_000 + i * 1_000_000;
        db.execute(
            "UPDATE call SET correlationId = ?1, nameId = ?2, start = ?3, \"end\" = ?4",
            (800_000 + i, name, start, start + 500),
        )
        .unwrap();
        db.execute(
            "UPDATE copy SET correlationId = ?1, copyKind = ?2, bytes = ?3, srcDeviceId = ?4, \
             dstDeviceId = ?5, start = ?6, \"end\" = ?7, srcKind = 0, dstKind = 2",
            (
                800_000 + i,
                kind,
                bytes,
                src,
                dst,
                start + 100,
                start + 100 + 10 * (i + 1),
            ),
        )
        .unwrap();
        db.execute_batch(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME SELECT * FROM call;
             INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY SELECT * FROM copy;",
        )
        .unwrap();
    }
    path
}

#[test]
fn cuda_memcpy_sync_matches_the_oracle_on_every_report() {
    let mut with_rows = Vec::new();
    for report in reports() {
        let n = check(&report, &[], None);
        println!("cuda_memcpy_sync {:<45} {n} rows", short(&report));
        if n > 0 {
            with_rows.push(short(&report));
        }
    }
    assert_eq!(with_rows, ["gtls/report1.sqlite"]);
}

#[test]
fn cuda_memcpy_sync_tells_the_rules_cases_apart() {
    let dir = std::env::temp_dir().join(format!("nsight-memcpy-sync-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = sync_cases_export(&dir);
    // Listed: HtoD above 64 KB, DtoH, DtoD across devices, the cudaMemcpy2D DtoH; not the
    // HtoD of 64 KB, the DtoD within one device, the small 2D HtoD or the async calls.
    assert_eq!(check(&report, &[], None), 4);
    assert_eq!(check(&report, &[("rows", "2")], Some(2)), 4);
    std::fs::remove_dir_all(&dir).unwrap();
}
