//! `cargo xtask bench nvtx`: the cost of our NVTX injection (libnsight_nvtx.so, release) in a
//! tight loop of `nvtxRangePushA`/`nvtxRangePop` pairs in a C program built with gcc -O2, against
//! the same program with no injection (NVTX's no-op path); and the memory the recorded events
//! take (peak RSS with recording minus without, per million events). The dump at exit is not
//! timed.

use std::process::Command;

use anyhow::{bail, Context, Result};
use nsight_e2e::TempDir;

use crate::{cmd::run as run_cmd, paths::Layout};

/// Push/pop pairs per run (two events each: a push and a pop make one recorded range).
const PAIRS: u64 = 1_000_000;

pub(crate) const PROGRAM: &str = r#"
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static long long now_ns(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static long hwm_kib(void) {
    FILE* f = fopen("/proc/self/status", "r"); char line[256]; long kib = -1;
    while (f && fgets(line, sizeof line, f)) if (!strncmp(line, "VmHWM:", 6)) kib = atol(line + 6);
    if (f) fclose(f);
    return kib;
}
int main(int argc, char** argv) {
    long long n = atoll(argv[1]);
    nvtxRangePushA("warmup"); nvtxRangePop();
    long long t0 = now_ns();
    for (long long i = 0; i < n; i++) { nvtxRangePushA("pair"); nvtxRangePop(); }
    long long t1 = now_ns();
    printf("%lld %ld\n", t1 - t0, hwm_kib());
    return 0;
}
"#;

struct Sample {
    ns_per_pair: f64,
    hwm_kib: f64,
}

fn once(
    exe: &std::path::Path,
    injection: Option<&std::path::Path>,
    dump_dir: &std::path::Path,
) -> Result<Sample> {
    let mut cmd = Command::new(exe);
    cmd.arg(PAIRS.to_string())
        .env_remove("NVTX_INJECTION64_PATH")
        .env_remove("NSIGHT_NVTX_CONTROL")
        .env("NSIGHT_NVTX_DUMP_DIR", dump_dir);
    if let Some(lib) = injection {
        cmd.env("NVTX_INJECTION64_PATH", lib);
    }
    let out = cmd.output().context("running the NVTX bench program")?;
    if !out.status.success() {
        bail!(
            "the bench program failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    let ns: f64 = words.next().context("no time printed")?.parse()?;
    let hwm: f64 = words.next().context("no RSS printed")?.parse()?;
    Ok(Sample {
        ns_per_pair: ns / PAIRS as f64,
        hwm_kib: hwm,
    })
}

/// The bench program (`PROGRAM`, gcc -O2) built in `dir`: `bench N` runs N push/pop pairs and
/// prints the loop's nanoseconds and its peak RSS in KiB.
pub(crate) fn build_program(layout: &Layout, dir: &std::path::Path) -> Result<std::path::PathBuf> {
    let include = std::fs::read_dir(layout.venv().join("lib"))?
        .filter_map(Result::ok)
        .map(|e| e.path().join("site-packages/nvidia/nvtx/include"))
        .find(|p| p.exists())
        .context("the venv has no NVTX headers: run `cargo xtask setup`")?;
    let src = dir.join("bench.c");
    let exe = dir.join("bench");
    std::fs::write(&src, PROGRAM)?;
    run_cmd(
        Command::new("gcc")
            .args(["-O2", "-o"])
            .arg(&exe)
            .arg(&src)
            .arg("-I")
            .arg(&include)
            .arg("-ldl"),
    )?;
    Ok(exe)
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn nvtx(layout: &Layout) -> Result<()> {
    let lib = crate::bench::build_release(layout, &["-p", "nsight-agent-nvtx"])?
        .join("libnsight_nvtx.so");
    let dir = TempDir::new("bench-nvtx");
    let exe = build_program(layout, dir.path())?;
    let runs = 5;
    let (mut base, mut inj, mut base_mem, mut inj_mem) = (vec![], vec![], vec![], vec![]);
    for _ in 0..runs {
        let b = once(&exe, None, dir.path())?;
        let i = once(&exe, Some(&lib), dir.path())?;
        base.push(b.ns_per_pair);
        base_mem.push(b.hwm_kib);
        inj.push(i.ns_per_pair);
        inj_mem.push(i.hwm_kib);
    }
    let (base, inj) = (median(base), median(inj));
    let mem_mib = (median(inj_mem) - median(base_mem)) / 1024.0 * (1_000_000.0 / PAIRS as f64);
    println!(
        "NVTX push/pop pairs, {PAIRS} per run, median of {runs} runs (gcc -O2, release injection):"
    );
    println!(
        "  no injection:      {base:8.1} ns/pair  {:10.0} pairs/s",
        1e9 / base
    );
    println!(
        "  libnsight_nvtx.so: {inj:8.1} ns/pair  {:10.0} pairs/s",
        1e9 / inj
    );
    println!(
        "  overhead:          {:8.1} ns/pair (target < 1000)",
        inj - base
    );
    println!("  memory:            {mem_mib:8.1} MiB per million recorded ranges (peak RSS delta)");
    Ok(())
}
