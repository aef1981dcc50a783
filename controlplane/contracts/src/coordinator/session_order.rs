//! The order of a sessions list (the Cloud UI's sortable columns, kept in the URL as
//! `sort=<column>` or `sort=-<column>` for descending). The default is newest first (`-began`),
//! the order a user who has just begun a session expects. Ties keep the begin order, then the
//! ID, so the order is total and a redraw never shuffles equal rows. Pure.

use std::cmp::Ordering;

use super::view::SessionSummary;

/// A sortable column of the sessions list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionColumn {
    Session,
    Title,
    State,
    Began,
    Ended,
    Collections,
}

impl SessionColumn {
    pub const ALL: [SessionColumn; 6] = [
        SessionColumn::Session,
        SessionColumn::Title,
        SessionColumn::State,
        SessionColumn::Began,
        SessionColumn::Ended,
        SessionColumn::Collections,
    ];

    /// The name in the URL.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionColumn::Session => "session",
            SessionColumn::Title => "title",
            SessionColumn::State => "state",
            SessionColumn::Began => "began",
            SessionColumn::Ended => "ended",
            SessionColumn::Collections => "collections",
        }
    }

    /// The first click's direction: times and counts largest first (the newest, the busiest),
    /// text A to Z.
    pub fn first_descending(self) -> bool {
        matches!(
            self,
            SessionColumn::Began | SessionColumn::Ended | SessionColumn::Collections
        )
    }
}

/// A column and a direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionOrder {
    pub column: SessionColumn,
    pub descending: bool,
}

impl Default for SessionOrder {
    fn default() -> Self {
        SessionOrder {
            column: SessionColumn::Began,
            descending: true,
        }
    }
}

impl SessionOrder {
    /// `began`, `-collections`, ...; anything else is `None` (the page falls back to the default).
    pub fn parse(raw: &str) -> Option<SessionOrder> {
        let (descending, name) = match raw.strip_prefix('-') {
            Some(name) => (true, name),
            None => (false, raw),
        };
        SessionColumn::ALL
            .into_iter()
            .find(|c| c.as_str() == name)
            .map(|column| SessionOrder { column, descending })
    }

    /// What [`SessionOrder::parse`] reads back.
    pub fn as_param(self) -> String {
        let sign = if self.descending { "-" } else { "" };
        format!("{sign}{}", self.column.as_str())
    }

    /// The order after a click on `column`'s header: the other direction of the same column,
    /// else that column in its first direction.
    pub fn clicked(self, column: SessionColumn) -> SessionOrder {
        if self.column == column {
            SessionOrder {
                column,
                descending: !self.descending,
            }
        } else {
            SessionOrder {
                column,
                descending: column.first_descending(),
            }
        }
    }

    /// Sorts `sessions` in this order. An empty title and a session not ended yet sort after
    /// every value ascending (before them descending).
    pub fn sort(self, sessions: &mut [SessionSummary]) {
        sessions.sort_by(|a, b| {
            let by = match self.column {
                SessionColumn::Session => a.id.to_string().cmp(&b.id.to_string()),
                SessionColumn::Title => title_key(a).cmp(&title_key(b)),
                SessionColumn::State => a.state.as_str().cmp(b.state.as_str()),
                SessionColumn::Began => a.created_at.0.cmp(&b.created_at.0),
                SessionColumn::Ended => {
                    missing_last(a.ended_at.map(|m| m.0), b.ended_at.map(|m| m.0))
                }
                SessionColumn::Collections => a.collections.cmp(&b.collections),
            };
            let by = by
                .then_with(|| a.created_at.0.cmp(&b.created_at.0))
                .then_with(|| a.id.to_string().cmp(&b.id.to_string()));
            if self.descending {
                by.reverse()
            } else {
                by
            }
        });
    }
}

/// Titles ignoring case, the untitled last.
fn title_key(s: &SessionSummary) -> (bool, String) {
    match &s.title {
        Some(t) => (false, t.to_string().to_lowercase()),
        None => (true, String::new()),
    }
}

fn missing_last(a: Option<u64>, b: Option<u64>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.cmp(&b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(
        n: u8,
        title: Option<&str>,
        began: u64,
        ended: Option<u64>,
        collections: usize,
    ) -> SessionSummary {
        serde_json::from_value(serde_json::json!({
            "id": format!("00000000-0000-4000-8000-0000000000{n:02}"),
            "tag": "default",
            "title": title,
            "state": if ended.is_some() { "ended" } else { "open" },
            "createdAt": began,
            "endedAt": ended,
            "collections": collections,
        }))
        .expect("a session summary")
    }

    fn order_of(order: SessionOrder, list: &[SessionSummary]) -> Vec<u8> {
        let mut list = list.to_vec();
        order.sort(&mut list);
        list.iter()
            .map(|s| s.id.to_string()[34..].parse().unwrap())
            .collect()
    }

    #[test]
    fn parse_and_param_round_trip_and_unknown_is_none() {
        for column in SessionColumn::ALL {
            for descending in [false, true] {
                let o = SessionOrder { column, descending };
                assert_eq!(SessionOrder::parse(&o.as_param()), Some(o));
            }
        }
        for bad in ["", "-", "Began", "--began", "tag", "began "] {
            assert_eq!(SessionOrder::parse(bad), None, "{bad:?}");
        }
        assert_eq!(SessionOrder::default().as_param(), "-began");
    }

    #[test]
    fn each_column_sorts_with_ties_by_begin_and_missing_values_last() {
        let list = [
            session(1, Some("beta"), 100, Some(500), 2),
            session(2, None, 200, None, 0),
            session(3, Some("Alpha"), 300, Some(400), 2),
            session(4, Some("gamma"), 400, None, 5),
        ];
        let asc = |column| SessionOrder {
            column,
            descending: false,
        };
        let desc = |column| SessionOrder {
            column,
            descending: true,
        };
        assert_eq!(
            order_of(SessionOrder::default(), &list),
            [4, 3, 2, 1],
            "newest first"
        );
        assert_eq!(order_of(asc(SessionColumn::Began), &list), [1, 2, 3, 4]);
        assert_eq!(order_of(asc(SessionColumn::Title), &list), [3, 1, 4, 2]);
        assert_eq!(order_of(desc(SessionColumn::Title), &list), [2, 4, 1, 3]);
        assert_eq!(order_of(asc(SessionColumn::Ended), &list), [3, 1, 2, 4]);
        assert_eq!(
            order_of(desc(SessionColumn::Collections), &list),
            [4, 3, 1, 2]
        );
        assert_eq!(
            order_of(asc(SessionColumn::Collections), &list),
            [2, 1, 3, 4]
        );
        assert_eq!(order_of(asc(SessionColumn::State), &list), [1, 3, 2, 4]);
        assert_eq!(order_of(asc(SessionColumn::Session), &list), [1, 2, 3, 4]);
    }

    #[test]
    fn a_click_flips_the_same_column_or_starts_another_in_its_first_direction() {
        let o = SessionOrder::default();
        assert_eq!(o.clicked(SessionColumn::Began).as_param(), "began");
        assert_eq!(o.clicked(SessionColumn::Title).as_param(), "title");
        assert_eq!(
            o.clicked(SessionColumn::Collections).as_param(),
            "-collections"
        );
        assert_eq!(
            o.clicked(SessionColumn::Collections)
                .clicked(SessionColumn::Collections)
                .as_param(),
            "collections"
        );
    }
}
