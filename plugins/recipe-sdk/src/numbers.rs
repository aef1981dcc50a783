//! Numeric recipe arguments (`--bins 30`, `--gap 0.5`) and time values in the `--timeunit`:
//! parsing with a clear error that names the argument and the accepted range.

use crate::{Args, TimeUnit, Value};

/// `--name` as a whole number in `min..=max`, `default` when not given.
pub fn count_arg(args: &Args, name: &str, default: u32, min: u32, max: u32) -> Result<u32, String> {
    let Some(s) = args.get(name) else {
        return Ok(default);
    };
    match s.trim().parse::<u32>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "--{name} {s}: expected a whole number from {min} to {max}"
        )),
    }
}

/// `--name` as a finite number `>= 0`, `default` when not given.
pub fn number_arg(args: &Args, name: &str, default: f64) -> Result<f64, String> {
    let Some(s) = args.get(name) else {
        return Ok(default);
    };
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!(
            "--{name} {s}: expected a number of 0 or more, e.g. {default}"
        )),
    }
}

/// A time in nanoseconds as a value in `unit`: the integer for `nsec`, else `ns / 1e3|1e6|1e9`
/// as a real (the rule of the summary tables).
pub fn time_value(unit: TimeUnit, ns: i64) -> Value {
    match unit {
        TimeUnit::Nsec => Value::Int(ns),
        _ => Value::Real(ns as f64 / unit.nanos()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(p: &[(&str, &str)]) -> Args {
        let p: Vec<(String, String)> = p
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        Args::parse(&p, &["bins", "gap"]).unwrap()
    }

    #[test]
    fn counts_and_numbers_are_checked() {
        assert_eq!(count_arg(&args(&[]), "bins", 30, 1, 10), Ok(30));
        assert_eq!(count_arg(&args(&[("bins", "7")]), "bins", 30, 1, 10), Ok(7));
        for bad in ["0", "11", "-1", "2.5", "x"] {
            let e = count_arg(&args(&[("bins", bad)]), "bins", 3, 1, 10).unwrap_err();
            assert!(e.contains("--bins") && e.contains("1 to 10"), "{e}");
        }
        assert_eq!(number_arg(&args(&[("gap", "0.5")]), "gap", 500.0), Ok(0.5));
        assert_eq!(number_arg(&args(&[]), "gap", 500.0), Ok(500.0));
        for bad in ["-1", "inf", "NaN", "ms"] {
            assert!(
                number_arg(&args(&[("gap", bad)]), "gap", 1.0).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn time_values_follow_the_unit() {
        assert_eq!(time_value(TimeUnit::Nsec, 1500), Value::Int(1500));
        assert_eq!(time_value(TimeUnit::Usec, 1500), Value::Real(1.5));
        assert_eq!(time_value(TimeUnit::Sec, 2_000_000_000), Value::Real(2.0));
    }
}
