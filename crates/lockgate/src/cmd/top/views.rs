//! The queue, nodes, explain and help screens of `lockgate top`.
//!
//! # Invariants
//! - The queue draws only the rows that fit (one page around the cursor), so 20,000 jobs
//!   cost one page of cells per frame, not 20,000 rows.
//! - The explain screen shows the server's explanation whole: every reason's text (with its
//!   numbers) as `lockgate job explain` prints it, each scope's count, limit and holders,
//!   and the forecast estimate when the server sent one.

use super::draw::{job_words, since};
use super::state::App;
use crate::cmd::output;
use lockgate_core::{JobState, Timestamp};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Clear, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

fn state_style(s: JobState) -> Style {
    match s {
        JobState::Running => Style::new().fg(Color::Green),
        JobState::Queued => Style::new().fg(Color::Yellow),
        _ => Style::new().fg(Color::Cyan),
    }
}

/// The filter line: each filter with its key, the order, the count.
fn filter_line(app: &App, shown: usize) -> Line<'static> {
    let f = &app.filters;
    let one = |key: &str, name: &str, v: Option<String>| {
        let v = v.unwrap_or_else(|| "all".into());
        vec![
            Span::raw(format!(" {key} ")).reversed(),
            Span::raw(format!(" {name}: {v}  ")),
        ]
    };
    let attr = f.attr.as_ref().map(|(k, v)| match v {
        Some(v) => format!("{k}={v}"),
        None => k.clone(),
    });
    let mut spans = Vec::new();
    spans.extend(one("s", "state", f.state.map(|s| s.as_str().to_string())));
    spans.extend(one("k", "kind", f.kind.clone()));
    spans.extend(one("o", "owner", f.owner.clone()));
    spans.extend(one("a", "attr", attr));
    let dir = if app.reverse { "desc" } else { "asc" };
    spans.extend(one("S", "sort", Some(format!("{} {dir}", app.sort.name()))));
    spans.push(Span::raw(format!("{shown} of {} jobs", app.snap.jobs.len())).bold());
    Line::from(spans)
}

/// The queue: queued and running jobs as a table, the cursor's row highlighted.
pub fn queue(f: &mut Frame, area: Rect, app: &App, now: Timestamp) {
    let [filters, table] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    let jobs = app.visible();
    f.render_widget(Paragraph::new(filter_line(app, jobs.len())), filters);
    let page = (table.height.saturating_sub(3) as usize).max(1);
    let first = app.selected / page * page;
    let rows: Vec<Row> = jobs
        .iter()
        .enumerate()
        .skip(first)
        .take(page)
        .map(|(i, j)| {
            let (since_what, at) = match j.state {
                JobState::Queued => ("waiting", j.queued_at.as_ref()),
                JobState::Running => ("running", j.started_at.as_ref()),
                _ => ("since", j.prepare_started_at.as_ref()),
            };
            let age = format!("{since_what} {}", output::duration(since(at, now)));
            let row = Row::new(vec![
                j.id.to_string(),
                j.state.as_str().to_string(),
                job_words(j),
                j.owner.clone(),
                j.priority.to_string(),
                j.node.clone().unwrap_or_else(|| "-".into()),
                rate(j),
                age,
            ])
            .style(state_style(j.state));
            if i == app.selected {
                row.style(Style::new().reversed())
            } else {
                row
            }
        })
        .collect();
    let widths = [
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Fill(3),
        Constraint::Fill(1),
        Constraint::Length(5),
        Constraint::Fill(1),
        Constraint::Length(12),
        Constraint::Length(16),
    ];
    let header = Row::new(["ID", "STATE", "JOB", "OWNER", "PRIO", "NODE", "RATE", "AGE"]).bold();
    let pages = jobs.len().div_ceil(page).max(1);
    let title = format!(
        " queue (page {}/{pages}; Enter explains, ↑↓ PgUp PgDn move) ",
        first / page + 1
    );
    f.render_widget(
        Table::new(rows, widths)
            .header(header)
            .block(Block::bordered().title(title)),
        table,
    );
}

/// A job's rate as its holder measured it: the larger direction, recent where known,
/// else the mean; `-` without a report.
fn rate(j: &lockgate_api::JobView) -> String {
    let Some(u) = &j.usage else {
        return "-".into();
    };
    let now = u.read_per_s.zip(u.written_per_s).map(|(r, w)| r.max(w));
    let mean = u.mean_read_per_s.max(u.mean_written_per_s);
    format!(
        "{}/s",
        lockgate_core::usage::format_bytes(now.unwrap_or(mean))
    )
}

/// A node's pressure and guard, as its last sample and the server say: `mem 3% io 1%`.
fn pressure(n: &lockgate_api::NodeView) -> String {
    let mut parts = Vec::new();
    if let Some(s) = &n.sample {
        for (name, v) in [
            ("cpu", s.sample.cpu_some),
            ("io", s.sample.io_some),
            ("mem", s.sample.memory_some),
        ] {
            if let Some(v) = v {
                parts.push(format!("{name} {v:.0}%"));
            }
        }
    }
    if let Some(g) = n.guarded {
        parts.push(format!("guard {g}"));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" ")
    }
}

/// Every node as a table.
pub fn nodes(f: &mut Frame, area: Rect, app: &App, now: Timestamp) {
    let rows: Vec<Row> = app
        .snap
        .nodes
        .iter()
        .skip(app.node_top)
        .map(|n| {
            let labels: Vec<String> = n.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let kinds: Vec<&str> = n.kinds.iter().map(String::as_str).collect();
            let slots = match n.number {
                Some(num) => format!("{}/{num}", n.running),
                None => format!("{}/-", n.running),
            };
            Row::new(vec![
                n.name.clone(),
                n.state.clone(),
                slots,
                n.prepared.to_string(),
                n.preparing.to_string(),
                n.rule
                    .clone()
                    .unwrap_or_else(|| "[nodes].max_running".into()),
                pressure(n),
                kinds.join(","),
                labels.join(","),
                format!("{} ago", output::duration(since(Some(&n.last_seen), now))),
            ])
        })
        .collect();
    let widths = [
        Constraint::Fill(2),
        Constraint::Length(9),
        Constraint::Length(7),
        Constraint::Length(8),
        Constraint::Length(9),
        Constraint::Fill(2),
        Constraint::Length(14),
        Constraint::Fill(2),
        Constraint::Fill(3),
        Constraint::Length(10),
    ];
    let header = Row::new([
        "NODE",
        "STATE",
        "SLOTS",
        "PREPARED",
        "PREPARING",
        "RULE",
        "PRESSURE",
        "KINDS",
        "LABELS",
        "SEEN",
    ])
    .bold();
    let total = app.snap.nodes.len();
    let fits = (area.height.saturating_sub(3) as usize).min(total - app.node_top.min(total));
    let title = format!(
        " nodes {}-{} of {total} (↑↓ PgUp PgDn scroll) ",
        (app.node_top + 1).min(total),
        app.node_top + fits
    );
    f.render_widget(
        Table::new(rows, widths)
            .header(header)
            .block(Block::bordered().title(title)),
        area,
    );
}

/// The explanation of job `id`: the job, every reason with its numbers, the estimate.
pub fn explain(f: &mut Frame, area: Rect, app: &App, id: u64, now: Timestamp) {
    let mut lines: Vec<Line> = Vec::new();
    if let Some(j) = app.snap.jobs.iter().find(|j| j.id == id) {
        lines.push(Line::from(vec![
            Span::raw(format!("job {id} ")).bold(),
            Span::raw(format!("{} by {}, ", job_words(j), j.owner)),
            Span::styled(j.state.as_str().to_string(), state_style(j.state)),
            Span::raw(format!(
                ", submitted {} ago, priority {}",
                output::duration(since(Some(&j.submitted_at), now)),
                j.priority
            )),
        ]));
    } else {
        lines.push(Line::raw(format!("job {id} is no longer active")).yellow());
    }
    lines.push(Line::raw(""));
    match &app.explain {
        None => lines.push("reading its explanation...".dark_gray().into()),
        Some(Err(why)) => lines.push(Line::raw(why.clone()).red()),
        Some(Ok(ex)) => {
            let text = crate::cmd::job::render_explain(id, ex, crate::cmd::output::now());
            lines.extend(text.lines().map(|l| Line::raw(l.to_string())));
            let scoped: Vec<_> = ex.reasons.iter().filter(|r| r.scope.is_some()).collect();
            if !scoped.is_empty() {
                lines.push(Line::raw(""));
                lines.push("holding scopes:".bold().into());
            }
            for r in scoped {
                let n = |v: Option<u64>| v.map_or_else(|| "-".into(), |v| v.to_string());
                let holders: Vec<String> = r.holders.iter().map(u64::to_string).collect();
                lines.push(Line::raw(format!(
                    "  {} ({}): {}/{}{}",
                    r.scope.as_deref().unwrap_or(""),
                    r.kind,
                    n(r.count),
                    n(r.limit),
                    if holders.is_empty() {
                        String::new()
                    } else {
                        format!(", held by jobs {}", holders.join(", "))
                    }
                )));
            }
        }
    }
    let title = format!(" explain job {id} (Esc back) ");
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(title)),
        area,
    );
}

/// The keys, over the screen.
pub fn help(f: &mut Frame, area: Rect) {
    const KEYS: [(&str, &str); 16] = [
        ("1 2 3, Tab", "overview, queue, nodes"),
        ("?", "this list (any key closes it)"),
        ("q, Esc, Ctrl-C", "quit (Esc first closes an explanation)"),
        ("↑ ↓ PgUp PgDn", "move in the queue, scroll the nodes"),
        ("Home End", "first, last job"),
        ("Enter", "explain the selected job"),
        ("Esc, ←", "back from the explanation"),
        ("s", "filter by state (cycles)"),
        ("k", "filter by kind (cycles)"),
        ("o", "filter by owner (cycles)"),
        ("a", "filter by attribute: key=value or key"),
        ("c", "clear the filters"),
        ("S", "sort by the next column"),
        ("r", "reverse the order"),
        ("", ""),
        ("", "the screen redraws on every server event"),
    ];
    let lines: Vec<Line> = KEYS
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::raw(format!("{k:>16}  ")).bold(),
                Span::raw(*what),
            ])
        })
        .collect();
    let w = 64.min(area.width);
    let h = (KEYS.len() as u16 + 2).min(area.height);
    let r = Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    );
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(" keys ")),
        r,
    );
}
