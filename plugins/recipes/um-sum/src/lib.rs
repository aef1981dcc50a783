//! The `um_sum` recipe (NVIDIA's Unified Memory Analysis Summary), as a component of the
//! `recipe` world: per virtual address, the bytes Unified Memory migrated each way, the CPU and
//! GPU page faults, and the migration throughput.
//!
//! ```text
//!  CUDA_UM_CPU_PAGE_FAULT_EVENTS (count per address) ─┐
//!  CUDA_UM_GPU_PAGE_FAULT_EVENTS (sum numberOfPageFaults) ─┼─ by address ─> rows by throughput
//!  MEMCPY copyKind 11 (HtoD) / 12 (DtoH) (bytes, time) ─┘
//! ```
//! A bar chart shows the addresses that migrated the most (HtoD + DtoH, in MB), up to 20, from
//! every address (not only the listed rows).
//! Throughput is NVIDIA's `(HtoD + DtoH bytes) * (1000000000 / (HtoD + DtoH time))`, the
//! division an integer one, shown in MB/s; sizes in MB; both rounded to three decimals.

use std::collections::BTreeMap;

use nsight_recipe_sdk::{
    memops::MEMCPY_TABLE, round_half_away, svg, Args, Column, ColumnKind, Figure, Output, Report,
    Schema, Table, Value, BYTES_PER_MB,
};

nsight_recipe_sdk::recipe_component!(UmSum);

use component::{log, Guest, Level, Output as WitOutput, RecipeInfo};

const NAME: &str = "um_sum";
const CPU_FAULTS: &str = "CUDA_UM_CPU_PAGE_FAULT_EVENTS";
const GPU_FAULTS: &str = "CUDA_UM_GPU_PAGE_FAULT_EVENTS";
/// nsys's copy kinds of Unified Memory migrations.
const UM_HTOD: i64 = 11;
const UM_DTOH: i64 = 12;
/// NVIDIA's default row limit.
const DEFAULT_ROWS: usize = 10;
/// At most this many addresses in the figure.
const FIGURE_BARS: usize = 20;

struct UmSum;

impl Guest for UmSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "um_sum: describe");
        RecipeInfo {
            name: NAME.into(),
            display_name: "Unified Memory Analysis Summary".into(),
            description: "Unified Memory per virtual address: bytes migrated host to device and \
                          device to host, CPU and GPU page faults, and the migration throughput, \
                          highest throughput first."
                .into(),
            arguments: wit_arguments(
                [(
                    "rows",
                    "At most this many rows (highest throughput first); -1 for all.",
                    Some("10"),
                )]
                .iter(),
            ),
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, um_sum)
    }
}

/// What one virtual address saw.
#[derive(Debug, Default, Clone, Copy)]
struct Address {
    cpu_faults: Option<i64>,
    gpu_faults: Option<i64>,
    /// (bytes, ns) of the migrations host to device and device to host.
    htod: Option<(i64, i64)>,
    dtoh: Option<(i64, i64)>,
}

impl Address {
    /// NVIDIA's throughput in bytes per second: NULL without migrations or with a zero total
    /// time (SQLite's division by zero).
    fn throughput(&self) -> Option<i64> {
        if self.htod.is_none() && self.dtoh.is_none() {
            return None;
        }
        let (hb, ht) = self.htod.unwrap_or((0, 0));
        let (db, dt) = self.dtoh.unwrap_or((0, 0));
        let time = ht + dt;
        (time != 0).then(|| (hb + db).saturating_mul(1_000_000_000 / time))
    }
}

/// `--rows`: a limit, or `None` for all (`-1`).
fn row_limit(args: &Args) -> Result<Option<usize>, String> {
    match args.get("rows").map(str::trim) {
        None => Ok(Some(DEFAULT_ROWS)),
        Some("-1") => Ok(None),
        Some(s) => s
            .parse::<usize>()
            .ok()
            .filter(|&n| n >= 1)
            .map(Some)
            .ok_or_else(|| {
                format!("--rows {s}: expected a whole number of 1 or more, or -1 for all")
            }),
    }
}

fn um_sum(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["rows"])?;
    let limit = row_limit(&args)?;
    let mut out = Output::default();
    let schema = Schema::read(report);
    schema.check_nsys_export(&mut out);
    let memcpy = schema.require(
        &mut out,
        MEMCPY_TABLE,
        &["start", "end", "bytes", "copyKind", "virtualAddress"],
        "the profile has no CUDA memory copies",
    );
    let cpu = schema.require(
        &mut out,
        CPU_FAULTS,
        &["address"],
        "the profile has no Unified Memory CPU page faults",
    );
    let gpu = schema.require(
        &mut out,
        GPU_FAULTS,
        &["address", "numberOfPageFaults"],
        "the profile has no Unified Memory GPU page faults",
    );
    let mut addresses: BTreeMap<i64, Address> = BTreeMap::new();
    // NVIDIA's report needs all three tables.
    if memcpy.is_some() && cpu.is_some() && gpu.is_some() {
        let int = |row: &[Value], i: usize| row.get(i).and_then(Value::as_int);
        report.query(
            &format!("SELECT address FROM {CPU_FAULTS} WHERE address IS NOT NULL"),
            &[],
            &mut |row| {
                if let Some(a) = int(row, 0) {
                    *addresses.entry(a).or_default().cpu_faults.get_or_insert(0) += 1;
                }
                Ok(())
            },
        )?;
        report.query(
            &format!(
                "SELECT address, numberOfPageFaults FROM {GPU_FAULTS} WHERE address IS NOT NULL"
            ),
            &[],
            &mut |row| {
                if let Some(a) = int(row, 0) {
                    let faults = addresses.entry(a).or_default().gpu_faults.get_or_insert(0);
                    *faults += int(row, 1).unwrap_or(0);
                }
                Ok(())
            },
        )?;
        report.query(
            &format!(
                "SELECT virtualAddress, copyKind, bytes, \"end\" - start FROM {MEMCPY_TABLE} \
                 WHERE copyKind IN ({UM_HTOD}, {UM_DTOH}) AND virtualAddress IS NOT NULL"
            ),
            &[],
            &mut |row| {
                if let (Some(a), Some(kind)) = (int(row, 0), int(row, 1)) {
                    let entry = addresses.entry(a).or_default();
                    let side = if kind == UM_HTOD {
                        &mut entry.htod
                    } else {
                        &mut entry.dtoh
                    };
                    let (bytes, time) = side.get_or_insert((0, 0));
                    *bytes += int(row, 2).unwrap_or(0);
                    *time += int(row, 3).unwrap_or(0);
                }
                Ok(())
            },
        )?;
    }
    // NVIDIA's ORDER BY 6 DESC (throughput; none last), then the address.
    let mut rows: Vec<(i64, Address)> = addresses.into_iter().collect();
    out.figures.extend(migrated_figure(&rows));
    rows.sort_by(|(a, x), (b, y)| y.throughput().cmp(&x.throughput()).then(a.cmp(b)));
    let found = rows.len();
    if let Some(limit) = limit.filter(|&l| l < found) {
        rows.truncate(limit);
        out.note(format!(
            "{found} addresses; the {limit} with the highest throughput are listed (--rows)"
        ));
    }
    out.tables.push(table(rows));
    Ok(out)
}

/// The addresses that migrated the most bytes (both ways), most first (ties by address), as a
/// bar chart in MB; none without migrations.
fn migrated_figure(rows: &[(i64, Address)]) -> Option<Figure> {
    let mut migrated: Vec<(i64, i64)> = rows
        .iter()
        .filter(|(_, a)| a.htod.is_some() || a.dtoh.is_some())
        .map(|(address, a)| {
            let bytes = a.htod.map_or(0, |(b, _)| b) + a.dtoh.map_or(0, |(b, _)| b);
            (*address, bytes)
        })
        .collect();
    if migrated.is_empty() {
        return None;
    }
    migrated.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let total = migrated.len();
    let bars: Vec<(String, f64)> = migrated
        .into_iter()
        .take(FIGURE_BARS)
        .map(|(address, bytes)| {
            (
                format!("{address:#x}"),
                round_half_away(bytes as f64 / BYTES_PER_MB, 3),
            )
        })
        .collect();
    Some(svg::bar_chart(
        "um_sum_migrated",
        &format!(
            "Unified Memory migrated (HtoD + DtoH), {} of {total} addresses",
            bars.len()
        ),
        "virtual address",
        "migrated (MB)",
        &bars,
    ))
}

fn table(rows: Vec<(i64, Address)>) -> Table {
    let mb = |bytes: Option<i64>| {
        bytes.map_or(Value::Null, |b| {
            Value::Real(round_half_away(b as f64 / BYTES_PER_MB, 3))
        })
    };
    let int = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
    let columns = vec![
        Column::new("Virtual Address", ColumnKind::Int, None),
        Column::new("HtoD Migration size (MB)", ColumnKind::Real, Some("MB")),
        Column::new("DtoH Migration size (MB)", ColumnKind::Real, Some("MB")),
        Column::new("CPU Page Faults", ColumnKind::Int, None),
        Column::new("GPU Page Faults", ColumnKind::Int, None),
        Column::new(
            "Migration Throughput (MB/s)",
            ColumnKind::Real,
            Some("MB/s"),
        ),
    ];
    let rows = rows
        .into_iter()
        .map(|(address, a)| {
            vec![
                Value::Int(address),
                mb(a.htod.map(|(b, _)| b)),
                mb(a.dtoh.map(|(b, _)| b)),
                int(a.cpu_faults),
                int(a.gpu_faults),
                mb(a.throughput()),
            ]
        })
        .collect();
    Table {
        name: NAME.to_owned(),
        columns,
        rows,
    }
}
