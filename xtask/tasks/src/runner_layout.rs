//! How `cargo xtask bench recipes` links the release `nsight-recipe-run`: the code layout that
//! decides how much of the binary a recipe run pages in.
//!
//! A run of a cached component executes about 1.3 MiB of the runner's 13 MiB of code (SQLite's
//! VM, the wasmtime runtime, the host), but those functions lie scattered among Cranelift's, so
//! each first touch maps a whole 64 KiB fault-around window: about 5 MiB of code pages for one
//! report. The layouts, each a relink of the same compiled code (`cargo rustc`):
//!
//! ```text
//!  plain    cargo build --release                        dynamic glibc, RELA relocations
//!  static   + -C target-feature=+crt-static              static-pie (still ASLR): only the libc
//!           + -z pack-relative-relocs                    code it calls; RELR (4 KiB, not 430 KiB)
//!  ordered  static + --symbol-ordering-file              the functions training runs executed,
//!                                                        first and together
//! ```
//!
//! Training (for `ordered`): valgrind's callgrind runs the static binary on recipes and reports
//! that are not the benchmark's input (see [`TRAINING`]), each once to compile into a private
//! cache and once from that cache with `--dump-instr=yes`; every executed instruction address
//! is mapped to its symbol through `nm`, and those symbols, in their original address order,
//! are the ordering file. Symbols the file names that the new link lacks are ignored, so the
//! worst a stale file can do is order less.

use std::{
    collections::{BTreeMap, HashMap},
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};

use crate::{cmd::run as run_cmd, paths::Layout};

/// Which link of the runner to build (`--layout` of `cargo xtask bench recipes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunnerLayout {
    Plain,
    Static,
    Ordered,
}

impl RunnerLayout {
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "plain" => Ok(Self::Plain),
            "static" => Ok(Self::Static),
            "ordered" => Ok(Self::Ordered),
            other => bail!("--layout is plain, static or ordered, not `{other}`"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Static => "static",
            Self::Ordered => "ordered",
        }
    }
}

/// (recipe, report under the test data dir): the training runs. None is the benchmark's input
/// (gtls/report1.sqlite), so its figures show how the order carries over to other reports.
pub const TRAINING: &[(&str, &str)] = &[
    ("cuda_gpu_kern_sum", "nsys-ai/h100_2gpu_1s.sqlite"),
    ("cuda_api_sum", "nsys-ai/mfu_2gpu_before.sqlite"),
    ("nvtx_sum", "nsys-ai/h100_2gpu_1s.sqlite"),
];

const STATIC_FLAGS: &[&str] = &[
    "-C",
    "target-feature=+crt-static",
    "-C",
    "link-arg=-Wl,-z,pack-relative-relocs",
];

/// Builds the runner in `which` layout; returns the binary's path.
pub fn build(layout: &Layout, which: RunnerLayout, testdata: &Path) -> Result<PathBuf> {
    let binary = layout.host_target().join("release/nsight-recipe-run");
    match which {
        RunnerLayout::Plain => {
            crate::bench::build_release(
                layout,
                &["-p", "nsight-analysis", "--bin", "nsight-recipe-run"],
            )?;
        }
        RunnerLayout::Static => relink(layout, &[])?,
        RunnerLayout::Ordered => {
            relink(layout, &[])?;
            let hot = train(layout, &binary, testdata)?;
            let order = layout.cache.join("bench/nsight-recipe-run.order");
            std::fs::write(&order, hot.join("\n") + "\n")
                .with_context(|| format!("writing {}", order.display()))?;
            let order = order.to_str().context("cache path is not UTF-8")?;
            relink(
                layout,
                &[
                    "-C".into(),
                    format!("link-arg=-Wl,--symbol-ordering-file={order}"),
                    "-C".into(),
                    "link-arg=-Wl,--no-warn-symbol-ordering".into(),
                ],
            )?;
        }
    }
    Ok(binary)
}

/// `cargo rustc` of the runner alone with the static flags and `extra`: only the binary's own
/// crate is compiled again, with the link.
fn relink(layout: &Layout, extra: &[String]) -> Result<()> {
    run_cmd(
        Command::new("cargo")
            .current_dir(&layout.root)
            .env("CARGO_TARGET_DIR", layout.host_target())
            .args(["rustc", "--release", "-p", "nsight-analysis"])
            .args(["--bin", "nsight-recipe-run", "--"])
            .args(STATIC_FLAGS)
            .args(extra),
    )
}

/// The mangled names of the functions the training runs executed, in address order.
fn train(layout: &Layout, binary: &Path, testdata: &Path) -> Result<Vec<String>> {
    for tool in ["valgrind", "nm"] {
        if crate::cmd::output(Command::new(tool).arg("--version")).is_none() {
            bail!(
                "`{tool}` is needed to order the runner's functions: `cargo xtask setup apt-test` \
                 installs it (or pass `--layout static`)"
            );
        }
    }
    // valgrind names the object by its resolved path.
    let binary = &binary
        .canonicalize()
        .with_context(|| format!("{} is missing", binary.display()))?;
    let dir = layout.cache.join("bench/runner-training");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let symbols = text_symbols(binary)?;
    let mut addresses = Vec::new();
    for (recipe, report) in TRAINING {
        let component = layout.dist().join(format!("recipes/{recipe}.wasm"));
        let report = testdata.join(report);
        if !report.exists() {
            bail!("training input {} is missing", report.display());
        }
        let profile = dir.join(format!("callgrind.{recipe}"));
        let runner_args = |cmd: &mut Command| {
            cmd.arg(binary)
                .arg("--cache-dir")
                .arg(dir.join("compiled"))
                .arg(&component)
                .arg(&report)
                .stdout(std::process::Stdio::null());
        };
        // Under valgrind the CPU features (hence the engine's cache key) differ: compile into
        // the training cache first, with no instrumentation, so the profile is of a cached run.
        let mut compile = Command::new("valgrind");
        compile.args(["--tool=none", "-q"]);
        runner_args(&mut compile);
        run_cmd(&mut compile)?;
        let mut profiled = Command::new("valgrind");
        profiled
            .args(["--tool=callgrind", "-q", "--dump-instr=yes"])
            .args(["--compress-strings=no", "--compress-pos=no"])
            .arg(format!("--callgrind-out-file={}", profile.display()));
        runner_args(&mut profiled);
        run_cmd(&mut profiled)?;
        let text = std::fs::read_to_string(&profile)
            .with_context(|| format!("reading {}", profile.display()))?;
        let run = executed(&text, binary);
        if run.addresses.is_empty() {
            bail!(
                "{}: no instructions of {}",
                profile.display(),
                binary.display()
            );
        }
        let bias = load_bias(&run.entries, &symbols)
            .with_context(|| format!("{}: no function to align with nm", profile.display()))?;
        addresses.extend(run.addresses.iter().map(|a| a.wrapping_sub(bias)));
    }
    let hot = hot_symbols(&symbols, &addresses);
    let bytes: u64 = hot.iter().map(|s| s.size).sum();
    eprintln!(
        "training: {} functions executed, {:.0} KiB of {:.0} KiB of code",
        hot.len(),
        bytes as f64 / 1024.0,
        symbols.iter().map(|s| s.size).sum::<u64>() as f64 / 1024.0
    );
    Ok(hot.into_iter().map(|s| s.name.clone()).collect())
}

/// One function symbol of the binary, from `nm -S`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub address: u64,
    pub size: u64,
    pub name: String,
}

fn text_symbols(binary: &Path) -> Result<Vec<Symbol>> {
    let out = crate::cmd::output(
        Command::new("nm")
            .args(["-S", "--defined-only"])
            .arg(binary),
    )
    .with_context(|| format!("`nm -S {}` failed", binary.display()))?;
    Ok(parse_nm(&out))
}

/// The code symbols (`t T w W i I`) of `nm -S --defined-only` output, sorted by address.
pub fn parse_nm(text: &str) -> Vec<Symbol> {
    let mut symbols: Vec<Symbol> = text
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(4, ' ');
            let address = u64::from_str_radix(parts.next()?, 16).ok()?;
            let size = u64::from_str_radix(parts.next()?, 16).ok()?;
            let kind = parts.next()?;
            let name = parts.next()?;
            matches!(kind, "t" | "T" | "w" | "W" | "i" | "I").then(|| Symbol {
                address,
                size,
                name: name.to_owned(),
            })
        })
        .collect();
    symbols.sort_by_key(|s| s.address);
    symbols
}

/// What one callgrind profile says about one object.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Executed {
    /// Every instruction address of the object that ran (as loaded).
    pub addresses: Vec<u64>,
    /// Function name -> lowest address seen in it (its entry, for a called function).
    pub entries: HashMap<String, u64>,
}

/// Reads a callgrind profile written with `--dump-instr=yes --compress-strings=no
/// --compress-pos=no`: cost lines start with the instruction's address; `ob=` and `fn=` name
/// the object and function they belong to (`cob=`/`cfn=` name a callee and change neither).
pub fn executed(profile: &str, binary: &Path) -> Executed {
    let binary = binary.to_string_lossy();
    let mut out = Executed::default();
    let (mut in_binary, mut function) = (false, String::new());
    for line in profile.lines() {
        if let Some(object) = line.strip_prefix("ob=") {
            in_binary = object == binary;
        } else if let Some(name) = line.strip_prefix("fn=") {
            // Recursion levels are written `name'2`.
            function = name.split('\'').next().unwrap_or(name).to_owned();
        } else if in_binary {
            let Some(hex) = line.strip_prefix("0x") else {
                continue;
            };
            let hex = hex.split(' ').next().unwrap_or_default();
            if let Ok(address) = u64::from_str_radix(hex, 16) {
                out.addresses.push(address);
                out.entries
                    .entry(function.clone())
                    .and_modify(|a| *a = (*a).min(address))
                    .or_insert(address);
            }
        }
    }
    out
}

/// Where valgrind loaded the binary relative to its symbol table: the most common difference
/// between a function's lowest executed address and its `nm` address, over the functions whose
/// name is the same demangled or not (C functions: SQLite's, libc's), and unique.
pub fn load_bias(entries: &HashMap<String, u64>, symbols: &[Symbol]) -> Option<u64> {
    let mut by_name: HashMap<&str, Option<u64>> = HashMap::new();
    for s in symbols {
        by_name
            .entry(s.name.as_str())
            .and_modify(|a| *a = None)
            .or_insert(Some(s.address));
    }
    let mut votes: BTreeMap<u64, usize> = BTreeMap::new();
    for (name, seen) in entries {
        if let Some(Some(address)) = by_name.get(name.as_str()) {
            *votes.entry(seen.wrapping_sub(*address)).or_default() += 1;
        }
    }
    votes
        .into_iter()
        .max_by_key(|&(_, n)| n)
        .map(|(bias, _)| bias)
}

/// The symbols containing any of `addresses`, each once, in address order.
pub fn hot_symbols<'a>(symbols: &'a [Symbol], addresses: &[u64]) -> Vec<&'a Symbol> {
    let mut hit = vec![false; symbols.len()];
    for &a in addresses {
        let i = symbols.partition_point(|s| s.address <= a);
        if let Some(i) = i.checked_sub(1) {
            let s = &symbols[i];
            if a < s.address + s.size.max(1) {
                hit[i] = true;
            }
        }
    }
    symbols
        .iter()
        .zip(hit)
        .filter_map(|(s, h)| h.then_some(s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NM: &str = "\
0000000000001000 0000000000000040 T sqlite3_step
0000000000001040 0000000000000020 t _ZN4core3ptr13drop_in_place17h0123456789abcdefE
0000000000001060 0000000000000020 t _ZN4core3ptr13drop_in_place17hfedcba9876543210E
0000000000002000 0000000000000010 r CSWTCH.1
0000000000003000 0000000000000100 T main
";

    const PROFILE: &str = "\
version: 1
positions: instr
events: Ir
ob=/lib/libc.so.6
fn=memcpy
0x9000 3
ob=/bin/runner
fn=sqlite3_step
0x101008 2
0x101000 1
cob=/lib/libc.so.6
cfn=memcpy
calls=1 0x9000
0x101010 5
fn=_ZN4core3ptr13drop_in_place17hfedcba9876543210E'2
0x101064 1
fn=main
0x103000 1
";

    #[test]
    fn nm_keeps_code_symbols_sorted() {
        let symbols = parse_nm(NM);
        let names: Vec<_> = symbols.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "sqlite3_step",
                "_ZN4core3ptr13drop_in_place17h0123456789abcdefE",
                "_ZN4core3ptr13drop_in_place17hfedcba9876543210E",
                "main"
            ]
        );
        assert_eq!(symbols[0].size, 0x40);
    }

    #[test]
    fn profile_addresses_belong_to_the_binary_only() {
        let run = executed(PROFILE, Path::new("/bin/runner"));
        assert_eq!(
            run.addresses,
            [0x101008, 0x101000, 0x101010, 0x101064, 0x103000]
        );
        assert_eq!(run.entries["sqlite3_step"], 0x101000);
        assert!(!run.entries.contains_key("memcpy"));
    }

    #[test]
    fn bias_aligns_and_maps_to_the_exact_instances() {
        let symbols = parse_nm(NM);
        let run = executed(PROFILE, Path::new("/bin/runner"));
        let bias = load_bias(&run.entries, &symbols);
        assert_eq!(bias, Some(0x100000));
        let addresses: Vec<u64> = run.addresses.iter().map(|a| a - 0x100000).collect();
        let hot: Vec<_> = hot_symbols(&symbols, &addresses)
            .into_iter()
            .map(|s| s.name.as_str())
            .collect();
        // The second drop_in_place instance ran, the first did not.
        assert_eq!(
            hot,
            [
                "sqlite3_step",
                "_ZN4core3ptr13drop_in_place17hfedcba9876543210E",
                "main"
            ]
        );
    }

    #[test]
    fn layout_names_round_trip_and_refuse_others() {
        for l in [
            RunnerLayout::Plain,
            RunnerLayout::Static,
            RunnerLayout::Ordered,
        ] {
            assert_eq!(RunnerLayout::parse(l.name()).ok(), Some(l));
        }
        let err = RunnerLayout::parse("fast").err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("--layout is plain, static or ordered, not `fast`")
        );
    }
}
