//! Jumping from one event whose name matches to the next (or the previous), across every track
//! of a report's index, in time order: the events are ordered by `(start, track, event)`, a
//! total order, so "next after this one" never skips or repeats an event, even among events
//! that start at the same nanosecond. The name test is the page's highlight rule: the name
//! contains the text, ignoring case. Pure.

use super::index::Index;

/// Where a search continues from: an event of the index (its start, track and number), or
/// nothing (the first match, or the last one backwards).
pub type Cursor = Option<(i64, u32, u32)>;

/// The first event after `cursor` (before it, `backwards`) whose name contains `text` (already
/// lowercase, not empty), as `(track, event)`; `None` when there is no further one.
pub fn find(index: &Index, text: &str, cursor: Cursor, backwards: bool) -> Option<(u32, u32)> {
    let matching: Vec<bool> = index
        .names
        .iter()
        .map(|n| n.to_lowercase().contains(text))
        .collect();
    if !matching.contains(&true) {
        return None;
    }
    let named = |name: u32| matching.get(name as usize).copied().unwrap_or(false);
    let mut best: Option<(i64, u32, u32)> = None;
    for track in &index.tracks {
        if track.kind.is_group() {
            continue;
        }
        let Some((_, ev)) = index.track(track.id) else {
            continue;
        };
        let after = |i: usize| match cursor {
            None => true,
            Some(c) => {
                let key = (ev.start[i], track.id, i as u32);
                if backwards {
                    key < c
                } else {
                    key > c
                }
            }
        };
        let found = if backwards {
            // Events starting after the cursor cannot be before it.
            let end = match cursor {
                Some((start, _, _)) => ev.start.partition_point(|&s| s <= start),
                None => ev.len(),
            };
            (0..end).rev().find(|&i| after(i) && named(ev.name[i]))
        } else {
            let from = match cursor {
                Some((start, _, _)) => ev.start.partition_point(|&s| s < start),
                None => 0,
            };
            (from..ev.len()).find(|&i| after(i) && named(ev.name[i]))
        };
        if let Some(i) = found {
            let key = (ev.start[i], track.id, i as u32);
            let better = match best {
                None => true,
                Some(b) => {
                    if backwards {
                        key > b
                    } else {
                        key < b
                    }
                }
            };
            if better {
                best = Some(key);
            }
        }
    }
    best.map(|(_, track, event)| (track, event))
}

#[cfg(test)]
mod tests {
    use nsight_contracts::timeline::TrackKind;

    use super::*;
    use crate::timeline::{index::TrackSource, perfetto::tests::ev as raw};

    /// A group, then two NVTX tracks: track 1 has "Step 1" at 0 and 100, "load" at 50; track 2
    /// has "step 2" at 100 (the same start as track 1's second step) and "other" at 10.
    fn index() -> Index {
        let names = ["Step 1", "load", "step 2", "other"]
            .map(String::from)
            .to_vec();
        let track = |label: &str, events| TrackSource {
            kind: TrackKind::Nvtx,
            label: label.into(),
            parent: Some(0),
            events,
        };
        Index::build(
            vec![
                TrackSource {
                    kind: TrackKind::Process,
                    label: "process".into(),
                    parent: None,
                    events: vec![],
                },
                track("a", vec![raw(0, 10, 0), raw(50, 60, 1), raw(100, 110, 0)]),
                track("b", vec![raw(10, 20, 3), raw(100, 120, 2)]),
            ],
            names,
            vec![],
        )
    }

    fn walk(idx: &Index, text: &str, backwards: bool) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        let mut cursor = None;
        while let Some((t, e)) = find(idx, text, cursor, backwards) {
            out.push((t, e));
            let start = idx.events[t as usize].start[e as usize];
            cursor = Some((start, t, e));
            assert!(out.len() < 10, "no end: {out:?}");
        }
        out
    }

    #[test]
    fn matches_in_time_order_across_tracks_ignoring_case_and_ties_by_track() {
        let idx = index();
        // "step" matches "Step 1" (track 1, events 0 and 2) and "step 2" (track 2, event 1);
        // at 100 ns track 1 comes before track 2.
        assert_eq!(walk(&idx, "step", false), [(1, 0), (1, 2), (2, 1)]);
        assert_eq!(walk(&idx, "step", true), [(2, 1), (1, 2), (1, 0)]);
        assert_eq!(walk(&idx, "load", false), [(1, 1)]);
    }

    #[test]
    fn no_match_or_past_the_last_is_none() {
        let idx = index();
        assert_eq!(find(&idx, "nothing", None, false), None);
        assert_eq!(find(&idx, "step", Some((100, 2, 1)), false), None);
        assert_eq!(find(&idx, "step", Some((0, 1, 0)), true), None);
        // From a cursor on a non-matching event: the next match after it.
        assert_eq!(find(&idx, "step", Some((50, 1, 1)), false), Some((1, 2)));
        assert_eq!(find(&idx, "step", Some((50, 1, 1)), true), Some((1, 0)));
    }
}
