//! The manager's Prometheus metrics: reconciles by kind and result, reconcile duration
//! histograms, errors by kind and failed step, reconciles in flight, and whether this replica
//! holds the leader lease. Rendered in the text exposition format for `/metrics`.
//!
//! Owns only counters; every label value is a fixed `&'static str`. No I/O.

use std::{collections::BTreeMap, fmt::Write as _, sync::Mutex, time::Duration};

/// Upper bounds (seconds) of the duration histogram.
const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug, Default, Clone)]
struct Histogram {
    /// Cumulative counts per bucket of [`BUCKETS`].
    buckets: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        for (i, bound) in BUCKETS.iter().enumerate() {
            if secs <= *bound {
                self.buckets[i] += 1;
            }
        }
        self.sum += secs;
        self.count += 1;
    }
}

#[derive(Debug, Default)]
struct Inner {
    reconciles: BTreeMap<(&'static str, &'static str), u64>,
    errors: BTreeMap<(&'static str, &'static str), u64>,
    durations: BTreeMap<&'static str, Histogram>,
    in_flight: BTreeMap<&'static str, i64>,
    leader: bool,
}

/// Shared by every controller of one manager.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

impl Metrics {
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut inner)
    }

    /// A reconcile of `kind` started.
    pub fn started(&self, kind: &'static str) {
        self.with(|m| *m.in_flight.entry(kind).or_default() += 1);
    }

    /// A reconcile of `kind` ended after `took`; `error` names the failed step.
    pub fn finished(&self, kind: &'static str, took: Duration, error: Option<&'static str>) {
        self.with(|m| {
            *m.in_flight.entry(kind).or_default() -= 1;
            let result = if error.is_some() { "error" } else { "success" };
            *m.reconciles.entry((kind, result)).or_default() += 1;
            if let Some(step) = error {
                *m.errors.entry((kind, step)).or_default() += 1;
            }
            m.durations
                .entry(kind)
                .or_default()
                .observe(took.as_secs_f64());
        });
    }

    pub fn set_leader(&self, leader: bool) {
        self.with(|m| m.leader = leader);
    }

    /// Successful plus failed reconciles of `kind` so far.
    pub fn reconciles(&self, kind: &'static str) -> u64 {
        self.with(|m| {
            m.reconciles
                .iter()
                .filter(|((k, _), _)| *k == kind)
                .map(|(_, n)| n)
                .sum()
        })
    }

    /// Reconciles of every kind so far.
    pub fn total_reconciles(&self) -> u64 {
        self.with(|m| m.reconciles.values().sum())
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        self.with(|m| {
            let mut out = String::new();
            // Writing to a String cannot fail.
            let _ = render_into(&mut out, m);
            out
        })
    }
}

fn render_into(out: &mut String, m: &Inner) -> std::fmt::Result {
    writeln!(
        out,
        "# HELP nsight_operator_reconciles_total Reconciles by custom resource kind and result."
    )?;
    writeln!(out, "# TYPE nsight_operator_reconciles_total counter")?;
    for ((kind, result), n) in &m.reconciles {
        writeln!(
            out,
            "nsight_operator_reconciles_total{{kind=\"{kind}\",result=\"{result}\"}} {n}"
        )?;
    }
    writeln!(
        out,
        "# HELP nsight_operator_reconcile_errors_total Failed reconciles by kind and failed step."
    )?;
    writeln!(out, "# TYPE nsight_operator_reconcile_errors_total counter")?;
    for ((kind, step), n) in &m.errors {
        writeln!(
            out,
            "nsight_operator_reconcile_errors_total{{kind=\"{kind}\",step=\"{step}\"}} {n}"
        )?;
    }
    writeln!(
        out,
        "# HELP nsight_operator_reconcile_duration_seconds Time of one reconcile."
    )?;
    writeln!(
        out,
        "# TYPE nsight_operator_reconcile_duration_seconds histogram"
    )?;
    for (kind, h) in &m.durations {
        for (bound, n) in BUCKETS.iter().zip(h.buckets) {
            writeln!(
                out,
                "nsight_operator_reconcile_duration_seconds_bucket{{kind=\"{kind}\",le=\"{bound}\"}} {n}"
            )?;
        }
        writeln!(
            out,
            "nsight_operator_reconcile_duration_seconds_bucket{{kind=\"{kind}\",le=\"+Inf\"}} {}",
            h.count
        )?;
        writeln!(
            out,
            "nsight_operator_reconcile_duration_seconds_sum{{kind=\"{kind}\"}} {}",
            h.sum
        )?;
        writeln!(
            out,
            "nsight_operator_reconcile_duration_seconds_count{{kind=\"{kind}\"}} {}",
            h.count
        )?;
    }
    writeln!(
        out,
        "# HELP nsight_operator_reconciles_in_flight Reconciles running now (the work queue being drained)."
    )?;
    writeln!(out, "# TYPE nsight_operator_reconciles_in_flight gauge")?;
    for (kind, n) in &m.in_flight {
        writeln!(
            out,
            "nsight_operator_reconciles_in_flight{{kind=\"{kind}\"}} {n}"
        )?;
    }
    writeln!(
        out,
        "# HELP nsight_operator_leader 1 when this replica holds the leader lease."
    )?;
    writeln!(out, "# TYPE nsight_operator_leader gauge")?;
    writeln!(out, "nsight_operator_leader {}", u8::from(m.leader))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_durations_and_errors_are_exposed() {
        let m = Metrics::new();
        m.started("NsightGateway");
        m.finished("NsightGateway", Duration::from_millis(20), None);
        m.started("NsightGateway");
        m.finished("NsightGateway", Duration::from_secs(3), Some("apply"));
        m.set_leader(true);
        let text = m.render();
        assert!(text.contains(
            "nsight_operator_reconciles_total{kind=\"NsightGateway\",result=\"success\"} 1"
        ));
        assert!(text.contains(
            "nsight_operator_reconcile_errors_total{kind=\"NsightGateway\",step=\"apply\"} 1"
        ));
        assert!(text.contains(
            "nsight_operator_reconcile_duration_seconds_bucket{kind=\"NsightGateway\",le=\"0.025\"} 1"
        ));
        assert!(text.contains(
            "nsight_operator_reconcile_duration_seconds_bucket{kind=\"NsightGateway\",le=\"5\"} 2"
        ));
        assert!(text.contains("nsight_operator_reconciles_in_flight{kind=\"NsightGateway\"} 0"));
        assert!(text.contains("nsight_operator_leader 1"));
        assert_eq!(m.reconciles("NsightGateway"), 2);
    }
}
