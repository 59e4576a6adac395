//! Policy documents: every design example parses, round trips through TOML and JSON, the
//! error table (line, field and text of every rule), diffs, and snapshots of what users
//! see (error texts, `policy show` of the examples).

mod confinement;
mod diff;
mod errors;
mod notify;
mod parse;
mod rpo;
mod snapshots;
mod windows;

/// Every example TOML block of design `policy.md`, `schedules.md` and `item-blocks.md`,
/// in one document.
pub(crate) const DESIGN_EXAMPLES: &str = r#"
[global]
max_running = 8                 # at most 8 jobs hold slots at once

[[limit]]                       # Bacula "Maximum Concurrent Jobs" per Storage
name = "per-datastore"
per = ["datastore"]             # one counter per distinct value of attrs.datastore
max = 2
values = { ds-fast = 4 }        # optional per-value override

[[limit]]                       # PBS RFC: per job type
name = "per-kind"
per = ["kind"]
values = { backup = 6, sync = 1, verify = 2, prune = 1, gc = 1 }

[[limit]]                       # PBS RFC: per user / API token
name = "per-owner"
per = ["owner"]
max = 3

[[limit]]                       # a limit can apply to some jobs only
name = "restores"
match = "kind in (restore, data-download)"
max = 4

[nodes]
max_running = 2                 # every node, unless a rule says otherwise (Velero "globalConfig")
prepare_queue = 1               # per node: how many jobs may hold prepared resources beyond max_running
ttl = "30s"                     # a node whose agent is silent this long is lost

[[nodes.rule]]
selector = "beta.kubernetes.io/instance-type=Standard_B4ms"
max_running = 3
[[nodes.rule]]
selector = "kubernetes.io/hostname in (node-1, node-2), !gpu"
max_running = 5
[[nodes.rule]]
selector = "role=database"
max_running = 0                 # no data movement on database nodes

[resources]
threads = 10
memory_gib = 64

[kinds.tape-backup]
cost = { threads = 4, memory_gib = 8 }
[kinds.backup]
cost = { threads = 1 }

[[conflict]]
keys = ["datastore", "group"]   # two jobs with equal values for all keys never hold slots together
[[conflict]]
match = "kind=backup"
overlap = "namespaces"          # list-valued attr ("a,b"; "*" = all): overlapping sets conflict

[leases]
ttl = "30s"                     # an admitted job's holder must renew within this
[kinds.data-upload]
retry = { times = 3, interval = "30s" }   # default: times = 0

[[schedule]]
name = "verify-ds1"
when = "sat 03:00"
job = { kind = "verify", attrs = { datastore = "ds1" }, priority = -1 }
duplicates = "skip"          # skip | queue | cancel-queued | cancel-running  (Bacula: Allow/Cancel ... Duplicates)
misfire = "run-once"         # after downtime: run-once | skip
max_start_delay = "2h"       # Bacula Max Start Delay: give up if not admitted by then
jitter = "5m"                # spread many schedules that share a time

[[blocks.rule]]
match = "kind=Pod, app.kubernetes.io/managed-by=cass-operator"
group_by = ["label:cassandra.datastax.com/cluster"]   # all three Cassandra pods together
"#;

/// Every other key the design names, each set once.
pub(crate) const OTHER_KEYS: &str = r#"
[global]
max_running = 8
prepare_queue = 4

[nodes]
max_running = 3
[nodes.resources]
gpus = 1

[queue]
aging = "10m"
strict = true
reserve_after = "2m"
fair_share = "owner"

[owners.alice]
weight = 2
max_priority = 5

[kinds.resource-backup]
priority = 1
coordinator = true
two_stage = false
prepare_timeout = "10m"
cost = { gpus = 1 }

[quotas]
max_attrs = 8
max_attr_value_bytes = 256
max_message_bytes = 4096
max_queued_per_owner = 100

[retention]
days = 30

[[schedule]]
name = "nightly"
when = "mon..fri 02:00"
job = { kind = "data-upload", node_selector = "zone=eu-1", executor = "agent", cost = { gpus = 1 }, two_stage = true, max_wait = "1h", max_run = "6h" }
duplicates = "cancel-queued"
misfire = "skip"
retry = { times = 3, interval = "30m" }

[blocks]
exec_template = ["kubectl", "exec", "{pod}", "--", "{command}"]
volume_group_label = "example.com/group"
data_upload_selector = "zone=eu-1"
restore_wait_image = "registry.example/lockgate:0.1"
"#;
