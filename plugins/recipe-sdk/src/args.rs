//! Command-line arguments of a recipe (`--name value` pairs, names given without dashes) and
//! the `--timeunit` shared by the summary recipes.

/// A recipe's arguments, checked against the names it accepts.
#[derive(Debug, Clone, Default)]
pub struct Args {
    pairs: Vec<(String, String)>,
}

impl Args {
    /// Keeps `args`, refusing names not in `known` and names given twice.
    pub fn parse(args: &[(String, String)], known: &[&str]) -> Result<Self, String> {
        let mut pairs: Vec<(String, String)> = Vec::with_capacity(args.len());
        for (name, value) in args {
            let name = name.trim_start_matches('-');
            if !known.contains(&name) {
                let accepted: Vec<String> = known.iter().map(|k| format!("--{k}")).collect();
                return Err(format!(
                    "unknown argument --{name}; this recipe takes {}",
                    if accepted.is_empty() {
                        "no arguments".to_owned()
                    } else {
                        accepted.join(", ")
                    }
                ));
            }
            if pairs.iter().any(|(n, _)| n == name) {
                return Err(format!("argument --{name} given twice"));
            }
            pairs.push((name.to_owned(), value.clone()));
        }
        Ok(Self { pairs })
    }

    /// The value of `--name`, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// `--timeunit`, nanoseconds when not given.
    pub fn time_unit(&self) -> Result<TimeUnit, String> {
        self.get("timeunit")
            .map_or(Ok(TimeUnit::Nsec), TimeUnit::parse)
    }
}

/// The unit of the time columns of a summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Nsec,
    Usec,
    Msec,
    Sec,
}

impl TimeUnit {
    /// `nsec`, `usec`, `msec`, `sec` (as NVIDIA's tool spells them) or `ns`, `us`, `ms`, `s`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "nsec" | "ns" => Ok(Self::Nsec),
            "usec" | "us" => Ok(Self::Usec),
            "msec" | "ms" => Ok(Self::Msec),
            "sec" | "s" => Ok(Self::Sec),
            other => Err(format!(
                "--timeunit {other}: expected nsec, usec, msec or sec"
            )),
        }
    }

    /// The short unit shown in headers: `ns`, `us`, `ms`, `s`.
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Nsec => "ns",
            Self::Usec => "us",
            Self::Msec => "ms",
            Self::Sec => "s",
        }
    }

    /// Nanoseconds in one unit.
    pub fn nanos(self) -> f64 {
        match self {
            Self::Nsec => 1.0,
            Self::Usec => 1e3,
            Self::Msec => 1e6,
            Self::Sec => 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn known_arguments_are_kept_and_dashes_dropped() {
        let a = Args::parse(&pairs(&[("--timeunit", "usec")]), &["timeunit"]).unwrap();
        assert_eq!(a.get("timeunit"), Some("usec"));
        assert_eq!(a.time_unit(), Ok(TimeUnit::Usec));
        assert_eq!(Args::default().time_unit(), Ok(TimeUnit::Nsec));
    }

    #[test]
    fn unknown_and_repeated_arguments_are_refused() {
        let err = Args::parse(&pairs(&[("bogus", "1")]), &["timeunit"]).unwrap_err();
        assert!(
            err.contains("--bogus") && err.contains("--timeunit"),
            "{err}"
        );
        let err = Args::parse(&pairs(&[("a", "1"), ("a", "2")]), &["a"]).unwrap_err();
        assert!(err.contains("twice"), "{err}");
    }

    #[test]
    fn time_units() {
        for (s, unit, suffix, nanos) in [
            ("nsec", TimeUnit::Nsec, "ns", 1.0),
            ("us", TimeUnit::Usec, "us", 1e3),
            ("msec", TimeUnit::Msec, "ms", 1e6),
            ("sec", TimeUnit::Sec, "s", 1e9),
        ] {
            let u = TimeUnit::parse(s).unwrap();
            assert_eq!((u, u.suffix(), u.nanos()), (unit, suffix, nanos));
        }
        assert!(TimeUnit::parse("minutes").unwrap_err().contains("minutes"));
    }
}
