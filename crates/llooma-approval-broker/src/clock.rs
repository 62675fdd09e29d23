//! Time, behind a trait, so tests can move through a two-minute deadline without waiting for it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

/// A boxed sleep, so [`Clock`] stays usable as `Arc<dyn Clock>`.
pub type Sleep<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Where the broker gets "now" and how it waits for a moment.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Milliseconds since the Unix epoch (the schema's one time format).
    fn now_ms(&self) -> i64;

    /// Resolves once [`Clock::now_ms`] is at or past `at_ms`.
    fn sleep_until(&self, at_ms: i64) -> Sleep<'_>;
}

/// The wall clock and tokio's timer.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }

    fn sleep_until(&self, at_ms: i64) -> Sleep<'_> {
        // Relative sleep from the current reading: if the wall clock jumps, callers re-read it
        // after waking and sleep again, so a jump costs at most one extra round.
        let wait = at_ms.saturating_sub(self.now_ms());
        Box::pin(async move {
            if let Ok(wait) = u64::try_from(wait)
                && wait > 0
            {
                tokio::time::sleep(Duration::from_millis(wait)).await;
            }
        })
    }
}

/// A clock that only moves when told to. Sleepers wake when [`ManualClock::advance`] or
/// [`ManualClock::set`] moves it past their moment.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<watch::Sender<i64>>,
}

impl ManualClock {
    pub fn new(start_ms: i64) -> Self {
        ManualClock { now: Arc::new(watch::Sender::new(start_ms)) }
    }

    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.now.send_modify(|now| *now = now.saturating_add(by));
    }

    pub fn set(&self, at_ms: i64) {
        self.now.send_replace(at_ms);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        *self.now.borrow()
    }

    fn sleep_until(&self, at_ms: i64) -> Sleep<'_> {
        let mut rx = self.now.subscribe();
        Box::pin(async move {
            loop {
                if *rx.borrow_and_update() >= at_ms {
                    return;
                }
                if rx.changed().await.is_err() {
                    // The clock is gone: time will never reach `at_ms`.
                    std::future::pending::<()>().await;
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn manual_sleep_wakes_only_when_advanced_past() {
        let clock = ManualClock::new(1_000);
        let sleeper = {
            let clock = clock.clone();
            tokio::spawn(async move { clock.sleep_until(2_000).await })
        };
        clock.advance(Duration::from_millis(500));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished());
        clock.advance(Duration::from_millis(500));
        tokio::time::timeout(Duration::from_secs(5), sleeper).await.unwrap().unwrap();
        assert_eq!(clock.now_ms(), 2_000);
    }
}
