//! The statistics of NVIDIA's summary reports and their rounding (docs/recipes.md):
//! total, count, mean, median, min, max and the sample standard deviation (n-1; 0.0 for a
//! single instance) of integer durations, Time (%) as a share of the listed totals, and
//! SQLite's `round()` rule.

/// The statistics of one group of durations (nanoseconds), unrounded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    /// Sum of the durations (saturates at the i64 range, 292 years).
    pub total: i64,
    pub count: u64,
    /// `total / count` in f64, the way SQLite's `avg()` computes it.
    pub mean: f64,
    /// The middle value; the mean of the two middle values for an even count.
    pub median: f64,
    pub min: i64,
    pub max: i64,
    /// Sample standard deviation (n - 1); 0.0 for a single value.
    pub stddev: f64,
}

impl Stats {
    /// Statistics of `values` (reordered in place: the median by selection, O(n), not a
    /// sort); `None` when there are none.
    pub fn of(values: &mut [i64]) -> Option<Self> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let (mut min, mut max, mut sum) = (i64::MAX, i64::MIN, 0i128);
        for &v in values.iter() {
            min = min.min(v);
            max = max.max(v);
            sum += i128::from(v);
        }
        let total = i64::try_from(sum).unwrap_or(if sum < 0 { i64::MIN } else { i64::MAX });
        let mid = n / 2;
        let (below, &mut upper, _) = values.select_nth_unstable(mid);
        let median = if n % 2 == 1 {
            upper as f64
        } else {
            // The largest value below the middle one: the other middle value of the sorted list.
            let lower = below.iter().copied().max().unwrap_or(upper);
            (i128::from(lower) + i128::from(upper)) as f64 / 2.0
        };
        Some(Self {
            total,
            count: n as u64,
            mean: sum as f64 / n as f64,
            median,
            min,
            max,
            stddev: sample_stddev(values, upper),
        })
    }
}

/// sqrt((n·Σd² − (Σd)²) / (n·(n − 1))) over d = x − `middle` (the median), in exact integer
/// arithmetic so that near-equal large durations lose nothing to cancellation; a two-pass f64
/// computation over the same deviations if that overflows i128.
fn sample_stddev(values: &[i64], middle: i64) -> f64 {
    let n = values.len();
    if n < 2 {
        return 0.0;
    }
    let pivot = i128::from(middle);
    let deviations = || values.iter().map(move |&v| i128::from(v) - pivot);
    let exact = deviations()
        .try_fold((0i128, 0i128), |(sum, sum_sq), d| {
            Some((sum + d, sum_sq.checked_add(d.checked_mul(d)?)?))
        })
        .and_then(|(sum, sum_sq)| {
            sum_sq
                .checked_mul(n as i128)?
                .checked_sub(sum.checked_mul(sum)?)
        });
    let variance = match exact {
        Some(numerator) => numerator as f64 / (n as f64 * (n - 1) as f64),
        None => {
            let mean = deviations().map(|d| d as f64).sum::<f64>() / n as f64;
            deviations().map(|d| (d as f64 - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        }
    };
    variance.max(0.0).sqrt()
}

/// `round(part * 100 / whole, 1)`: Time (%). `None` when `whole` is 0 (SQLite gives NULL).
pub fn percent(part: i64, whole: i64) -> Option<f64> {
    (whole != 0).then(|| round_half_away(part as f64 * 100.0 / whole as f64, 1))
}

/// Current SQLite's `round(x, decimals)` (3.43 and later, the one current nsys reports run on):
/// the double is written with 18 significant digits, then rounded half away from zero at
/// `decimals` places. So the double nearest 2164.85 (2164.849999999999909...) gives 2164.8,
/// 0.15 (0.1499999999999999944...) gives 0.1, and 12.25 (exact in binary) gives 12.3. Older
/// SQLite (3.40) wrote 16 digits first and gave 2164.9 and 0.2. Values of 2^52 and more have no
/// fraction and are returned as they are, as SQLite does.
pub fn round_half_away(x: f64, decimals: u32) -> f64 {
    if !x.is_finite() || x.abs() >= 4_503_599_627_370_496.0 || x == 0.0 {
        return x;
    }
    let decimals = decimals.min(30) as i32;
    // d.ddddddddddddddddde<exp>: 18 significant digits, correctly rounded.
    let sci = format!("{:.17e}", x.abs());
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return x;
    };
    let Ok(exp) = exp.parse::<i32>() else {
        return x;
    };
    let digits: Vec<u64> = mantissa
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|b| u64::from(b - b'0'))
        .collect();
    // Digit i has weight 10^(exp - i); keep those with weight >= 10^-decimals.
    let keep = exp + decimals + 1;
    if keep < 0 {
        return 0.0;
    }
    let keep = (keep as usize).min(digits.len());
    let mut m = digits[..keep].iter().fold(0u64, |acc, d| acc * 10 + d);
    if digits.get(keep).is_some_and(|&d| d >= 5) {
        m += 1;
    }
    let scale = exp - keep as i32 + 1;
    let magnitude = format!("{m}e{scale}").parse::<f64>().unwrap_or(x.abs());
    if x < 0.0 {
        -magnitude
    } else {
        magnitude
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(values: &[i64]) -> Stats {
        Stats::of(&mut values.to_vec()).unwrap()
    }

    #[test]
    fn rounding_follows_sqlite() {
        // Current SQLite's round() (tests/recipe_oracle.rs runs the oracles in SQLite 3.54).
        let cases = [
            (0.15, 1, 0.1),
            (216_485.0 / 100.0, 1, 2164.8),
            (0.25, 1, 0.3),
            (12.25, 1, 12.3),
            (-12.25, 1, -12.3),
            (2.675, 2, 2.67),
            (0.05, 1, 0.1),
            (0.0015, 3, 0.002),
            (0.04, 1, 0.0),
            (99.95, 1, 100.0),
            (1234.0, 1, 1234.0),
            (1234.5678, 1, 1234.6),
            (0.5, 0, 1.0),
            (1.449_999_999_999_999, 1, 1.4),
            (123_456_789.25, 1, 123_456_789.3),
            (1e-20, 1, 0.0),
        ];
        for (x, n, want) in cases {
            assert_eq!(round_half_away(x, n), want, "round({x}, {n})");
        }
        assert_eq!(round_half_away(0.0, 1), 0.0);
        assert_eq!(round_half_away(9.0e15, 1), 9.0e15);
        assert!(round_half_away(f64::NAN, 1).is_nan());
    }

    #[test]
    fn a_single_value_has_zero_stddev_and_itself_everywhere() {
        let s = stats(&[42]);
        assert_eq!(
            (s.total, s.count, s.mean, s.median, s.min, s.max, s.stddev),
            (42, 1, 42.0, 42.0, 42, 42, 0.0)
        );
    }

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let s = stats(&[10, 1, 4, 3]);
        assert_eq!(s.median, 3.5);
        assert_eq!((s.min, s.max, s.total, s.count), (1, 10, 18, 4));
        assert_eq!(s.mean, 4.5);
        assert_eq!(stats(&[5, 1, 3]).median, 3.0);
    }

    #[test]
    fn stddev_is_the_sample_stddev() {
        // 2,4,4,4,5,5,7,9: population sd 2, sample sd sqrt(32/7).
        let s = stats(&[2, 4, 4, 4, 5, 5, 7, 9]);
        assert!((s.stddev - (32.0f64 / 7.0).sqrt()).abs() < 1e-15);
        assert_eq!(stats(&[7, 7, 7]).stddev, 0.0);
        assert_eq!(stats(&[10, 11]).stddev, 0.5f64.sqrt());
    }

    #[test]
    fn stddev_of_large_near_equal_values_keeps_its_precision() {
        let base = 4_000_000_000_000i64;
        let s = stats(&[base, base + 1, base + 2]);
        assert_eq!(s.stddev, 1.0);
    }

    #[test]
    fn stddev_of_huge_spread_falls_back_to_floating_point() {
        let values = [i64::MIN, 0, i64::MAX, i64::MAX];
        let f: Vec<f64> = values.iter().map(|&v| v as f64).collect();
        let mean = f.iter().sum::<f64>() / 4.0;
        let want = (f.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 3.0).sqrt();
        let got = stats(&values).stddev;
        assert!((got - want).abs() / want < 1e-12, "{got} vs {want}");
        let big = i64::MAX / 2;
        assert_eq!(
            stats(&[big, big - 2, big - 4, big - 6]).stddev,
            (20.0f64 / 3.0).sqrt()
        );
    }

    #[test]
    fn percent_is_rounded_and_none_without_a_total() {
        assert_eq!(percent(1, 8), Some(12.5));
        assert_eq!(percent(1, 3), Some(33.3));
        assert_eq!(percent(2, 3), Some(66.7));
        assert_eq!(percent(0, 0), None);
    }

    #[test]
    fn no_values_no_stats() {
        assert_eq!(Stats::of(&mut []), None);
    }
}
