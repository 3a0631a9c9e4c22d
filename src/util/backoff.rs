//! The delay between connection attempts of a route seed or a gateway: 1 s, or with
//! `connect_backoff` (nats-server 2.12+) doubled after every failed attempt up to 30 s and
//! back to 1 s once connected. Pure: the caller sleeps.

use std::time::Duration;

/// nats-server's DEFAULT_ROUTE_CONNECT and DEFAULT_ROUTE_CONNECT_MAX.
pub const FIRST: Duration = Duration::from_secs(1);
pub const MAX: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
pub struct Backoff {
    exponential: bool,
    next: Duration,
}

impl Backoff {
    pub fn new(exponential: bool) -> Self {
        Backoff {
            exponential,
            next: FIRST,
        }
    }

    /// An attempt failed: how long to wait before the next one.
    pub fn failed(&mut self) -> Duration {
        let d = self.next;
        if self.exponential {
            self.next = (self.next * 2).min(MAX);
        }
        d
    }

    /// Connected (or nothing to do): the next failure waits the first delay again.
    pub fn reset(&mut self) -> Duration {
        self.next = FIRST;
        FIRST
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_thirty_seconds_and_resets() {
        let mut b = Backoff::new(true);
        let secs: Vec<u64> = (0..8).map(|_| b.failed().as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(b.reset(), FIRST);
        assert_eq!(b.failed(), FIRST);
    }

    #[test]
    fn without_backoff_always_one_second() {
        let mut b = Backoff::new(false);
        for _ in 0..5 {
            assert_eq!(b.failed(), FIRST);
        }
    }
}
