//! Union-find over items, and the deterministic order of blocks and of items in a block.
//!
//! Invariants:
//! - items in a block: ordered items first in listed order, then pods, PVCs, PVs, other
//!   kinds, each group by item name;
//! - blocks: those holding ordered items first, by their earliest-listed ordered item; then
//!   every other block by its smallest item name. Names are unique, so the order is total
//!   and the same input always gives the same blocks in the same order.

/// Disjoint sets of item positions (union by size, path halving).
pub(super) struct UnionFind {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl UnionFind {
    pub fn new(n: usize) -> UnionFind {
        UnionFind {
            parent: (0..n as u32).collect(),
            size: vec![1; n],
        }
    }

    pub fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let grand = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = grand;
            x = grand;
        }
        x
    }

    pub fn union(&mut self, a: u32, b: u32) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return;
        }
        let (big, small) = if self.size[ra as usize] >= self.size[rb as usize] {
            (ra, rb)
        } else {
            (rb, ra)
        };
        self.parent[small as usize] = big;
        self.size[big as usize] += self.size[small as usize];
    }
}

/// Sort keys of one item.
pub(super) struct ItemKey<'a> {
    /// Position in the `ordered` list, `u32::MAX` when not listed.
    pub ordered: u32,
    /// 0 pods, 1 PVCs, 2 PVs, 3 the rest.
    pub rank: u8,
    /// Full item name.
    pub name: &'a str,
}

/// Blocks as compressed rows: block `b` holds `items[starts[b]..starts[b + 1]]`.
pub(super) struct Blocks {
    pub starts: Vec<u32>,
    pub items: Vec<u32>,
    /// The first `ordered` blocks hold ordered items.
    pub ordered: usize,
}

/// Builds the blocks from `(root, item)` pairs, `key(item)` giving each item's sort keys.
pub(super) fn blocks<'a>(mut members: Vec<(u32, u32)>, key: impl Fn(u32) -> ItemKey<'a>) -> Blocks {
    members.sort_unstable();
    let mut items: Vec<u32> = members.iter().map(|&(_, i)| i).collect();
    let mut ranges = Vec::new();
    let mut start = 0;
    for end in 1..=members.len() {
        if end == members.len() || members[end].0 != members[start].0 {
            ranges.push((start, end));
            start = end;
        }
    }
    drop(members);
    let cmp_items = |a: &u32, b: &u32| {
        let (ka, kb) = (key(*a), key(*b));
        (ka.ordered, ka.rank, ka.name).cmp(&(kb.ordered, kb.rank, kb.name))
    };
    let mut heads: Vec<(u32, u32, usize, usize)> = ranges
        .into_iter()
        .map(|(s, e)| {
            let slice = &mut items[s..e];
            slice.sort_unstable_by(cmp_items);
            let smallest = *slice
                .iter()
                .min_by(|a, b| key(**a).name.cmp(key(**b).name))
                .expect("non-empty");
            (key(slice[0]).ordered, smallest, s, e)
        })
        .collect();
    heads.sort_unstable_by(|a, b| (a.0, key(a.1).name).cmp(&(b.0, key(b.1).name)));
    let mut out = Blocks {
        starts: Vec::with_capacity(heads.len() + 1),
        items: Vec::with_capacity(items.len()),
        ordered: 0,
    };
    for (ordered, _, s, e) in heads {
        out.starts.push(out.items.len() as u32);
        out.items.extend_from_slice(&items[s..e]);
        out.ordered += usize::from(ordered != u32::MAX);
    }
    out.starts.push(out.items.len() as u32);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_find_joins_transitively() {
        let mut uf = UnionFind::new(5);
        uf.union(0, 1);
        uf.union(3, 1);
        assert_eq!(uf.find(0), uf.find(3));
        assert_ne!(uf.find(0), uf.find(2));
    }

    #[test]
    fn blocks_are_ordered_by_ordered_position_then_smallest_name() {
        let names = ["c", "a", "b", "d"];
        let ordered = [u32::MAX, u32::MAX, u32::MAX, 0];
        let members = vec![(7, 0), (7, 1), (9, 2), (4, 3)];
        let b = blocks(members, |i| ItemKey {
            ordered: ordered[i as usize],
            rank: 3,
            name: names[i as usize],
        });
        assert_eq!(b.ordered, 1);
        assert_eq!(b.starts, vec![0, 1, 3, 4]);
        assert_eq!(b.items, vec![3, 1, 0, 2]);
    }
}
