//! Long lists on a client's screen (the UI's sessions and jobs): a text filter over each row's
//! fields, and how many rows to draw, so that a tag with thousands of sessions or a service
//! with ten thousand jobs draws a page of rows, not all of them. Pure, for host tests.
//!
//! ```text
//!  "resnet fail" ──matches──> every word is in some field, ignoring case
//!  rows ──filter──> 1,234 match ──Window::new(1_234, shown 100)──> draw 100, "Show 100 more"
//! ```

/// Rows drawn at first, and added by each "Show more".
pub const PAGE_ROWS: usize = 100;

/// Whether a row with these fields matches `query`: every whitespace-separated word of it is
/// part of some field, ignoring case. An empty query matches every row.
pub fn matches(query: &str, fields: &[&str]) -> bool {
    let fields: Vec<String> = fields.iter().map(|f| f.to_lowercase()).collect();
    query
        .split_whitespace()
        .map(str::to_lowercase)
        .all(|word| fields.iter().any(|f| f.contains(&word)))
}

/// The rows drawn of those that match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// How many match the filter.
    pub total: usize,
    /// How many of them are drawn (the first ones).
    pub shown: usize,
}

impl Window {
    /// `limit` rows of `total` (at least one page; `None`: one page).
    pub fn new(total: usize, limit: Option<usize>) -> Self {
        let limit = limit.unwrap_or(PAGE_ROWS).max(PAGE_ROWS);
        Self {
            total,
            shown: total.min(limit),
        }
    }

    /// How many more one "Show more" draws (0: all are drawn).
    pub fn more(&self) -> usize {
        (self.total - self.shown).min(PAGE_ROWS)
    }

    /// The limit after one "Show more".
    pub fn next_limit(&self) -> usize {
        self.shown + self.more()
    }

    /// What a person reads above the rows: `1 session`, `1,000 sessions`, or
    /// `Showing 100 of 1,000 sessions` (`one` and `many`: the noun's two forms).
    pub fn caption(&self, one: &str, many: &str) -> String {
        let noun = if self.total == 1 { one } else { many };
        if self.shown == self.total {
            format!("{} {noun}", thousands(self.total))
        } else {
            format!(
                "Showing {} of {} {noun}",
                thousands(self.shown),
                thousands(self.total)
            )
        }
    }
}

/// `12345` as `12,345`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_must_be_in_some_field_ignoring_case() {
        let row = ["3eb672fd-0000", "ResNet baseline", "ended"];
        assert!(matches("", &row));
        assert!(matches("  ", &row));
        assert!(matches("resnet", &row));
        assert!(matches("RESNET end", &row));
        assert!(matches("3eb6", &row));
        assert!(!matches("resnet open", &row));
        assert!(!matches("bert", &row));
    }

    #[test]
    fn a_page_at_first_then_a_page_more_each_time() {
        let w = Window::new(1_000, None);
        assert_eq!((w.shown, w.more()), (100, 100));
        assert_eq!(
            w.caption("session", "sessions"),
            "Showing 100 of 1,000 sessions"
        );
        let w = Window::new(1_000, Some(w.next_limit()));
        assert_eq!(w.shown, 200);
        let w = Window::new(250, Some(200));
        assert_eq!((w.more(), w.next_limit()), (50, 250));
        let all = Window::new(250, Some(250));
        assert_eq!(
            (all.more(), all.caption("job", "jobs")),
            (0, "250 jobs".into())
        );
        assert_eq!(Window::new(7, Some(3)).shown, 7, "never less than a page");
        assert_eq!(Window::new(0, None).caption("job", "jobs"), "0 jobs");
        assert_eq!(Window::new(1, None).caption("job", "jobs"), "1 job");
    }

    #[test]
    fn thousands_are_grouped() {
        for (n, s) in [
            (0, "0"),
            (999, "999"),
            (1_000, "1,000"),
            (1_234_567, "1,234,567"),
        ] {
            assert_eq!(thousands(n), s);
        }
    }
}
