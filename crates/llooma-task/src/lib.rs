//! Polling a connection and its request or body together in one task, without that task waking
//! itself.
//!
//! Its own crate because both ends of Llooma's HTTP use it: the outbound client
//! (`llooma-net`) and the server's inbound connections (`llooma-server`), and neither should
//! reach into the other for a piece of runtime plumbing.
//!
//! An outbound connection is driven by the task that reads its response (`llooma-net`):
//! its state machine and the request or body waiting on it are polled in the same poll. They
//! talk through hyper's channels, and each hand-over wakes the other side: the request queued
//! wakes the connection, the body read wakes it to read more, a chunk read wakes the body. With
//! the task's own waker that is the task waking itself while it runs, which tokio answers by
//! putting the task back on the shared queue (not the worker's next-task slot) and waking the
//! runtime's other worker to take it: a thread woken, and the task moved to another core, for
//! work the same poll could have done (once per model request and more per streamed answer).
//!
//! So they are polled with a waker of ours ([`SameTask::poll`]): a wake-up that arrives while
//! they are being polled is only noted, and they are polled again at once; one that arrives
//! between polls (the socket became readable) wakes the task as usual.
//!
//! The server's own connections have the same shape (hyper polls a request's handler, and the
//! handler reads the request's body, inside the connection's task), so it polls them through
//! a [`SameTask`] too.
//!
//! Invariant: no wake-up is lost. One that finds the poll running either is seen by the poll
//! (noted before the poll looks) or, when the poll has just ended, is passed on to the task
//! (the waker looks at `polling` again after noting it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

/// Polls in a row at most, while wake-ups keep arriving during the poll, before the task lets
/// the runtime schedule it again (a source that wakes on every poll, as tokio's cooperative
/// budget does once spent, must not keep it here).
const ROUNDS: usize = 4;

/// The waker given to a connection and what waits on it, shared by the polls of its life.
pub struct SameTask {
    state: Arc<State>,
    waker: Waker,
}

struct State {
    /// Set while they are being polled.
    polling: AtomicBool,
    /// A wake-up arrived while they were being polled.
    woken: AtomicBool,
    /// The task that polls them now.
    task: AtomicWaker,
}

impl Wake for State {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.polling.load(Ordering::SeqCst) {
            self.woken.store(true, Ordering::SeqCst);
            // The poll may have ended before the note was made: then the task is told.
            if self.polling.load(Ordering::SeqCst) {
                return;
            }
        }
        self.task.wake();
    }
}

impl std::fmt::Debug for SameTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SameTask")
            .field("polling", &self.state.polling.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Default for SameTask {
    fn default() -> Self {
        Self::new()
    }
}

impl SameTask {
    pub fn new() -> Self {
        let state = Arc::new(State {
            polling: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            task: AtomicWaker::new(),
        });
        let waker = Waker::from(Arc::clone(&state));
        SameTask { state, waker }
    }

    /// Polls `work` (the connection, then what waits on it) for the task of `cx`, again while
    /// wake-ups arrive during the poll.
    pub fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        mut work: impl FnMut(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        self.state.task.register(cx.waker());
        let mut inner = Context::from_waker(&self.waker);
        for _ in 0..ROUNDS {
            self.state.woken.store(false, Ordering::SeqCst);
            self.state.polling.store(true, Ordering::SeqCst);
            let polled = work(&mut inner);
            self.state.polling.store(false, Ordering::SeqCst);
            if polled.is_ready() {
                // Anything noted is looked at by the next poll, which the caller makes to
                // read on (or never, having what it wanted).
                return polled;
            }
            if !self.state.woken.swap(false, Ordering::SeqCst) {
                return Poll::Pending;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counting() -> (Arc<Count>, Waker) {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        (count.clone(), Waker::from(count))
    }

    /// Polls once for `task` with nothing ready, keeping the waker given, as a socket
    /// registers with the reactor.
    fn poll_keeping_the_waker(same: &SameTask, task: &Waker) -> Waker {
        let mut kept = None;
        let polled = same.poll(&mut Context::from_waker(task), |cx| {
            kept = Some(cx.waker().clone());
            Poll::<()>::Pending
        });
        assert_eq!(polled, Poll::Pending);
        kept.expect("the waker was given")
    }

    #[test]
    fn a_wake_up_during_the_poll_polls_again_instead_of_waking_the_task() {
        let (count, task) = counting();
        let same = SameTask::new();
        let mut polls = 0;
        let polled = same.poll(&mut Context::from_waker(&task), |cx| {
            polls += 1;
            if polls == 1 {
                cx.waker().wake_by_ref(); // a request queued: the connection should run
                return Poll::Pending;
            }
            Poll::Ready(polls)
        });
        assert_eq!(polled, Poll::Ready(2));
        assert_eq!(count.0.load(Ordering::SeqCst), 0, "the task was not woken");
    }

    #[test]
    fn a_wake_up_between_polls_wakes_the_task() {
        let (count, task) = counting();
        let same = SameTask::new();
        poll_keeping_the_waker(&same, &task).wake();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_source_that_wakes_on_every_poll_hands_the_task_back_to_the_runtime() {
        let (count, task) = counting();
        let same = SameTask::new();
        let mut polls = 0;
        let polled = same.poll(&mut Context::from_waker(&task), |cx| {
            polls += 1;
            cx.waker().wake_by_ref();
            Poll::<()>::Pending
        });
        assert_eq!(polled, Poll::Pending);
        assert_eq!(polls, ROUNDS);
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "the task is scheduled again");
    }

    #[test]
    fn the_task_polling_now_is_the_one_woken() {
        let (first_count, first) = counting();
        let (second_count, second) = counting();
        let same = SameTask::new();
        let kept = poll_keeping_the_waker(&same, &first);
        let _ = same.poll(&mut Context::from_waker(&second), |_| Poll::<()>::Pending);
        kept.wake();
        assert_eq!(first_count.0.load(Ordering::SeqCst), 0);
        assert_eq!(second_count.0.load(Ordering::SeqCst), 1);
    }
}
