//! Validation of `[[schedule]]` and the job template each one submits: the same
//! `file:line: field: expected .., got ..` errors as the rest.

use super::*;

pub(super) fn schedules(
    raw: &[RawSchedule],
    pools: &Pools<'_>,
    p: &FieldPath,
) -> Checked<Vec<ScheduleSpec>> {
    let mut out = Vec::new();
    let mut seen = BTreeMap::new();
    for (i, s) in raw.iter().enumerate() {
        let sp = p.at(i);
        if let Some(first) = seen.insert(s.name.as_str(), i) {
            let message = format!(
                "schedule name {:?} is already used by schedule[{first}], expected unique names",
                s.name
            );
            return bad(&sp.key("name"), message);
        }
        out.push(schedule(s, pools, &sp)?);
    }
    let after_of = |n: &str| seen.get(n).map(|&i| raw[i].after.as_deref());
    for (i, s) in raw.iter().enumerate() {
        crate::schedule::check_after(&s.name, after_of, raw.len(), " in this policy")
            .or_else(|e| bad(&p.at(i).key("after"), e.to_string()))?;
    }
    Ok(out)
}

pub(super) fn schedule(s: &RawSchedule, pools: &Pools<'_>, p: &FieldPath) -> Checked<ScheduleSpec> {
    schedule_name(&s.name, &p.key("name"))?;
    let when_limit = crate::limits::text("when", &s.when, crate::limits::MAX_EXPR_BYTES);
    within(when_limit, &p.key("when"))?;
    if s.when.trim().is_empty() {
        return bad(
            &p.key("when"),
            "expected a calendar event or cron expression (such as \"mon..fri 02:00\" or \"30 2 * * 1-5\"), got an empty string",
        );
    }
    match crate::calendar::Schedule::parse(s.when.trim()) {
        Err(e) => {
            return bad(
                &p.key("when"),
                format!("invalid schedule {:?}: {e}", s.when.trim()),
            )
        }
        // No clock here: a time after 1970 at all (a date in the past is the server's
        // check, which knows now). The zone hardly matters for whether a day exists.
        Ok(expr) if !matches!(expr.next_after(0, "UTC"), Ok(Some(_))) => {
            return bad(
                &p.key("when"),
                format!(
                    "schedule {:?} never elapses: no date matches it (such as February 30), expected an expression with a future time",
                    s.when.trim()
                ),
            )
        }
        Ok(_) => {}
    }
    let duplicates = match s.duplicates.as_deref() {
        None | Some("skip") => Duplicates::Skip,
        Some("queue") => Duplicates::Queue,
        Some("cancel-queued") => Duplicates::CancelQueued,
        Some("cancel-running") => Duplicates::CancelRunning,
        Some(other) => {
            return bad(
                &p.key("duplicates"),
                format!("expected one of \"skip\", \"queue\", \"cancel-queued\", \"cancel-running\", got {other:?}"),
            )
        }
    };
    let misfire = match s.misfire.as_deref() {
        None | Some("run-once") => Misfire::RunOnce,
        Some("skip") => Misfire::Skip,
        Some(other) => {
            return bad(
                &p.key("misfire"),
                format!("expected \"run-once\" or \"skip\", got {other:?}"),
            )
        }
    };
    Ok(ScheduleSpec {
        name: s.name.clone(),
        when: s.when.trim().to_string(),
        job: job_template(&s.job, pools, &p.key("job"))?,
        duplicates,
        misfire,
        max_start_delay: positive_duration(&s.max_start_delay, &p.key("max_start_delay"))?,
        jitter: opt_duration(&s.jitter, &p.key("jitter"))?,
        retry: s
            .retry
            .as_ref()
            .map(|r| retry(r, &p.key("retry")))
            .transpose()?,
        after: match &s.after {
            Some(a) => schedule_name(a, &p.key("after")).map(|()| Some(a.clone()))?,
            None => None,
        },
    })
}

pub(super) fn job_template(j: &RawJob, pools: &Pools<'_>, p: &FieldPath) -> Checked<JobTemplate> {
    // Kind, attributes and placement are checked by the one job check the engine uses (the
    // cost and durations, still raw here, below).
    let spec = crate::job::JobSpec {
        kind: j.kind.clone(),
        attrs: j.attrs.clone(),
        node: j.node.clone(),
        node_selector: j.node_selector.clone(),
        ..Default::default()
    };
    if let Err(crate::job::SubmitError::Invalid { field, message }) =
        spec.check(&Policy::unlimited())
    {
        let path = match field.split_once('.') {
            Some((head, rest)) => p.key(head).key(rest),
            None => p.key(&field),
        };
        return bad(&path, message);
    }
    let executor = match j.executor.as_deref() {
        None => None,
        // Nobody holds a scheduled run as its client: the server submits it and walks
        // away, so the run would show `running` with no process, be `lost` when its lease
        // runs out, and the next runs be skipped as its duplicates.
        Some("client") => {
            return bad(
                &p.key("executor"),
                "a schedule's run is submitted by the server, so no client would hold it: it would be lost when its lease runs out and the next runs skipped as its duplicates; expected \"agent\" (the default: an agent with a handler for the kind runs it), or leave it out",
            )
        }
        Some("agent") => Some(Executor::Agent),
        Some(other) => {
            return bad(
                &p.key("executor"),
                format!("expected \"client\" or \"agent\", got {other:?}"),
            )
        }
    };
    Ok(JobTemplate {
        kind: j.kind.clone(),
        attrs: j.attrs.clone(),
        priority: opt_priority(j.priority, &p.key("priority"))?,
        node: j.node.clone(),
        node_selector: j.node_selector.clone(),
        executor,
        cost: pools.cost(&j.cost, &p.key("cost"))?,
        two_stage: j.two_stage,
        max_wait: positive_duration(&j.max_wait, &p.key("max_wait"))?,
        max_run: positive_duration(&j.max_run, &p.key("max_run"))?,
    })
}

/// A schedule's name, or another's in `after`: [`crate::schedule::NAME_RULE`].
fn schedule_name(text: &str, p: &FieldPath) -> Checked<()> {
    if crate::schedule::valid_name(text) {
        return Ok(());
    }
    let rule = crate::schedule::NAME_RULE;
    bad(
        p,
        format!("invalid schedule name {text:?}: expected {rule}"),
    )
}
