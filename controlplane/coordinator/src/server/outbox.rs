//! An agent's outbound queue: the hub pushes commands ([`Sender::try_send`]), the agent's gRPC
//! response stream takes them ([`Receiver`] is a `Stream`). One sender, one receiver, bounded.
//!
//! Why not a tokio `mpsc` channel: the coordinator keeps one queue per connected agent for the
//! connection's life, and it is empty nearly always. A tokio channel costs ~800 bytes each even
//! when empty (cache-line-padded fields, a first block of 32 slots), 8 MB at 10,000 agents. This
//! one is a mutex around a `VecDeque` that holds no allocation while empty (~100 bytes).
//!
//! Closing: dropping the [`Sender`] (the hub forgets the link) ends the stream after what is
//! queued; dropping the [`Receiver`] (the stream is gone) makes later sends fail.

use std::{
    collections::VecDeque,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    task::{Context, Poll, Waker},
};

use tokio_stream::Stream;

#[derive(Debug)]
struct Shared<T> {
    queue: VecDeque<T>,
    /// The receiver's task, woken by a send or the sender's drop.
    waker: Option<Waker>,
    sender_gone: bool,
    receiver_gone: bool,
}

fn lock<T>(shared: &Mutex<Shared<T>>) -> MutexGuard<'_, Shared<T>> {
    // Every update leaves `Shared` consistent; a panic elsewhere cannot tear it.
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The pushing half, held by the hub's link to the agent.
#[derive(Debug)]
pub struct Sender<T> {
    shared: Arc<Mutex<Shared<T>>>,
    capacity: usize,
}

/// The taking half: the agent's response stream.
#[derive(Debug)]
pub struct Receiver<T> {
    shared: Arc<Mutex<Shared<T>>>,
}

/// Why [`Sender::try_send`] refused an item (it is dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// `capacity` items are waiting: the agent is not reading.
    Full,
    /// The receiver is gone: the stream ended.
    Closed,
}

/// A queue holding at most `capacity` items.
pub fn channel<T>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Mutex::new(Shared {
        queue: VecDeque::new(),
        waker: None,
        sender_gone: false,
        receiver_gone: false,
    }));
    (
        Sender {
            shared: Arc::clone(&shared),
            capacity,
        },
        Receiver { shared },
    )
}

impl<T> Sender<T> {
    /// Queues `item` unless the queue is full or the receiver is gone.
    pub fn try_send(&self, item: T) -> Result<(), SendError> {
        let waker = {
            let mut shared = lock(&self.shared);
            if shared.receiver_gone {
                return Err(SendError::Closed);
            }
            if shared.queue.len() >= self.capacity {
                return Err(SendError::Full);
            }
            shared.queue.push_back(item);
            shared.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut shared = lock(&self.shared);
            shared.sender_gone = true;
            shared.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Stream for Receiver<T> {
    type Item = T;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut shared = lock(&self.shared);
        if let Some(item) = shared.queue.pop_front() {
            if shared.queue.is_empty() {
                // Idle again: hold no allocation until the next command.
                shared.queue = VecDeque::new();
            }
            return Poll::Ready(Some(item));
        }
        if shared.sender_gone {
            return Poll::Ready(None);
        }
        match &mut shared.waker {
            Some(waker) => waker.clone_from(cx.waker()),
            slot @ None => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut shared = lock(&self.shared);
        shared.receiver_gone = true;
        shared.queue.clear();
        shared.waker = None;
    }
}

#[cfg(test)]
mod tests {
    use tokio_stream::StreamExt;

    use super::*;

    #[tokio::test]
    async fn delivers_in_order_then_ends_when_the_sender_is_dropped() {
        let (tx, mut rx) = channel(4);
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
        let waiting = tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(item) = rx.next().await {
                got.push(item);
            }
            got
        });
        tokio::task::yield_now().await;
        tx.try_send(3).unwrap();
        drop(tx);
        assert_eq!(waiting.await.unwrap(), vec![1, 2, 3]);
    }

    #[tokio::test]
    async fn refuses_when_full_or_when_the_receiver_is_gone() {
        let (tx, mut rx) = channel(2);
        tx.try_send('a').unwrap();
        tx.try_send('b').unwrap();
        assert_eq!(tx.try_send('c'), Err(SendError::Full));
        assert_eq!(rx.next().await, Some('a'));
        tx.try_send('c').unwrap();
        drop(rx);
        assert_eq!(tx.try_send('d'), Err(SendError::Closed));
    }

    #[tokio::test]
    async fn an_idle_queue_holds_no_allocation() {
        let (tx, mut rx) = channel(16);
        tx.try_send(7u64).unwrap();
        assert_eq!(rx.next().await, Some(7));
        assert_eq!(lock(&rx.shared).queue.capacity(), 0);
    }
}
