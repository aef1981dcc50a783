//! Equal-width histograms of integer values (durations in ns), exact in integers.
//!
//! Over `[min, max]` with `range = max - min`, there are `b = min(bins, range)` bins (one when
//! every value is the same, so that each bin holds at least one integer). A value `v` goes to
//! bin `(v - min) * b / range` (integer division), `max` to the last bin. Bin `i` holds the
//! integers from `min + ceil(i * range / b)` to `min + ceil((i + 1) * range / b) - 1` (the last
//! bin up to `max`), both inclusive.

/// One bin: the smallest and largest integer it holds, and how many values fall in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bin {
    pub min: i64,
    pub max: i64,
    pub count: u64,
}

/// The histogram of `values` in at most `bins` bins (empty when there are no values).
pub fn histogram(values: &[i64], bins: u32) -> Vec<Bin> {
    let (Some(&min), Some(&max)) = (values.iter().min(), values.iter().max()) else {
        return Vec::new();
    };
    let range = i128::from(max) - i128::from(min);
    let n = i128::from(bins.max(1)).min(range.max(1));
    let mut counts = vec![0u64; n as usize];
    for &v in values {
        let i = if range == 0 {
            0
        } else {
            ((i128::from(v) - i128::from(min)) * n / range).min(n - 1)
        };
        counts[i as usize] += 1;
    }
    // The first integer of bin i: min + ceil(i * range / n).
    let first = |i: i128| (i128::from(min) + (i * range + n - 1) / n) as i64;
    counts
        .into_iter()
        .enumerate()
        .map(|(i, count)| {
            let i = i as i128;
            Bin {
                min: first(i),
                max: if i == n - 1 { max } else { first(i + 1) - 1 },
                count,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bins(values: &[i64], n: u32) -> Vec<(i64, i64, u64)> {
        histogram(values, n)
            .iter()
            .map(|b| (b.min, b.max, b.count))
            .collect()
    }

    #[test]
    fn values_fall_in_equal_width_bins() {
        // range 10 in 4 bins: edges 10, 12.5, 15, 17.5, 20.
        assert_eq!(
            bins(&[10, 11, 12, 13, 15, 20], 4),
            [(10, 12, 3), (13, 14, 1), (15, 17, 1), (18, 20, 1)]
        );
        // A range shorter than the bins asked for: one bin per nanosecond of it.
        assert_eq!(bins(&[5, 7], 30), [(5, 5, 1), (6, 7, 1)]);
        assert_eq!(bins(&[7, 7], 30), [(7, 7, 2)]);
        assert!(histogram(&[], 3).is_empty());
    }
}
