//! `um_sum`: no export in testdata has Unified Memory page faults, so the test builds one: a
//! copy of a real export with the two page-fault tables added and Unified Memory migrations
//! (copy kinds 11 and 12) among its memcpys, from a fixed pseudo-random sequence, including
//! addresses with faults only, migrations only, one direction only and zero-time migrations.
//! The recipe must equal tests/oracle/um_sum.sql (run in current SQLite) row for row, with the
//! default `--rows 10`, `--rows -1` and `--rows 3`; the real exports give the notes and an
//! empty table; bad `--rows` is the recipe's error.

use std::path::{Path, PathBuf};

use nsight_analysis::Value;
use serde_json::{Map, Value as Json};

use super::common::{oracle::run, reports, short, sqlite3_json, testdata_dir};

const ORACLE: &str = include_str!("um_sum.sql");

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Real(x), Value::Real(y)) => x == y,
        _ => false,
    }
}

/// A 64-bit linear congruential sequence (Knuth's MMIX constants): the same data every run.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> i64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n) as i64
    }
}

/// The copy of `nsys-ai/mock.sqlite` with Unified Memory data, in `dir`.
fn unified_memory_export(dir: &Path) -> PathBuf {
    let path = dir.join("um.sqlite");
    std::fs::copy(testdata_dir().join("nsys-ai/mock.sqlite"), &path).unwrap();
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch(
        "PRAGMA foreign_keys = OFF;
         CREATE TABLE CUDA_UM_CPU_PAGE_FAULT_EVENTS (start INTEGER NOT NULL,
             globalPid INTEGER, address INTEGER NOT NULL, originalFaultPc INTEGER);
         CREATE TABLE CUDA_UM_GPU_PAGE_FAULT_EVENTS (start INTEGER NOT NULL,
             end INTEGER NOT NULL, globalPid INTEGER, deviceId INTEGER NOT NULL,
             address INTEGER NOT NULL, numberOfPageFaults INTEGER NOT NULL,
             faultAccessType INTEGER);
         CREATE TEMP TABLE one AS SELECT * FROM CUPTI_ACTIVITY_KIND_MEMCPY LIMIT 1;",
    )
    .unwrap();
    let mut rng = Lcg(23);
    let base = 0x7f00_0000_0000_i64;
    let address = |rng: &mut Lcg| base + rng.below(40) * 0x20_0000;
    for i in 0..200 {
        let a = address(&mut rng);
        db.execute(
            "INSERT INTO CUDA_UM_CPU_PAGE_FAULT_EVENTS VALUES (?1, 1, ?2, 0)",
            (1_000 + i, a),
        )
        .unwrap();
    }
    for i in 0..150 {
        // Addresses 40 and up: GPU faults only.
        let a = base + (20 + rng.below(30)) * 0x20_0000;
        db.execute(
            "INSERT INTO CUDA_UM_GPU_PAGE_FAULT_EVENTS VALUES (?1, ?2, 1, 0, ?3, ?4, 1)",
            (2_000 + i, 2_010 + i, a, 1 + rng.below(64)),
        )
        .unwrap();
    }
    for i in 0..301 {
        // Addresses 0..10 have faults only, 50..64 migrations only; the last migration, at
        // address 70, is the only one there and takes no time (no throughput).
        let slot = if i == 300 { 70 } else { 10 + rng.below(54) };
        let a = base + slot * 0x20_0000;
        let kind = if rng.below(3) == 0 { 12 } else { 11 };
        // One in ten takes no time at all.
        let duration = if i == 300 || rng.below(10) == 0 {
            0
        } else {
            1 + rng.below(90_000)
        };
        let start = 1_000_000 + i * 100_000;
        db.execute(
            "UPDATE one SET start = ?1, \"end\" = ?2, copyKind = ?3, bytes = ?4, \
             virtualAddress = ?5",
            (
                start,
                start + duration,
                kind,
                4_096 * (1 + rng.below(512)),
                a,
            ),
        )
        .unwrap();
        db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY SELECT * FROM one",
            (),
        )
        .unwrap();
    }
    path
}

fn expected(o: &Map<String, Json>) -> Vec<Value> {
    let int = |k: &str| o[k].as_i64().map_or(Value::Null, Value::Int);
    let real = |k: &str| o[k].as_f64().map_or(Value::Null, Value::Real);
    vec![
        int("address"),
        real("htod_mb"),
        real("dtoh_mb"),
        int("cpu"),
        int("gpu"),
        real("mbps"),
    ]
}

#[test]
fn um_sum_matches_the_oracle_on_an_export_with_unified_memory() {
    let dir = std::env::temp_dir().join(format!("nsight-um-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = unified_memory_export(&dir);
    let want = sqlite3_json(&report, ORACLE);
    // Up to 65 addresses: faults and migrations, faults only, migrations only.
    let total = want.len();
    assert!((50..=65).contains(&total), "{total}");
    let faults_only = want
        .iter()
        .filter(|r| r["mbps"].is_null() && r["htod_mb"].is_null())
        .count();
    assert!(faults_only > 0, "{want:?}");
    assert!(want
        .iter()
        .any(|r| r["mbps"].is_null() && r["cpu"].is_null()));
    assert!(want
        .iter()
        .any(|r| r["htod_mb"].is_null() && !r["dtoh_mb"].is_null()));
    for (args, rows) in [
        (vec![], 10),
        (vec![("rows", "-1")], total),
        (vec![("rows", "3")], 3),
    ] {
        let out = run("um_sum", &report, &args);
        let table = &out.tables[0];
        assert_eq!(table.rows.len(), rows, "{args:?}");
        for (i, (got, want)) in table.rows.iter().zip(&want).enumerate() {
            let want = expected(want);
            let equal = got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| same(a, b));
            assert!(equal, "{args:?} row {i}\n   got {got:?}\n  want {want:?}");
        }
        let cut = out
            .notes
            .iter()
            .any(|n| n.starts_with(&format!("{total} addresses")));
        assert_eq!(cut, rows < total, "{args:?}: {:?}", out.notes);
        check_migrated_figure(&report, &out);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The figure: the (at most 20) addresses whose Unified Memory copies moved the most bytes,
/// from every address whatever `--rows`, summed here with SQL.
fn check_migrated_figure(report: &Path, out: &nsight_analysis::RecipeOutput) {
    let want = sqlite3_json(
        report,
        "SELECT virtualAddress AS address, sum(bytes) AS bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY \
         WHERE copyKind IN (11, 12) AND virtualAddress IS NOT NULL \
         GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 20",
    );
    assert!(!want.is_empty());
    assert_eq!(out.figures.len(), 1);
    let bars = super::common::figure_bars(&out.figures[0].svg);
    assert_eq!(bars.len(), want.len());
    for ((label, mb), w) in bars.iter().zip(&want) {
        assert_eq!(*label, format!("{:#x}", w["address"].as_i64().unwrap()));
        let bytes = w["bytes"].as_i64().unwrap() as f64;
        assert!(
            (mb - bytes / 1e6).abs() < 0.0006,
            "{label}: {mb} MB, {bytes} bytes"
        );
    }
}

#[test]
fn um_sum_without_page_faults_gives_the_notes() {
    for report in reports() {
        let out = run("um_sum", &report, &[("rows", "-1")]);
        assert!(out.tables[0].rows.is_empty(), "{}", short(&report));
        assert!(
            out.notes
                .iter()
                .any(|n| n.contains("table CUDA_UM_CPU_PAGE_FAULT_EVENTS not in this report")),
            "{}: {:?}",
            short(&report),
            out.notes
        );
    }
    let report = testdata_dir().join("nsys-ai/mock.sqlite");
    for bad in ["0", "x", "-5"] {
        let args = vec![("rows".to_owned(), bad.to_owned())];
        let err = super::common::host()
            .run(&super::common::recipe("um_sum"), &report, &args)
            .unwrap_err();
        assert!(err.to_string().contains(&format!("--rows {bad}")), "{err}");
    }
}
