//! What the converter's test binaries share: the converter built with this crate, the real
//! OpenTelemetry SDK client (tests/data/otlp_client.py), the stop call, and two oracles of a
//! report (the real nvtx_sum recipe, and SQL over NVTX_EVENTS).

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test helpers; each test binary uses some"
)]

use std::{
    collections::BTreeMap,
    ops::Not as _,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use nsight_e2e::{
    http,
    otlp::{self, Converter},
    wait_for,
};
use nsight_recipe_host::{Limits, RecipeHost, Value};
use serde_json::Value as Json;

/// The converter built with this crate, its data under `dir` and reports in `dir/storage`.
pub fn start(dir: &Path, extra: &[&str]) -> Converter {
    otlp::converter_with(
        Path::new(env!("CARGO_BIN_EXE_nsight-otlp")),
        dir,
        &dir.join("storage"),
        extra,
    )
}

/// Runs the SDK client (tests/data/otlp_client.py) and returns its JSON line.
pub fn client(args: &[&str]) -> Json {
    let python = nsight_e2e::cache_dir().join("venv/bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/otlp_client.py");
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .expect("run the OpenTelemetry SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

pub fn send_http(c: &Converter, args: &[&str]) -> Json {
    let endpoint = format!("http://{}/v1/traces", c.http);
    let mut all = vec!["--mode", "http", "--endpoint", &endpoint];
    all.extend_from_slice(args);
    let out = client(&all);
    assert_eq!(out["result"], "SUCCESS", "{out}");
    out
}

pub fn stop(c: &Converter, session: &str, collection: &str) -> Json {
    let r = http::request(
        c.http,
        "POST",
        &format!("/v1/collections/{session}/{collection}/stop"),
        &[],
        None,
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    serde_json::from_str(&r.body).unwrap()
}

/// The stored report of a stop's answer (exactly one).
pub fn report_of(dir: &Path, flushed: &Json) -> PathBuf {
    let reports = flushed["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 1, "{flushed}");
    assert_eq!(flushed["stored"], flushed["reports"], "{flushed}");
    dir.join("storage").join(reports[0].as_str().unwrap())
}

/// The real nvtx_sum component on `db`: range -> (instances, total ns), its push/pop and
/// start/end rows of one name added up (the spans' nesting decides the style, not the client).
pub fn nvtx_sum(db: &Path) -> BTreeMap<String, (i64, i64)> {
    let host = RecipeHost::new(Limits::default()).unwrap();
    let recipe = host
        .load(&nsight_e2e::wasm_artifact("recipes/nvtx_sum.wasm"))
        .unwrap();
    let out = host.run(&recipe, db, &[]).unwrap();
    let table = out
        .tables
        .iter()
        .find(|t| t.name == "nvtx_sum")
        .unwrap_or_else(|| panic!("{out:?}"));
    let col = |name: &str| {
        table
            .columns
            .iter()
            .position(|c| c.name == name)
            .unwrap_or_else(|| panic!("{:?}", table.columns))
    };
    let (range, n, total) = (col("Range"), col("Instances"), col("Total Time (ns)"));
    let int = |v: &Value| match v {
        Value::Int(i) => *i,
        v => panic!("{v:?}"),
    };
    let mut sums = BTreeMap::new();
    for r in &table.rows {
        let Value::Text(name) = &r[range] else {
            panic!("{r:?}")
        };
        let e: &mut (i64, i64) = sums.entry(name.clone()).or_default();
        e.0 += int(&r[n]);
        e.1 += int(&r[total]);
    }
    sums
}

/// What the client says nvtx_sum must find, summed over several sends.
pub fn expected(sends: &[&Json]) -> BTreeMap<String, (i64, i64)> {
    let mut out = BTreeMap::new();
    for send in sends {
        for (name, v) in send["expected"].as_object().unwrap() {
            let e: &mut (i64, i64) = out.entry(name.clone()).or_default();
            e.0 += v[0].as_i64().unwrap();
            e.1 += v[1].as_i64().unwrap();
        }
    }
    out
}

/// An independent oracle: ranges per name straight from the table, in SQL.
pub fn sql_ranges(db: &Path) -> BTreeMap<String, (i64, i64)> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT coalesce(d.text, '') || ':' || e.text, count(*), sum(e.end - e.start)
             FROM NVTX_EVENTS e
             LEFT JOIN NVTX_EVENTS d ON d.eventType = 75 AND d.domainId = e.domainId
             WHERE e.eventType IN (59, 60) GROUP BY 1",
        )
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Waits (20 s) until the converter holds spans of `session`: a collector forwards on its own
/// schedule. `log` explains a timeout (the collector's, the sidecar's).
pub fn wait_arrived(c: &Converter, session: &str, log: &str) {
    let arrived = wait_for(Duration::from_secs(20), || {
        let list = http::get(c.http, "/v1/collections", &[]).ok()?;
        list.body
            .contains("\"active_bytes\":0")
            .not()
            .then_some(())?;
        list.body
            .contains(&format!("\"session\":\"{session}\""))
            .then_some(())
    });
    assert!(arrived.is_some(), "no span of {session} arrived: {log}");
    // The last batch may still be on its way.
    std::thread::sleep(Duration::from_millis(500));
}
