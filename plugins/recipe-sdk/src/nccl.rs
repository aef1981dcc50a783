//! NCCL in a report, for `nccl_sum` and `nccl_gpu_time_util_map`: which kernels are NCCL's
//! (communication) and which are compute, which NVTX ranges are NCCL's own, and how much of
//! each time bin a kind of kernel keeps a GPU busy.
//!
//! ```text
//!  KERNEL rows ─ (pid, device, start, end, nccl?) ─ per (pid, device): unions of intervals
//!        All = every kernel, NCCL, Compute, Overlap = NCCL ∩ Compute
//!        └─ bins of the report's kernel span ─> covered ns per bin and kind ─> UtilBin
//! ```
//!
//! NVIDIA's documented rule (Nsight Systems user guide, recipe list): "Communication kernels
//! are identified by the 'nccl' prefix" — the kernel's short name starts with `nccl`
//! (case-sensitive). Pure functions over plain data.

/// The prefix of NCCL's kernel names (`ncclDevKernel_SendRecv`, `ncclKernel_AllReduce_...`)
/// and of its NVTX ranges (`ncclAllReduce`, `ncclGroupStart`).
pub const NCCL_PREFIX: &str = "nccl";
/// The NVTX domain NCCL annotates its API calls in.
pub const NCCL_DOMAIN: &str = "NCCL";

/// Whether a kernel's short name (or, in exports without short names, its demangled name)
/// marks it as an NCCL (communication) kernel.
pub fn is_nccl_kernel(name: &str) -> bool {
    name.starts_with(NCCL_PREFIX)
}

/// Whether an NVTX range is one of NCCL's: its domain is named `NCCL`, or (the report has no
/// name for its domain, as when the domain's create event was not captured) it is not in the
/// default domain and its text starts with `nccl`.
pub fn is_nccl_range(domain_id: i64, domain_name: Option<&str>, text: &str) -> bool {
    match domain_name {
        Some(name) => name == NCCL_DOMAIN,
        None => domain_id != 0 && text.starts_with(NCCL_PREFIX),
    }
}

/// One kernel, classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Kernel {
    pub pid: i64,
    pub device: i64,
    pub start: i64,
    pub end: i64,
    pub nccl: bool,
}

/// The sorted, disjoint union of `spans` (start, end); empty spans cover nothing and are
/// dropped, touching ones merge.
pub fn union(mut spans: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    spans.retain(|(s, e)| e > s);
    spans.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// The intersection of two sorted, disjoint interval lists (as [`union`] gives them).
pub fn intersection(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        let (s, e) = (a[i].0.max(b[j].0), a[i].1.min(b[j].1));
        if e > s {
            out.push((s, e));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// Nanoseconds of `[lo, hi)` that the sorted, disjoint `intervals` cover.
pub fn covered(intervals: &[(i64, i64)], lo: i64, hi: i64) -> i64 {
    let first = intervals.partition_point(|(_, e)| *e <= lo);
    intervals[first..]
        .iter()
        .take_while(|(s, _)| *s < hi)
        .map(|(s, e)| (*e).min(hi) - (*s).max(lo))
        .filter(|d| *d > 0)
        .sum()
}

/// The bins of `[s, e)` cut at `s + i * (e - s) / bins` (integer division, i = 0..=bins), as
/// (index, start, end); bins of zero length (a span shorter than `bins` ns) are left out.
pub fn bins(s: i64, e: i64, bins: u32) -> Vec<(u32, i64, i64)> {
    let n = i128::from(bins.max(1));
    let span = i128::from(e) - i128::from(s);
    let bound = |i: i128| (i128::from(s) + i * span / n) as i64;
    (0..bins.max(1))
        .map(|i| (i, bound(i128::from(i)), bound(i128::from(i) + 1)))
        .filter(|(_, lo, hi)| hi > lo)
        .collect()
}

/// One time bin of one (process, device): the nanoseconds in `[start, end)` during which any
/// kernel (`all`), an NCCL kernel, a compute kernel, or both at once (`overlap`) ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtilBin {
    pub pid: i64,
    pub device: i64,
    pub index: u32,
    pub start: i64,
    pub end: i64,
    pub all: i64,
    pub nccl: i64,
    pub compute: i64,
    pub overlap: i64,
}

impl UtilBin {
    /// `ns` as a percentage of the bin, in f64.
    pub fn percent(&self, ns: i64) -> f64 {
        ns as f64 * 100.0 / (self.end - self.start) as f64
    }
}

/// The heat map of `kernels`: the span from the earliest start to the latest end over every
/// kernel (all processes and devices, so that every row shares the time axis) cut into
/// `bin_count` [`bins`], and for each (process, device) with kernels each bin's coverage by
/// the union of its kernels of each kind. Ordered by process, device, bin.
pub fn time_util_map(kernels: &[Kernel], bin_count: u32) -> Vec<UtilBin> {
    let (Some(s), Some(e)) = (
        kernels.iter().map(|k| k.start).min(),
        kernels.iter().map(|k| k.end).max(),
    ) else {
        return Vec::new();
    };
    let cuts = bins(s, e, bin_count);
    let mut sorted = kernels.to_vec();
    sorted.sort_unstable();
    let mut out = Vec::new();
    for group in sorted.chunk_by(|a, b| (a.pid, a.device) == (b.pid, b.device)) {
        let spans = |keep: &dyn Fn(&Kernel) -> bool| {
            union(
                group
                    .iter()
                    .filter(|k| keep(k))
                    .map(|k| (k.start, k.end))
                    .collect(),
            )
        };
        let all = spans(&|_| true);
        let nccl = spans(&|k| k.nccl);
        let compute = spans(&|k| !k.nccl);
        let overlap = intersection(&nccl, &compute);
        for &(index, lo, hi) in &cuts {
            out.push(UtilBin {
                pid: group[0].pid,
                device: group[0].device,
                index,
                start: lo,
                end: hi,
                all: covered(&all, lo, hi),
                nccl: covered(&nccl, lo, hi),
                compute: covered(&compute, lo, hi),
                overlap: covered(&overlap, lo, hi),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(device: i64, start: i64, end: i64, nccl: bool) -> Kernel {
        Kernel {
            pid: 1,
            device,
            start,
            end,
            nccl,
        }
    }

    #[test]
    fn kernels_and_ranges_are_told_apart_by_the_prefix_and_domain() {
        assert!(is_nccl_kernel("ncclDevKernel_SendRecv"));
        assert!(!is_nccl_kernel("void at::native::nccl_like"));
        assert!(!is_nccl_kernel("NCCLKernel"));
        assert!(is_nccl_range(1, None, "ncclSend"));
        assert!(is_nccl_range(1, Some("NCCL"), "anything"));
        assert!(!is_nccl_range(1, Some("torch"), "ncclSend"));
        assert!(!is_nccl_range(0, None, "nccl:all_to_all"));
    }

    #[test]
    fn unions_intersections_and_coverage() {
        assert_eq!(
            union(vec![(5, 9), (0, 3), (2, 4), (4, 4), (9, 10)]),
            [(0, 4), (5, 10)]
        );
        assert_eq!(
            intersection(&[(0, 4), (5, 10)], &[(3, 6), (8, 20)]),
            [(3, 4), (5, 6), (8, 10)]
        );
        assert_eq!(covered(&[(0, 4), (5, 10)], 3, 7), 3);
        assert_eq!(covered(&[(0, 4), (5, 10)], 10, 12), 0);
        assert_eq!(covered(&[], 0, 12), 0);
    }

    #[test]
    fn bins_cut_the_span_like_gpu_time_util() {
        assert_eq!(
            bins(0, 10, 4),
            [(0, 0, 2), (1, 2, 5), (2, 5, 7), (3, 7, 10)]
        );
        assert_eq!(bins(0, 2, 4).len(), 2);
    }

    #[test]
    fn the_map_shares_the_span_and_never_passes_100_percent() {
        // Device 0: compute 0..6 twice (concurrent), NCCL 4..10; device 1: NCCL 8..10.
        let kernels = [
            k(0, 0, 6, false),
            k(0, 1, 6, false),
            k(0, 4, 10, true),
            k(1, 8, 10, true),
        ];
        let map = time_util_map(&kernels, 2);
        let got: Vec<_> = map
            .iter()
            .map(|b| {
                (
                    b.device, b.start, b.end, b.all, b.nccl, b.compute, b.overlap,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (0, 0, 5, 5, 1, 5, 1),
                (0, 5, 10, 5, 5, 1, 1),
                (1, 0, 5, 0, 0, 0, 0),
                (1, 5, 10, 2, 2, 0, 0),
            ]
        );
        assert_eq!(map[0].percent(map[0].all), 100.0);
        assert!(time_util_map(&[], 3).is_empty());
    }
}
