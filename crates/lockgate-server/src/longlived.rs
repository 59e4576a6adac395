//! Caps on the answers that stay open: event streams (`/v1/events/stream`) and long-polls
//! (job waits, agents' assignment polls, log follows).
//!
//! # Invariants
//! - **Bounded per token and in all.** At most [`STREAMS_PER_TOKEN`] streams and
//!   [`POLLS_PER_TOKEN`] polls are open for one principal, and [`STREAMS`] and [`POLLS`] for
//!   the whole server. One more is refused with 429 `quota_exceeded` and `Retry-After`,
//!   naming the cap, before anything is read or held for it.
//! - **Given back when the answer ends**: a [`Slot`] is held by the handler (a poll) or by
//!   the stream's state (a stream, whose body hyper drops when the client goes), and its
//!   `Drop` returns it, whatever way the answer ends.

use crate::auth::Principal;
use crate::error::ApiError;
use lockgate_api::ErrorCode;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Event streams open for one principal.
pub const STREAMS_PER_TOKEN: usize = 64;
/// Event streams open in all.
pub const STREAMS: usize = 1024;
/// Long-polls open for one principal (many `lockgate run` wrappers may share one token).
pub const POLLS_PER_TOKEN: usize = 4096;
/// Long-polls open in all.
pub const POLLS: usize = 16384;

/// What stays open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// An SSE stream.
    Stream,
    /// A long-poll.
    Poll,
}

impl Kind {
    fn caps(self) -> (usize, usize, &'static str) {
        match self {
            Kind::Stream => (STREAMS_PER_TOKEN, STREAMS, "event streams"),
            Kind::Poll => (POLLS_PER_TOKEN, POLLS, "long-polls"),
        }
    }
}

/// The open answers, counted per principal and kind.
#[derive(Debug, Default)]
pub struct Open {
    counts: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    /// Per (kind, principal); an entry is removed when it reaches 0.
    mine: HashMap<(Kind, String), usize>,
    /// Per kind, in all.
    total: HashMap<Kind, usize>,
}

/// One open answer; dropping it gives it back.
#[derive(Debug)]
pub struct Slot {
    open: Arc<Open>,
    key: (Kind, String),
}

impl Open {
    /// Takes a slot of `kind` for `p`.
    ///
    /// # Errors
    /// 429 `quota_exceeded` (with `Retry-After`) naming the cap that is full.
    pub fn take(self: &Arc<Self>, kind: Kind, p: &Principal) -> Result<Slot, ApiError> {
        let (per_token, all, what) = kind.caps();
        let key = (kind, p.name.clone());
        let mut c = self.counts.lock().expect("not poisoned");
        let mine = c.mine.get(&key).copied().unwrap_or(0);
        let total = c.total.get(&kind).copied().unwrap_or(0);
        let full = if mine >= per_token {
            Some(format!(
                "{:?} has {mine} {what} open, the most one token may have ({per_token}): close one, or retry later",
                p.name
            ))
        } else if total >= all {
            Some(format!(
                "the server has {total} {what} open, the most it keeps ({all}): retry later"
            ))
        } else {
            None
        };
        if let Some(message) = full {
            return Err(ApiError::new(ErrorCode::QuotaExceeded, message));
        }
        *c.mine.entry(key.clone()).or_default() += 1;
        *c.total.entry(kind).or_default() += 1;
        Ok(Slot {
            open: self.clone(),
            key,
        })
    }

    /// How many of `kind` are open in all.
    pub fn total(&self, kind: Kind) -> usize {
        let c = self.counts.lock().expect("not poisoned");
        c.total.get(&kind).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.open.counts.lock().expect("not poisoned");
        if let Some(n) = c.mine.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                c.mine.remove(&self.key);
            }
        }
        if let Some(n) = c.total.get_mut(&self.key.0) {
            *n = n.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgate_api::Role;

    fn principal(name: &str) -> Principal {
        Principal {
            name: name.into(),
            role: Role::Submitter,
            node: None,
        }
    }

    #[test]
    fn a_token_past_its_cap_is_refused_and_a_closed_answer_frees_its_slot() {
        let open = Arc::new(Open::default());
        let alice = principal("alice");
        let held: Vec<Slot> = (0..STREAMS_PER_TOKEN)
            .map(|_| open.take(Kind::Stream, &alice).unwrap())
            .collect();
        let e = open.take(Kind::Stream, &alice).unwrap_err();
        assert_eq!(e.code, ErrorCode::QuotaExceeded);
        assert!(e.message.contains("(64)"), "{}", e.message);
        // Another token, and another kind, are counted apart.
        open.take(Kind::Stream, &principal("bob")).unwrap();
        open.take(Kind::Poll, &alice).unwrap();
        drop(held);
        assert_eq!(open.total(Kind::Stream), 0);
        open.take(Kind::Stream, &alice).unwrap();
    }

    #[test]
    fn the_server_wide_cap_holds_across_tokens() {
        let open = Arc::new(Open::default());
        let held: Vec<Slot> = (0..STREAMS)
            .map(|i| {
                let p = principal(&format!("t{}", i / STREAMS_PER_TOKEN));
                open.take(Kind::Stream, &p).unwrap()
            })
            .collect();
        let e = open.take(Kind::Stream, &principal("late")).unwrap_err();
        assert!(e.message.contains("(1024)"), "{}", e.message);
        assert_eq!(held.len(), STREAMS);
    }
}
