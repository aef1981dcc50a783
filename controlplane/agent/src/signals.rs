//! Signals sent to the agent reach the profiled program: the agent stands in for the program it
//! wraps (the exec hook replaced the program with `nsight-agent run -- <argv>`), so SIGTERM from
//! Kubernetes, Ctrl-C in a terminal, SIGHUP and SIGQUIT are forwarded to it, and the agent then
//! exits with the program's status once the program has reacted. While collecting NVTX ranges,
//! the recordings are saved first (`nvtx::Checkpoint`), so a deleted Pod still uploads them.

use tokio::signal::unix::{signal, SignalKind};

/// Forwards SIGTERM, SIGINT, SIGHUP and SIGQUIT to `pid` until the returned task is aborted.
/// With a `checkpoint`, what the program recorded is saved before SIGTERM or SIGINT reaches it
/// (a program that does not handle them dies before it could write its data).
pub fn forward_to(
    pid: u32,
    checkpoint: Option<crate::nvtx::Checkpoint>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let kinds = [
            SignalKind::terminate(),
            SignalKind::interrupt(),
            SignalKind::hangup(),
            SignalKind::quit(),
        ];
        let mut streams = Vec::new();
        for kind in kinds {
            match signal(kind) {
                Ok(s) => streams.push((kind, s)),
                Err(e) => tracing::warn!(error = %e, "cannot watch a signal to forward it"),
            }
        }
        loop {
            let received = futures_first(&mut streams).await;
            let Some(kind) = received else { return };
            let terminating = kind == SignalKind::terminate() || kind == SignalKind::interrupt();
            if let (true, Some(checkpoint)) = (terminating, &checkpoint) {
                let saved = checkpoint.save().await;
                if saved > 0 {
                    tracing::info!(processes = saved, "recordings saved before the signal");
                }
            }
            tracing::info!(
                signal = kind.as_raw_value(),
                pid,
                "forwarding signal to the target"
            );
            send(pid, kind.as_raw_value());
        }
    })
}

/// The first signal any stream receives.
async fn futures_first(
    streams: &mut [(SignalKind, tokio::signal::unix::Signal)],
) -> Option<SignalKind> {
    if streams.is_empty() {
        return None;
    }
    std::future::poll_fn(|cx| {
        for (kind, stream) in streams.iter_mut() {
            if let std::task::Poll::Ready(Some(())) = stream.poll_recv(cx) {
                return std::task::Poll::Ready(Some(*kind));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

#[allow(unsafe_code, reason = "kill(2) has no safe wrapper in std")]
fn send(pid: u32, signal: i32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid <= 0 {
        return;
    }
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; pid is the target's
    // positive pid (never 0 or -1, which would signal a process group or every process).
    let _ = unsafe { libc::kill(pid, signal) };
}
