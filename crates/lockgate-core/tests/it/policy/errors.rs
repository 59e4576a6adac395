//! The error table: for every rule, the line, the field and the text users see.

use super::{DESIGN_EXAMPLES, OTHER_KEYS};
use lockgate_core::policy::raw::{self, RawPolicy};
use lockgate_core::policy::*;
use rstest::rstest;

const SCHEDULE: &str = "[[schedule]]\nname = \"s\"\nwhen = \"daily\"\n";

#[rstest]
#[case::negative_max(
    "[[limit]]\nname = \"a\"\nmax = 2\n\n[[limit]]\nname = \"b\"\nmax = -1\n",
    7,
    "limit[1].max",
    "expected a whole number >= 0, got -1"
)]
#[case::auto_min_over_max(
    "[[limit]]\nname = \"ds\"\nper = [\"datastore\"]\nmax = { auto = \"throughput\", min = 5, max = 2 }\n",
    4,
    "limit[0].max.max",
    "expected a number >= min (5), got 2"
)]
#[case::auto_unknown_goal(
    "[[limit]]\nname = \"ds\"\n\nmax = { auto = \"latency\", min = 1, max = 4 }\n",
    4,
    "limit[0].max.auto",
    "expected \"throughput\" (the goal a number sets itself for), got \"latency\""
)]
#[case::auto_min_zero(
    "[[limit]]\nname = \"ds\"\nmax = { auto = \"throughput\", min = 0, max = 4 }\n",
    3,
    "limit[0].max.min",
    "expected a whole number >= 1 (a number that sets itself never shuts its scope), got 0"
)]
#[case::auto_bad_gain(
    "[[limit]]\nname = \"ds\"\nmax = { auto = \"throughput\", min = 1, max = 4, gain = 0 }\n",
    3,
    "limit[0].max.gain",
    "expected a percentage from 1 to 100, got 0"
)]
#[case::auto_pin_outside_the_range(
    "[[limit]]\nname = \"ds\"\nmax = { auto = \"throughput\", min = 2, max = 4, pin = 6 }\n",
    3,
    "limit[0].max.pin",
    "expected a number from min to max (2-4), got 6"
)]
#[case::auto_unknown_key(
    "[[limit]]\nname = \"ds\"\nmax = { auto = \"throughput\", min = 1, max = 4, step = 2 }\n",
    3,
    "limit[0].max.step",
    "unknown key, expected one of `auto`, `min`, `max`, `gain`, `interval`, `pin`"
)]
#[case::auto_on_a_conflict(
    "[[conflict]]\nkeys = [\"repo\"]\nmax = { auto = \"throughput\", min = 1, max = 4 }\n",
    3,
    "conflict[0].max",
    "unknown key"
)]
#[case::guard_out_of_range(
    "[nodes]\n[[nodes.rule]]\nselector = \"\"\nmax_running = 4\nguard = { memory = 120 }\n",
    5,
    "nodes.rule[0].guard.memory",
    "expected a pressure in percent from 1 to 100, got 120"
)]
#[case::guard_unknown(
    "[nodes]\n[[nodes.rule]]\nselector = \"\"\nmax_running = 4\nguard = { disk = 10 }\n",
    5,
    "nodes.rule[0].guard.disk",
    "unknown key, expected one of `cpu`, `io`, `memory`"
)]
#[case::non_integer(
    "[global]\nmax_running = 2.5\n",
    2,
    "global.max_running",
    "expected a whole number, got 2.5"
)]
#[case::string_number(
    "[global]\n\nprepare_queue = \"8\"\n",
    3,
    "global.prepare_queue",
    "expected a whole number, got \"8\""
)]
#[case::huge_number(
    "[global]\nmax_running = 99999999999\n",
    2,
    "global.max_running",
    "expected a whole number <= 4294967295"
)]
#[case::negative_cost(
    "[resources]\nthreads = 10\n[kinds.tape-backup]\ncost.threads = -4\n",
    4,
    "kinds.tape-backup.cost.threads",
    "expected a whole number >= 0, got -4"
)]
#[case::negative_capacity("[resources]\nthreads = -1\n", 2, "resources.threads", ">= 0, got -1")]
#[case::duplicate_limit(
    "[[limit]]\nname = \"a\"\n[[limit]]\nname = \"a\"\n",
    4,
    "limit[1].name",
    "already used by limit[0]"
)]
#[case::empty_limit_name(
    "[[limit]]\nname = \"\"\n",
    2,
    "limit[0].name",
    "expected a limit name"
)]
#[case::values_without_per(
    "[[limit]]\nname = \"a\"\nvalues = { x = 1 }\n",
    3,
    "limit[0].values",
    "`values` needs `per`"
)]
#[case::values_parts(
    "[[limit]]\nname = \"a\"\nper = [\"datastore\", \"kind\"]\nvalues = { \"ds1\" = 2 }\n",
    4,
    "limit[0].values.ds1",
    "has 1 comma-separated part(s), expected 2 (one value per `per` key: datastore, kind)"
)]
#[case::values_empty_part(
    "[[limit]]\nname = \"a\"\nper = [\"datastore\", \"kind\"]\nvalues = { \"ds1,\" = 2 }\n",
    4,
    "limit[0].values.ds1,",
    "empty part"
)]
#[case::negative_value(
    "[[limit]]\nname = \"a\"\nper = [\"kind\"]\nvalues = { backup = -2 }\n",
    4,
    "limit[0].values.backup",
    "got -2"
)]
#[case::per_node(
    "[[limit]]\nname = \"a\"\nper = [\"kind\", \"node\"]\n",
    3,
    "limit[0].per[1]",
    "node numbers are set in [nodes]"
)]
#[case::per_empty(
    "[[limit]]\nname = \"a\"\nper = [\"\"]\n",
    3,
    "limit[0].per[0]",
    "got an empty string"
)]
#[case::per_twice(
    "[[limit]]\nname = \"a\"\nper = [\"kind\", \"kind\"]\n",
    3,
    "limit[0].per[1]",
    "listed twice"
)]
#[case::bad_match(
    "[[limit]]\nname = \"a\"\nmatch = \"kind in ()\"\n",
    3,
    "limit[0].match",
    "invalid job selector \"kind in ()\": column 10: empty list"
)]
#[case::bad_rule_selector(
    "[nodes]\n[[nodes.rule]]\nselector = \"zone=eu 1\"\nmax_running = 1\n",
    3,
    "nodes.rule[0].selector",
    "invalid label selector \"zone=eu 1\": column 9"
)]
#[case::label_syntax_in_rule(
    "[[nodes.rule]]\nselector = \"group=vm/100\"\nmax_running = 1\n",
    2,
    "nodes.rule[0].selector",
    "holds '/'"
)]
#[case::rule_without_selector(
    "[[nodes.rule]]\nmax_running = 1\n",
    1,
    "nodes.rule[0].selector",
    "missing, this key is required"
)]
#[case::undeclared_pool("[resources]\nthreads = 10\n[kinds.tape-backup]\ncost = { threads = 4, gpus = 1 }\n", 4, "kinds.tape-backup.cost.gpus", "pool \"gpus\" is not declared, expected a pool declared in [resources] or [nodes.resources]: threads")]
#[case::no_pools(
    "[kinds.backup]\ncost = { threads = 1 }\n",
    2,
    "kinds.backup.cost.threads",
    "none are declared"
)]
#[case::pool_twice(
    "[resources]\nthreads = 10\n[nodes.resources]\nthreads = 2\n",
    4,
    "nodes.resources.threads",
    "already declared in [resources]"
)]
#[case::weight_zero(
    "[owners.alice]\nweight = 0\n",
    2,
    "owners.alice.weight",
    "expected a whole number >= 1, got 0"
)]
#[case::fair_share(
    "[queue]\nfair_share = \"user\"\n",
    2,
    "queue.fair_share",
    "expected \"owner\" (the only fair-share mode), got \"user\""
)]
#[case::if_unreachable(
    "[kinds.backup]\nif_unreachable = \"skip\"\n",
    2,
    "kinds.backup.if_unreachable",
    "expected \"run\" or \"fail\", got \"skip\""
)]
#[case::bad_duration(
    "[leases]\nttl = \"30 seconds\"\n",
    2,
    "leases.ttl",
    "invalid duration \"30 seconds\": expected a whole number followed by ms, s, m, h or d"
)]
#[case::zero_ttl(
    "[nodes]\nttl = \"0s\"\n",
    2,
    "nodes.ttl",
    "expected a duration greater than zero, got \"0s\""
)]
#[case::zero_lease_ttl("[leases]\nttl = \"0ms\"\n", 2, "leases.ttl", "greater than zero")]
#[case::zero_aging("[queue]\naging = \"0m\"\n", 2, "queue.aging", "greater than zero")]
#[case::bad_reserve_after(
    "[queue]\nreserve_after = \"5 min\"\n",
    2,
    "queue.reserve_after",
    "invalid duration"
)]
#[case::bad_limit_reserve_after(
    "[[limit]]\nname = \"a\"\nmax = 1\nreserve_after = \"soon\"\n",
    4,
    "limit[0].reserve_after",
    "invalid duration \"soon\": expected a whole number followed by ms, s, m, h or d"
)]
#[case::limit_strict_not_bool(
    "[[limit]]\nname = \"a\"\nstrict = \"yes\"\n",
    3,
    "limit[0].strict",
    "expected true or false, got \"yes\""
)]
#[case::bad_conflict_exclusive(
    "[[conflict]]\nkeys = [\"repo\"]\nexclusive = \"kind in (prune\"\n",
    3,
    "conflict[0].exclusive",
    "invalid job selector \"kind in (prune\""
)]
#[case::bad_exclusive_delay(
    "[[conflict]]\nkeys = [\"repo\"]\nexclusive = \"kind=prune\"\nexclusive_delay = \"30 s\"\n",
    4,
    "conflict[0].exclusive_delay",
    "invalid duration \"30 s\""
)]
#[case::exclusive_delay_without_exclusive(
    "[[conflict]]\nkeys = [\"repo\"]\nexclusive_delay = \"30s\"\n",
    3,
    "conflict[0].exclusive_delay",
    "`exclusive_delay` needs `exclusive`"
)]
#[case::bad_conflict_reserve_after(
    "[[conflict]]\nkeys = [\"repo\"]\n\nreserve_after = \"-1s\"\n",
    4,
    "conflict[0].reserve_after",
    "invalid duration \"-1s\""
)]
#[case::conflict_strict_not_bool(
    "[[conflict]]\nkeys = [\"repo\"]\nstrict = 1\n",
    3,
    "conflict[0].strict",
    "expected true or false, got 1"
)]
#[case::bad_prepare_timeout(
    "[kinds.x]\nprepare_timeout = \"soon\"\n",
    2,
    "kinds.x.prepare_timeout",
    "invalid duration"
)]
#[case::retry_without_interval(
    "[kinds.data-upload]\nretry = { times = 3 }\n",
    2,
    "kinds.data-upload.retry.interval",
    "missing, expected a duration such as \"30s\" when times = 3"
)]
#[case::quota_zero(
    "[quotas]\nmax_queued_per_owner = 0\n",
    2,
    "quotas.max_queued_per_owner",
    "expected a whole number >= 1, got 0"
)]
#[case::quota_negative(
    "[quotas]\nmax_attrs = 4\nmax_attr_value_bytes = -1\n",
    3,
    "quotas.max_attr_value_bytes",
    "expected a whole number >= 1, got -1"
)]
#[case::quota_unknown_key("[quotas]\nmax_jobs = 4\n", 2, "quotas.max_jobs", "unknown key")]
#[case::schedule_kind_syntax(&format!("{SCHEDULE}job = {{ kind = \"bad kind\" }}\n"), 4, "schedule[0].job.kind", "Kubernetes label-key syntax")]
#[case::retention_zero("[retention]\ndays = 0\n", 2, "retention.days", "got 0")]
#[case::job_log_bytes_not_a_size(
    "[retention]\njob_log_bytes = \"4 megs\"\n",
    2,
    "retention.job_log_bytes",
    "expected a size of at least 1 byte such as \"64MiB\", \"500MB\" or a whole number of bytes, got \"4 megs\""
)]
#[case::job_logs_total_below_one_job(
    "[retention]\njob_log_bytes = \"8MiB\"\njob_logs_total_bytes = \"4MiB\"\n",
    3,
    "retention.job_logs_total_bytes",
    "expected at least job_log_bytes (8388608), got 4194304"
)]
#[case::duplicates(&format!("{SCHEDULE}job = {{ kind = \"verify\" }}\nduplicates = \"cancel\"\n"), 5, "schedule[0].duplicates", "expected one of \"skip\", \"queue\", \"cancel-queued\", \"cancel-running\", got \"cancel\"")]
#[case::misfire(&format!("{SCHEDULE}job = {{ kind = \"verify\" }}\nmisfire = \"later\"\n"), 5, "schedule[0].misfire", "expected \"run-once\" or \"skip\", got \"later\"")]
#[case::executor(&format!("{SCHEDULE}job = {{ kind = \"verify\", executor = \"robot\" }}\n"), 4, "schedule[0].job.executor", "expected \"client\" or \"agent\", got \"robot\"")]
#[case::client_schedule(&format!("{SCHEDULE}job = {{ kind = \"verify\", executor = \"client\" }}\n"), 4, "schedule[0].job.executor", "a schedule's run is submitted by the server, so no client would hold it")]
#[case::schedule_name_slash(
    "[[schedule]]\nname = \"ds1/verify\"\nwhen = \"daily\"\njob = { kind = \"verify\" }\n",
    2,
    "schedule[0].name",
    "invalid schedule name \"ds1/verify\": expected 1 to 64 letters, digits or . _ : @ -"
)]
#[case::schedule_after_name(&format!("{SCHEDULE}job = {{ kind = \"verify\" }}\nafter = \"\"\n"), 5, "schedule[0].after", "invalid schedule name \"\": expected 1 to 64")]
#[case::duplicate_schedule(&format!("{SCHEDULE}job = {{ kind = \"a\" }}\n{SCHEDULE}job = {{ kind = \"b\" }}\n"), 6, "schedule[1].name", "already used by schedule[0]")]
#[case::empty_when(
    "[[schedule]]\nname = \"s\"\nwhen = \" \"\njob = { kind = \"verify\" }\n",
    3,
    "schedule[0].when",
    "expected a calendar event or cron expression"
)]
#[case::bad_weekday_range(
    "[[schedule]]\nname = \"s\"\nwhen = \"mon..xyz 02:00\"\njob = { kind = \"verify\" }\n",
    3,
    "schedule[0].when",
    "xyz"
)]
#[case::bad_hour(
    "[[schedule]]\nname = \"s\"\nwhen = \"25:00\"\njob = { kind = \"verify\" }\n",
    3,
    "schedule[0].when",
    "25"
)]
#[case::bad_zone(
    "[[schedule]]\nname = \"s\"\nwhen = \"daily Mars/Olympus\"\njob = { kind = \"verify\" }\n",
    3,
    "schedule[0].when",
    "Mars/Olympus"
)]
#[case::reserved_kind(&format!("{SCHEDULE}job = {{ kind = \"verify\", attrs = {{ kind = \"x\" }} }}\n"), 4, "schedule[0].job.attrs.kind", "`kind` is reserved")]
#[case::reserved_owner(&format!("{SCHEDULE}job = {{ kind = \"verify\", attrs = {{ owner = \"x\" }} }}\n"), 4, "schedule[0].job.attrs.owner", "`owner` is reserved")]
#[case::reserved_node(&format!("{SCHEDULE}job = {{ kind = \"verify\", attrs = {{ node = \"x\" }} }}\n"), 4, "schedule[0].job.attrs.node", "`node` is reserved")]
#[case::empty_kind(&format!("{SCHEDULE}job = {{ kind = \"\" }}\n"), 4, "schedule[0].job.kind", "expected a job kind")]
#[case::pinned_and_movable(&format!("{SCHEDULE}job = {{ kind = \"a\", node = \"n1\", node_selector = \"\" }}\n"), 4, "schedule[0].job.node_selector", "either pinned")]
#[case::bad_node_selector(&format!("{SCHEDULE}job = {{ kind = \"a\", node_selector = \"zone in eu\" }}\n"), 4, "schedule[0].job.node_selector", "invalid label selector")]
#[case::job_cost(&format!("{SCHEDULE}job = {{ kind = \"a\", cost = {{ tape = 1 }} }}\n"), 4, "schedule[0].job.cost.tape", "not declared")]
#[case::job_missing(SCHEDULE, 1, "schedule[0].job", "missing")]
#[case::after_unknown(&format!("{SCHEDULE}job = {{ kind = \"a\" }}\nafter = \"nightly-bakup\"\n"), 5, "schedule[0].after", "no schedule is named \"nightly-bakup\", expected the name of another schedule in this policy")]
#[case::after_itself(&format!("{SCHEDULE}job = {{ kind = \"a\" }}\nafter = \"s\"\n"), 5, "schedule[0].after", "schedule \"s\" cannot wait for its own runs")]
#[case::after_cycle(
    "[[schedule]]\nname = \"gc\"\nwhen = \"daily\"\njob = { kind = \"gc\" }\nafter = \"prune\"\n\n[[schedule]]\nname = \"prune\"\nwhen = \"daily\"\njob = { kind = \"prune\" }\nafter = \"gc\"\n",
    5,
    "schedule[0].after",
    "schedules \"gc\" -> \"prune\" -> \"gc\" wait for each other in a cycle"
)]
#[case::conflict_without_keys(
    "[global]\n\n[[conflict]]\nmatch = \"kind=backup\"\n",
    3,
    "conflict[0]",
    "expected `keys = [..]`, `overlap = \"<attribute>\"` or both"
)]
#[case::conflict_empty_key(
    "[[conflict]]\nkeys = [\"datastore\", \"\"]\n",
    2,
    "conflict[0].keys[1]",
    "empty string"
)]
#[case::conflict_node(
    "[[conflict]]\nkeys = [\"node\"]\n",
    2,
    "conflict[0].keys[0]",
    "not allowed"
)]
#[case::conflict_bad_match(
    "[[conflict]]\nkeys = [\"a\"]\nmatch = \"kind=\"\n",
    3,
    "conflict[0].match",
    "expected a value"
)]
#[case::conflict_overlap_reserved(
    "[[conflict]]\noverlap = \"kind\"\n",
    2,
    "conflict[0].overlap",
    "list-valued attribute"
)]
#[case::group_by(
    "[[blocks.rule]]\nmatch = \"kind=Pod\"\ngroup_by = [\"label:a\", \"app\"]\n",
    3,
    "blocks.rule[0].group_by[1]",
    "expected `label:<name>` or `field:<dotted.path>`, got \"app\""
)]
#[case::group_by_empty(
    "[[blocks.rule]]\nmatch = \"kind=Pod\"\ngroup_by = []\n",
    3,
    "blocks.rule[0].group_by",
    "at least one"
)]
#[case::block_match(
    "[[blocks.rule]]\nmatch = \"kind==\"\ngroup_by = [\"field:spec.x\"]\n",
    2,
    "blocks.rule[0].match",
    "invalid job selector"
)]
#[case::exec_template(
    "[blocks]\nexec_template = []\n",
    2,
    "blocks.exec_template",
    "expected a non-empty argv"
)]
#[case::volume_group_label(
    "[blocks]\nvolume_group_label = \"-bad\"\n",
    2,
    "blocks.volume_group_label",
    "expected a Kubernetes label key"
)]
#[case::data_upload_selector(
    "[blocks]\ndata_upload_selector = \"a=(b)\"\n",
    2,
    "blocks.data_upload_selector",
    "invalid label selector"
)]
#[case::restore_wait_image(
    "[blocks]\nrestore_wait_image = \"my image\"\n",
    2,
    "blocks.restore_wait_image",
    "expected a container image reference"
)]
#[case::unknown_key(
    "[global]\nmax_running = 1\nmax_runing = 2\n",
    3,
    "global.max_runing",
    "unknown key, expected one of `max_running`, `prepare_queue`, `windows`"
)]
#[case::unknown_section(
    "[global]\n[bogus]\nx = 1\n",
    2,
    "bogus",
    "unknown key, expected one of `global`, `limit`"
)]
#[case::unknown_header(
    "[global]\n[global.bogus]\nx = 1\n",
    2,
    "global.bogus",
    "unknown key, expected one of `max_running`, `prepare_queue`, `windows`"
)]
#[case::unknown_array_header("[[bogus]]\nx = 1\n", 1, "bogus", "unknown key")]
#[case::unknown_same_name("[global]\nglobal = 1\n", 2, "global.global", "unknown key")]
#[case::unknown_dotted(
    "[kinds.backup]\ncost.threads = 1\nretry.count = 1\n",
    3,
    "kinds.backup.retry.count",
    "unknown key, expected `times` or `interval`"
)]
#[case::unknown_nested(
    "[[limit]]\nname = \"a\"\n\n[[limit]]\nname = \"b\"\nmaximum = 3\n",
    6,
    "limit[1].maximum",
    "unknown key"
)]
#[case::unknown_inline(&format!("{SCHEDULE}job = {{ kind = \"a\", nodes = \"x\" }}\n"), 4, "schedule[0].job.nodes", "unknown key")]
#[case::section_type("global = 3\n", 1, "global", "expected a table, got 3")]
#[case::array_type(
    "[[limit]]\nname = \"a\"\nper = \"kind\"\n",
    3,
    "limit[0].per",
    "expected an array, got \"kind\""
)]
#[case::bool_type(
    "[queue]\nstrict = \"yes\"\n",
    2,
    "queue.strict",
    "expected true or false, got \"yes\""
)]
#[case::limit_not_array("limit = 1\n", 1, "limit", "expected an array, got 1")]
#[case::syntax("[global]\nmax_running = 1\n[limit\n", 3, "", "invalid TOML")]
#[case::duplicate_table("[global]\n[global]\n", 2, "", "duplicate key")]
fn rejects(#[case] text: &str, #[case] line: usize, #[case] field: &str, #[case] needle: &str) {
    let e = Policy::from_toml(text, Some("lockgate.toml")).expect_err(text);
    assert!(e.message.contains(needle), "{e}\n(wanted {needle:?})");
    assert_eq!((e.line, e.field.as_str()), (Some(line), field), "{e}");
    assert_eq!(e.file.as_deref(), Some("lockgate.toml"));
}

#[test]
fn displays_file_line_field_and_message() {
    let e = Policy::from_toml(
        "[[limit]]\nname = \"a\"\n[[limit]]\nname = \"b\"\n\n\n\n\n\n\n\nmax = -1\n",
        Some("lockgate.toml"),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "lockgate.toml:12: limit[1].max: expected a whole number >= 0, got -1"
    );
    let e = Policy::from_toml("[global]\nmax_running = -1\n", None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 2: global.max_running: expected a whole number >= 0, got -1"
    );
    let mut raw = RawPolicy::default();
    raw.limit.push(raw::RawLimit {
        name: "a".into(),
        max: Some(raw::RawMax::Number(-1)),
        ..Default::default()
    });
    let e = Policy::from_raw(raw).unwrap_err();
    assert_eq!(
        e.to_string(),
        "limit[0].max: expected a whole number >= 0, got -1"
    );
    let e = PolicyError {
        file: Some("p.toml".into()),
        line: None,
        field: String::new(),
        message: "m".into(),
    };
    assert_eq!(e.to_string(), "p.toml: m");
}

#[rstest]
#[case::syntax(
    "{\n  \"global\": {\n    \"max_running\": 1,\n  }\n}",
    Some(4),
    "",
    "invalid JSON"
)]
#[case::unknown(
    "{\n  \"global\": {\n    \"max_runing\": 1\n  }\n}",
    Some(3),
    "global.max_runing",
    "unknown key"
)]
#[case::wrong_type(
    "{\"limit\": [{\"name\": \"a\"},\n {\"name\": \"b\", \"max\": 1.5}]}",
    Some(2),
    "limit[1].max",
    "expected a whole number, got 1.5"
)]
#[case::missing(
    "{\"nodes\": {\"rule\": [{\"max_running\": 1}]}}",
    Some(1),
    "nodes.rule[0].selector",
    "missing"
)]
#[case::semantic(
    "{\"limit\": [{\"name\": \"a\", \"max\": -1}]}",
    None,
    "limit[0].max",
    "got -1"
)]
#[case::not_an_object("[1]", Some(1), "", "expected a table")]
fn rejects_json(
    #[case] text: &str,
    #[case] line: Option<usize>,
    #[case] field: &str,
    #[case] needle: &str,
) {
    let e = Policy::from_json(text).expect_err(text);
    assert!(e.message.contains(needle), "{e}\n(wanted {needle:?})");
    assert_eq!((e.line, e.field.as_str()), (line, field), "{e}");
}

/// The path a header names: `[kinds.backup]` -> `kinds.backup`, the third `[[limit]]` ->
/// `limit[2]`.
fn header_path(
    line: &str,
    counts: &mut std::collections::BTreeMap<String, usize>,
) -> Option<String> {
    let line = line.split('#').next()?.trim();
    if let Some(name) = line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]")) {
        let n = counts.entry(name.to_string()).or_insert(0);
        *n += 1;
        return Some(format!("{name}[{}]", *n - 1));
    }
    line.strip_prefix('[')
        .and_then(|l| l.strip_suffix(']'))
        .map(str::to_string)
}

/// Every line of the design examples that sets a value, and every header but the pools': a
/// value of the wrong type there, or an unknown key right after the header, is reported at exactly that
/// line and field. The lines come from toml_edit's spans; if an upgrade of toml or
/// toml_edit moved them, this names every line that moved.
#[rstest]
#[case(DESIGN_EXAMPLES)]
#[case(OTHER_KEYS)]
fn toml_errors_name_their_own_line(#[case] doc: &str) {
    let lines: Vec<&str> = doc.lines().collect();
    let mut counts = std::collections::BTreeMap::new();
    let mut table = String::new();
    let mut checked = 0;
    for (i, text) in lines.iter().enumerate() {
        let with = |replace: Option<String>, insert: Option<String>| {
            let mut v: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
            if let Some(r) = replace {
                v[i] = r;
            }
            if let Some(x) = insert {
                v.insert(i + 1, x);
            }
            Policy::from_toml(&v.join("\n"), Some("p.toml")).expect_err(&v.join("\n"))
        };
        if let Some(path) = header_path(text, &mut counts) {
            table = path;
            if table.ends_with("resources") {
                continue; // a table of pools: any key is a pool name
            }
            let e = with(None, Some("bogus_key = 1".into()));
            assert_eq!(e.line, Some(i + 2), "{e}");
            assert_eq!(e.field, format!("{table}.bogus_key"), "{e}");
            assert!(e.message.starts_with("unknown key"), "{e}");
            checked += 1;
            continue;
        }
        let Some((key, value)) = text.split_once(" = ") else {
            continue;
        };
        let value = value.split('#').next().unwrap_or("").trim();
        let (wrong, expected) = match value.chars().next() {
            Some('"') => ("7", "expected a string, got 7"),
            Some('t' | 'f') => ("\"x\"", "expected true or false, got \"x\""),
            Some('-' | '0'..='9') => ("\"x\"", "expected a whole number, got \"x\""),
            _ => continue,
        };
        let e = with(Some(format!("{key} = {wrong}")), None);
        assert_eq!(e.line, Some(i + 1), "{e}");
        assert_eq!(e.field, format!("{table}.{key}"), "{e}");
        assert_eq!(e.message, expected, "{e}");
        checked += 1;
    }
    assert!(checked > 20, "only {checked} lines checked");
}

/// Every value and every table of the design examples as JSON: a value of the wrong type,
/// or an unknown key in a table, is reported at its field path.
#[rstest]
#[case(DESIGN_EXAMPLES)]
#[case(OTHER_KEYS)]
fn json_errors_name_their_field(#[case] doc: &str) {
    use serde_json::Value;
    /// Tables whose keys the user names (pools, values, attributes, owners, kinds).
    const MAPS: &[&str] = &["resources", "values", "cost", "attrs", "kinds", "owners"];
    fn walk(doc: &Value, v: &Value, here: &mut Vec<Value>, checked: &mut usize) {
        let path: String = here
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                Value::String(k) if i == 0 => k.clone(),
                Value::String(k) => format!(".{k}"),
                n => format!("[{n}]"),
            })
            .collect();
        let pointer: String = here
            .iter()
            .map(|s| format!("/{}", s.as_str().map_or(s.to_string(), str::to_string)))
            .collect();
        let reject = |mutate: &dyn Fn(&mut Value)| {
            let mut d = doc.clone();
            mutate(d.pointer_mut(&pointer).unwrap());
            let text = serde_json::to_string_pretty(&d).unwrap();
            Policy::from_json(&text).expect_err(&text)
        };
        match v {
            Value::Object(map) => {
                if !here
                    .last()
                    .and_then(Value::as_str)
                    .is_some_and(|k| MAPS.contains(&k))
                {
                    let e = reject(&|t| {
                        t.as_object_mut()
                            .unwrap()
                            .insert("bogus_key".into(), 1.into());
                    });
                    let want = if path.is_empty() {
                        "bogus_key".to_string()
                    } else {
                        format!("{path}.bogus_key")
                    };
                    assert_eq!(e.field, want, "{e}");
                    assert!(e.message.starts_with("unknown key"), "{e}");
                    *checked += 1;
                }
                for (k, c) in map {
                    here.push(Value::from(k.clone()));
                    walk(doc, c, here, checked);
                    here.pop();
                }
            }
            Value::Array(a) => {
                for (i, c) in a.iter().enumerate() {
                    here.push(Value::from(i));
                    walk(doc, c, here, checked);
                    here.pop();
                }
            }
            leaf => {
                let (wrong, expected): (Value, &str) = match leaf {
                    Value::String(_) => (7.into(), "expected a string, got 7"),
                    Value::Bool(_) => ("x".into(), "expected true or false, got \"x\""),
                    _ => ("x".into(), "expected a whole number, got \"x\""),
                };
                let e = reject(&|t| *t = wrong.clone());
                assert_eq!(
                    (e.field.as_str(), e.message.as_str()),
                    (path.as_str(), expected),
                    "{e}"
                );
                *checked += 1;
            }
        }
    }
    let doc = Policy::from_toml(doc, None).unwrap().to_json_value();
    let mut checked = 0;
    walk(&doc, &doc, &mut Vec::new(), &mut checked);
    assert!(checked > 20, "only {checked} fields checked");
}

/// A wrong value is named by the path serde walked to it, wherever the document writes it:
/// an array element, an inline table, a dotted key, a table that exists only through
/// `[kinds.x]` headers.
#[rstest]
#[case(
    "[[limit]]\nname = 'a'\n\n[[limit]]\nname = 'b'\nper = ['x', 3]\n",
    6,
    "limit[1].per[1]"
)]
#[case(
    "[resources]\nthreads = 1\n[kinds.tape-backup]\ncost = { threads = 'x' }\n",
    4,
    "kinds.tape-backup.cost.threads"
)]
#[case(
    "[kinds.tape-backup]\ncost = { threads = 1 }\n[kinds.backup]\ncost.threads = 'x'\n",
    4,
    "kinds.backup.cost.threads"
)]
#[case(
    "[[schedule]]\nname = 's'\nwhen = 'daily'\njob = { kind = 'a', attrs = { x = 1 } }\n",
    4,
    "schedule[0].job.attrs.x"
)]
#[case(
    "[global]\nmax_running = 1\n[[nodes.rule]]\nselector = ''\nmax_running = [\n  1,\n]\n",
    5,
    "nodes.rule[0].max_running"
)]
fn errors_name_the_path_of_their_value(
    #[case] text: &str,
    #[case] line: usize,
    #[case] field: &str,
) {
    let e = Policy::from_toml(text, None).expect_err(text);
    assert_eq!((e.line, e.field.as_str()), (Some(line), field), "{e}");
    assert!(e.message.starts_with("expected"), "{e}");
}
