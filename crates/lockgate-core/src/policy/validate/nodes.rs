//! `[nodes]`: the default number, the prepare queue, the node TTL, the rules (with their
//! pressure guards) and the per-node pools.

use super::DEFAULT_NODE_TTL;
use super::{bad, count, guard, label_selector, opt_count, pools, positive_duration, Checked};
use crate::policy::locate::FieldPath;
use crate::policy::raw::RawNodes;
use crate::policy::{NodeRule, NodesPolicy};
use std::collections::BTreeMap;

pub(super) fn nodes_policy(
    n: &RawNodes,
    global_pools: &BTreeMap<String, u64>,
    p: &FieldPath,
) -> Checked<NodesPolicy> {
    let mut rules = Vec::new();
    for (i, r) in n.rule.iter().enumerate() {
        let rp = p.key("rule").at(i);
        rules.push(NodeRule {
            selector: label_selector(&r.selector, &rp.key("selector"))?,
            max_running: count(r.max_running, &rp.key("max_running"))?,
            guard: guard(r.guard.as_ref(), &rp.key("guard"))?,
        });
    }
    let resources = pools(&n.resources, &p.key("resources"))?;
    if let Some(pool) = resources.keys().find(|k| global_pools.contains_key(*k)) {
        return bad(
            &p.key("resources").key(pool),
            format!("pool {pool:?} is already declared in [resources], expected each pool either global ([resources]) or per node ([nodes.resources])"),
        );
    }
    Ok(NodesPolicy {
        max_running: opt_count(n.max_running, &p.key("max_running"))?,
        prepare_queue: opt_count(n.prepare_queue, &p.key("prepare_queue"))?.unwrap_or(0),
        ttl: positive_duration(&n.ttl, &p.key("ttl"))?.unwrap_or(DEFAULT_NODE_TTL),
        rules,
        resources,
    })
}
