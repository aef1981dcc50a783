//! `nsight-recipe-run`: runs one recipe component on one report file with the same host as the
//! service (no server, no storage), prints each table as CSV on stdout and the notes, timings
//! and peak RSS on stderr. Used by `cargo xtask bench recipes` and for trying a recipe by hand:
//!
//! ```text
//! nsight-recipe-run [--repeat N] [--fuel F] [--cache-dir DIR] COMPONENT.wasm REPORT.sqlite [--name value]...
//! ```
//! With `--cache-dir` the compiled component is kept in (and loaded from) that directory, as
//! the CLI's local form does; stderr then says `load_source disk` when it came from there.
//! With `--repeat N` the component is compiled once and run N times (as the service does:
//! compiled at start, a fresh sandbox per run); stderr gets `compile_ms`, one `run_ms` per run
//! and `peak_rss_kib`.

use std::{io::Write as _, path::PathBuf, process::ExitCode, time::Instant};

use anyhow::{bail, Context, Result};
use nsight_analysis::{table_to_csv, Limits, LoadSource, RecipeHost};

const USAGE: &str = "usage: nsight-recipe-run [--repeat N] [--fuel F] [--cache-dir DIR] \
                     COMPONENT.wasm REPORT.sqlite [--name value]...";

struct Cli {
    repeat: u32,
    fuel: Option<u64>,
    cache_dir: Option<PathBuf>,
    component: PathBuf,
    report: PathBuf,
    args: Vec<(String, String)>,
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Cli> {
    let (mut repeat, mut fuel, mut cache_dir) = (1u32, None, None);
    let mut positional = Vec::new();
    let mut args = Vec::new();
    while let Some(a) = argv.next() {
        let mut value = |what: &str| {
            argv.next()
                .with_context(|| format!("{what} needs a value; {USAGE}"))
        };
        match a.as_str() {
            "--repeat" if positional.is_empty() => {
                repeat = value("--repeat")?.parse().context("--repeat: a number")?;
            }
            "--fuel" if positional.is_empty() => {
                fuel = Some(value("--fuel")?.parse().context("--fuel: a number")?);
            }
            "--cache-dir" if positional.is_empty() => {
                cache_dir = Some(PathBuf::from(value("--cache-dir")?));
            }
            "-h" | "--help" => bail!("{USAGE}"),
            flag if flag.starts_with("--") && positional.len() == 2 => {
                let name = flag.trim_start_matches('-');
                let (name, v) = match name.split_once('=') {
                    Some((n, v)) => (n.to_owned(), v.to_owned()),
                    None => (name.to_owned(), value(flag)?),
                };
                args.push((name, v));
            }
            _ if positional.len() < 2 => positional.push(PathBuf::from(a)),
            other => bail!("unexpected argument {other:?}; {USAGE}"),
        }
    }
    let [component, report] = <[PathBuf; 2]>::try_from(positional)
        .map_err(|_| anyhow::anyhow!("a component and a report are needed; {USAGE}"))?;
    Ok(Cli {
        repeat: repeat.max(1),
        fuel,
        cache_dir,
        component,
        report,
        args,
    })
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn run(cli: &Cli) -> Result<()> {
    let mut limits = Limits::default();
    if let Some(f) = cli.fuel {
        limits.fuel = f;
    }
    let host = match &cli.cache_dir {
        Some(dir) => RecipeHost::with_cache_dir(limits, dir)?,
        None => RecipeHost::new(limits)?,
    };
    let t = Instant::now();
    let (component, source) = host.load_traced(&cli.component)?;
    let mut err = std::io::stderr().lock();
    writeln!(err, "compile_ms {:.1}", t.elapsed().as_secs_f64() * 1e3)?;
    let source = match source {
        LoadSource::Memory | LoadSource::Disk => "disk".to_owned(),
        LoadSource::Compiled => "compiled".to_owned(),
        LoadSource::Recompiled(why) => format!("recompiled ({why})"),
    };
    writeln!(err, "load_source {source}")?;
    let mut last = None;
    for _ in 0..cli.repeat {
        let t = Instant::now();
        let out = host
            .run(&component, &cli.report, &cli.args)
            .with_context(|| format!("running on {}", cli.report.display()))?;
        writeln!(err, "run_ms {:.1}", t.elapsed().as_secs_f64() * 1e3)?;
        last = Some(out);
    }
    let out = last.context("no run")?;
    for note in &out.notes {
        writeln!(err, "note: {note}")?;
    }
    writeln!(err, "peak_rss_kib {}", peak_rss_kib())?;
    let mut stdout = std::io::stdout().lock();
    for table in &out.tables {
        stdout.write_all(table_to_csv(table).as_bytes())?;
    }
    Ok(())
}

fn main() -> ExitCode {
    match parse(std::env::args().skip(1)).and_then(|cli| run(&cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nsight-recipe-run: {e:#}");
            ExitCode::FAILURE
        }
    }
}
