//! `--gantt out.svg`: a picture of one run.
//!
//! Layout, top to bottom: the title and a legend (one colour per job kind, the wait
//! shade, the prepare shade), a time axis with labels (seconds from the start of the
//! workload, grid lines through the whole picture), then one group of rows per node (jobs
//! that run on no node in a last group), then one step chart per limited scope (its
//! occupancy over time under a dashed line at its limit) and a step chart of the queue.
//!
//! Inside a group, jobs are packed into lanes (a lane never holds two jobs at once): by
//! their span from submit to end while that needs at most 60 lanes in all, so every wait
//! band is visible; else by their admitted span, so a group is as tall as its peak
//! concurrency, not as its queue (waits then show where the lane is free, and in the
//! queue chart).
//! A job is a bar from admission to end in its kind's colour (the prepare stage of a
//! two-stage job paler); its wait is a thin grey band from submit to admission in the same
//! lane, drawn under the bars. Lanes shrink (to 1.5 px) so 1000+ jobs still fit in about
//! 900 px; tooltips (`<title>`) are written for up to [`TOOLTIPS_UP_TO`] jobs.
//!
//! # Invariants
//! - Every admitted job with an end is exactly one `<rect class="bar">`; every job that
//!   waited (admission after submit) one `<rect class="wait">`; every group one
//!   `<g class="row">`; every limited scope's chart one `<g class="scope">`. The tests
//!   and `scripts/checks/gantt` count these.
//! - Only [`crate::svg`] writes markup, so the document is well-formed XML.

use crate::input::WorkloadJob;
use crate::sim::Run;
use crate::svg::{a, num, Svg};
use lockgate_core::job::JobSpec;
use lockgate_core::{Policy, Timestamp};
use std::collections::BTreeMap;

/// Jobs up to which every bar gets a tooltip (beyond, the file would mostly be titles).
pub const TOOLTIPS_UP_TO: usize = 2_000;

/// The most scope charts drawn (the rest are named in one line).
const MAX_SCOPE_CHARTS: usize = 24;

/// The most lanes in all for lanes by submit-to-end span (see [`gantt`]).
const MAX_WAIT_LANES: usize = 60;

const WIDTH: f64 = 1200.0;
const LEFT: f64 = 190.0;
const RIGHT: f64 = 24.0;
const JOB_AREA: f64 = 640.0;
const CHART_H: f64 = 34.0;

const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// A drawn picture and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gantt {
    /// The SVG document.
    pub svg: String,
    /// Row groups (nodes, and the no-node group when a job ran on no node).
    pub rows: usize,
    /// Job bars.
    pub bars: usize,
    /// Wait bands.
    pub waits: usize,
    /// Scope charts.
    pub scopes: usize,
}

/// One job as the picture needs it.
struct Bar<'a> {
    index: usize,
    label: Option<&'a str>,
    kind: &'a str,
    submitted: u64,
    admitted: Option<u64>,
    started: Option<u64>,
    finished: Option<u64>,
}

/// The x of a time.
struct Scale {
    span: f64,
}

impl Scale {
    /// A time past the picture's end (a wait that never ends) is drawn at the end.
    fn x(&self, ms: u64) -> f64 {
        LEFT + ((ms as f64).min(self.span) / self.span) * (WIDTH - LEFT - RIGHT)
    }
}

/// Draws `run` (the simulation of `jobs` under `policy`) with `title` on top.
pub fn gantt(policy: &Policy, jobs: &[WorkloadJob], run: &Run, title: &str) -> Gantt {
    gantt_labelled(policy, jobs, run, title, &Labels::default())
}

/// What a caller names in the picture beyond [`gantt`]'s defaults (the server's forecast
/// card names jobs by their id and times from now).
#[derive(Debug, Clone, Default)]
pub struct Labels {
    /// Each job's name, in workload order (default: `job N`, its 1-based position); drawn
    /// on its bar where the bar is wide enough, and in its tooltip.
    pub jobs: Vec<String>,
    /// The time axis's caption (default: `time from start`).
    pub axis: Option<String>,
    /// What the subtitle calls the jobs with no admission in the picture (default: `never
    /// admitted`; a forecast cut at a horizon says `not started within 6 h`).
    pub unadmitted: Option<String>,
}

/// [`gantt`] with the names of `labels`.
pub fn gantt_labelled(
    policy: &Policy,
    jobs: &[WorkloadJob],
    run: &Run,
    title: &str,
    labels: &Labels,
) -> Gantt {
    let end = run
        .jobs
        .iter()
        .filter_map(|r| r.finished_ms)
        .chain(run.jobs.iter().map(|r| r.submitted_ms))
        .max()
        .unwrap_or(0);
    let scale = Scale {
        span: end.max(1) as f64,
    };
    // Lanes by submit-to-end span, so every wait shows, while that stays small;
    // otherwise by admitted span (as tall as the peak concurrency).
    let mut groups = groups(jobs, run, &labels.jobs, true);
    if groups.iter().map(|(_, l)| l.len()).sum::<usize>() > MAX_WAIT_LANES {
        groups = self::groups(jobs, run, &labels.jobs, false);
    }
    let lanes_total: usize = groups.iter().map(|(_, l)| l.len().max(1)).sum();
    let lane_h = (JOB_AREA / lanes_total.max(1) as f64).clamp(1.5, 14.0);
    let charts = occupancy(policy, jobs, run);
    let shown = charts.len().min(MAX_SCOPE_CHARTS);
    let rows_h: f64 = groups
        .iter()
        .map(|(_, l)| l.len().max(1) as f64 * lane_h + 8.0)
        .sum();
    let height = 78.0 + rows_h + 16.0 + (shown + 1) as f64 * (CHART_H + 8.0) + 30.0;
    let kinds = kind_colours(jobs);
    let mut svg = Svg::new(WIDTH, height);
    svg.leaf(
        "rect",
        &[
            a("width", "100%"),
            a("height", "100%"),
            a("fill", "#ffffff"),
        ],
        None,
    );
    let never = run.jobs.iter().filter(|r| r.admitted_ms.is_none()).count();
    let sub = match never {
        0 => format!("{} jobs", jobs.len()),
        n => {
            let what = labels.unadmitted.as_deref().unwrap_or("never admitted");
            format!("{} jobs, {n} {what}", jobs.len())
        }
    };
    svg.text(
        10.0,
        18.0,
        &[a("font-size", 14), a("font-weight", "bold")],
        title,
    );
    let sub_x = (20.0 + 8.5 * title.chars().count() as f64).max(LEFT);
    svg.text(sub_x, 18.0, &[a("fill", "#555")], &sub);
    legend(&mut svg, &kinds);
    let caption = labels.axis.as_deref().unwrap_or("time from start");
    axis(&mut svg, &scale, end, 62.0, height - 20.0, caption);
    let tips = jobs.len() <= TOOLTIPS_UP_TO;
    let mut counts = Gantt {
        svg: String::new(),
        rows: groups.len(),
        bars: 0,
        waits: 0,
        scopes: shown,
    };
    let mut y = 78.0;
    for (name, lanes) in &groups {
        let lanes = Lanes {
            name,
            lanes,
            lane_h,
        };
        let (waits, bars) = draw_group(&mut svg, &scale, &lanes, y, &kinds, tips);
        counts.waits += waits;
        counts.bars += bars;
        y += lanes.lanes.len().max(1) as f64 * lane_h + 8.0;
    }
    y += 16.0;
    let queued = queue_series(run);
    step_chart(&mut svg, &scale, y, "queued", None, &queued);
    y += CHART_H + 8.0;
    for (name, limit, series) in charts.iter().take(shown) {
        step_chart(&mut svg, &scale, y, name, Some(*limit), series);
        y += CHART_H + 8.0;
    }
    if charts.len() > shown {
        let more = format!("{} more limited scopes not drawn", charts.len() - shown);
        svg.text(10.0, y + 10.0, &[a("fill", "#555")], &more);
    }
    counts.svg = svg.finish();
    counts
}

/// One group of rows to draw.
struct Lanes<'a, 'b> {
    name: &'a str,
    lanes: &'a [Vec<Bar<'b>>],
    lane_h: f64,
}

/// One group at `y`: its background, its label, the wait bands, then the bars; returns
/// how many wait bands and bars it drew.
fn draw_group(
    svg: &mut Svg,
    scale: &Scale,
    lanes: &Lanes<'_, '_>,
    y: f64,
    kinds: &BTreeMap<String, &'static str>,
    tips: bool,
) -> (usize, usize) {
    let mut drawn = (0, 0);
    let h = lanes.lanes.len().max(1) as f64 * lanes.lane_h;
    svg.open("g", &[a("class", "row"), a("data-name", lanes.name)]);
    svg.leaf(
        "rect",
        &[
            a("x", num(LEFT)),
            a("y", num(y - 2.0)),
            a("width", num(WIDTH - LEFT - RIGHT)),
            a("height", num(h + 4.0)),
            a("fill", "#f4f4f4"),
        ],
        None,
    );
    let label = match lanes.lanes.len() {
        1 => format!("{} (1 lane)", lanes.name),
        n => format!("{} ({n} lanes)", lanes.name),
    };
    svg.text(10.0, y + h.min(14.0) / 2.0 + 4.0, &[], &label);
    // Waits first, so every bar is drawn over every wait band.
    for waits in [true, false] {
        for (lane, bars) in lanes.lanes.iter().enumerate() {
            let ly = y + lane as f64 * lanes.lane_h;
            for b in bars {
                let lane = Lane {
                    y: ly,
                    h: lanes.lane_h,
                    alone: bars.len() == 1,
                };
                let n = draw_job(svg, scale, b, lane, waits, kinds, tips);
                match waits {
                    true => drawn.0 += n,
                    false => drawn.1 += n,
                }
            }
        }
    }
    svg.close();
    drawn
}

/// Kinds in first-seen order, each with its colour.
fn kind_colours(jobs: &[WorkloadJob]) -> BTreeMap<String, &'static str> {
    let mut out = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for j in jobs {
        if !order.contains(&j.kind.as_str()) {
            order.push(&j.kind);
        }
    }
    for (i, k) in order.iter().enumerate() {
        out.insert(k.to_string(), PALETTE[i % PALETTE.len()]);
    }
    out
}

/// Groups (node name, or `(no node)`) in the run's node order, each a list of lanes.
fn groups<'a>(
    jobs: &'a [WorkloadJob],
    run: &Run,
    labels: &'a [String],
    by_wait: bool,
) -> Vec<(String, Vec<Vec<Bar<'a>>>)> {
    let mut by_group: BTreeMap<usize, Vec<Bar<'a>>> = BTreeMap::new();
    let names: Vec<&str> = run.nodes.iter().map(|n| n.name.as_str()).collect();
    for (i, (j, r)) in jobs.iter().zip(&run.jobs).enumerate() {
        let g = r
            .node
            .as_deref()
            .and_then(|n| names.iter().position(|&x| x == n))
            .unwrap_or(names.len());
        by_group.entry(g).or_default().push(Bar {
            index: i,
            label: labels.get(i).map(String::as_str),
            kind: &j.kind,
            submitted: r.submitted_ms,
            admitted: r.admitted_ms,
            started: r.started_ms,
            finished: r.finished_ms,
        });
    }
    by_group
        .into_iter()
        .map(|(g, bars)| {
            let name = names
                .get(g)
                .map_or("(no node)".to_string(), |n| match run.nodes[g].slots {
                    Some(1) => format!("{n} [1 slot]"),
                    Some(s) => format!("{n} [{s} slots]"),
                    None => format!("{n} [unlimited]"),
                });
            (name, pack(bars, by_wait))
        })
        .collect()
}

/// Greedy interval partitioning: each job goes to the first lane free at the start of its
/// span (submit to end with `by_wait`, else admission to end). A job never admitted whose
/// wait has an end (the server's forecast cuts it at its horizon) is a span from submit
/// like any other with `by_wait`, so its wait band shows; otherwise jobs never admitted
/// share lane 0 (for their wait band only).
fn pack(mut bars: Vec<Bar<'_>>, by_wait: bool) -> Vec<Vec<Bar<'_>>> {
    let start = |b: &Bar<'_>| match by_wait {
        true => b.admitted.or(b.finished).map(|_| b.submitted),
        false => b.admitted,
    };
    bars.sort_by_key(|b| (start(b).unwrap_or(u64::MAX), b.index));
    let mut lanes: Vec<Vec<Bar<'_>>> = Vec::new();
    let mut free_at: Vec<u64> = Vec::new();
    for b in bars {
        let (Some(from), Some(to)) = (start(&b), b.finished) else {
            match lanes.first_mut() {
                Some(l) => l.push(b),
                None => {
                    lanes.push(vec![b]);
                    free_at.push(0);
                }
            }
            continue;
        };
        match free_at.iter().position(|&f| f <= from) {
            Some(l) => {
                free_at[l] = to;
                lanes[l].push(b);
            }
            None => {
                free_at.push(to);
                lanes.push(vec![b]);
            }
        }
    }
    lanes
}

/// Where a lane is drawn.
#[derive(Clone, Copy)]
struct Lane {
    y: f64,
    h: f64,
    /// The lane holds this one job only.
    alone: bool,
}

/// One job's wait band (`waits`) or bar; returns how many it drew (0 or 1).
fn draw_job(
    svg: &mut Svg,
    scale: &Scale,
    b: &Bar<'_>,
    lane: Lane,
    waits: bool,
    kinds: &BTreeMap<String, &'static str>,
    tips: bool,
) -> usize {
    let Lane { y, h, alone } = lane;
    let gap = if h >= 4.0 { 1.0 } else { 0.0 };
    let waited_to = b.admitted.or(b.finished).unwrap_or(b.submitted);
    if waits {
        if waited_to <= b.submitted {
            return 0;
        }
        let (x0, x1) = (scale.x(b.submitted), scale.x(waited_to));
        svg.leaf(
            "rect",
            &[
                a("class", "wait"),
                a("x", num(x0)),
                a("y", num(y + h * 0.3)),
                a("width", num((x1 - x0).max(0.5))),
                a("height", num((h * 0.4).max(0.5))),
                a("fill", "#9a9a9a"),
                a("fill-opacity", "0.45"),
            ],
            b.label
                .map(|l| format!("{l} ({}): waiting", b.kind))
                .as_deref(),
        );
        // A job that only waits, alone in its lane: named there too.
        if let (None, Some(l), true) = (b.admitted, b.label, alone) {
            bar_label(svg, (x0, x1), lane, &format!("{l} (waiting)"), "#dddddd");
        }
        return 1;
    }
    let (Some(adm), Some(fin)) = (b.admitted, b.finished) else {
        return 0;
    };
    let colour = kinds.get(b.kind).copied().unwrap_or(PALETTE[0]);
    let (x0, x1) = (scale.x(adm), scale.x(fin));
    let name = b
        .label
        .map_or_else(|| format!("job {}", b.index + 1), str::to_string);
    let tip = tips.then(|| {
        format!(
            "{name} ({}): waited {}, ran {}",
            b.kind,
            clock(adm - b.submitted),
            clock(fin - b.started.unwrap_or(adm))
        )
    });
    svg.leaf(
        "rect",
        &[
            a("class", "bar"),
            a("x", num(x0)),
            a("y", num(y)),
            a("width", num((x1 - x0).max(0.6))),
            a("height", num((h - gap).max(1.0))),
            a("fill", colour),
            a("stroke", if h >= 4.0 { "#ffffff" } else { "none" }),
            a("stroke-width", "0.5"),
        ],
        tip.as_deref(),
    );
    bar_label(svg, (x0, x1), lane, &name, colour);
    if let Some(st) = b.started.filter(|&s| s > adm) {
        let xs = scale.x(st);
        svg.leaf(
            "rect",
            &[
                a("class", "prepare"),
                a("x", num(x0)),
                a("y", num(y)),
                a("width", num(xs - x0)),
                a("height", num((h - gap).max(1.0))),
                a("fill", "#ffffff"),
                a("fill-opacity", "0.5"),
            ],
            None,
        );
    }
    1
}

/// The least lane height a bar's name is written in (smaller lanes keep it in the
/// tooltip only).
const LABEL_MIN_H: f64 = 10.0;

/// `name` written on the bar from `x0` to `x1` when it fits (the lane is at least
/// [`LABEL_MIN_H`] tall and the bar wide enough for the text): in white on a dark
/// colour, in near-black on a light one ([`is_light`]). A picture shown as an `<img>` shows no
/// tooltips, so this is where a reader finds which job a bar is.
fn bar_label(svg: &mut Svg, (x0, x1): (f64, f64), lane: Lane, name: &str, colour: &str) {
    let Lane { y, h, .. } = lane;
    let size = (h - 3.0).min(11.0);
    // About 0.6 em a character in a sans-serif face, plus 3 px each side.
    let width = 0.6 * size * name.chars().count() as f64 + 6.0;
    if h < LABEL_MIN_H || x1 - x0 < width {
        return;
    }
    let ink = if is_light(colour) {
        "#1b1f24"
    } else {
        "#ffffff"
    };
    svg.text(
        x0 + 3.0,
        y + (h - 1.0) / 2.0 + size * 0.36,
        &[
            a("class", "bar-label"),
            a("font-size", num(size)),
            a("fill", ink),
            a("pointer-events", "none"),
        ],
        name,
    );
}

/// Whether near-black text on `#rrggbb` has more contrast than white (WCAG contrast:
/// from a relative luminance of about 0.21 on).
fn is_light(colour: &str) -> bool {
    let hex = colour.trim_start_matches('#');
    let channel = |i: usize| {
        let c = u8::from_str_radix(hex.get(i..i + 2).unwrap_or("00"), 16).unwrap_or(0);
        let c = f64::from(c) / 255.0;
        match c <= 0.04045 {
            true => c / 12.92,
            false => ((c + 0.055) / 1.055).powf(2.4),
        }
    };
    0.2126 * channel(0) + 0.7152 * channel(2) + 0.0722 * channel(4) > 0.21
}

/// The legend: kinds, then the wait and prepare shades.
fn legend(svg: &mut Svg, kinds: &BTreeMap<String, &'static str>) {
    let mut x = 10.0;
    let y = 36.0;
    let mut entries: Vec<(String, &str, &str)> =
        kinds.iter().map(|(k, c)| (k.clone(), *c, "1")).collect();
    entries.push(("waiting".into(), "#9a9a9a", "0.45"));
    entries.push(("prepare stage (paler)".into(), "#c7d3e3", "1"));
    svg.open("g", &[a("class", "legend")]);
    for (name, colour, opacity) in entries {
        svg.leaf(
            "rect",
            &[
                a("x", num(x)),
                a("y", num(y - 9.0)),
                a("width", 12),
                a("height", 10),
                a("fill", colour),
                a("fill-opacity", opacity),
            ],
            None,
        );
        svg.text(x + 16.0, y, &[], &name);
        x += 28.0 + 6.5 * name.chars().count() as f64;
    }
    svg.close();
}

/// A tick step of 1, 2 or 5 times a power of ten seconds (or whole minutes/hours) giving
/// about eight labels.
fn tick_step(span_ms: u64) -> u64 {
    let steps: [u64; 16] = [
        1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000,
    ];
    let candidates = steps
        .iter()
        .copied()
        .chain([120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000])
        .chain([7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000]);
    candidates
        .into_iter()
        .find(|s| span_ms / s <= 10)
        .unwrap_or(86_400_000 * (span_ms / 86_400_000 / 10 + 1))
}

/// The time axis at `y`, grid lines down to `bottom`.
fn axis(svg: &mut Svg, scale: &Scale, end: u64, y: f64, bottom: f64, caption: &str) {
    let step = tick_step(end.max(1));
    svg.open("g", &[a("class", "axis"), a("stroke", "#dddddd")]);
    let mut t = 0;
    while t <= end.max(1) {
        let x = scale.x(t);
        svg.leaf(
            "line",
            &[
                a("x1", num(x)),
                a("x2", num(x)),
                a("y1", num(y)),
                a("y2", num(bottom)),
            ],
            None,
        );
        svg.text(
            x,
            y - 4.0,
            &[
                a("text-anchor", "middle"),
                a("stroke", "none"),
                a("fill", "#333"),
            ],
            &clock(t),
        );
        t += step;
    }
    svg.close();
    svg.text(10.0, y - 4.0, &[a("fill", "#333")], caption);
}

/// `0`, `250ms`, `45s`, `12m30s`, `2h05m`.
pub fn clock(ms: u64) -> String {
    match ms {
        0 => "0".into(),
        1..1_000 => format!("{ms}ms"),
        1_000..60_000 if ms % 1_000 != 0 => format!("{:.1}s", ms as f64 / 1000.0),
        1_000..60_000 => format!("{}s", ms / 1000),
        60_000..3_600_000 => match ms / 1000 % 60 {
            0 => format!("{}m", ms / 60_000),
            s => format!("{}m{s:02}s", ms / 60_000),
        },
        _ => match ms / 60_000 % 60 {
            0 => format!("{}h", ms / 3_600_000),
            m => format!("{}h{m:02}m", ms / 3_600_000),
        },
    }
}

/// `(time, count)` steps: the count from that time on.
pub(crate) type Series = Vec<(u64, u64)>;

/// `(from, to, units)`: a job holding `units` of a scope over `[from, to)`.
type Interval = (u64, u64, u64);

/// Steps from `(from, to, units)` intervals.
fn steps(intervals: impl Iterator<Item = (u64, u64, u64)>) -> Series {
    let mut delta: BTreeMap<u64, i64> = BTreeMap::new();
    for (from, to, n) in intervals {
        if to > from && n > 0 {
            *delta.entry(from).or_default() += n as i64;
            *delta.entry(to).or_default() -= n as i64;
        }
    }
    let mut level = 0i64;
    delta
        .into_iter()
        .map(|(t, d)| {
            level += d;
            (t, level.max(0) as u64)
        })
        .collect()
}

/// Jobs waiting (submitted, not yet admitted) over time.
fn queue_series(run: &Run) -> Series {
    steps(run.jobs.iter().map(|r| {
        let to = r.admitted_ms.or(r.finished_ms).unwrap_or(u64::MAX);
        (r.submitted_ms, to, 1)
    }))
}

/// Every scope the policy itself limits (not conflicts), with its occupancy over time,
/// by name; the engine's [`Policy::scopes_of`] says which scopes a job takes.
pub(crate) fn occupancy(
    policy: &Policy,
    jobs: &[WorkloadJob],
    run: &Run,
) -> Vec<(String, u64, Series)> {
    let mut spans: BTreeMap<String, (u64, Vec<Interval>)> = BTreeMap::new();
    for (j, r) in jobs.iter().zip(&run.jobs) {
        let (Some(adm), Some(fin)) = (r.admitted_ms, r.finished_ms) else {
            continue;
        };
        let Ok(checked) = JobSpec::check(j.spec(), policy) else {
            continue;
        };
        let job = checked.into_job(0, Timestamp(j.at_ms()));
        let scopes = policy.scopes_of(&job);
        for u in &scopes.common {
            if let Some(limit) = u.key.limit_in(policy) {
                let e = spans
                    .entry(u.key.to_string())
                    .or_insert((limit, Vec::new()));
                e.1.push((adm, fin, u.take));
            }
        }
        if let Some(key) = &scopes.prepare {
            if let Some(limit) = key.limit_in(policy) {
                let to = r.started_ms.unwrap_or(fin);
                let e = spans.entry(key.to_string()).or_insert((limit, Vec::new()));
                e.1.push((adm, to, 1));
            }
        }
    }
    spans
        .into_iter()
        .map(|(name, (limit, iv))| (name, limit, steps(iv.into_iter())))
        .collect()
}

/// One step chart at `y`: filled occupancy, a dashed line at the limit, the label left.
fn step_chart(svg: &mut Svg, scale: &Scale, y: f64, name: &str, limit: Option<u64>, s: &Series) {
    let peak = s.iter().map(|p| p.1).max().unwrap_or(0);
    let top = limit.unwrap_or(0).max(peak).max(1) as f64;
    let yv = |v: u64| y + CHART_H - (v as f64 / top) * CHART_H;
    svg.open(
        "g",
        &[
            a("class", if limit.is_some() { "scope" } else { "queue" }),
            a("data-name", name),
        ],
    );
    svg.leaf(
        "rect",
        &[
            a("x", num(LEFT)),
            a("y", num(y)),
            a("width", num(WIDTH - LEFT - RIGHT)),
            a("height", num(CHART_H)),
            a("fill", "#fafafa"),
            a("stroke", "#e0e0e0"),
        ],
        None,
    );
    let mut d = format!("M{} {}", num(LEFT), num(yv(0)));
    let mut level = 0;
    for &(t, v) in s {
        let x = num(scale.x(t));
        d.push_str(&format!(" L{x} {} L{x} {}", num(yv(level)), num(yv(v))));
        level = v;
    }
    d.push_str(&format!(" L{} {} Z", num(WIDTH - RIGHT), num(yv(level))));
    let colour = if limit.is_some() {
        "#4e79a7"
    } else {
        "#9a9a9a"
    };
    svg.leaf(
        "path",
        &[
            a("d", d),
            a("fill", colour),
            a("fill-opacity", "0.35"),
            a("stroke", colour),
        ],
        None,
    );
    if let Some(l) = limit {
        let ly = num(yv(l));
        svg.leaf(
            "line",
            &[
                a("x1", num(LEFT)),
                a("x2", num(WIDTH - RIGHT)),
                a("y1", &ly),
                a("y2", &ly),
                a("stroke", "#e15759"),
                a("stroke-dasharray", "4 3"),
            ],
            None,
        );
    }
    let label = match limit {
        Some(l) => format!("peak {peak} / limit {l}"),
        None => format!("peak {peak}"),
    };
    // `limit:per-datastore[datastore=ds-01]` on two lines: the rule, then the values; the
    // peak and the limit inside the chart, on the right.
    let (rule, values) = match name.split_once('[') {
        Some((r, p)) => {
            let parts = p.trim_end_matches(']').split(',');
            let vals: Vec<&str> = parts
                .map(|kv| kv.split_once('=').map_or(kv, |x| x.1))
                .collect();
            (r, vals.join(", "))
        }
        None => (name, String::new()),
    };
    svg.text(10.0, y + 13.0, &[], &shorten(rule, 30));
    svg.text(10.0, y + 27.0, &[a("fill", "#555")], &shorten(&values, 30));
    let anchor = [a("text-anchor", "end"), a("fill", "#333")];
    svg.text(WIDTH - RIGHT - 4.0, y + 12.0, &anchor, &label);
    svg.close();
}

/// `text` cut to `max` characters with an ellipsis (the charts' labels and the
/// comparison table's scope names).
pub(crate) fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut s: String = text.chars().take(max - 1).collect();
    s.push('…');
    s
}

#[cfg(test)]
mod tests;
