//! `lockgate top`: a live terminal view of any server (ratatui over crossterm).
//!
//! Three screens: the overview (every scope as a gauge, nodes with their slots and rule,
//! queue depth by kind and owner, the oldest waiting job, recent events), the queue
//! (filters, sorting, and a job's explanation on Enter), and the nodes.
//!
//! Four threads: this one owns the terminal and the [`state::App`]; the input thread
//! forwards terminal events; [`fetch::stream`] follows the event stream; [`fetch::fetcher`]
//! reads a [`fetch::Snapshot`] after each burst of events. They talk through one channel of
//! [`fetch::Msg`], so the screen is redrawn when something happened, plus once a second for
//! the clock and the ages.
//!
//! # Invariants
//! - The terminal is restored on every way out: `q`, Esc, Ctrl-C, SIGTERM/SIGINT/SIGHUP
//!   (turned into [`fetch::Msg::Quit`]), an error (the [`Restore`] guard's drop) and a
//!   panic (the hook `ratatui::init` installs).
//! - Keys never act on the server; `top` only reads, so any role's token will do.

mod draw;
mod fetch;
mod scopes;
mod state;
mod views;

use super::session;
use crate::GlobalArgs;
use fetch::Msg;
use ratatui::crossterm::event::{self, Event, KeyEventKind};
use state::{Action, App};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

/// How often the screen is redrawn when nothing happens (the clock and the ages).
const HEARTBEAT: Duration = Duration::from_secs(1);

/// Arguments of `lockgate top`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Restores the terminal when dropped (an error return is a way out too).
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
        // `restore` leaves the cursor as the last frame left it: hidden.
        let _ = ratatui::crossterm::execute!(std::io::stdout(), ratatui::crossterm::cursor::Show);
    }
}

/// Forwards terminal events until the main thread is gone.
fn input(out: Sender<Msg>) {
    while let Ok(ev) = event::read() {
        if out.send(Msg::Term(ev)).is_err() {
            return;
        }
    }
}

/// Turns SIGTERM, SIGINT and SIGHUP into [`Msg::Quit`].
fn signals(out: Sender<Msg>) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = out.send(Msg::Quit);
        }
    });
    Ok(())
}

/// Runs the subcommand.
pub fn run(global: &GlobalArgs, _args: Args) -> anyhow::Result<ExitCode> {
    let client = session::client(global)?;
    // A refused token is said once, as every command says it, not retried on screen; a
    // server that does not answer yet is (the screen says so and reconnects).
    if let Err(e) = client.nodes() {
        if !e.is_temporary() {
            return Err(e.into());
        }
    }
    if !std::io::stdout().is_terminal() {
        anyhow::bail!("lockgate top draws on a terminal; stdout is not one (for scripts: lockgate events --follow, lockgate job ls -o json)");
    }
    let (tx, rx) = mpsc::channel::<Msg>();
    let (ask, asks) = mpsc::channel::<()>();
    let open = Arc::new(AtomicU64::new(0));
    signals(tx.clone())?;
    {
        let (client, tx, open) = (client.clone(), tx.clone(), open.clone());
        std::thread::spawn(move || fetch::fetcher(client, asks, tx, open));
    }
    {
        let (client, ask, tx) = (client.clone(), ask.clone(), tx.clone());
        std::thread::spawn(move || fetch::stream(client, ask, tx));
    }
    let _ = ask.send(());
    let mut terminal = ratatui::init();
    let _restore = Restore;
    {
        let tx = tx.clone();
        std::thread::spawn(move || input(tx));
    }
    drop(tx);
    let mut app = App::new(&client.base());
    loop {
        terminal.draw(|f| draw::draw(f, &app, super::output::now()))?;
        let msg = match rx.recv_timeout(HEARTBEAT) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        match msg {
            Msg::Term(Event::Key(k)) if k.kind != KeyEventKind::Release => match app.key(k) {
                Action::Quit => break,
                Action::None => {}
                Action::Open(id) => {
                    open.store(id, Ordering::Relaxed);
                    let _ = ask.send(());
                }
                Action::Close => open.store(0, Ordering::Relaxed),
            },
            // A resize (or anything else from the terminal) only redraws.
            Msg::Term(_) => {}
            Msg::Snapshot(r) => app.snapshot(*r),
            Msg::Event(ev) => app.event(super::events::line(&ev)),
            Msg::StreamLost(why) => app.conn = state::Conn::Down(why),
            Msg::Quit => break,
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::fetch::Snapshot;
    use super::state::{App, Conn, Tab};
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    /// The screen as text, one line per row, trailing blanks cut.
    fn screen(app: &App, w: u16, h: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        let now = lockgate_api::time::parse("2026-03-27T22:20:00Z").unwrap();
        t.draw(|f| draw::draw(f, app, now)).unwrap();
        let buf = t.backend().buffer().clone();
        let mut out = String::new();
        for y in 0..h {
            let row: String = (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect();
            out.push_str(row.trim_end());
            out.push('\n');
        }
        out
    }

    fn app() -> App {
        let mut a = App::new("http://127.0.0.1:7400");
        let jobs = crate::cmd::testdata::jobs();
        let scopes = vec![
            scopes::ScopeRow {
                scope: "global".into(),
                used: 3,
                limit: Some(4),
                preparing: 1,
                prepared: 1,
                held_as: None,
            },
            scopes::ScopeRow {
                scope: "limit:repo[repo=main]".into(),
                used: 2,
                limit: Some(1),
                preparing: 0,
                prepared: 0,
                held_as: None,
            },
            scopes::ScopeRow {
                scope: "conflict:repo=r1".into(),
                used: 2,
                limit: None,
                preparing: 0,
                prepared: 0,
                held_as: Some("shared".into()),
            },
        ];
        a.snapshot(Ok(Snapshot {
            jobs: jobs
                .into_iter()
                .filter(|j| !j.state.is_terminal())
                .collect(),
            nodes: crate::cmd::testdata::nodes(),
            scopes,
            oldest_why: Some("datastore:ds1 is full (2/2: jobs 1, 2)".into()),
            ..Snapshot::default()
        }));
        a.event("     7  22:19:58.000  job 1 backup by admin: admitted, running".into());
        a
    }

    #[test]
    fn the_overview_shows_scopes_nodes_queue_and_events() {
        let text = screen(&app(), 120, 30);
        for want in [
            "connected",
            "2 active",
            "3/4 running 1, prepared 1, preparing 1",
            "2/1 running 2 OVER",
            "(held shared; no limit)",
            "pve1 ready",
            "2/2 slots, prepared 1, preparing 0  rule zone=west",
            "[nodes].max_running",
            "waiting by kind: verify 1 (1 in all)",
            "waiting by owner: ci 1",
            "oldest waiting: job 2 verify datastore=ds1 by ci, waiting 0s: datastore:ds1 is full (2/2: jobs 1, 2)",
            "job 1 backup by admin: admitted, running",
            "22:20:00 UTC",
        ] {
            assert!(text.contains(want), "{want:?} missing from\n{text}");
        }
        let shared = text
            .lines()
            .find(|l| l.contains("conflict:repo=r1"))
            .unwrap();
        assert!(!shared.contains("OVER"), "{shared}");
    }

    #[test]
    fn a_list_too_long_for_its_box_says_what_it_left_out() {
        let mut a = app();
        let row = |i: u64| scopes::ScopeRow {
            scope: format!("limit:repo[repo=r{i}]"),
            used: 2,
            limit: Some(if i.is_multiple_of(2) { 1 } else { 2 }),
            preparing: 0,
            prepared: 0,
            held_as: None,
        };
        a.snap.scopes = (0..40).map(row).collect();
        a.snap.nodes = (0..30)
            .map(|i| {
                let mut n = crate::cmd::testdata::nodes()[0].clone();
                n.name = format!("n{i}");
                n
            })
            .collect();
        let text = screen(&a, 120, 30);
        // A 28-row body: a third inside the scopes' box (9 rows), a quarter inside the nodes' (7);
        // the last row of each names the rest.
        assert!(
            text.contains("… and 32 more scopes, 16 of them OVER their limit"),
            "{text}"
        );
        assert!(
            text.contains("… and 24 more nodes (3 lists them all)"),
            "{text}"
        );
    }

    #[test]
    fn every_screen_draws_at_any_size() {
        let mut a = app();
        for tab in [Tab::Overview, Tab::Queue, Tab::Nodes] {
            for (w, h) in [(1, 1), (20, 5), (80, 24), (250, 70)] {
                for (help, typing) in [(false, None), (true, Some("repo=".to_string()))] {
                    a.tab = tab;
                    a.help = help;
                    a.typing = typing;
                    let text = screen(&a, w, h);
                    assert_eq!(text.lines().count(), h as usize);
                }
            }
        }
    }

    #[test]
    fn the_queue_and_an_explanation_and_a_lost_server() {
        let mut a = app();
        a.tab = Tab::Queue;
        let text = screen(&a, 120, 20);
        assert!(text.contains("2 of 2 jobs"), "{text}");
        assert!(text.contains("running 1m57s"), "{text}");
        a.open = Some(2);
        a.explain = Some(Ok(crate::cmd::testdata::explain()));
        let text = screen(&a, 120, 20);
        for want in [
            "explain job 2",
            "job 2 verify datastore=ds1 by ci, queued",
            "  - datastore:ds1 is full (2/2: jobs 1, 2)",
            "  - conflicts with job 3 (same group vm/100)",
            "datastore:ds1 (capacity): 2/2, held by jobs 1, 2",
        ] {
            assert!(text.contains(want), "{want:?} missing from\n{text}");
        }
        a.conn = Conn::Down("cannot reach http://127.0.0.1:7400/v1/jobs: refused".into());
        let text = screen(&a, 120, 20);
        assert!(text.contains("disconnected, retrying"), "{text}");
        a.tab = Tab::Nodes;
        let text = screen(&a, 120, 24);
        assert!(text.contains(" nodes 1-3 of 3 "), "{text}");
        a.help = true;
        let text = screen(&a, 120, 24);
        assert!(
            text.contains("zone=west") && text.contains("filter by attribute"),
            "{text}"
        );
    }
}
