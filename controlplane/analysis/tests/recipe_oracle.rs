//! Correctness of the summary recipes on every real nsys export in shared/testdata/nsys: each
//! recipe component, run by the host, must produce exactly what an independent oracle computes
//! (SQL in tests/oracle/, run in current SQLite): the same rows in the same order, integers
//! equal, and each rounded value exactly the double nearest to the oracle's rounded value.
//! Reports that lack a recipe's table must give an empty table and the note saying so.
//! `--filter-time`/`--filter-nvtx` are checked in recipe_filter.rs.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

mod common;
// cuda_gpu_kern_hist, gpu_time_util and gpu_gaps against their oracles.
#[path = "oracle/timeline.rs"]
mod timeline;
// cuda_gpu_kern_sum --name nvtx-name against its oracle.
#[path = "oracle/kern_nvtx_name.rs"]
mod kern_nvtx_name;
// cuda_kern_exec_sum against its oracle.
#[path = "oracle/kern_exec.rs"]
mod kern_exec;
// nvtx_kern_sum against its oracle.
#[path = "oracle/nvtx_kern.rs"]
mod nvtx_kern;
// cuda_memcpy_async against its oracle.
#[path = "oracle/memcpy_async.rs"]
mod memcpy_async;
// cuda_memcpy_sync against its oracle.
#[path = "oracle/memcpy_sync.rs"]
mod memcpy_sync;
// cuda_gpu_trace against its oracle.
#[path = "oracle/gpu_trace.rs"]
mod gpu_trace;
// nvtx_gpu_proj_sum against its oracle.
#[path = "oracle/gpu_proj.rs"]
mod gpu_proj;
// um_sum against its oracle, on an export built by the test.
#[path = "oracle/um.rs"]
mod um;
// cuda_gpu_kern_pace against its oracles.
#[path = "oracle/kern_pace.rs"]
mod kern_pace;
// nvtx_pace against its oracles.
#[path = "oracle/nvtx_pace.rs"]
mod nvtx_pace;
// nccl_sum and nccl_gpu_time_util_map against their oracles.
#[path = "oracle/nccl.rs"]
mod nccl;

use common::{
    has_column, has_table,
    oracle::{
        assert_matches, check_output, run, Case, ALL, API, API_GPU, KERN, MEM_SIZE, MEM_TIME, NVTX,
        OSRT, TIMED,
    },
    recipe, reports, short, sqlite3_json,
};

/// Runs `case` on every report; returns how many had rows.
fn check_every_report(case: &Case, args: &[(&str, &str)], unit: f64) -> usize {
    let mut with_rows = 0;
    for report in reports() {
        let out = run(case.recipe, &report, args);
        let n = check_output(case, &report, &out, ALL, unit);
        println!(
            "{:<22} {:<45} {n} rows match the oracle; notes {:?}",
            case.recipe,
            short(&report),
            out.notes
        );
        if n > 0 {
            with_rows += 1;
        }
    }
    with_rows
}

#[test]
fn nvtx_sum_matches_the_oracle_on_every_report() {
    // 5 extrap/concurrent runs and 3 nsys-ai traces have NVTX ranges.
    assert!(check_every_report(&NVTX, &[], 1.0) >= 8);
}

#[test]
fn cuda_gpu_kern_sum_matches_the_oracle_on_every_report() {
    assert_eq!(check_every_report(&KERN, &[], 1.0), reports().len());
}

#[test]
fn cuda_api_sum_matches_the_oracle_on_every_report() {
    assert_eq!(check_every_report(&API, &[], 1.0), reports().len());
}

#[test]
fn cuda_gpu_mem_time_sum_matches_the_oracle_on_every_report() {
    // Every report but the three sampled_callchains ones has memory copies.
    assert_eq!(check_every_report(&MEM_TIME, &[], 1.0), reports().len() - 3);
}

#[test]
fn cuda_gpu_mem_size_sum_matches_the_oracle_on_every_report() {
    assert_eq!(check_every_report(&MEM_SIZE, &[], 1.0), reports().len() - 3);
}

#[test]
fn cuda_api_gpu_sum_matches_the_oracle_on_every_report() {
    assert_eq!(check_every_report(&API_GPU, &[], 1.0), reports().len());
}

/// Its bar chart: the 20 largest `Total Time` rows of its table (which the oracle checks),
/// largest first, ties by category and operation, labelled `<Category>: <Operation>`.
#[test]
fn cuda_api_gpu_sum_charts_its_largest_totals() {
    use nsight_analysis::Value;
    let mut charted = 0;
    for report in reports() {
        let out = run("cuda_api_gpu_sum", &report, &[]);
        let table = &out.tables[0];
        let at = short(&report);
        if table.rows.is_empty() {
            assert!(out.figures.is_empty(), "{at}");
            continue;
        }
        let column = |name: &str| table.columns.iter().position(|c| c.name == name).unwrap();
        let (total, category, operation) = (
            column("Total Time (ns)"),
            column("Category"),
            column("Operation"),
        );
        let mut want: Vec<(String, i64)> = table
            .rows
            .iter()
            .map(|r| match (&r[total], &r[category], &r[operation]) {
                (Value::Int(t), Value::Text(c), Value::Text(o)) => (format!("{c}: {o}"), *t),
                other => panic!("{at}: {other:?}"),
            })
            .collect();
        want.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        want.truncate(20);
        let bars = common::figure_bars(&out.figures[0].svg);
        let want: Vec<(String, f64)> = want.into_iter().map(|(l, t)| (l, t as f64)).collect();
        assert_eq!(bars, want, "{at}");
        charted += 1;
    }
    assert!(charted >= 10, "{charted}");
}

#[test]
fn osrt_sum_matches_the_oracle_on_every_report() {
    // Only the three sampled_callchains reports traced the OS runtime.
    assert_eq!(check_every_report(&OSRT, &[], 1.0), 3);
}

#[test]
fn memory_operations_are_named_by_the_reports_copy_kind_labels() {
    let names = |report: &str| -> Vec<String> {
        let out = run(
            "cuda_gpu_mem_time_sum",
            &common::testdata_dir().join(report),
            &[],
        );
        let mut names: Vec<String> = out.tables[0]
            .rows
            .iter()
            .map(|r| match r.last() {
                Some(nsight_analysis::Value::Text(s)) => s.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        names.sort();
        names
    };
    // 2023.1 export: labels from ENUM_CUDA_MEMCPY_OPER.
    assert_eq!(
        names("gtls/report1.sqlite"),
        [
            "[CUDA memcpy Device-to-Device]",
            "[CUDA memcpy Device-to-Host]",
            "[CUDA memcpy Host-to-Device]",
            "[CUDA memset]"
        ]
    );
    // 2022.1 export without the enum table: CUPTI's short names.
    assert_eq!(
        names("extrap/con_kernel.sqlite"),
        ["[CUDA memcpy DtoH]", "[CUDA memcpy HtoD]", "[CUDA memset]"]
    );
}

/// A copy of `report` in a temporary directory whose memory copies appear once per copy kind
/// 0..=13 (CUPTI's 0-10 and nsys's Unified Memory 11-13): the testdata has only kinds 1, 2, 8.
fn every_copy_kind(report: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let copy = dir.join(report.replace('/', "_"));
    std::fs::copy(common::testdata_dir().join(report), &copy).unwrap();
    let db = rusqlite::Connection::open(&copy).unwrap();
    // The exports reference tables they lack (CUDA_GRAPH_EVENTS); rusqlite's SQLite checks
    // foreign keys by default.
    let mut script = String::from(
        "PRAGMA foreign_keys = OFF;\n\
         CREATE TEMP TABLE one AS SELECT * FROM CUPTI_ACTIVITY_KIND_MEMCPY;\n\
         DELETE FROM CUPTI_ACTIVITY_KIND_MEMCPY;\n",
    );
    for kind in 0..=13 {
        script.push_str(&format!(
            "UPDATE one SET copyKind = {kind};\n\
             INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY SELECT * FROM one;\n"
        ));
    }
    db.execute_batch(&script).unwrap();
    copy
}

#[test]
fn every_copy_kind_is_named_in_the_reports_label_style() {
    let dir = std::env::temp_dir().join(format!("nsight-copy-kinds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let names = |report: &std::path::Path| -> Vec<String> {
        let out = run("cuda_gpu_mem_time_sum", report, &[]);
        assert!(
            !out.notes.iter().any(|n| n.contains("have no label")),
            "{:?}",
            out.notes
        );
        let mut names: Vec<String> = out.tables[0]
            .rows
            .iter()
            .filter_map(|r| match r.last() {
                Some(nsight_analysis::Value::Text(s))
                    if s.starts_with("[CUDA memcpy") || s.starts_with("[CUDA Unified") =>
                {
                    Some(s.clone())
                }
                _ => None,
            })
            .collect();
        names.sort();
        names
    };
    // 2022.1 export without ENUM_CUDA_MEMCPY_OPER: the names older reports printed.
    let legacy = every_copy_kind("extrap/con_kernel.sqlite", &dir);
    assert_eq!(
        names(&legacy),
        [
            "[CUDA Unified Memory memcpy DtoD]",
            "[CUDA Unified Memory memcpy DtoH]",
            "[CUDA Unified Memory memcpy HtoD]",
            "[CUDA memcpy AtoA]",
            "[CUDA memcpy AtoD]",
            "[CUDA memcpy AtoH]",
            "[CUDA memcpy DtoA]",
            "[CUDA memcpy DtoD]",
            "[CUDA memcpy DtoH]",
            "[CUDA memcpy HtoA]",
            "[CUDA memcpy HtoD]",
            "[CUDA memcpy HtoH]",
            "[CUDA memcpy PtoP]",
            "[CUDA memcpy Unknown]",
        ]
    );
    // 2026 export: the labels of its enum table.
    let current = every_copy_kind("nsys-ai/mock.sqlite", &dir);
    let current_names = names(&current);
    assert_eq!(current_names.len(), 14);
    for name in [
        "[CUDA memcpy Unified Host-to-Device]",
        "[CUDA memcpy Unified Device-to-Host]",
        "[CUDA memcpy Unified Device-to-Device]",
        "[CUDA memcpy Unknown]",
        "[CUDA memcpy Peer-to-Peer]",
    ] {
        assert!(
            current_names.iter().any(|n| n == name),
            "{name}: {current_names:?}"
        );
    }
    for report in [&legacy, &current] {
        for case in [&MEM_TIME, &MEM_SIZE] {
            let out = run(case.recipe, report, &[]);
            assert!(check_output(case, report, &out, ALL, 1.0) >= 14);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn osrt_sum_notes_the_rows_of_other_event_classes() {
    for report in reports() {
        if !has_table(&report, "OSRT_API") {
            continue;
        }
        let rows = sqlite3_json(
            &report,
            "SELECT count(*) AS n FROM OSRT_API WHERE eventClass IS NOT 27",
        );
        let n = rows[0]["n"].as_i64().unwrap();
        let noted = run("osrt_sum", &report, &[]).notes.iter().any(|note| {
            note.starts_with(&format!("{n} rows of OSRT_API are not of event class 27"))
        });
        assert_eq!(noted, n > 0, "{}", short(&report));
    }
}

#[test]
fn cuda_api_sum_notes_the_backtrace_rows_it_leaves_out() {
    for report in reports() {
        let rows = sqlite3_json(
            &report,
            "SELECT count(*) AS n FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE eventClass = 67",
        );
        let noted = run("cuda_api_sum", &report, &[])
            .notes
            .iter()
            .any(|n| n.contains("event class 67"));
        assert_eq!(noted, rows[0]["n"].as_i64() > Some(0), "{}", short(&report));
    }
}

#[test]
fn kernel_names_base_and_mangled_match_the_oracle() {
    let table = KERN.tables[0];
    for (variant, column) in [("base", "shortName"), ("mangled", "mangledName")] {
        for report in reports() {
            let out = run("cuda_gpu_kern_sum", &report, &[("name", variant)]);
            let present = has_column(&report, table, column);
            let note = format!("column {table}.{column} not in this report");
            assert_eq!(
                out.notes.iter().any(|n| n.contains(&note)),
                !present,
                "{variant} on {}: {:?}",
                short(&report),
                out.notes
            );
            let sql = KERN.oracle.replace(
                "NAME_COLUMN",
                if present { column } else { "demangledName" },
            );
            let n = assert_matches(&KERN, &report, &out.tables[0], &sql, ALL, 1.0);
            println!(
                "cuda_gpu_kern_sum --name {variant:<8} {:<40} {n} rows",
                short(&report)
            );
        }
    }
}

#[test]
fn timeunit_divides_the_rounded_nanosecond_statistics() {
    let reports = reports();
    for (i, report) in reports.iter().enumerate() {
        // Every report in one unit or another, cycling through the three.
        let (unit, nanos, header) = [
            ("usec", 1e3, "(us)"),
            ("msec", 1e6, "(ms)"),
            ("sec", 1e9, "(s)"),
        ][i % 3];
        for case in TIMED {
            let out = run(case.recipe, report, &[("timeunit", unit)]);
            let table = &out.tables[0];
            assert_eq!(table.columns[1].name, format!("Total Time {header}"));
            assert_eq!(
                table.columns[3].unit.as_deref(),
                Some(&header[1..header.len() - 1])
            );
            check_output(case, report, &out, ALL, nanos);
        }
    }
}

#[test]
fn bad_arguments_are_the_recipes_error() {
    let report = common::testdata_dir().join("nsys-ai/mock.sqlite");
    let host = common::host();
    for (recipe_name, args, want) in [
        (
            "nvtx_sum",
            vec![("timeunit", "minutes")],
            "--timeunit minutes",
        ),
        (
            "cuda_api_sum",
            vec![("bogus", "1")],
            "unknown argument --bogus",
        ),
        ("cuda_gpu_kern_sum", vec![("name", "short")], "--name short"),
        (
            "cuda_gpu_mem_size_sum",
            vec![("timeunit", "usec")],
            "unknown argument --timeunit",
        ),
        ("osrt_sum", vec![("timeunit", "hours")], "--timeunit hours"),
    ] {
        let args: Vec<(String, String)> = args
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let err = host.run(&recipe(recipe_name), &report, &args).unwrap_err();
        assert!(err.to_string().contains(want), "{recipe_name}: {err}");
    }
}
