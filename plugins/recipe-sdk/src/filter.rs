//! `--filter-time` and `--filter-nvtx`: the time window a statistics recipe looks at.
//!
//! - `--filter-time START/END`: nanoseconds on the report's clock (the `start`/`end` values of
//!   its tables); either side may be left empty (`START/`, `/END`).
//! - `--filter-nvtx RANGE[@DOMAIN][/INDEX]`: the window of an NVTX range (push/pop or
//!   start/end, with an end) whose text is RANGE in the domain named DOMAIN (the default domain
//!   without `@`), the INDEX-th one by start time counting from 0 (default 0).
//!
//! The two exclude each other. An event is in the window when it lies wholly inside it:
//! `start >= START` and `end <= END` (both inclusive). A `--filter-nvtx` range that the report
//! does not have gives a note and an empty window, not an error, so a job over many reports
//! still runs.

use crate::{
    nvtx::{Domains, EventTypes, NvtxSql, NVTX_TABLE},
    Args, Output, Schema, Value,
};

/// The argument names of the filters, for `Args::parse`.
pub const FILTER_ARGS: [&str; 2] = ["filter-time", "filter-nvtx"];

/// The arguments every statistics recipe takes: (name, description, default).
pub const STATS_ARGUMENTS: [(&str, &str, Option<&str>); 3] = [
    (
        "timeunit",
        "Unit of the time columns: nsec, usec, msec or sec.",
        Some("nsec"),
    ),
    (
        "filter-time",
        "Only events wholly inside START/END (ns on the report's clock; either side may be \
         empty). Excludes --filter-nvtx.",
        None,
    ),
    (
        "filter-nvtx",
        "Only events wholly inside an NVTX range: RANGE[@DOMAIN][/INDEX] (INDEX counts from 0 \
         by start time). Excludes --filter-time.",
        None,
    ),
];

/// Which events a recipe looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    All,
    /// Events with `start >= .0` and `end <= .1`.
    Between(i64, i64),
    /// No event (the `--filter-nvtx` range is not in the report).
    Nothing,
}

impl Window {
    /// An SQL condition on the table aliased `alias` (which has `start` and `end`).
    pub fn sql(&self, alias: &str) -> String {
        match self {
            Self::All => "1".to_owned(),
            Self::Between(lo, hi) => format!("{alias}.start >= {lo} AND {alias}.\"end\" <= {hi}"),
            Self::Nothing => "0".to_owned(),
        }
    }

    /// Whether an event from `start` to `end` is in the window.
    pub fn contains(&self, start: i64, end: i64) -> bool {
        match self {
            Self::All => true,
            Self::Between(lo, hi) => start >= *lo && end <= *hi,
            Self::Nothing => false,
        }
    }
}

/// `START/END`, either side optional.
pub fn parse_filter_time(s: &str) -> Result<Window, String> {
    let bad = |why: &str| {
        format!("--filter-time {s}: {why}; expected START/END in nanoseconds, e.g. 1000000/2000000")
    };
    let (a, b) = s.split_once('/').ok_or_else(|| bad("no '/'"))?;
    let side = |v: &str, default: i64| -> Result<i64, String> {
        let v = v.trim();
        if v.is_empty() {
            Ok(default)
        } else {
            v.parse::<i64>()
                .map_err(|_| bad(&format!("{v:?} is not an integer")))
        }
    };
    let (lo, hi) = (side(a, i64::MIN)?, side(b, i64::MAX)?);
    if lo > hi {
        return Err(bad("START is after END"));
    }
    Ok(Window::Between(lo, hi))
}

/// A parsed `--filter-nvtx`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvtxFilter {
    pub range: String,
    /// The domain's name; empty for the default domain.
    pub domain: String,
    pub index: usize,
}

/// `RANGE[@DOMAIN][/INDEX]`: the index is a trailing `/digits`, the domain what follows the
/// last `@` before it.
pub fn parse_filter_nvtx(s: &str) -> Result<NvtxFilter, String> {
    let (rest, index) = match s.rsplit_once('/') {
        Some((r, i)) if !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()) => (
            r,
            i.parse::<usize>()
                .map_err(|_| format!("--filter-nvtx {s}: index {i} is too large"))?,
        ),
        _ => (s, 0),
    };
    let (range, domain) = match rest.rsplit_once('@') {
        Some((r, d)) => (r, d),
        None => (rest, ""),
    };
    if range.is_empty() {
        return Err(format!(
            "--filter-nvtx {s}: no range name; expected RANGE[@DOMAIN][/INDEX]"
        ));
    }
    Ok(NvtxFilter {
        range: range.to_owned(),
        domain: domain.to_owned(),
        index,
    })
}

/// The window `args` ask for, resolving `--filter-nvtx` against the report. Adds a note that
/// says which window applied.
pub fn time_window(args: &Args, schema: &Schema<'_>, out: &mut Output) -> Result<Window, String> {
    match (args.get("filter-time"), args.get("filter-nvtx")) {
        (Some(_), Some(_)) => {
            Err("--filter-time and --filter-nvtx exclude each other; give one of them".to_owned())
        }
        (Some(t), None) => {
            let w = parse_filter_time(t)?;
            out.note(format!("only events wholly inside --filter-time {t}"));
            Ok(w)
        }
        (None, Some(n)) => {
            let f = parse_filter_nvtx(n)?;
            let w = nvtx_window(schema, &f, out)?;
            if let Window::Between(lo, hi) = w {
                out.note(format!(
                    "only events wholly inside NVTX range {n}: {lo}/{hi} ns"
                ));
            }
            Ok(w)
        }
        (None, None) => Ok(Window::All),
    }
}

/// The start and end of the range `f` names, or [`Window::Nothing`] with a note.
fn nvtx_window(schema: &Schema<'_>, f: &NvtxFilter, out: &mut Output) -> Result<Window, String> {
    let domain = if f.domain.is_empty() {
        "the default domain".to_owned()
    } else {
        format!("domain {}", f.domain)
    };
    let missing = |out: &mut Output, have: usize| {
        out.note(format!(
            "--filter-nvtx: the report has {have} NVTX ranges {:?} in {domain}, so no instance \
             {}; nothing is summarised",
            f.range, f.index
        ));
        Ok(Window::Nothing)
    };
    let Some(columns) = schema.require(
        out,
        NVTX_TABLE,
        &["start", "end", "eventType"],
        "--filter-nvtx needs NVTX ranges",
    ) else {
        return Ok(Window::Nothing);
    };
    let report = schema.report();
    let types = EventTypes::read(schema)?;
    let sql = NvtxSql::new(&columns, schema.has_table("StringIds"));
    let domains = Domains::read(report, &types, &sql)?;
    let q = format!(
        "SELECT e.start, e.\"end\", {}, {} FROM {NVTX_TABLE} AS e {} \
         WHERE e.eventType IN ({}) AND e.\"end\" IS NOT NULL AND {} = ?",
        sql.domain,
        sql.tid,
        sql.join,
        types.range_list(),
        sql.text
    );
    let mut found: Vec<(i64, i64)> = Vec::new();
    report.query(&q, &[Value::Text(f.range.clone())], &mut |row| {
        if let [Value::Int(start), Value::Int(end), d, t] = row {
            let name = domains
                .name(d.as_int().unwrap_or(0), t.as_int().unwrap_or(0))
                .unwrap_or("");
            if name == f.domain {
                found.push((*start, *end));
            }
        }
        Ok(())
    })?;
    found.sort_unstable();
    match found.get(f.index) {
        Some(&(lo, hi)) => Ok(Window::Between(lo, hi)),
        None => missing(out, found.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_time_sides_are_optional() {
        assert_eq!(parse_filter_time("10/20"), Ok(Window::Between(10, 20)));
        assert_eq!(parse_filter_time("10/"), Ok(Window::Between(10, i64::MAX)));
        assert_eq!(parse_filter_time("/20"), Ok(Window::Between(i64::MIN, 20)));
        for bad in ["10", "a/20", "30/20", "1.5/2"] {
            let e = parse_filter_time(bad).unwrap_err();
            assert!(
                e.contains("--filter-time") && e.contains("START/END"),
                "{e}"
            );
        }
    }

    #[test]
    fn filter_nvtx_range_domain_and_index() {
        let f = |r: &str, d: &str, i| NvtxFilter {
            range: r.into(),
            domain: d.into(),
            index: i,
        };
        assert_eq!(parse_filter_nvtx("step"), Ok(f("step", "", 0)));
        assert_eq!(parse_filter_nvtx("step/3"), Ok(f("step", "", 3)));
        assert_eq!(parse_filter_nvtx("step@NCCL/1"), Ok(f("step", "NCCL", 1)));
        assert_eq!(parse_filter_nvtx("a/b@D"), Ok(f("a/b", "D", 0)));
        assert_eq!(parse_filter_nvtx("a/b/"), Ok(f("a/b/", "", 0)));
        assert!(parse_filter_nvtx("@D/1")
            .unwrap_err()
            .contains("no range name"));
        assert!(parse_filter_nvtx("x/99999999999999999999999").is_err());
    }

    #[test]
    fn windows_as_sql_and_predicates() {
        let w = Window::Between(5, 9);
        assert_eq!(w.sql("k"), "k.start >= 5 AND k.\"end\" <= 9");
        assert!(w.contains(5, 9) && !w.contains(4, 9) && !w.contains(5, 10));
        assert!(Window::All.contains(i64::MIN, i64::MAX));
        assert!(!Window::Nothing.contains(0, 0));
        assert_eq!(
            (Window::All.sql("k"), Window::Nothing.sql("k")),
            ("1".into(), "0".into())
        );
    }
}
