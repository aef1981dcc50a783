//! A report made from CUPTI activity records, the whole way the agent makes it without nsys:
//! record bytes laid out as CUPTI lays them (`CUpti_ActivityKernel10`, `Memcpy6`, `Memset4`,
//! `API`, checked against the headers in e2e/tests/agent_cupti.rs) -> decode -> collector ->
//! dump -> SQLite report -> every recipe (the real Wasm components, run by the analysis host).
//! The GPU run of `cargo xtask gpu-check` compares the same path with nsys on a real GPU.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use nsight_agent::report::{self, ReportMeta};
use nsight_analysis::{Limits, RecipeHost, Value};
use nsight_nvtx::{
    cuda::{CudaActivity, Device},
    cupti::{
        collector::Collector,
        decode::{decode, synth},
        layout,
    },
    dump::{Dump, Window},
};

fn api(kind: u32, cbid: u64, start: u64, end: u64, correlation: u64) -> Vec<u8> {
    let mut rec = synth::record(kind, 40);
    for (f, v) in [
        ("cbid", cbid),
        ("start", start),
        ("end", end),
        ("processId", 4242),
        ("threadId", 4243),
        ("correlationId", correlation),
    ] {
        synth::set(&mut rec, layout::api::FIELDS, f, v);
    }
    rec
}

fn copy(kind: u64, bytes: u64, start: u64, end: u64) -> Vec<u8> {
    let mut rec = synth::record(layout::kind::MEMCPY, 96);
    for (f, v) in [
        ("copyKind", kind),
        ("srcKind", 1),
        ("dstKind", 3),
        ("bytes", bytes),
        ("start", start),
        ("end", end),
        ("streamId", 7),
        ("contextId", 1),
    ] {
        synth::set(&mut rec, layout::memcpy::FIELDS, f, v);
    }
    rec
}

/// Two kernels (saxpy x3, an extern "C" reduction x1), two copies, a set, four runtime calls
/// and a driver call; one kernel before the window.
fn activity() -> CudaActivity {
    let saxpy = 1u64;
    let reduce = 2u64;
    let mut records = Vec::new();
    for (start, end, name) in [
        (500, 900, saxpy), // before the window: left out
        (1_000, 2_000, saxpy),
        (3_000, 5_000, saxpy),
        (6_000, 6_600, saxpy),
        (7_000, 10_000, reduce),
    ] {
        records.push(synth::kernel(&[
            ("start", start),
            ("end", end),
            ("deviceId", 0),
            ("contextId", 1),
            ("streamId", 7),
            ("gridX", 16_384),
            ("gridY", 1),
            ("gridZ", 1),
            ("blockX", 256),
            ("blockY", 1),
            ("blockZ", 1),
            ("registersPerThread", 16),
            ("correlationId", start),
            ("name", name),
        ]));
    }
    records.push(copy(1, 1 << 20, 11_000, 12_000));
    records.push(copy(2, 1 << 19, 13_000, 13_500));
    let mut set = synth::record(layout::kind::MEMSET, 88);
    for (f, v) in [
        ("bytes", 4096),
        ("start", 14_000),
        ("end", 14_100),
        ("memoryKind", 3),
        ("streamId", 7),
    ] {
        synth::set(&mut set, layout::memset::FIELDS, f, v);
    }
    records.push(set);
    for (start, end) in [(990, 995), (2_990, 2_995), (5_990, 5_996)] {
        records.push(api(layout::kind::RUNTIME, 211, start, end, start + 10));
    }
    records.push(api(layout::kind::RUNTIME, 20, 10_500, 12_500, 1));
    records.push(api(layout::kind::DRIVER, 307, 6_990, 6_999, 7_000));

    let c = Collector::new(1 << 20);
    for rec in &records {
        let d = decode(rec).unwrap();
        c.add(
            d,
            |ptr| match ptr {
                1 => "_Z5saxpyifPKfPf".into(),
                _ => "reduce_blocks".into(),
            },
            |_, cbid| match cbid {
                211 => "cudaLaunchKernel_v7000".into(),
                20 => "cudaMemcpy_v3020".into(),
                _ => "cuLaunchKernel".into(),
            },
        );
    }
    let mut a = c.take(1_000, 20_000);
    a.devices = vec![Device {
        id: 0,
        name: "NVIDIA H200".into(),
        uuid: "GPU-00000000-0000-0000-0000-000000000000".into(),
        total_memory: 150_000_000_000,
        sm_count: 132,
        compute_major: 9,
        compute_minor: 0,
        clock_rate_khz: 1_980_000,
        l2_cache_size: 50_000_000,
        bus_location: "0000:19:00.0".into(),
    }];
    a
}

fn report() -> (tempdir::Dir, std::path::PathBuf) {
    let dir = tempdir::Dir::new();
    let db = dir.0.join("cupti.sqlite");
    let dump = Dump {
        pid: 4242,
        process_name: "cuda_sample".into(),
        window: Window {
            start_ns: 1_000,
            end_ns: 20_000,
            utc_start_ns: 1_779_782_330_000_000_000,
        },
        strings: vec![],
        thread_names: vec![],
        events: vec![],
        cuda: Some(activity()),
    };
    let meta = ReportMeta {
        export_time_utc: String::new(),
        host: String::new(),
        output_file: "cupti.sqlite".into(),
    };
    report::write_file(&dump, &meta, &db).unwrap();
    (dir, db)
}

mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Self {
            let p = std::env::temp_dir().join(format!(
                "cupti-report-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Self(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Text(t) => t.clone(),
        v => panic!("{v:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        v => panic!("{v:?}"),
    }
}

/// (name, instances, total ns) from a summary table.
fn summary(recipe: &str, args: &[&str], name_col: &str) -> Vec<(String, i64, i64)> {
    summary_with(recipe, args, name_col, "Instances")
}

fn summary_with(
    recipe: &str,
    args: &[&str],
    name_col: &str,
    count_col: &str,
) -> Vec<(String, i64, i64)> {
    let (_dir, db) = report();
    let host = RecipeHost::new(Limits::default()).unwrap();
    let loaded = host
        .load(&nsight_e2e::wasm_artifact(&format!(
            "recipes/{recipe}.wasm"
        )))
        .unwrap();
    let args: Vec<(String, String)> = args
        .chunks(2)
        .map(|kv| (kv[0].trim_start_matches('-').to_owned(), kv[1].to_owned()))
        .collect();
    let out = host.run(&loaded, &db, &args).unwrap();
    let table = out
        .tables
        .iter()
        .find(|t| t.name == recipe)
        .unwrap_or_else(|| panic!("{out:?}"));
    let col = |name: &str| {
        table
            .columns
            .iter()
            .position(|c| c.name == name)
            .unwrap_or_else(|| panic!("{name} in {:?}", table.columns))
    };
    let (n, count, total) = (col(name_col), col(count_col), col("Total Time (ns)"));
    table
        .rows
        .iter()
        .map(|r| (text(&r[n]), int(&r[count]), int(&r[total])))
        .collect()
}

#[test]
fn cuda_gpu_kern_sum_counts_and_times_the_cupti_kernels() {
    assert_eq!(
        summary("cuda_gpu_kern_sum", &[], "Name"),
        [
            (
                "saxpy(int, float, float const*, float*)".to_owned(),
                3,
                3_600
            ),
            ("reduce_blocks".to_owned(), 1, 3_000),
        ]
    );
    assert_eq!(
        summary("cuda_gpu_kern_sum", &["--name", "base"], "Name"),
        [
            ("saxpy".to_owned(), 3, 3_600),
            ("reduce_blocks".to_owned(), 1, 3_000)
        ]
    );
}

#[test]
fn memory_and_api_summaries_read_the_cupti_rows() {
    assert_eq!(
        summary_with("cuda_gpu_mem_time_sum", &[], "Operation", "Count"),
        [
            ("[CUDA memcpy Host-to-Device]".to_owned(), 1, 1_000),
            ("[CUDA memcpy Device-to-Host]".to_owned(), 1, 500),
            ("[CUDA memset]".to_owned(), 1, 100),
        ]
    );
    assert_eq!(
        summary_with("cuda_api_sum", &[], "Name", "Num Calls"),
        [
            ("cudaMemcpy".to_owned(), 1, 2_000),
            // The launch at 990 ns is before the window.
            ("cudaLaunchKernel".to_owned(), 2, 11),
            ("cuLaunchKernel".to_owned(), 1, 9),
        ]
    );
}

#[test]
fn every_recipe_runs_on_a_cupti_report() {
    let (_dir, db) = report();
    let host = RecipeHost::new(Limits::default()).unwrap();
    let recipes = nsight_e2e::wasm_artifact("recipes");
    let mut ran = Vec::new();
    for entry in std::fs::read_dir(&recipes).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        // diff compares two reports; sql needs a query; nvtx_pace needs NVTX ranges, which
        // this report has none of.
        if ["diff", "sql", "nvtx_pace"].contains(&name.as_str()) {
            continue;
        }
        // The pace of a kernel: its instances are the iterations.
        let args = match name.as_str() {
            "cuda_gpu_kern_pace" => vec![(
                "name".to_owned(),
                "saxpy(int, float, float const*, float*)".to_owned(),
            )],
            _ => vec![],
        };
        let loaded = host.load(&path).unwrap();
        let out = host
            .run(&loaded, &db, &args)
            .unwrap_or_else(|e| panic!("{name} on a CUPTI report: {e}"));
        ran.push((name, out.tables.iter().map(|t| t.rows.len()).sum::<usize>()));
    }
    ran.sort();
    let rows = |n: &str| ran.iter().find(|(r, _)| r == n).map(|(_, c)| *c);
    assert!(ran.len() >= 15, "{ran:?}");
    // The GPU reports have rows: 4 kernels and 3 memory operations in the window.
    assert_eq!(rows("cuda_gpu_trace"), Some(4 + 3), "{ran:?}");
    assert!(rows("cuda_kern_exec_sum").unwrap_or(0) >= 2, "{ran:?}");
    assert!(rows("gpu_time_util").unwrap_or(0) >= 1, "{ran:?}");
    // Three saxpy iterations, and the duration and gap statistics.
    assert_eq!(rows("cuda_gpu_kern_pace"), Some(3 + 2), "{ran:?}");
}
