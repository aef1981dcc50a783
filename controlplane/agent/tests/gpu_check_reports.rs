//! What the GPU check (`cargo xtask gpu-check`, docs/agent.md) brought back from an H200, kept
//! as fixtures in `tests/gpu-check/` and checked on every CI run:
//!
//! - the agent's CUPTI report and nsys's report of the same fixed-step workload (`cuda_sample`
//!   5000 steps, a PyTorch loop 200 steps) launch the same kernels the same number of times, and
//!   their GPU time agrees within 2% (each kernel's within 5%: two runs, two clocks);
//! - our cuda_gpu_kern_sum recipe equals NVIDIA's `nsys stats -r cuda_gpu_kern_sum` on the same
//!   file, for nsys's own export and for the agent's CUPTI report alike (nsys read our report).

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::{collections::BTreeMap, path::PathBuf};

use nsight_analysis::{Limits, RecipeHost, Value};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/gpu-check")
        .join(name)
}

/// (instances, total ns, min ns, max ns) per kernel name.
type Summary = BTreeMap<String, (i64, i64, i64, i64)>;

/// One CSV line, with nsys's quoting (names with commas are quoted; no escaped quotes occur).
fn csv_fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// `nsys stats -r cuda_gpu_kern_sum -f csv` as printed on the GPU machine.
fn nsys_csv(name: &str) -> Summary {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    let mut lines = text.lines();
    let header = csv_fields(lines.next().unwrap());
    let col = |n: &str| header.iter().position(|h| h == n).unwrap();
    let (total, count, min, max, kname) = (
        col("Total Time (ns)"),
        col("Instances"),
        col("Min (ns)"),
        col("Max (ns)"),
        col("Name"),
    );
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f = csv_fields(l);
            let int = |i: usize| f[i].parse::<f64>().unwrap() as i64;
            (
                f[kname].clone(),
                (int(count), int(total), int(min), int(max)),
            )
        })
        .collect()
}

/// Our cuda_gpu_kern_sum recipe (the real Wasm component) on a report.
fn recipe(report: &str, args: &[(&str, &str)]) -> Summary {
    let host = RecipeHost::new(Limits::default()).unwrap();
    let loaded = host
        .load(&nsight_e2e::wasm_artifact("recipes/cuda_gpu_kern_sum.wasm"))
        .unwrap();
    let args: Vec<(String, String)> = args
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let out = host.run(&loaded, &fixture(report), &args).unwrap();
    let table = out
        .tables
        .iter()
        .find(|t| t.name == "cuda_gpu_kern_sum")
        .unwrap_or_else(|| panic!("{out:?}"));
    let col = |n: &str| table.columns.iter().position(|c| c.name == n).unwrap();
    let (total, count, min, max, kname) = (
        col("Total Time (ns)"),
        col("Instances"),
        col("Min (ns)"),
        col("Max (ns)"),
        col("Name"),
    );
    let int = |v: &Value| match v {
        Value::Int(i) => *i,
        v => panic!("{v:?}"),
    };
    table
        .rows
        .iter()
        .map(|r| {
            let name = match &r[kname] {
                Value::Text(t) => t.clone(),
                v => panic!("{v:?}"),
            };
            (
                name,
                (int(&r[count]), int(&r[total]), int(&r[min]), int(&r[max])),
            )
        })
        .collect()
}

#[test]
fn our_recipe_equals_nsys_stats_on_nsys_exports_from_the_gpu() {
    for w in ["cuda_sample", "torch"] {
        let ours = recipe(&format!("{w}-nsys.sqlite"), &[]);
        let nvidia = nsys_csv(&format!("{w}-nsys_cuda_gpu_kern_sum.csv"));
        assert_eq!(ours, nvidia, "{w}");
    }
}

#[test]
fn nsys_stats_reads_the_agents_cupti_report_as_our_recipe_does() {
    for w in ["cuda_sample", "torch"] {
        let ours = recipe(&format!("{w}-cupti.sqlite"), &[]);
        let nvidia = nsys_csv(&format!("{w}-cupti-by-nsys_cuda_gpu_kern_sum.csv"));
        assert_eq!(ours, nvidia, "{w}");
        assert!(ours.len() >= 2, "{w}: {ours:?}");
    }
}

#[test]
fn cupti_and_nsys_see_the_same_kernels_and_the_same_gpu_time() {
    // Two separate runs of the same workload (no two profilers can trace one run): the kernels
    // and their counts must be equal; GPU time varies between runs (clocks, a busy machine), so
    // the sum over all kernels must agree within 2% and each kernel's within 5%. Seen on an
    // H200 (docs/agent.md): within 0.2% for cuda_sample; for the PyTorch loop the sum within
    // 0.6%, one small elementwise kernel 3.9% lower in one run and within 0.75% in another.
    for (w, kernels) in [("cuda_sample", 10_000), ("torch", 1_028)] {
        let cupti = recipe(&format!("{w}-cupti.sqlite"), &[("name", "base")]);
        let nsys = recipe(&format!("{w}-nsys.sqlite"), &[("name", "base")]);
        assert_eq!(
            cupti.keys().collect::<Vec<_>>(),
            nsys.keys().collect::<Vec<_>>(),
            "{w}: the same kernels"
        );
        let (mut launched, mut sum, mut sum_nsys) = (0, 0, 0);
        for (name, (n, total, _, _)) in &cupti {
            let (n_nsys, total_nsys, _, _) = nsys[name];
            assert_eq!(*n, n_nsys, "{w}: {name} instances");
            let diff = (*total - total_nsys).abs() as f64 / total_nsys as f64;
            assert!(
                diff <= 0.05,
                "{w}: {name} total {total} vs nsys {total_nsys} ({:.2}%)",
                diff * 100.0
            );
            launched += n;
            sum += total;
            sum_nsys += total_nsys;
        }
        assert_eq!(launched, kernels, "{w}");
        let diff = (sum - sum_nsys).abs() as f64 / sum_nsys as f64;
        assert!(diff <= 0.02, "{w}: GPU time {sum} vs nsys {sum_nsys}");
    }
}
