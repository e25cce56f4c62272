//! Where to cut a run of entries into nodes, and what separator to put between them.
//!
//! Entries vary in size (keys up to 300 bytes, values up to a quarter node), so a node that
//! overflows by one entry may need cutting into three, and "half full" is a matter of bytes.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

/// Limits of one node.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Bytes available for entries.
    pub cap: usize,
    /// Most entries a node may hold.
    pub max_entries: usize,
}

impl Limits {
    /// Whether entries `a..b` fit in one node, `bytes(a, b)` being their encoded size.
    fn fits(&self, bytes: &impl Fn(usize, usize) -> usize, a: usize, b: usize) -> bool {
        b - a <= self.max_entries && bytes(a, b) <= self.cap
    }
}

/// The last entry added to a dirty node: where, and whether it came right after the one
/// added before it. Kept in RAM only, to steer the node's next split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insert {
    /// Its position in the node.
    pub at: usize,
    /// Whether it extends an ascending run of insertions.
    pub ascending: bool,
}

impl Insert {
    /// An entry added at `at` to a node that now holds `len`, after `prev`. A node with no
    /// history counts an entry added at its end as ascending.
    pub fn after(prev: Option<Insert>, at: usize, len: usize) -> Insert {
        let ascending = match prev {
            Some(p) => at == p.at + 1,
            None => at > 0 && at + 1 == len,
        };
        Insert { at, ascending }
    }
}

/// The cut for a node of `n` entries that overflowed while a run of ascending insertions
/// reached position `at` (a log appended to, a record file growing at its end): the left
/// node stays as full as it is, since the run goes on to the right and would leave an even
/// cut's left half half-empty for good. The cut falls after the new entry, when the entries
/// after it (another file's) fit apart, or else just before it. `None` if neither fits.
pub(crate) fn plan_ascending(
    n: usize,
    bytes: impl Fn(usize, usize) -> usize,
    lim: Limits,
    at: usize,
) -> Option<Vec<usize>> {
    let fits = |a, b| lim.fits(&bytes, a, b);
    [at + 1, at]
        .into_iter()
        .find(|&c| c > 0 && c < n && fits(0, c) && fits(c, n))
        .map(|c| vec![c, n - c])
}

/// Cuts `n` entries into as few nodes as fit, as evenly as possible; returns the entries
/// per node. `bytes(a, b)` is the encoded size of entries `a..b` as one node (it depends on
/// the whole run: a branch does not store its first key, and a node stores its keys' common
/// prefix once). `None` if one entry alone does not fit, which the tree's limits on keys and
/// values rule out.
pub(crate) fn plan(
    n: usize,
    bytes: impl Fn(usize, usize) -> usize,
    lim: Limits,
) -> Option<Vec<usize>> {
    let fits = |a, b| lim.fits(&bytes, a, b);
    if n == 0 || fits(0, n) {
        return Some(vec![n]);
    }
    // Two nodes: the most even cut that fits. Ties go to cuts that leave every node two
    // entries (a branch with one child adds height without fan-out), then to the one that
    // leaves more on the left, where ascending inserts no longer reach.
    let best = (1..n)
        .filter(|&i| fits(0, i) && fits(i, n))
        .min_by_key(|&i| (i.min(n - i) < 2, bytes(0, i).abs_diff(bytes(i, n)), n - i));
    if let Some(i) = best {
        return Some(vec![i, n - i]);
    }
    // More: fill each node in turn. A run's size only grows as it gains entries and only
    // shrinks as its start moves right, so greedy filling uses the fewest nodes.
    let mut parts = Vec::new();
    let mut a = 0;
    while a < n {
        if !fits(a, a + 1) {
            return None;
        }
        let mut b = a + 1;
        while b < n && fits(a, b + 1) {
            b += 1;
        }
        parts.push(b - a);
        a = b;
    }
    Some(parts)
}

/// Bytes two keys share at their start.
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The shortest key `s` with `left < s <= right`: a separator in a branch between a child
/// ending at `left` and one starting at `right`. Short separators keep branches wide.
pub(crate) fn separator(left: &[u8], right: &[u8]) -> Box<[u8]> {
    let common = common_prefix(left, right);
    // `right > left`, so `right` either extends `left` or first differs (and is greater) at
    // `common`: either way its first `common + 1` bytes exceed `left`.
    let n = (common + 1).min(right.len());
    right[..n].into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim(cap: usize, max_entries: usize) -> Limits {
        Limits { cap, max_entries }
    }

    /// Plans over plain entry sizes, `first[i]` when entry `i` opens a node.
    fn plan_sizes(first: &[usize], rest: &[usize], l: Limits) -> Option<Vec<usize>> {
        let bytes = |a: usize, b: usize| first[a] + rest[a + 1..b].iter().sum::<usize>();
        plan(rest.len(), bytes, l)
    }

    #[test]
    fn an_ascending_run_keeps_the_left_node_full() {
        let bytes = |a: usize, b: usize| (b - a) * 10;
        // The run's entry last: the left node keeps all it had, the new entry goes right.
        assert_eq!(plan_ascending(7, bytes, lim(60, 99), 6), Some(vec![6, 1]));
        // Entries of another run after it: cut after the new entry.
        assert_eq!(plan_ascending(7, bytes, lim(60, 99), 4), Some(vec![5, 2]));
        // The new entry does not fit with what came before it: cut just before it.
        assert_eq!(plan_ascending(7, bytes, lim(40, 99), 4), Some(vec![4, 3]));
        // Neither cut leaves two nodes that fit: the caller cuts evenly.
        assert_eq!(plan_ascending(9, bytes, lim(40, 99), 4), None);
        assert_eq!(plan_ascending(7, bytes, lim(60, 99), 0), Some(vec![1, 6]));
    }

    #[test]
    fn an_insert_is_ascending_after_the_one_before_or_at_the_end() {
        let first = Insert::after(None, 5, 6);
        assert!(first.ascending);
        assert!(Insert::after(Some(first), 6, 7).ascending);
        assert!(!Insert::after(Some(first), 2, 7).ascending);
        assert!(!Insert::after(None, 3, 6).ascending);
        // An empty node's first entry is not a run yet.
        assert!(!Insert::after(None, 0, 1).ascending);
    }

    #[test]
    fn fits_in_one() {
        assert_eq!(plan_sizes(&[10, 10], &[10, 10], lim(20, 9)), Some(vec![2]));
        assert_eq!(plan_sizes(&[], &[], lim(20, 9)), Some(vec![0]));
    }

    #[test]
    fn splits_evenly_in_two() {
        let s = [10; 7];
        assert_eq!(plan_sizes(&s, &s, lim(60, 99)), Some(vec![4, 3]));
        // Entry counts bind before bytes.
        assert_eq!(plan_sizes(&s, &s, lim(1000, 4)), Some(vec![4, 3]));
    }

    #[test]
    fn a_big_entry_in_the_middle_needs_three() {
        let s = [100, 432, 100];
        assert_eq!(plan_sizes(&s, &s, lim(496, 99)), Some(vec![1, 1, 1]));
        assert_eq!(plan_sizes(&s, &s, lim(431, 99)), None);
    }

    #[test]
    fn branch_first_entries_are_smaller() {
        // [e0 e1 | e2]: the cut turns e2 into a first entry of 10 bytes.
        let first = [10, 10, 10];
        let rest = [10, 310, 310];
        assert_eq!(plan_sizes(&first, &rest, lim(496, 99)), Some(vec![2, 1]));
        // With four, both sides keep two children even at some cost in balance.
        let first = [10; 4];
        let rest = [10, 10, 10, 300];
        assert_eq!(plan_sizes(&first, &rest, lim(320, 99)), Some(vec![2, 2]));
    }

    #[test]
    fn separators_are_short_and_between() {
        assert_eq!(&*separator(b"abc", b"abd"), b"abd");
        assert_eq!(&*separator(b"abc", b"b"), b"b");
        assert_eq!(&*separator(b"ab", b"abzz"), b"abz");
        assert_eq!(&*separator(b"apple", b"banana"), b"b");
        assert_eq!(common_prefix(b"apple", b"apricot"), 2);
    }
}
