//! Toolchain proof 2: recipe guest components (plugins/recipes/*, built for
//! wasm32-unknown-unknown and componentised with wasm-tools) instantiated by our wasmtime host.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use nsight_analysis::{Limits, RecipeHost, RecipeHostError};
use nsight_e2e::{wasm_artifact, TempDir};

#[test]
fn host_calls_describe_on_the_nvtx_sum_component() {
    let host = RecipeHost::new(Limits::default()).unwrap();
    let component = host.load(&wasm_artifact("recipes/nvtx_sum.wasm")).unwrap();
    let info = host.describe(&component).unwrap();
    assert_eq!(info.name, "nvtx_sum");
    assert_eq!(info.display_name, "NVTX Range Summary");
    let names: Vec<&str> = info.arguments.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["timeunit", "filter-time", "filter-nvtx"]);
    assert_eq!(info.arguments[0].default_value.as_deref(), Some("nsec"));
}

#[test]
fn every_recipe_describes_itself() {
    const STATS: [&str; 3] = ["timeunit", "filter-time", "filter-nvtx"];
    let host = RecipeHost::new(Limits::default()).unwrap();
    for (file, name, args) in [
        ("nvtx_sum", "nvtx_sum", &STATS[..]),
        (
            "cuda_gpu_kern_sum",
            "cuda_gpu_kern_sum",
            &["timeunit", "name", "filter-time", "filter-nvtx"][..],
        ),
        ("cuda_api_sum", "cuda_api_sum", &STATS[..]),
        ("cuda_gpu_mem_time_sum", "cuda_gpu_mem_time_sum", &STATS[..]),
        (
            "cuda_gpu_mem_size_sum",
            "cuda_gpu_mem_size_sum",
            &STATS[1..],
        ),
        ("osrt_sum", "osrt_sum", &STATS[..]),
        ("sql", "sql", &["query", "limit"][..]),
        (
            "cuda_kern_exec_sum",
            "cuda_kern_exec_sum",
            &["timeunit", "name", "filter-time", "filter-nvtx"][..],
        ),
        (
            "nvtx_kern_sum",
            "nvtx_kern_sum",
            &["timeunit", "name", "filter-time", "filter-nvtx"][..],
        ),
        (
            "cuda_memcpy_async",
            "cuda_memcpy_async",
            &["timeunit", "rows", "filter-time", "filter-nvtx"][..],
        ),
        (
            "cuda_gpu_trace",
            "cuda_gpu_trace",
            &["timeunit", "name", "filter-time", "filter-nvtx"][..],
        ),
        ("nvtx_gpu_proj_sum", "nvtx_gpu_proj_sum", &STATS[..]),
        ("um_sum", "um_sum", &["rows"][..]),
        (
            "cuda_api_gpu_sum",
            "cuda_api_gpu_sum",
            &["timeunit", "name", "filter-time", "filter-nvtx"][..],
        ),
        (
            "cuda_memcpy_sync",
            "cuda_memcpy_sync",
            &["timeunit", "rows", "filter-time", "filter-nvtx"][..],
        ),
        (
            "cuda_gpu_kern_pace",
            "cuda_gpu_kern_pace",
            &["name", "timeunit", "filter-time", "filter-nvtx"][..],
        ),
        (
            "nvtx_pace",
            "nvtx_pace",
            &["name", "timeunit", "filter-time", "filter-nvtx"][..],
        ),
        (
            "nccl_sum",
            "nccl_sum",
            &["timeunit", "name", "filter-time", "filter-nvtx"][..],
        ),
        (
            "nccl_gpu_time_util_map",
            "nccl_gpu_time_util_map",
            &["bins", "timeunit", "filter-time", "filter-nvtx"][..],
        ),
    ] {
        let component = host
            .load(&wasm_artifact(&format!("recipes/{file}.wasm")))
            .unwrap();
        let info = host.describe(&component).unwrap();
        assert_eq!(info.name, name);
        assert!(!info.description.is_empty());
        let names: Vec<&str> = info.arguments.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, args, "{name}");
    }
}

#[test]
fn same_component_is_compiled_once() {
    let host = RecipeHost::new(Limits::default()).unwrap();
    let path = wasm_artifact("recipes/nvtx_sum.wasm");
    let a = host.load(&path).unwrap();
    let b = host.load(&path).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    assert_eq!(host.cached_components(), 1);
}

#[test]
fn a_call_out_of_fuel_fails_cleanly() {
    let host = RecipeHost::new(Limits {
        fuel: 10,
        ..Limits::default()
    })
    .unwrap();
    let component = host.load(&wasm_artifact("recipes/nvtx_sum.wasm")).unwrap();
    let err = host.describe(&component).unwrap_err();
    assert!(
        matches!(
            err,
            RecipeHostError::Call { .. } | RecipeHostError::Instantiate(_)
        ),
        "{err:?}"
    );
}

#[test]
fn a_file_that_is_not_a_component_is_refused_with_its_path() {
    let dir = TempDir::new("not-a-component");
    let path = dir.path().join("bogus.wasm");
    std::fs::write(&path, b"not wasm at all").unwrap();
    let host = RecipeHost::new(Limits::default()).unwrap();
    let err = host.load(&path).unwrap_err();
    assert!(err.to_string().contains("bogus.wasm"), "{err}");
    assert!(matches!(err, RecipeHostError::Compile { .. }));
}

/// Never ends on its own: only the SQL call limit or a cancel stops it.
const RUNAWAY: &str = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) \
                       SELECT max(x) FROM c";

#[test]
fn a_cancelled_run_stops_within_a_second() {
    let host = RecipeHost::new(Limits::default()).unwrap();
    let component = host.load(&wasm_artifact("recipes/sql.wasm")).unwrap();
    let dir = TempDir::new("cancel-run");
    let db = dir.path().join("r.sqlite");
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE StringIds (id INTEGER, value TEXT);")
        .unwrap();
    let args = [("query".to_string(), RUNAWAY.to_string())];

    let early = host.cancel_handle();
    early.cancel();
    let err = host
        .run_cancellable(&component, &db, &args, &early)
        .unwrap_err();
    assert!(matches!(err, RecipeHostError::Cancelled), "{err:?}");

    let cancel = host.cancel_handle();
    std::thread::scope(|s| {
        let run = s.spawn(|| host.run_cancellable(&component, &db, &args, &cancel));
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(!run.is_finished(), "the runaway query ended by itself");
        let t = std::time::Instant::now();
        cancel.cancel();
        let err = run.join().unwrap().unwrap_err();
        assert!(
            t.elapsed() < std::time::Duration::from_secs(1),
            "{:?}",
            t.elapsed()
        );
        assert!(matches!(err, RecipeHostError::Cancelled), "{err:?}");
    });
    // Another run on the same host is not affected by that cancel.
    let ok = host
        .run(
            &component,
            &db,
            &[("query".into(), "SELECT 1 AS one".into())],
        )
        .unwrap();
    assert_eq!(ok.tables[0].rows.len(), 1);
}
