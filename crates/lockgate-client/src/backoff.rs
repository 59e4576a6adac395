//! The one back-off of every lockgate client, and the retry loop built on it.
//!
//! [`Backoff`] pauses 20 ms, then twice as long each time, up to 1 s: a restarting server
//! is found again within a second of being back, and a down server costs one request a
//! second per waiting client. [`retry`] retries exactly the errors
//! [`ClientError::is_temporary`] accepts, for a bounded time of *continuous* failure;
//! [`retry_with`] is the same loop with the caller's own wait (the agent's, which ends
//! early when the agent stops).

use crate::ClientError;
use std::time::{Duration, Instant};

/// The first pause.
const FIRST: Duration = Duration::from_millis(20);
/// The longest pause.
const LONGEST: Duration = Duration::from_secs(1);

/// A growing pause between retries: 20 ms doubling up to 1 s.
#[derive(Debug, Clone)]
pub struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff::new()
    }
}

impl Backoff {
    /// A back-off at its first pause.
    pub fn new() -> Backoff {
        Backoff(FIRST)
    }

    /// The next pause (and doubles the one after).
    pub fn next_pause(&mut self) -> Duration {
        let d = self.0;
        self.0 = (self.0 * 2).min(LONGEST);
        d
    }
}

/// How a [`retry`] failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RetryError {
    /// Only temporary errors for the whole time allowed; the last one.
    #[error("{0}; gave up after retrying")]
    GaveUp(ClientError),
    /// A permanent error (no retry can help).
    #[error("{0}")]
    Permanent(ClientError),
}

/// Calls `f` until it succeeds or fails permanently, retrying temporary errors with a
/// [`Backoff`] for at most `limit` from the first call (the last pause is cut to fit).
///
/// # Errors
/// [`RetryError::GaveUp`] after `limit` of temporary errors, [`RetryError::Permanent`] at
/// once for any other error.
pub fn retry<T>(
    limit: Duration,
    f: impl FnMut() -> Result<T, ClientError>,
) -> Result<T, RetryError> {
    let start = Instant::now();
    retry_with(
        |pause, _| {
            let left = limit.saturating_sub(start.elapsed());
            if left.is_zero() {
                return false;
            }
            std::thread::sleep(pause.min(left));
            true
        },
        f,
    )
}

/// [`retry`] with the caller's own wait: after each temporary error, `wait` gets the
/// [`Backoff`]'s next pause and the error, waits as it likes (a stop signal that ends the
/// wait early, a log line the first time), and says whether to try again.
///
/// # Errors
/// [`RetryError::GaveUp`] with the last temporary error once `wait` says no,
/// [`RetryError::Permanent`] at once for any other error.
pub fn retry_with<T>(
    mut wait: impl FnMut(Duration, &ClientError) -> bool,
    mut f: impl FnMut() -> Result<T, ClientError>,
) -> Result<T, RetryError> {
    let mut backoff = Backoff::new();
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) if e.is_temporary() => {
                if !wait(backoff.next_pause(), &e) {
                    return Err(RetryError::GaveUp(e));
                }
            }
            Err(e) => return Err(RetryError::Permanent(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreachable() -> ClientError {
        ClientError::Unreachable {
            url: "u".into(),
            message: "refused".into(),
        }
    }

    #[test]
    fn the_pause_doubles_up_to_a_second() {
        let mut b = Backoff::new();
        let pauses: Vec<u128> = (0..8).map(|_| b.next_pause().as_millis()).collect();
        assert_eq!(pauses, [20, 40, 80, 160, 320, 640, 1000, 1000]);
    }

    #[test]
    fn retry_retries_temporary_errors_only() {
        let mut calls = 0;
        let r = retry(Duration::from_secs(5), || {
            calls += 1;
            if calls < 3 {
                Err(unreachable())
            } else {
                Ok(calls)
            }
        });
        assert_eq!(r, Ok(3));
        let setup = ClientError::Setup("x".into());
        let mut calls = 0;
        let r: Result<(), _> = retry(Duration::from_secs(5), || {
            calls += 1;
            Err(setup.clone())
        });
        assert_eq!((r, calls), (Err(RetryError::Permanent(setup)), 1));
    }

    #[test]
    fn retry_gives_up_after_its_limit() {
        let start = Instant::now();
        let r: Result<(), _> = retry(Duration::from_millis(100), || Err(unreachable()));
        assert_eq!(r, Err(RetryError::GaveUp(unreachable())));
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(100) && took < Duration::from_secs(2),
            "{took:?}"
        );
    }

    #[test]
    fn retry_with_waits_as_told_and_stops_when_told() {
        let mut pauses = Vec::new();
        let r: Result<(), _> = retry_with(
            |pause, e| {
                assert_eq!(*e, unreachable());
                pauses.push(pause.as_millis());
                pauses.len() < 3
            },
            || Err(unreachable()),
        );
        assert_eq!(r, Err(RetryError::GaveUp(unreachable())));
        assert_eq!(
            pauses,
            [20, 40, 80],
            "the back-off's pauses, no sleep of its own"
        );
    }
}
