//! The in-memory form of a thread's push/pop ranges and marks, kept small because a busy program
//! records millions of them: 48 bytes an event, messages interned per thread (most programs
//! repeat a few names), stored in fixed-size chunks (no doubling reserve, no copy on growth).
//! [`Compact::expand`] turns one back into a dump [`Event`].

use std::{collections::HashMap, sync::Arc};

use crate::dump::{Event, EventKind, Payload};

use super::Attrs;

/// What names an event: an explicit message, a registered string's id, or (rarely) both.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Label {
    Text(Arc<str>),
    Registered(u64),
    Both(Arc<str>, u64),
}

/// A thread's interned labels; index `i` is stored as `i + 1` (0: no label). Texts are looked
/// up by `&str`, so a repeated message costs a hash, not an allocation.
#[derive(Debug, Default)]
pub(super) struct Labels {
    values: Vec<Label>,
    texts: HashMap<Box<str>, u32>,
    others: HashMap<Label, u32>,
}

impl Labels {
    fn add(&mut self, label: Label) -> u32 {
        let Ok(i) = u32::try_from(self.values.len() + 1) else {
            return 0;
        };
        self.values.push(label);
        i
    }

    fn text(&mut self, text: String) -> u32 {
        if let Some(&i) = self.texts.get(text.as_str()) {
            return i;
        }
        let i = self.add(Label::Text(Arc::from(text.as_str())));
        self.texts.insert(text.into_boxed_str(), i);
        i
    }

    fn other(&mut self, label: Label) -> u32 {
        if let Some(&i) = self.others.get(&label) {
            return i;
        }
        let i = self.add(label.clone());
        self.others.insert(label, i);
        i
    }

    fn get(&self, i: u32) -> Option<&Label> {
        let i = usize::try_from(i).ok()?.checked_sub(1)?;
        self.values.get(i)
    }
}

/// No end yet.
const OPEN: u64 = u64::MAX;

/// One push/pop range or mark of a thread (the thread's id is the log's).
#[derive(Debug)]
pub(super) struct Compact {
    pub start: u64,
    end: u64,
    domain: u64,
    /// Rare: boxed so that events without one stay small.
    payload: Option<Box<Payload>>,
    /// An index of the thread's [`Labels`].
    label: u32,
    category: u32,
    color: u32,
    kind: EventKind,
    has_color: bool,
}

impl Compact {
    pub fn new(
        kind: EventKind,
        start: u64,
        domain: u64,
        attrs: Attrs,
        labels: &mut Labels,
    ) -> Self {
        let label = match (attrs.text, attrs.text_id) {
            (Some(text), None) => labels.text(text),
            (Some(text), Some(id)) => labels.other(Label::Both(Arc::from(text), id)),
            (None, Some(id)) => labels.other(Label::Registered(id)),
            (None, None) => 0,
        };
        Self {
            start,
            end: OPEN,
            domain,
            payload: attrs.payload.map(Box::new),
            label,
            category: attrs.category,
            color: attrs.color.unwrap_or_default(),
            kind,
            has_color: attrs.color.is_some(),
        }
    }

    pub fn end_at(&mut self, now: u64) {
        self.end = now;
    }

    /// The dump's form of this event of thread `tid`.
    pub fn expand(&self, tid: u32, labels: &Labels) -> Event {
        let (text, text_id) = match labels.get(self.label) {
            Some(Label::Text(t)) => (Some(t.to_string()), None),
            Some(Label::Registered(id)) => (None, Some(*id)),
            Some(Label::Both(t, id)) => (Some(t.to_string()), Some(*id)),
            None => (None, None),
        };
        Event {
            kind: self.kind,
            start: self.start,
            end: (self.end != OPEN).then_some(self.end),
            tid,
            end_tid: None,
            domain: self.domain,
            category: self.category,
            color: self.has_color.then_some(self.color),
            text,
            text_id,
            payload: self.payload.as_deref().copied(),
            range_id: None,
        }
    }
}

/// Events per chunk (~384 KiB of [`Compact`]).
const CHUNK: usize = 8192;

/// An append-only list in fixed-size chunks: growing never copies or over-reserves by more than
/// one chunk.
#[derive(Debug, Default)]
pub(super) struct Chunks {
    chunks: Vec<Vec<Compact>>,
}

impl Chunks {
    pub fn push(&mut self, event: Compact) {
        match self.chunks.last_mut() {
            Some(last) if last.len() < last.capacity() => last.push(event),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(event);
                self.chunks.push(chunk);
            }
        }
    }

    /// Removes and returns every event, in order.
    pub fn drain(&mut self) -> impl Iterator<Item = Compact> {
        std::mem::take(&mut self.chunks).into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_takes_48_bytes() {
        assert_eq!(size_of::<Compact>(), 48);
    }

    #[test]
    fn repeated_labels_are_stored_once_and_events_expand_to_what_was_given() {
        let mut labels = Labels::default();
        let given = [
            Attrs {
                text: Some("step".into()),
                ..Attrs::default()
            },
            Attrs {
                text: Some("step".into()),
                color: Some(0xff00_ff00),
                category: 3,
                payload: Some(Payload::F64(0.5)),
                ..Attrs::default()
            },
            Attrs {
                text_id: Some(9),
                ..Attrs::default()
            },
            Attrs {
                text: Some("both".into()),
                text_id: Some(9),
                ..Attrs::default()
            },
            Attrs::default(),
        ];
        let mut chunks = Chunks::default();
        for (i, attrs) in given.iter().enumerate() {
            let mut e = Compact::new(
                EventKind::PushPop,
                10 + i as u64,
                4,
                attrs.clone(),
                &mut labels,
            );
            if i % 2 == 0 {
                e.end_at(100);
            }
            chunks.push(e);
        }
        assert_eq!(labels.values.len(), 3, "step, 9, both+9");
        let back: Vec<Event> = chunks.drain().map(|e| e.expand(77, &labels)).collect();
        for (i, (e, attrs)) in back.iter().zip(&given).enumerate() {
            assert_eq!(e.text, attrs.text);
            assert_eq!(e.text_id, attrs.text_id);
            assert_eq!(e.color, attrs.color);
            assert_eq!(e.category, attrs.category);
            assert_eq!(e.payload, attrs.payload);
            assert_eq!((e.tid, e.domain, e.start), (77, 4, 10 + i as u64));
            assert_eq!(e.end, (i % 2 == 0).then_some(100));
        }
    }

    #[test]
    fn chunks_keep_order_across_chunk_boundaries() {
        let mut labels = Labels::default();
        let mut chunks = Chunks::default();
        let n = CHUNK as u64 * 2 + 5;
        for i in 0..n {
            chunks.push(Compact::new(
                EventKind::Mark,
                i,
                0,
                Attrs::default(),
                &mut labels,
            ));
        }
        assert_eq!(chunks.chunks.len(), 3);
        let starts: Vec<u64> = chunks.drain().map(|e| e.start).collect();
        assert_eq!(starts, (0..n).collect::<Vec<_>>());
        assert_eq!(chunks.drain().count(), 0, "drained");
    }
}
