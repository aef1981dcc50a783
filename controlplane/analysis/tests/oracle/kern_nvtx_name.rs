//! `cuda_gpu_kern_sum --name nvtx-name[:base]` on every real nsys export against its oracle
//! (tests/oracle/cuda_gpu_kern_sum_nvtx_name.sql, run in current SQLite): kernel names
//! prefixed with the innermost NVTX push/pop range around their launch. Reports without NVTX
//! must give the note and the plain summary. Included in recipe_oracle.rs.

use std::path::Path;

use super::common::{
    has_column, has_table,
    oracle::{assert_matches, run, ALL, KERN},
    reports, short, sqlite3_json,
};

const SQL: &str = include_str!("cuda_gpu_kern_sum_nvtx_name.sql");

/// The oracle with its placeholders filled for `report` and the kernel name `column`.
fn oracle_sql(report: &Path, column: &str) -> String {
    let mut push_pop: Vec<String> = Vec::new();
    if has_table(report, "ENUM_NSYS_EVENT_TYPE") {
        for row in sqlite3_json(
            report,
            "SELECT id FROM ENUM_NSYS_EVENT_TYPE \
             WHERE name IN ('NvtxPushPopRange', 'NvtxtPushPopRange') ORDER BY id",
        ) {
            push_pop.push(row["id"].to_string());
        }
    }
    if push_pop.is_empty() {
        push_pop = vec!["59".into(), "70".into()];
    }
    let text = match (
        has_column(report, "NVTX_EVENTS", "textId"),
        has_column(report, "NVTX_EVENTS", "text"),
    ) {
        (true, true) => "coalesce((SELECT value FROM StringIds WHERE id = e.textId), e.text)",
        (true, false) => "(SELECT value FROM StringIds WHERE id = e.textId)",
        (false, true) => "e.text",
        (false, false) => "NULL",
    };
    let calls = if has_column(report, "CUPTI_ACTIVITY_KIND_RUNTIME", "eventClass") {
        "r.eventClass IS NOT 67"
    } else {
        "1"
    };
    SQL.replace("NAME_COLUMN", column)
        .replace("@PUSHPOP@", &push_pop.join(","))
        .replace("@TEXT@", text)
        .replace("@CALLS@", calls)
}

#[test]
fn kernel_names_with_nvtx_ranges_match_the_oracle() {
    let table = KERN.tables[0];
    let mut prefixed = 0;
    for (variant, plain_variant, column) in [
        ("nvtx-name", "demangled", "demangledName"),
        ("base:nvtx-name", "base", "shortName"),
    ] {
        for report in reports() {
            let out = run("cuda_gpu_kern_sum", &report, &[("name", variant)]);
            let column = if has_column(&report, table, column) {
                column
            } else {
                "demangledName"
            };
            let nvtx = has_table(&report, "NVTX_EVENTS");
            let noted = out
                .notes
                .iter()
                .any(|n| n.contains("table NVTX_EVENTS not in this report"));
            assert_eq!(
                noted,
                !nvtx,
                "{variant} on {}: {:?}",
                short(&report),
                out.notes
            );
            let sql = if nvtx {
                oracle_sql(&report, column)
            } else {
                KERN.oracle.replace("NAME_COLUMN", column)
            };
            let n = assert_matches(&KERN, &report, &out.tables[0], &sql, ALL, 1.0);
            // Names the plain summary (same variant, no NVTX) does not have.
            let plain = run("cuda_gpu_kern_sum", &report, &[("name", plain_variant)]);
            let names = |t: &nsight_analysis::Table| -> Vec<String> {
                t.rows
                    .iter()
                    .filter_map(|r| match r.last() {
                        Some(nsight_analysis::Value::Text(name)) => Some(name.clone()),
                        _ => None,
                    })
                    .collect()
            };
            let plain = names(&plain.tables[0]);
            let with_range = names(&out.tables[0])
                .iter()
                .filter(|n| !plain.contains(n))
                .count();
            println!(
                "cuda_gpu_kern_sum --name {variant:<15} {:<42} {n} rows",
                short(&report)
            );
            prefixed += usize::from(with_range > 0);
        }
    }
    // The extrap/concurrent runs and the nsys-ai traces launch kernels inside ranges.
    assert!(prefixed >= 8, "{prefixed}");
}

#[test]
fn nvtx_name_is_refused_in_bad_combinations() {
    let report = super::common::testdata_dir().join("nsys-ai/mock.sqlite");
    for bad in [
        "nvtx",
        "base:mangled",
        "nvtx-name:nvtx-name",
        "nvtx-name:short",
    ] {
        let args = vec![("name".to_owned(), bad.to_owned())];
        let err = super::common::host()
            .run(&super::common::recipe("cuda_gpu_kern_sum"), &report, &args)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("--name {bad}")), "{bad}: {err}");
    }
}
