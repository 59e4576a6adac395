//! Several servers behind one [`crate::Client`]: which one to ask first, and when to move
//! on to the next (docs/api.md, "Several servers").
//!
//! `--server` / `LOCKGATE_SERVER` may name several replicas, comma-separated. One of them
//! leads; the others are standbys that answer 503 `not_leader` with the leader's URL. Every
//! clone of a client shares one [`Servers`], so once any call has found the leader, every
//! later call (the lease keeper's renewals, the run's finish) starts there.
//!
//! # Invariants
//! - **A request is sent again elsewhere only when it did nothing**: the connection was
//!   never made (refused, no route, DNS) or a standby answered `not_leader` (a standby
//!   acts on nothing but `/healthz`, `/metrics` and `GET /v1/cluster`). Any other failure
//!   (a timeout, a reset after the request went out, a 5xx from the leader) is returned to
//!   the caller, whose own retry rule ([`crate::ClientError::is_temporary`]) decides; the
//!   next call then starts at the next server, so a paused leader is left after one call.
//! - With one server nothing changes but that a `not_leader` answer's named leader is
//!   tried once: no rounds, no pauses.
//! - A round tries the named leader first (when the standby named one not yet tried in
//!   this round), then the others in their order; between rounds the one [`Backoff`]
//!   pauses, and the rounds stop at the call's deadline or after [`FOLLOW_LIMIT`].

use crate::Backoff;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one call keeps going round the servers while none leads (an election takes
/// a leadership lease, a fraction of the lease TTL); after that the last answer is the
/// caller's to retry.
pub const FOLLOW_LIMIT: Duration = Duration::from_secs(5);

/// The servers of one client and the one to ask first.
#[derive(Debug)]
pub(crate) struct Servers {
    /// As given, without trailing slashes; never empty.
    urls: Vec<String>,
    /// The one to ask first: a listed URL or a leader a standby named.
    current: Mutex<String>,
}

/// Splits `a,b , c` into trimmed URLs without trailing slashes; an empty list gives the
/// one empty URL (whose calls then fail as a bad URL does today).
pub(crate) fn parse_list(list: &str) -> Vec<String> {
    let urls: Vec<String> = list
        .split(',')
        .map(|u| u.trim().trim_end_matches('/').to_string())
        .filter(|u| !u.is_empty())
        .collect();
    if urls.is_empty() {
        vec![list.trim().trim_end_matches('/').to_string()]
    } else {
        urls
    }
}

impl Servers {
    pub(crate) fn new(list: &str) -> Arc<Servers> {
        let urls = parse_list(list);
        let current = Mutex::new(urls[0].clone());
        Arc::new(Servers { urls, current })
    }

    /// Every configured URL.
    pub(crate) fn urls(&self) -> &[String] {
        &self.urls
    }

    /// Whether there is more than one server to fail over to.
    pub(crate) fn several(&self) -> bool {
        self.urls.len() > 1
    }

    /// The server to ask first.
    pub(crate) fn current(&self) -> String {
        self.current.lock().expect("servers lock").clone()
    }

    /// `url` answered: ask it first from now on.
    pub(crate) fn settle(&self, url: &str) {
        *self.current.lock().expect("servers lock") = url.to_string();
    }

    /// `url` failed in a way that may be a dead or paused server: the next call starts at
    /// the server after it (when `url` is still the first choice).
    pub(crate) fn pass_over(&self, url: &str) {
        let mut cur = self.current.lock().expect("servers lock");
        if *cur == url {
            *cur = self.after(url).to_string();
        }
    }

    /// The listed server after `url` (the first one when `url` is not listed).
    fn after(&self, url: &str) -> &str {
        match self.urls.iter().position(|u| u == url) {
            Some(i) => &self.urls[(i + 1) % self.urls.len()],
            None => &self.urls[0],
        }
    }
}

/// One call's way round the servers.
#[derive(Debug)]
pub(crate) struct Round<'a> {
    servers: &'a Servers,
    /// Tried in this round.
    tried: Vec<String>,
    backoff: Backoff,
}

impl<'a> Round<'a> {
    pub(crate) fn new(servers: &'a Servers) -> Round<'a> {
        Round {
            servers,
            tried: Vec::new(),
            backoff: Backoff::new(),
        }
    }

    /// After `failed` did nothing (`leader`: the leader a standby named): the next server
    /// to try, and the pause before it (zero within a round). With one server only a
    /// named leader is tried, once.
    pub(crate) fn next(
        &mut self,
        failed: &str,
        leader: Option<&str>,
    ) -> Option<(String, Duration)> {
        self.tried.push(failed.to_string());
        let leader = leader
            .map(|l| l.trim_end_matches('/'))
            .filter(|l| !l.is_empty() && !self.tried.iter().any(|t| t == l));
        if let Some(l) = leader {
            return Some((l.to_string(), Duration::ZERO));
        }
        if !self.servers.several() {
            return None;
        }
        let untried = self.servers.urls().iter().find(|u| !self.tried.contains(u));
        match untried {
            Some(u) => Some((u.clone(), Duration::ZERO)),
            None => {
                // A full round without a leader: pause, then start again after `failed`.
                self.tried.clear();
                let pause = self.backoff.next_pause();
                Some((self.servers.after(failed).to_string(), pause))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_split_trimmed_and_never_empty() {
        assert_eq!(parse_list("http://a:1/"), ["http://a:1"]);
        assert_eq!(
            parse_list(" http://a:1 , http://b:2/,,http://c:3"),
            ["http://a:1", "http://b:2", "http://c:3"]
        );
        assert_eq!(parse_list(""), [""]);
    }

    #[test]
    fn a_round_tries_the_named_leader_then_the_others_then_pauses() {
        let s = Servers::new("http://a,http://b,http://c");
        let mut r = Round::new(&s);
        // a is a standby naming c: c next, then b, then a pause and a new round after b.
        assert_eq!(
            r.next("http://a", Some("http://c/")),
            Some(("http://c".into(), Duration::ZERO))
        );
        assert_eq!(
            r.next("http://c", None),
            Some(("http://b".into(), Duration::ZERO))
        );
        // b names c again, already tried in this round: no loop back to it.
        assert_eq!(
            r.next("http://b", Some("http://c")),
            Some(("http://c".into(), Duration::from_millis(20)))
        );
        // A leader outside the list is followed too (its advertised URL).
        assert_eq!(
            r.next("http://c", Some("http://d")),
            Some(("http://d".into(), Duration::ZERO))
        );
    }

    #[test]
    fn one_server_only_follows_a_named_leader_and_pass_over_moves_the_first_choice() {
        let one = Servers::new("http://a");
        assert_eq!(Round::new(&one).next("http://a", None), None);
        let mut r = Round::new(&one);
        assert_eq!(
            r.next("http://a", Some("http://b")),
            Some(("http://b".into(), Duration::ZERO))
        );
        assert_eq!(r.next("http://b", Some("http://a")), None);
        let s = Servers::new("http://a,http://b");
        s.pass_over("http://a");
        assert_eq!(s.current(), "http://b");
        s.pass_over("http://a"); // no longer first: nothing moves
        assert_eq!(s.current(), "http://b");
        s.settle("http://d");
        s.pass_over("http://d");
        assert_eq!(s.current(), "http://a");
    }
}
