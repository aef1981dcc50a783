//! `--filter-time` and `--filter-nvtx` on the summary recipes, against the oracles of
//! tests/oracle/ with the window bound to `:lo`/`:hi`. The windows and the NVTX ranges are
//! found here with the sqlite3 CLI, independently of the SDK's filter code.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

mod common;

use std::path::Path;

use common::{
    has_table,
    oracle::{check_output, run, Case, ALL, API, KERN, NVTX, STATS},
    recipe, reports, short, sqlite3_json, testdata_dir,
};

/// The middle half of the time `table` spans in `report`: [min start + a quarter, max end -
/// a quarter].
fn middle_half(report: &Path, table: &str) -> Option<(i64, i64)> {
    let rows = sqlite3_json(
        report,
        &format!("SELECT min(start) AS lo, max(\"end\") AS hi FROM {table}"),
    );
    let (lo, hi) = (rows[0]["lo"].as_i64()?, rows[0]["hi"].as_i64()?);
    let quarter = (hi - lo) / 4;
    Some((lo + quarter, hi - quarter))
}

fn count(out: &nsight_analysis::RecipeOutput, case: &Case) -> i64 {
    let col = if case.recipe == "cuda_gpu_mem_size_sum" {
        1
    } else {
        2
    };
    out.tables[0]
        .rows
        .iter()
        .map(|r| match &r[col] {
            nsight_analysis::Value::Int(n) => *n,
            other => panic!("count {other:?}"),
        })
        .sum()
}

#[test]
fn filter_time_matches_the_oracle_in_the_middle_of_every_report() {
    let mut narrowed = 0;
    for case in STATS {
        for report in reports() {
            let Some(table) = case.tables.iter().find(|t| has_table(&report, t)) else {
                continue;
            };
            let Some((lo, hi)) = middle_half(&report, table) else {
                continue;
            };
            let arg = format!("{lo}/{hi}");
            let out = run(case.recipe, &report, &[("filter-time", &arg)]);
            let n = check_output(case, &report, &out, (lo, hi), 1.0);
            assert!(
                out.notes
                    .iter()
                    .any(|n| n == &format!("only events wholly inside --filter-time {arg}")),
                "{:?}",
                out.notes
            );
            let all = run(case.recipe, &report, &[]);
            if count(&out, case) < count(&all, case) {
                narrowed += 1;
            }
            println!(
                "{:<22} {:<45} --filter-time {arg}: {n} rows, {} of {} events",
                case.recipe,
                short(&report),
                count(&out, case),
                count(&all, case)
            );
        }
    }
    // The window must actually leave events out, in most runs.
    assert!(narrowed >= 20, "only {narrowed} runs were narrowed");
}

#[test]
fn open_ended_filter_time_keeps_everything_on_that_side() {
    let report = testdata_dir().join("gtls/report1.sqlite");
    let (lo, _) = middle_half(&report, "CUPTI_ACTIVITY_KIND_KERNEL").unwrap();
    let out = run(
        "cuda_gpu_kern_sum",
        &report,
        &[("filter-time", &format!("{lo}/"))],
    );
    check_output(&KERN, &report, &out, (lo, i64::MAX), 1.0);
    let out = run(
        "cuda_gpu_kern_sum",
        &report,
        &[("filter-time", &format!("/{lo}"))],
    );
    check_output(&KERN, &report, &out, (i64::MIN, lo), 1.0);
}

/// The NVTX ranges of `report` named `text` in the domain named `domain` ('' = default), by
/// start: computed here in SQL.
fn nvtx_instances(report: &Path, text: &str, domain: &str) -> Vec<(i64, i64)> {
    let sql = format!(
        "WITH dom AS (
             SELECT domainId AS did, globalTid / 16777216 % 16777216 AS pid,
                    coalesce((SELECT value FROM StringIds WHERE id = textId), text) AS name,
                    row_number() OVER (PARTITION BY domainId, globalTid / 16777216 % 16777216
                                       ORDER BY start) AS rn
             FROM NVTX_EVENTS WHERE eventType = 75)
         SELECT e.start AS s, e.\"end\" AS e FROM NVTX_EVENTS AS e
         LEFT JOIN dom AS d ON d.did = e.domainId
              AND d.pid = e.globalTid / 16777216 % 16777216 AND d.rn = 1
         WHERE e.eventType IN (59, 60, 70, 71) AND e.\"end\" IS NOT NULL
           AND coalesce((SELECT value FROM StringIds WHERE id = e.textId), e.text) = '{}'
           AND coalesce(d.name, '') = '{}'
         ORDER BY e.start, e.\"end\"",
        text.replace('\'', "''"),
        domain.replace('\'', "''")
    );
    sqlite3_json(report, &sql)
        .iter()
        .map(|r| (r["s"].as_i64().unwrap(), r["e"].as_i64().unwrap()))
        .collect()
}

#[test]
fn filter_nvtx_uses_the_window_of_the_named_range() {
    // (report, range, domain, index): a default-domain range that occurs twice (the second
    // one), and a range of a named domain.
    let cases = [
        (
            "nsys-ai/h100_2gpu_1s.sqlite",
            "aten::to, op_id = 317100",
            "",
            1,
        ),
        (
            "extrap/concurrent/profile1.sqlite",
            "main->process->phase1",
            "de.tu-darmstadt.parallel.extra_prof",
            0,
        ),
    ];
    for (file, range, domain, index) in cases {
        let report = testdata_dir().join(file);
        let instances = nvtx_instances(&report, range, domain);
        assert!(instances.len() > index, "{file}: {instances:?}");
        let window = instances[index];
        let arg = match (domain, index) {
            ("", i) => format!("{range}/{i}"),
            (d, 0) => format!("{range}@{d}"),
            (d, i) => format!("{range}@{d}/{i}"),
        };
        // CPU-side ranges: the API calls and NVTX ranges inside them (kernels run later).
        for case in [&API, &NVTX] {
            let out = run(case.recipe, &report, &[("filter-nvtx", &arg)]);
            let n = check_output(case, &report, &out, window, 1.0);
            let note = format!(
                "only events wholly inside NVTX range {arg}: {}/{} ns",
                window.0, window.1
            );
            assert!(out.notes.contains(&note), "{:?}", out.notes);
            assert!(n > 0, "{} {file} {arg}: nothing in the window", case.recipe);
            println!("{:<18} {file} --filter-nvtx {arg:?}: {n} rows", case.recipe);
        }
    }
}

#[test]
fn filter_nvtx_without_such_a_range_notes_it_and_summarises_nothing() {
    for (file, arg, want) in [
        (
            "gtls/report1.sqlite",
            "step",
            "table NVTX_EVENTS not in this report",
        ),
        (
            "nsys-ai/h100_2gpu_1s.sqlite",
            "aten::to, op_id = 317100/2",
            "the report has 2 NVTX ranges",
        ),
        (
            "extrap/concurrent/profile1.sqlite",
            "main->process->phase1",
            "the report has 0 NVTX ranges \"main->process->phase1\" in the default domain",
        ),
    ] {
        let report = testdata_dir().join(file);
        let out = run("cuda_gpu_kern_sum", &report, &[("filter-nvtx", arg)]);
        assert!(
            out.notes.iter().any(|n| n.contains(want)),
            "{file} {arg}: {:?}",
            out.notes
        );
        assert!(out.tables[0].rows.is_empty(), "{file} {arg}");
    }
}

#[test]
fn bad_filters_are_the_recipes_error() {
    let report = testdata_dir().join("nsys-ai/mock.sqlite");
    for (args, want) in [
        (vec![("filter-time", "20/10")], "START is after END"),
        (vec![("filter-time", "abc")], "expected START/END"),
        (vec![("filter-nvtx", "@dom")], "no range name"),
        (
            vec![("filter-time", "1/2"), ("filter-nvtx", "x")],
            "exclude each other",
        ),
    ] {
        for case in STATS {
            let args: Vec<(String, String)> = args
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let err = common::host()
                .run(&recipe(case.recipe), &report, &args)
                .unwrap_err();
            assert!(err.to_string().contains(want), "{}: {err}", case.recipe);
        }
    }
    // Unfiltered runs still see every event.
    check_output(
        &KERN,
        &report,
        &run("cuda_gpu_kern_sum", &report, &[]),
        ALL,
        1.0,
    );
}
