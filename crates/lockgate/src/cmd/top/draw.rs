//! Drawing `lockgate top`: the title, the tab line, and the overview. The queue, nodes,
//! explain and help screens are in [`super::views`].
//!
//! # Invariants
//! - Drawing reads [`App`] and the clock it is given, nothing else: the same state draws the
//!   same screen (the tests draw into a `TestBackend`).
//! - Every number on screen is a number the server gave; the bars only picture them. A
//!   scope over its limit is drawn red and says `OVER`, whatever the width.

use super::fetch::{self, Snapshot};
use super::scopes::ScopeRow;
use super::state::{App, Conn, Tab};
use super::views;
use crate::cmd::output;
use lockgate_api::{JobView, NodeView};
use lockgate_core::{JobState, Timestamp};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;
use std::collections::BTreeMap;

/// Milliseconds from an RFC 3339 time to `now` (0 when unreadable or in the future).
pub fn since(t: Option<&String>, now: Timestamp) -> u64 {
    t.and_then(|t| lockgate_api::time::parse(t).ok())
        .map_or(0, |t| now.0.saturating_sub(t.0))
}

/// `backup repo=main,host=a`.
pub fn job_words(j: &JobView) -> String {
    let attrs: Vec<String> = j.attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if attrs.is_empty() {
        j.kind.clone()
    } else {
        format!("{} {}", j.kind, attrs.join(","))
    }
}

/// The whole screen.
pub fn draw(f: &mut Frame, app: &App, now: Timestamp) {
    let [title, tabs, body] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(f.area());
    f.render_widget(Paragraph::new(title_line(app, now)), title);
    f.render_widget(Paragraph::new(tab_line(app)), tabs);
    match (app.tab, app.open) {
        (Tab::Queue, Some(id)) => views::explain(f, body, app, id, now),
        (Tab::Overview, _) => overview(f, body, app, now),
        (Tab::Queue, None) => views::queue(f, body, app, now),
        (Tab::Nodes, _) => views::nodes(f, body, app, now),
    }
    if let Some(text) = &app.typing {
        let [_, bottom] = Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(body);
        let line = Line::from(vec![
            "attribute filter (key=value, Enter applies, Esc cancels): ".bold(),
            Span::raw(text.clone()),
            "_".slow_blink(),
        ]);
        f.render_widget(Paragraph::new(line).on_blue(), bottom);
    }
    if app.help {
        views::help(f, body);
    }
}

fn title_line(app: &App, now: Timestamp) -> Line<'static> {
    let status = match &app.conn {
        Conn::Connecting => Span::styled(" connecting ", Style::new().fg(Color::Yellow)),
        Conn::Up => Span::styled(" connected ", Style::new().fg(Color::Green)),
        Conn::Down(why) => Span::styled(
            format!(" disconnected, retrying: {why} "),
            Style::new().fg(Color::White).bg(Color::Red).bold(),
        ),
    };
    let clock = output::fixed_time(now);
    let clock = clock.get(11..19).unwrap_or("").to_string();
    let mut spans = vec![
        " lockgate top ".bold().reversed(),
        Span::raw(format!(" {} ", app.server)),
        status,
        Span::raw(format!(" {} active ", app.snap.jobs.len())),
    ];
    if app.snap.truncated {
        spans.push(" (first jobs only) ".yellow());
    }
    spans.push(Span::raw(format!(" {clock} UTC")));
    Line::from(spans)
}

fn tab_line(app: &App) -> Line<'static> {
    let tab = |key: &str, name: &str, t: Tab| {
        let text = format!(" {key} {name} ");
        if app.tab == t {
            Span::styled(
                text,
                Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD),
            )
        } else {
            Span::raw(text)
        }
    };
    Line::from(vec![
        tab("1", "overview", Tab::Overview),
        tab("2", "queue", Tab::Queue),
        tab("3", "nodes", Tab::Nodes),
        "   ? keys   q quit".dark_gray(),
    ])
}

/// A bar of `width` cells for `parts` (units, style) out of `total` units.
fn bar(parts: &[(u64, Color)], total: u64, width: usize, over: bool) -> Vec<Span<'static>> {
    let total = total.max(parts.iter().map(|p| p.0).sum()).max(1);
    let mut spans = Vec::new();
    let mut used = 0usize;
    for &(n, color) in parts {
        let cells = ((n as f64 / total as f64) * width as f64).round() as usize;
        let cells = cells.min(width - used);
        let color = if over { Color::Red } else { color };
        spans.push(Span::styled("█".repeat(cells), Style::new().fg(color)));
        used += cells;
    }
    spans.push(Span::styled(
        "·".repeat(width - used),
        Style::new().fg(Color::DarkGray),
    ));
    spans
}

/// One scope as a line: name, bar, `used/limit`, the stage split, `OVER`.
pub fn scope_line(s: &ScopeRow, name_width: usize, bar_width: usize) -> Line<'static> {
    let mut spans = vec![Span::raw(format!("{:<name_width$} ", s.scope))];
    let parts = [
        (s.running(), Color::Green),
        (s.prepared, Color::Cyan),
        (s.preparing, Color::Yellow),
    ];
    match s.limit {
        Some(limit) => {
            spans.extend(bar(&parts, limit, bar_width, s.over_limit()));
            spans.push(Span::raw(format!(" {}/{limit}", s.used)).bold());
        }
        None => {
            let what = match s.held_as.as_deref() {
                Some(mode) => format!("(held {mode}; no limit)"),
                None => "(no limit)".into(),
            };
            spans.push(Span::raw(format!("{what:bar_width$}")).dark_gray());
            spans.push(Span::raw(format!(" {}", s.used)).bold());
        }
    }
    spans.push(Span::raw(format!(" running {}", s.running())));
    if s.prepared > 0 {
        spans.push(Span::raw(format!(", prepared {}", s.prepared)).cyan());
    }
    if s.preparing > 0 {
        spans.push(Span::raw(format!(", preparing {}", s.preparing)).yellow());
    }
    if s.over_limit() {
        spans.push(" OVER".red().bold());
    }
    Line::from(spans)
}

/// One node as a line: name, state, slot bar, `running/number`, stages, the rule.
pub fn node_line(n: &NodeView, name_width: usize, bar_width: usize) -> Line<'static> {
    let state = match n.state.as_str() {
        "ready" => Span::raw(format!("{:<9}", n.state)).green(),
        "lost" => Span::raw(format!("{:<9}", n.state)).red(),
        _ => Span::raw(format!("{:<9}", n.state)).yellow(),
    };
    let mut spans = vec![Span::raw(format!("{:<name_width$} ", n.name)), state];
    let running = u64::from(n.running);
    match n.number {
        Some(number) => {
            let over = running > u64::from(number);
            spans.extend(bar(
                &[(running, Color::Green)],
                number.into(),
                bar_width,
                over,
            ));
            spans.push(Span::raw(format!(" {running}/{number} slots")).bold());
        }
        None => spans.push(Span::raw(format!(" {running} running (no number)")).bold()),
    }
    if n.prepared + n.preparing > 0 {
        spans.push(
            Span::raw(format!(
                ", prepared {}, preparing {}",
                n.prepared, n.preparing
            ))
            .cyan(),
        );
    }
    let rule = n.rule.as_deref().map_or_else(
        || "[nodes].max_running".to_string(),
        |r| format!("rule {r}"),
    );
    spans.push(Span::raw(format!("  {rule}")).dark_gray());
    Line::from(spans)
}

fn width_of<'a>(names: impl Iterator<Item = &'a str>, cap: usize) -> usize {
    names.map(str::len).max().unwrap_or(0).min(cap)
}

/// Counts of queued jobs by `f`, largest first: `backup 3, verify 1`.
fn depth(jobs: &[JobView], f: impl Fn(&JobView) -> &str) -> String {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for j in jobs.iter().filter(|j| j.state == JobState::Queued) {
        *by.entry(f(j)).or_default() += 1;
    }
    let mut v: Vec<(&str, usize)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    if v.is_empty() {
        return "none".into();
    }
    let words: Vec<String> = v.iter().map(|(k, n)| format!("{k} {n}")).collect();
    words.join(", ")
}

/// Cuts `lines` to what a bordered box of `height` rows holds; the last row kept then says
/// what was left out (`more(kept)`), so a cut list never looks complete.
fn fit(lines: &mut Vec<Line<'static>>, height: u16, more: impl Fn(usize) -> String) {
    let room = height.saturating_sub(2) as usize;
    if lines.len() > room && room > 0 {
        lines.truncate(room - 1);
        lines.push(Line::raw(more(room - 1)).yellow());
    }
}

/// The overview: scopes, nodes, queue depth, the oldest waiting job, recent events.
fn overview(f: &mut Frame, area: Rect, app: &App, now: Timestamp) {
    let snap = &app.snap;
    // At least one line each (the "none" line), at most a third and a quarter of the body.
    let rows = |n: usize, share: u16| (n as u16).min(share).max(1) + 2;
    let scope_rows = rows(snap.scopes.len(), area.height / 3);
    let node_rows = rows(snap.nodes.len(), area.height / 4);
    let [scopes, nodes, queue, events] = Layout::vertical([
        Constraint::Length(scope_rows),
        Constraint::Length(node_rows),
        Constraint::Length(5),
        Constraint::Min(3),
    ])
    .areas(area);
    let bar_width = 24.min(area.width as usize / 5);
    scope_panel(f, scopes, snap, bar_width);
    node_panel(f, nodes, snap, bar_width.min(12));
    f.render_widget(
        Paragraph::new(queue_lines(snap, now))
            .block(Block::bordered().title(" queue "))
            .wrap(Wrap { trim: true }),
        queue,
    );
    let shown = events.height.saturating_sub(2) as usize;
    let lines: Vec<Line> = app
        .events
        .iter()
        .skip(app.events.len().saturating_sub(shown))
        .map(|l| Line::raw(l.clone()))
        .collect();
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" recent events ")),
        events,
    );
}

/// Every scope as a gauge, with the legend in the title.
fn scope_panel(f: &mut Frame, area: Rect, snap: &Snapshot, bar_width: usize) {
    let w = width_of(snap.scopes.iter().map(|s| s.scope.as_str()), 40);
    let mut lines: Vec<Line> = snap
        .scopes
        .iter()
        .map(|s| scope_line(s, w, bar_width))
        .collect();
    fit(&mut lines, area.height, |kept| {
        let over = snap.scopes[kept..]
            .iter()
            .filter(|s| s.over_limit())
            .count();
        let more = format!("… and {} more scopes", snap.scopes.len() - kept);
        match over {
            0 => format!("{more} (a taller terminal shows them)"),
            n => format!("{more}, {n} of them OVER their limit (a taller terminal shows them)"),
        }
    });
    if lines.is_empty() {
        let none = "no scope in use and none named by the policy";
        lines.push(none.dark_gray().into());
    }
    let legend = Line::from(vec![
        " scopes: ".into(),
        "█ running ".green(),
        "█ prepared ".cyan(),
        "█ preparing ".yellow(),
    ]);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(legend)),
        area,
    );
}

/// Every node with its slots and the rule that set its number.
fn node_panel(f: &mut Frame, area: Rect, snap: &Snapshot, bar_width: usize) {
    let w = width_of(snap.nodes.iter().map(|n| n.name.as_str()), 30);
    let mut lines: Vec<Line> = snap
        .nodes
        .iter()
        .map(|n| node_line(n, w, bar_width))
        .collect();
    fit(&mut lines, area.height, |kept| {
        let more = snap.nodes.len() - kept;
        format!("… and {more} more nodes (3 lists them all)")
    });
    if lines.is_empty() {
        lines.push("no node registered".dark_gray().into());
    }
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" nodes ")),
        area,
    );
}

/// Queue depth by kind and by owner, and the oldest waiting job.
fn queue_lines(snap: &Snapshot, now: Timestamp) -> Vec<Line<'static>> {
    let jobs = &snap.jobs;
    let waiting = jobs.iter().filter(|j| j.state == JobState::Queued).count();
    let oldest = match fetch::oldest_waiting(jobs) {
        Some(j) => Line::from(vec![
            "oldest waiting: ".bold(),
            Span::raw(format!(
                "job {} {} by {}, waiting {}",
                j.id,
                job_words(j),
                j.owner,
                output::duration(since(j.queued_at.as_ref(), now))
            )),
            Span::raw(
                snap.oldest_why
                    .as_ref()
                    .map_or_else(String::new, |why| format!(": {why}")),
            )
            .yellow(),
        ]),
        None => Line::from(vec!["oldest waiting: ".bold(), "none".into()]),
    };
    vec![
        Line::from(vec![
            "waiting by kind: ".bold(),
            Span::raw(format!("{} ({waiting} in all)", depth(jobs, |j| &j.kind))),
        ]),
        Line::from(vec![
            "waiting by owner: ".bold(),
            Span::raw(depth(jobs, |j| &j.owner)),
        ]),
        oldest,
    ]
}
