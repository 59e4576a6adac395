//! The state of `lockgate top` and what each key does to it: pure, so it is tested without a
//! terminal or a server.
//!
//! # Invariants
//! - Keys only change what is shown; none acts on the server. The one effect a key has
//!   beyond this state is [`Action::Open`]/[`Action::Close`] (which job's explanation the
//!   fetch thread reads) or [`Action::Quit`].
//! - The selection is an index into [`App::visible`] and is clamped after every snapshot
//!   and filter change, so it never points past the list; it follows the selected job's id
//!   across snapshots while that job is still listed.

use super::fetch::Snapshot;
use lockgate_api::{ExplainView, JobView};
use lockgate_core::JobState;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::{BTreeSet, VecDeque};

/// How many stream events the overview keeps.
pub const EVENTS_KEPT: usize = 200;

/// The three screens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    /// Scopes, nodes, queue depth, the oldest waiting job, recent events.
    Overview,
    /// Queued and running jobs, filtered and sorted.
    Queue,
    /// Every node.
    Nodes,
}

/// The column the queue is sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Job id (submit order).
    Id,
    /// State, in life-cycle order.
    State,
    /// Kind, then id.
    Kind,
    /// Owner, then id.
    Owner,
    /// Priority, highest first.
    Priority,
    /// When it entered its state (queued at, or started at): longest first.
    Age,
}

impl SortKey {
    const ALL: [SortKey; 6] = [
        SortKey::Id,
        SortKey::State,
        SortKey::Kind,
        SortKey::Owner,
        SortKey::Priority,
        SortKey::Age,
    ];

    /// Its name in the filter line.
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Id => "id",
            SortKey::State => "state",
            SortKey::Kind => "kind",
            SortKey::Owner => "owner",
            SortKey::Priority => "priority",
            SortKey::Age => "age",
        }
    }

    fn next(self) -> SortKey {
        let i = Self::ALL.iter().position(|&k| k == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }
}

/// The queue's filters; `None` shows all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    /// One state.
    pub state: Option<JobState>,
    /// One kind.
    pub kind: Option<String>,
    /// One owner.
    pub owner: Option<String>,
    /// `key=value` (or `key` alone: has the attribute).
    pub attr: Option<(String, Option<String>)>,
}

impl Filters {
    /// Whether `j` passes every filter.
    pub fn keep(&self, j: &JobView) -> bool {
        self.state.is_none_or(|s| j.state == s)
            && self.kind.as_ref().is_none_or(|k| &j.kind == k)
            && self.owner.as_ref().is_none_or(|o| &j.owner == o)
            && self.attr.as_ref().is_none_or(|(k, v)| match v {
                Some(v) => j.attrs.get(k) == Some(v),
                None => j.attrs.contains_key(k),
            })
    }
}

/// Whether the server answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conn {
    /// Nothing read yet.
    Connecting,
    /// The last read worked.
    Up,
    /// The last read or the stream failed: why.
    Down(String),
}

/// What the caller must do after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Redraw only.
    None,
    /// Leave, restoring the terminal.
    Quit,
    /// Show this job's explanation (and keep it fresh).
    Open(u64),
    /// Stop reading an explanation.
    Close,
}

/// Everything on screen.
#[derive(Debug)]
pub struct App {
    /// The server's URL, for the title.
    pub server: String,
    /// The screen shown.
    pub tab: Tab,
    /// The key list is shown over the screen.
    pub help: bool,
    /// The job whose explanation is shown over the queue.
    pub open: Option<u64>,
    /// Typing an attribute filter: the text so far.
    pub typing: Option<String>,
    /// The queue's filters.
    pub filters: Filters,
    /// The queue's order.
    pub sort: SortKey,
    /// Reversed order.
    pub reverse: bool,
    /// Index into [`App::visible`].
    pub selected: usize,
    /// The first node shown on the nodes screen.
    pub node_top: usize,
    /// The last snapshot read.
    pub snap: Snapshot,
    /// The explanation of [`App::open`], once read.
    pub explain: Option<Result<ExplainView, String>>,
    /// Whether the server answers.
    pub conn: Conn,
    /// Recent events, newest last, already in words.
    pub events: VecDeque<String>,
}

/// The next value in `values` after `current`, wrapping to "all" (`None`).
fn cycle<T: Clone + PartialEq>(values: &[T], current: &Option<T>) -> Option<T> {
    match current {
        None => values.first().cloned(),
        Some(c) => {
            let i = values.iter().position(|v| v == c);
            i.and_then(|i| values.get(i + 1)).cloned()
        }
    }
}

impl App {
    /// A screen for the server at `server`, nothing read yet.
    pub fn new(server: &str) -> App {
        App {
            server: server.to_string(),
            tab: Tab::Overview,
            help: false,
            open: None,
            typing: None,
            filters: Filters::default(),
            sort: SortKey::Id,
            reverse: false,
            selected: 0,
            node_top: 0,
            snap: Snapshot::default(),
            explain: None,
            conn: Conn::Connecting,
            events: VecDeque::new(),
        }
    }

    /// The queue as shown: the active jobs that pass the filters, in the chosen order.
    pub fn visible(&self) -> Vec<&JobView> {
        let mut jobs: Vec<&JobView> = self
            .snap
            .jobs
            .iter()
            .filter(|j| self.filters.keep(j))
            .collect();
        let since = |j: &JobView| -> String {
            let t = match j.state {
                JobState::Queued => j.queued_at.as_ref(),
                JobState::Running => j.started_at.as_ref(),
                _ => j.prepare_started_at.as_ref(),
            };
            t.cloned().unwrap_or_else(|| j.submitted_at.clone())
        };
        let stage = |s: JobState| {
            [
                JobState::Queued,
                JobState::Preparing,
                JobState::Prepared,
                JobState::Running,
            ]
            .iter()
            .position(|&x| x == s)
        };
        jobs.sort_by(|a, b| {
            let by = match self.sort {
                SortKey::Id => std::cmp::Ordering::Equal,
                SortKey::State => stage(a.state).cmp(&stage(b.state)),
                SortKey::Kind => a.kind.cmp(&b.kind),
                SortKey::Owner => a.owner.cmp(&b.owner),
                SortKey::Priority => b.priority.cmp(&a.priority),
                // RFC 3339 in UTC with fixed digits sorts as text.
                SortKey::Age => since(a).cmp(&since(b)),
            };
            by.then(a.id.cmp(&b.id))
        });
        if self.reverse {
            jobs.reverse();
        }
        jobs
    }

    /// The job under the cursor.
    pub fn selected_job(&self) -> Option<&JobView> {
        self.visible().get(self.selected).copied()
    }

    fn clamp(&mut self) {
        let n = self.visible().len();
        self.selected = self.selected.min(n.saturating_sub(1));
    }

    /// Takes a snapshot (or the reason it failed), keeping the cursor on the same job.
    pub fn snapshot(&mut self, r: Result<Snapshot, String>) {
        match r {
            Ok(snap) => {
                let keep = self.selected_job().map(|j| j.id);
                self.snap = snap;
                self.conn = Conn::Up;
                if let Some((id, ex)) = self.snap.explain.take() {
                    if Some(id) == self.open {
                        self.explain = Some(ex);
                    }
                }
                if let Some(i) = keep.and_then(|id| self.visible().iter().position(|j| j.id == id))
                {
                    self.selected = i;
                }
                self.clamp();
            }
            Err(why) => self.conn = Conn::Down(why),
        }
    }

    /// Adds one event line to the recent events.
    pub fn event(&mut self, line: String) {
        self.events.push_back(line);
        while self.events.len() > EVENTS_KEPT {
            self.events.pop_front();
        }
    }

    fn values(&self, f: impl Fn(&JobView) -> &String) -> Vec<String> {
        let set: BTreeSet<&String> = self.snap.jobs.iter().map(f).collect();
        set.into_iter().cloned().collect()
    }

    /// What a key does.
    pub fn key(&mut self, k: KeyEvent) -> Action {
        if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
            return Action::Quit;
        }
        if let Some(text) = &mut self.typing {
            match k.code {
                KeyCode::Char(c) => text.push(c),
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Enter => {
                    let t = text.trim().to_string();
                    self.filters.attr = (!t.is_empty()).then(|| match t.split_once('=') {
                        Some((k, v)) => (k.to_string(), Some(v.to_string())),
                        None => (t.clone(), None),
                    });
                    self.typing = None;
                    self.clamp();
                }
                KeyCode::Esc => self.typing = None,
                _ => {}
            }
            return Action::None;
        }
        if self.help {
            self.help = false;
            return match k.code {
                KeyCode::Char('q') => Action::Quit,
                _ => Action::None,
            };
        }
        if self.open.is_some() {
            if matches!(k.code, KeyCode::Esc | KeyCode::Backspace | KeyCode::Left) {
                self.open = None;
                self.explain = None;
                return Action::Close;
            }
        } else if k.code == KeyCode::Esc {
            return Action::Quit;
        }
        match k.code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Char('?') => self.help = true,
            KeyCode::Char('1') => self.tab = Tab::Overview,
            KeyCode::Char('2') => self.tab = Tab::Queue,
            KeyCode::Char('3') => self.tab = Tab::Nodes,
            KeyCode::Tab | KeyCode::BackTab => {
                let order = [Tab::Overview, Tab::Queue, Tab::Nodes];
                let i = order.iter().position(|&t| t == self.tab).unwrap_or(0);
                let step = if k.code == KeyCode::Tab { 1 } else { 2 };
                self.tab = order[(i + step) % 3];
            }
            _ if self.tab == Tab::Queue && self.open.is_none() => return self.queue_key(k),
            _ if self.tab == Tab::Nodes => self.nodes_key(k),
            _ => {}
        }
        Action::None
    }

    /// The keys of the nodes screen: scrolling.
    fn nodes_key(&mut self, k: KeyEvent) {
        let last = self.snap.nodes.len().saturating_sub(1);
        self.node_top = match k.code {
            KeyCode::Up => self.node_top.saturating_sub(1),
            KeyCode::Down => self.node_top + 1,
            KeyCode::PageUp => self.node_top.saturating_sub(10),
            KeyCode::PageDown => self.node_top + 10,
            KeyCode::Home => 0,
            KeyCode::End => last,
            _ => self.node_top,
        }
        .min(last);
    }

    /// The keys of the queue screen.
    fn queue_key(&mut self, k: KeyEvent) -> Action {
        const PAGE: usize = 10;
        let n = self.visible().len();
        match k.code {
            KeyCode::Up => self.selected = self.selected.saturating_sub(1),
            KeyCode::Down => self.selected += 1,
            KeyCode::PageUp => self.selected = self.selected.saturating_sub(PAGE),
            KeyCode::PageDown => self.selected += PAGE,
            KeyCode::Home => self.selected = 0,
            KeyCode::End => self.selected = n.saturating_sub(1),
            KeyCode::Enter => {
                if let Some(id) = self.selected_job().map(|j| j.id) {
                    self.open = Some(id);
                    self.explain = None;
                    return Action::Open(id);
                }
            }
            KeyCode::Char('s') => {
                let states = [
                    JobState::Queued,
                    JobState::Preparing,
                    JobState::Prepared,
                    JobState::Running,
                ];
                self.filters.state = cycle(&states, &self.filters.state);
            }
            KeyCode::Char('k') => {
                self.filters.kind = cycle(&self.values(|j| &j.kind), &self.filters.kind)
            }
            KeyCode::Char('o') => {
                self.filters.owner = cycle(&self.values(|j| &j.owner), &self.filters.owner)
            }
            KeyCode::Char('a') => self.typing = Some(String::new()),
            KeyCode::Char('c') => self.filters = Filters::default(),
            KeyCode::Char('S') => self.sort = self.sort.next(),
            KeyCode::Char('r') => self.reverse = !self.reverse,
            _ => {}
        }
        self.clamp();
        Action::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn app() -> App {
        let mut a = App::new("http://127.0.0.1:7400");
        let jobs = crate::cmd::testdata::jobs();
        let snap = Snapshot {
            jobs: jobs
                .into_iter()
                .filter(|j| !j.state.is_terminal())
                .collect(),
            ..Snapshot::default()
        };
        a.snapshot(Ok(snap));
        a.tab = Tab::Queue;
        a
    }

    fn press(a: &mut App, keys: &str) -> Action {
        let mut last = Action::None;
        for c in keys.chars() {
            let code = match c {
                '\n' => KeyCode::Enter,
                '\u{1b}' => KeyCode::Esc,
                c => KeyCode::Char(c),
            };
            last = a.key(KeyEvent::new(code, KeyModifiers::NONE));
        }
        last
    }

    fn ids(a: &App) -> Vec<u64> {
        a.visible().iter().map(|j| j.id).collect()
    }

    #[rstest]
    #[case::all("", &[1, 2])]
    #[case::queued("s", &[2])]
    #[case::running("ssss", &[1])]
    #[case::back_to_all("sssss", &[1, 2])]
    #[case::kind("k", &[1])]
    #[case::second_kind("kk", &[2])]
    #[case::owner_ci("oo", &[2])]
    #[case::attr_pair("agroup=vm/100\n", &[1])]
    #[case::attr_key("adatastore\n", &[1, 2])]
    #[case::attr_none("adatastore=ds9\n", &[])]
    #[case::cleared("sc", &[1, 2])]
    #[case::by_priority("SSSS", &[1, 2])]
    #[case::by_priority_reversed("SSSSr", &[2, 1])]
    #[case::by_kind("SS", &[1, 2])]
    fn filter_and_sort_keys(#[case] keys: &str, #[case] want: &[u64]) {
        let mut a = app();
        press(&mut a, keys);
        assert_eq!(ids(&a), want, "after {keys:?}: {:?}", a.filters);
    }

    #[test]
    fn enter_opens_the_selected_job_and_esc_closes_it_before_quitting() {
        let mut a = app();
        a.key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE));
        assert_eq!(press(&mut a, "\n"), Action::Open(2));
        assert_eq!(a.open, Some(2));
        assert_eq!(press(&mut a, "\u{1b}"), Action::Close);
        assert_eq!(press(&mut a, "\u{1b}"), Action::Quit);
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(a.key(ctrl_c), Action::Quit);
    }

    #[test]
    fn keys_typed_into_the_attribute_filter_are_text() {
        let mut a = app();
        assert_eq!(press(&mut a, "aq=1"), Action::None, "q is a letter here");
        assert_eq!(a.typing.as_deref(), Some("q=1"));
        press(&mut a, "\u{1b}");
        assert_eq!((a.typing.clone(), a.filters.attr.clone()), (None, None));
        assert_eq!(press(&mut a, "?"), Action::None);
        assert!(a.help);
        assert_eq!(press(&mut a, "x"), Action::None, "any key closes the help");
        assert!(!a.help);
        assert_eq!(press(&mut a, "q"), Action::Quit);
    }

    #[test]
    fn the_nodes_screen_scrolls_within_the_list() {
        let mut a = app();
        a.snap.nodes = crate::cmd::testdata::nodes();
        a.tab = Tab::Nodes;
        let key = |a: &mut App, code| a.key(KeyEvent::new(code, KeyModifiers::NONE));
        key(&mut a, KeyCode::Down);
        assert_eq!(a.node_top, 1);
        key(&mut a, KeyCode::PageDown);
        assert_eq!(a.node_top, 2, "stops at the last node");
        key(&mut a, KeyCode::Home);
        assert_eq!(a.node_top, 0);
    }

    #[test]
    fn the_cursor_follows_its_job_and_stays_in_the_list() {
        let mut a = app();
        a.key(KeyEvent::new(KeyCode::End, KeyModifiers::NONE));
        assert_eq!(a.selected_job().map(|j| j.id), Some(2));
        let mut snap = a.snap.clone();
        snap.jobs.retain(|j| j.id == 2);
        a.snapshot(Ok(snap.clone()));
        assert_eq!((a.selected, a.selected_job().map(|j| j.id)), (0, Some(2)));
        snap.jobs.clear();
        a.snapshot(Ok(snap));
        assert_eq!((a.selected, a.selected_job()), (0, None));
        a.snapshot(Err("cannot reach".into()));
        assert_eq!(a.conn, Conn::Down("cannot reach".into()));
    }
}
