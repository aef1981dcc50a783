//! `cargo xtask bench recipes [ROWS] [--layout plain|static|ordered]`: `cuda_gpu_kern_sum` through our Wasm recipe host against
//! the references the issue names, in one run, on the largest real export
//! (shared/testdata/nsys/gtls/report1.sqlite, 23,419 kernels) and on a synthetic export of ROWS
//! kernels (default 10,000,000) sampled with replacement from that file's kernel rows (every
//! column kept, so names and durations follow its distributions):
//!
//! - ours: `nsight-recipe-run` (release, linked as `--layout` says: `ordered` by default, see
//!   `runner_layout.rs`) running the built component with the on-disk
//!   compiled-component cache (`--cache-dir`, as the CLI's local form and a restarted service
//!   use it): one untimed warm-up process compiles and stores it (its compile time is shown),
//!   the timed processes load it from the cache; wall time of the whole process and of the run
//!   alone;
//! - (a) the same statistics as one SQL query in the sqlite3 CLI (the test oracle
//!   controlplane/analysis/tests/oracle/cuda_gpu_kern_sum.sql);
//! - (b) pandas: `read_sql_query` of the kernels joined with their names, then `groupby` with
//!   sum, count, mean, median, min, max, std.
//!
//! Each is run 3 times (1 for the synthetic file); the median is shown. Peak RSS comes from
//! `/usr/bin/time -f %M`. The three outputs must have the same number of rows.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{bail, Context, Result};

use crate::{cmd::run as run_cmd, paths::Layout, runner_layout::RunnerLayout};

const PANDAS: &str = r#"
import sqlite3, sys
import pandas as pd
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
df = pd.read_sql_query(
    'SELECT k."end" - k.start AS dur, coalesce(s.value, \'\') AS name '
    'FROM CUPTI_ACTIVITY_KIND_KERNEL AS k LEFT JOIN StringIds AS s ON s.id = k.demangledName',
    con)
g = df.groupby("name")["dur"].agg(["sum", "count", "mean", "median", "min", "max", "std"])
g["std"] = g["std"].fillna(0.0)
g["pct"] = (g["sum"] * 100.0 / g["sum"].sum()).round(1)
for c in ("mean", "median", "std"):
    g[c] = g[c].round(1)
g = g.reset_index().sort_values(["sum", "count", "name"], ascending=[False, False, True])
g[["pct", "sum", "count", "mean", "median", "min", "max", "std", "name"]].to_csv(sys.stdout, index=False)
"#;

/// One measured process: wall seconds, peak RSS (MiB), stdout, stderr.
pub(crate) struct Measured {
    pub(crate) secs: f64,
    pub(crate) rss_mib: f64,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `program args` under `/usr/bin/time` (peak RSS), with `stdin` when given.
pub(crate) fn measure(program: &Path, args: &[&str], stdin: Option<&str>) -> Result<Measured> {
    let mut c = Command::new("/usr/bin/time");
    c.args(["-f", "MAXRSS_KIB %M"]).arg(program).args(args);
    let t = Instant::now();
    let out = match stdin {
        Some(input) => {
            use std::io::Write as _;
            let mut child = c
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .with_context(|| format!("starting {}", program.display()))?;
            child
                .stdin
                .take()
                .context("stdin")?
                .write_all(input.as_bytes())?;
            child.wait_with_output()?
        }
        None => c
            .output()
            .with_context(|| format!("starting {}", program.display()))?,
    };
    let secs = t.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        bail!("{} failed: {stderr}", program.display());
    }
    let rss_kib: f64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("MAXRSS_KIB "))
        .context("no peak RSS from /usr/bin/time")?
        .trim()
        .parse()?;
    Ok(Measured {
        secs,
        rss_mib: rss_kib / 1024.0,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
    })
}

/// The median run of `runs` (by wall time).
fn median_of(runs: Result<Vec<Measured>>) -> Result<Measured> {
    let mut runs = runs?;
    runs.sort_by(|a, b| a.secs.total_cmp(&b.secs));
    let mid = runs.len() / 2;
    runs.into_iter().nth(mid).context("no runs")
}

fn repeat(n: usize, f: impl Fn() -> Result<Measured>) -> Result<Vec<Measured>> {
    (0..n).map(|_| f()).collect()
}

/// Data rows of a CSV with a header line.
fn csv_rows(text: &str) -> usize {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .count()
        .saturating_sub(1)
}

fn stat(stderr: &str, key: &str) -> Option<f64> {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
}

/// The synthetic export with `rows` kernels, made once under the cache dir.
fn synthetic(layout: &Layout, source: &Path, rows: u64) -> Result<PathBuf> {
    let dir = layout.cache.join("bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("kernels-{rows}.sqlite"));
    if path.exists() {
        return Ok(path);
    }
    let partial = dir.join(format!("kernels-{rows}.sqlite.partial"));
    let _ = std::fs::remove_file(&partial);
    eprintln!("generating {} ({rows} kernels)", path.display());
    let sql = format!(
        "ATTACH 'file:{src}?mode=ro' AS src;
         CREATE TABLE StringIds AS SELECT * FROM src.StringIds;
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL AS SELECT * FROM src.CUPTI_ACTIVITY_KIND_KERNEL WHERE 0;
         CREATE TEMP TABLE pick AS SELECT * FROM src.CUPTI_ACTIVITY_KIND_KERNEL;
         WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n WHERE x < {last}),
         t AS MATERIALIZED (SELECT x, 1 + abs(random()) % (SELECT count(*) FROM pick) AS r FROM n)
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL
             SELECT p.* FROM t JOIN pick AS p ON p.rowid = t.r ORDER BY t.x;",
        src = source.display(),
        last = rows.saturating_sub(1)
    );
    run_cmd(Command::new("sqlite3").arg(&partial).arg(sql))?;
    std::fs::rename(&partial, &path)?;
    Ok(path)
}

struct Row {
    input: String,
    file_mib: f64,
    ours: Measured,
    ours_compile_ms: f64,
    ours_load_ms: f64,
    ours_run_ms: f64,
    sqlite: Measured,
    pandas: Measured,
}

fn bench_one(
    layout: &Layout,
    runner: &Path,
    input: &Path,
    runs: usize,
    rows: usize,
) -> Result<Row> {
    let component = layout.dist().join("recipes/cuda_gpu_kern_sum.wasm");
    let input_s = input.to_str().context("input path is not UTF-8")?;
    let component_s = component.to_str().context("component path is not UTF-8")?;
    let fuel = format!("{}", 1_000u64 * 1_000_000_000);
    // A fresh cache: the warm-up process compiles and stores, the timed ones load.
    let cache = layout.cache.join("bench/compiled");
    let _ = std::fs::remove_dir_all(&cache);
    let cache_s = cache.to_str().context("cache path is not UTF-8")?;
    let ours_args = [
        "--fuel",
        &fuel,
        "--cache-dir",
        cache_s,
        component_s,
        input_s,
    ];
    let warm = measure(runner, &ours_args, None)?;
    if !warm.stderr.contains("load_source compiled") {
        bail!("the warm-up run did not compile: {}", warm.stderr);
    }
    let ours = median_of(repeat(runs, || {
        let m = measure(runner, &ours_args, None)?;
        if !m.stderr.contains("load_source disk") {
            bail!("a timed run did not load from the cache: {}", m.stderr);
        }
        Ok(m)
    }))?;
    let oracle = std::fs::read_to_string(
        layout
            .root
            .join("controlplane/analysis/tests/oracle/cuda_gpu_kern_sum.sql"),
    )?
    .replace("NAME_COLUMN", "demangledName");
    let oracle = format!(
        ".parameter set :lo {}\n.parameter set :hi {}\n{oracle}",
        i64::MIN,
        i64::MAX
    );
    let sqlite3 = Path::new("/usr/bin/sqlite3");
    let sqlite = median_of(repeat(runs, || {
        measure(
            sqlite3,
            &["-readonly", "-csv", "-header", input_s],
            Some(&oracle),
        )
    }))?;
    let python = layout.venv().join("bin/python");
    let pandas = median_of(repeat(runs, || {
        measure(&python, &["-c", PANDAS, input_s], None)
    }))?;
    let counts = [
        csv_rows(&ours.stdout),
        csv_rows(&sqlite.stdout),
        csv_rows(&pandas.stdout),
    ];
    if counts.iter().any(|&c| c != rows) {
        bail!(
            "{}: row counts differ (ours, sqlite3, pandas) = {counts:?}, expected {rows}",
            input.display()
        );
    }
    Ok(Row {
        input: input
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        file_mib: std::fs::metadata(input)?.len() as f64 / (1 << 20) as f64,
        ours_compile_ms: stat(&warm.stderr, "compile_ms").unwrap_or(f64::NAN),
        ours_load_ms: stat(&ours.stderr, "compile_ms").unwrap_or(f64::NAN),
        ours_run_ms: stat(&ours.stderr, "run_ms").unwrap_or(f64::NAN),
        ours,
        sqlite,
        pandas,
    })
}

fn distinct_names(input: &Path) -> Result<usize> {
    let out = Command::new("sqlite3")
        .args(["-readonly"])
        .arg(input)
        .arg(
            "SELECT count(DISTINCT coalesce(s.value, '')) FROM CUPTI_ACTIVITY_KIND_KERNEL AS k \
             LEFT JOIN StringIds AS s ON s.id = k.demangledName",
        )
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().parse()?)
}

pub fn recipes(layout: &Layout, rows: u64, runner_layout: RunnerLayout) -> Result<()> {
    let component = layout.dist().join("recipes/cuda_gpu_kern_sum.wasm");
    if !component.exists() {
        bail!(
            "{} missing: run `cargo xtask build-wasm` first",
            component.display()
        );
    }
    if !layout.venv().join("bin/python").exists() {
        bail!("the Python venv is missing: run `cargo xtask setup python` (pandas)");
    }
    let testdata = std::env::var_os("NSIGHT_TESTDATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| layout.root.join("../shared/testdata/nsys"));
    let real = testdata.join("gtls/report1.sqlite");
    let synthetic = synthetic(layout, &real, rows)?;
    let runner = crate::runner_layout::build(layout, runner_layout, &testdata)?;
    let mut results = Vec::new();
    for (input, runs) in [(real.as_path(), 3), (synthetic.as_path(), 1)] {
        let names = distinct_names(input)?;
        eprintln!("benchmarking {} ({names} kernel names)", input.display());
        results.push(bench_one(layout, &runner, input, runs, names)?);
    }
    println!(
        "\ncuda_gpu_kern_sum, end to end (process start to CSV), median wall time and peak RSS; \
         runner layout `{}`",
        runner_layout.name()
    );
    println!(
        "| input | file | ours (Wasm host, cached component) | run alone | load from cache | compile (first process) | (a) sqlite3 CLI, one query | (b) pandas groupby | ours vs (a) | ours vs (b) | our RSS vs 2x file |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &results {
        println!(
            "| {} | {:.1} MiB | {:.3} s, {:.1} MiB | {:.0} ms | {:.0} ms | {:.0} ms | {:.3} s, {:.1} MiB | {:.3} s, {:.0} MiB | {:.1}x faster | {:.1}x faster | {:.1} MiB vs {:.1} MiB |",
            r.input,
            r.file_mib,
            r.ours.secs,
            r.ours.rss_mib,
            r.ours_run_ms,
            r.ours_load_ms,
            r.ours_compile_ms,
            r.sqlite.secs,
            r.sqlite.rss_mib,
            r.pandas.secs,
            r.pandas.rss_mib,
            r.sqlite.secs / r.ours.secs,
            r.pandas.secs / r.ours.secs,
            r.ours.rss_mib,
            2.0 * r.file_mib
        );
    }
    Ok(())
}
