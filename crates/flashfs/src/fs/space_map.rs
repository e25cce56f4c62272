//! The saved free-space map (SPEC.md §8.5): what lets a mount skip the walk of the index.
//!
//! A map holds one bit per block of the volume, written to consecutive free blocks by a
//! commit; later commits name it with a *delta*, the runs whose state changed since, at the
//! end of the block 0 they write. On NAND every commit writes block 0 anew anyway, so a
//! commit costs no extra program until the delta outgrows the room beside the superblock
//! record; that commit writes a new map instead (and the old one is freed with it). Where
//! superblocks are appended in place (reprogrammable NOR) a delta would take the room of
//! appended records, so commits name the map as stale and a mount after a power cut walks;
//! the unmount writes block 0 anew with a current map, so a clean mount never walks.
//!
//! The map describes the committed version exactly, as the walk would find it: the blocks
//! neither free, nor released by the working version (which the commit does not use), nor
//! an open transaction's (which no commit names). `fsck` checks the same identity.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;

use super::layout::{self, MapBlock, SpaceRef, SpaceRun, Superblock};
use super::space::{add_run, in_runs, runs_in, Space};
use super::Fs;
use crate::error::{Error, Result};
use crate::log::Head;
use crate::media::Segments;

impl<D: Segments> Fs<D> {
    /// Blocks the saved free-space map takes on this volume (SPEC.md §8.5); 0 where it
    /// keeps none.
    pub fn space_map_blocks(&self) -> u64 {
        // A block device without checkpoints scans at every mount, and a mount after a
        // scan walks (see `load_space_map`): no map is worth keeping there.
        if self.sb.sectors >= layout::MAP_MAX_BLOCKS || self.ftl().log().volume().anchors.is_none()
        {
            return 0;
        }
        self.map_len()
    }

    /// Blocks a map of this volume takes, whether it keeps one or not (one the superblock
    /// names is in use whatever the block device does now).
    pub(super) fn map_len(&self) -> u64 {
        layout::space_map_blocks(self.sb.sectors, self.sb.block_size as usize)
    }

    /// The blocks of the saved free-space map the last commit names, if any (current or
    /// stale).
    pub fn space_map(&self) -> Option<core::ops::Range<u64>> {
        let at = self.sb.space.map()?;
        Some(at..at + self.map_len())
    }

    /// The blocks of the saved map that hold nothing: a map of free runs leaves those past
    /// its own unwritten (none for a map of bits, or a first block that does not read).
    pub(super) fn space_map_unwritten(&mut self) -> core::ops::Range<u64> {
        let Some(map) = self.space_map() else {
            return 0..0;
        };
        let mut buf = vec![0; self.sb.block_size as usize];
        match self.tree.store_mut().read(map.start, &mut buf) {
            Ok(()) => match layout::runs_map_len(&buf) {
                Some(n) => map.start.saturating_add(n).min(map.end)..map.end,
                None => 0..0,
            },
            Err(_) => 0..0,
        }
    }

    /// Decides what the fresh block 0 of commit `sb` names (setting `sb.space`): the delta
    /// over the current map where it fits, else a new map, written here. Returns the delta
    /// to write after the record (the map's commit and the runs).
    pub(super) fn space_for_commit(
        &mut self,
        sb: &mut Superblock,
    ) -> Result<Option<(u64, Vec<SpaceRun>)>> {
        let blocks = self.space_map_blocks();
        let bs = self.sb.block_size as usize;
        let old = self.sb.space.map();
        if let Some(at) = old {
            let unused = self.unused_now();
            let store = self.tree.store();
            if let Some((map_commit, changed)) = store.space.changed_runs(&unused) {
                let runs = delta_runs(&store.space, &unused, &changed, layout::delta_capacity(bs));
                if let Some(runs) = runs {
                    sb.space = SpaceRef::Current {
                        at,
                        delta: runs.len() as u16,
                    };
                    return Ok(Some((map_commit, runs)));
                }
            }
        }
        // A new map: the old one is free once this commit is durable.
        let len = self.map_len();
        let space = &mut self.tree.store_mut().space;
        if let Some(at) = old {
            space.release_node(at, len);
        }
        sb.space = SpaceRef::None;
        if blocks == 0 {
            return Ok(None);
        }
        let Some(at) = space.alloc_run(blocks) else {
            return Ok(None);
        };
        let unused = self.unused_now();
        let store = self.tree.store_mut();
        // Programmed below while the free space is borrowed: dropped from the read cache
        // first, as every program of a sector does.
        store.rc.invalidate(at, blocks);
        let mut buf = vec![0; bs];
        // The committed version's free runs, where they take no more blocks than the bits:
        // a volume written in order has few, and a mount then reads a block or two
        // whatever the volume's size (and checks a run where it would check a bit per
        // block). The map keeps the bits' blocks; the rest stay unwritten.
        // Counted first, then encoded a block's worth at a time: no second list of them.
        let count = committed_free(&store.space, &unused, sb.sectors).count();
        let runs_blocks = layout::runs_map_blocks(count, bs);
        if runs_blocks <= blocks {
            let mut part = Vec::new();
            let mut runs = committed_free(&store.space, &unused, sb.sectors);
            for i in 0..runs_blocks {
                let head = (i == 0).then_some((runs_blocks as u32, count as u32));
                part.clear();
                part.extend(runs.by_ref().take(layout::runs_per_map_block(bs, i == 0)));
                layout::encode_runs_map_block(&mut buf, sb.commit, i as u32, head, &part);
                store.ftl.write_to(at + i, &buf, Some(Head::Meta))?;
                store.map_writes += 1;
            }
        } else {
            for i in 0..blocks {
                let space = &store.space;
                layout::encode_map_block(&mut buf, sb.commit, i as u32, sb.sectors, |k| {
                    !space.is_free(k) && !in_runs(&unused, k)
                });
                store.ftl.write_to(at + i, &buf, Some(Head::Meta))?;
                store.map_writes += 1;
            }
        }
        sb.space = SpaceRef::Current { at, delta: 0 };
        Ok(Some((sb.commit, Vec::new())))
    }

    /// Sectors that are not free but that the working version does not use.
    fn unused_now(&self) -> BTreeMap<u64, u64> {
        let space = &self.tree.store().space;
        space.unused(self.tree.tx.held(space.tx.as_ref()))
    }

    /// The committed version's space from the saved map and the delta in `block0` (the
    /// newest superblock's block), or `None` where the superblock names no current map or
    /// the map does not read back whole: the mount walks the index instead.
    pub(super) fn load_space_map(&mut self, block0: &[u8]) -> Result<Option<Space>> {
        let SpaceRef::Current { at, .. } = self.sb.space else {
            return Ok(None);
        };
        // A block device that scanned brings back every sector forgotten since its data
        // was written, also under extents allocated but never written, which only the
        // walk finds to forget again (SPEC.md §8.5); the scan costs more than the walk.
        if !self.ftl().log().restored() {
            return Ok(None);
        }
        let blocks = self.map_len();
        let sectors = self.sb.sectors;
        if blocks == 0 || at.checked_add(blocks).is_none_or(|end| end > sectors) {
            return Ok(None);
        }
        let Ok((map_commit, delta)) = layout::decode_delta(block0, &self.sb) else {
            return Ok(None);
        };
        // Runs come in order, apart, within the volume (as commits write them).
        let mut end = 0;
        for r in &delta {
            if r.start < end || r.start.checked_add(r.len).is_none_or(|e| e > sectors) {
                return Ok(None);
            }
            end = r.start + r.len;
        }
        let mut buf = vec![0; self.sb.block_size as usize];
        if !self.read_map_block(at, &mut buf)? {
            return Ok(None);
        }
        let free = match layout::decode_map_block(&buf, map_commit, 0) {
            Ok(MapBlock::Runs {
                head: Some(head),
                runs,
            }) => {
                let first: Vec<(u64, u64)> = MapBlock::runs(runs).collect();
                match self.load_runs(at, blocks, map_commit, head, first, &mut buf)? {
                    Some(free) => apply_delta(&free, &delta),
                    None => return Ok(None),
                }
            }
            Ok(MapBlock::Bits(_)) => {
                match self.load_bits(at, blocks, map_commit, &delta, &mut buf)? {
                    Some(free) => free,
                    None => return Ok(None),
                }
            }
            Ok(MapBlock::Runs { head: None, .. }) | Err(_) => return Ok(None),
        };
        let space = Space::from_free(free);
        Ok(Some(space.with_changes(
            map_commit,
            delta.iter().map(|r| (r.start, r.len)),
        )))
    }

    /// Reads block `k` of the map into `buf`; false if it does not read back.
    fn read_map_block(&mut self, k: u64, buf: &mut [u8]) -> Result<bool> {
        match self.tree.store_mut().read(k, buf) {
            Ok(()) => Ok(true),
            Err(Error::Corrupt(_) | Error::Damaged { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The free runs of a map of bits at `at` (`blocks` of them, its first in `buf`), the
    /// delta's runs (in order) overriding the bits they cover; one block in RAM at a time.
    fn load_bits(
        &mut self,
        at: u64,
        blocks: u64,
        map_commit: u64,
        delta: &[SpaceRun],
        buf: &mut [u8],
    ) -> Result<Option<Vec<(u64, u64)>>> {
        let sectors = self.sb.sectors;
        let bits_per_block = layout::map_bits(self.sb.block_size as usize);
        let mut free = Vec::new();
        let mut run: Option<(u64, u64)> = None;
        let mut runs = delta.iter().peekable();
        for i in 0..blocks {
            if i > 0 && !self.read_map_block(at + i, buf)? {
                return Ok(None);
            }
            let Ok(MapBlock::Bits(bits)) = layout::decode_map_block(buf, map_commit, i as u32)
            else {
                return Ok(None);
            };
            let first = i * bits_per_block;
            for k in first..(first + bits_per_block).min(sectors) {
                while runs.next_if(|r| r.start + r.len <= k).is_some() {}
                let used = match runs.peek() {
                    Some(r) if r.start <= k => r.used,
                    _ => {
                        let j = (k - first) as usize;
                        bits[j / 8] & (1 << (j % 8)) != 0
                    }
                };
                run = match (used, run) {
                    (true, Some(r)) => {
                        free.push(r);
                        None
                    }
                    (true, None) => None,
                    (false, Some((a, n))) => Some((a, n + 1)),
                    (false, None) => Some((k, 1)),
                };
            }
        }
        free.extend(run);
        Ok(Some(free))
    }

    /// The free runs of a runs map at `at` (`first`, those of its first block; `head`, its
    /// blocks and runs, as the first block says), checked: in order, apart, within the
    /// volume, as many as said, in no more blocks than the map keeps (`blocks`).
    fn load_runs(
        &mut self,
        at: u64,
        blocks: u64,
        map_commit: u64,
        (n_blocks, n_runs): (u32, u32),
        first: Vec<(u64, u64)>,
        buf: &mut [u8],
    ) -> Result<Option<Vec<(u64, u64)>>> {
        let bs = self.sb.block_size as usize;
        let (n_blocks, n_runs) = (u64::from(n_blocks), n_runs as usize);
        if n_blocks == 0 || n_blocks > blocks || layout::runs_map_blocks(n_runs, bs) != n_blocks {
            return Ok(None);
        }
        let mut free = first;
        free.truncate(n_runs);
        for i in 1..n_blocks {
            if !self.read_map_block(at + i, buf)? {
                return Ok(None);
            }
            let Ok(MapBlock::Runs { head: None, runs }) =
                layout::decode_map_block(buf, map_commit, i as u32)
            else {
                return Ok(None);
            };
            let want = n_runs - free.len();
            free.extend(MapBlock::runs(runs).take(want));
        }
        let mut end = 0;
        for &(a, n) in &free {
            if n == 0 || a < end || a.checked_add(n).is_none_or(|e| e > self.sb.sectors) {
                return Ok(None);
            }
            end = a + n;
        }
        Ok((free.len() == n_runs).then_some(free))
    }
}

/// The runs of `sectors` the committed version does not use: free, or `unused` (free once
/// it is durable, or an open transaction's).
fn committed_free<'a>(
    space: &'a Space,
    unused: &'a BTreeMap<u64, u64>,
    sectors: u64,
) -> impl Iterator<Item = (u64, u64)> + 'a {
    union(
        space.free_in(0, sectors),
        unused.iter().map(|(&a, &n)| (a, n)),
    )
}

/// The union of two lists of runs (first, length), each in order and apart: in order, runs
/// that overlap or touch merged.
fn union(
    a: impl Iterator<Item = (u64, u64)>,
    b: impl Iterator<Item = (u64, u64)>,
) -> impl Iterator<Item = (u64, u64)> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    let mut run: Option<(u64, u64)> = None;
    core::iter::from_fn(move || loop {
        let next = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) if x.0 <= y.0 => a.next(),
            (Some(_), Some(_)) | (None, Some(_)) => b.next(),
            (Some(_), None) => a.next(),
            (None, None) => return run.take(),
        };
        let Some((s, n)) = next else {
            return run.take();
        };
        match run {
            Some((r, m)) if s <= r + m => run = Some((r, (r + m).max(s + n) - r)),
            Some(done) => {
                run = Some((s, n));
                return Some(done);
            }
            None => run = Some((s, n)),
        }
    })
}

/// Free runs `free` (in order, apart) with the delta's runs (in order, apart) overriding
/// what they cover.
fn apply_delta(free: &[(u64, u64)], delta: &[SpaceRun]) -> Vec<(u64, u64)> {
    let mut out = BTreeMap::new();
    let mut skip = 0;
    for &(a, n) in free {
        let end = a + n;
        while delta.get(skip).is_some_and(|r| r.start + r.len <= a) {
            skip += 1;
        }
        // The parts of the run no delta run covers.
        let mut k = a;
        for r in delta[skip..].iter().take_while(|r| r.start < end) {
            if r.start > k {
                add_run(&mut out, k, r.start - k);
            }
            k = k.max(r.start + r.len);
        }
        if k < end {
            add_run(&mut out, k, end - k);
        }
    }
    for r in delta.iter().filter(|r| !r.used) {
        add_run(&mut out, r.start, r.len);
    }
    out.into_iter().collect()
}

/// The runs of `changed` split by their state in the committed version (in use: neither
/// free nor `unused`), or `None` where they are more than `capacity`. Works run by run, not
/// block by block: a run changed since the map may span most of the volume.
fn delta_runs(
    space: &Space,
    unused: &BTreeMap<u64, u64>,
    changed: &BTreeMap<u64, u64>,
    capacity: usize,
) -> Option<Vec<SpaceRun>> {
    let mut runs: Vec<SpaceRun> = Vec::new();
    let mut push = |start: u64, len: u64, used: bool| -> Option<()> {
        if let Some(r) = runs
            .last_mut()
            .filter(|r| r.used == used && r.start + r.len == start)
        {
            r.len += len;
        } else if runs.len() == capacity {
            return None;
        } else {
            runs.push(SpaceRun { start, len, used });
        }
        Some(())
    };
    for (&a, &n) in changed {
        let end = a + n;
        // The blocks of the run that the commit does not use, merged.
        let mut holes = BTreeMap::new();
        for (s, l) in space.free_in(a, end).chain(runs_in(unused, a, end)) {
            add_run(&mut holes, s, l);
        }
        let mut k = a;
        for (s, l) in holes {
            if s > k {
                push(k, s - k, true)?;
            }
            push(s, l, false)?;
            k = s + l;
        }
        if k < end {
            push(k, end - k, true)?;
        }
    }
    Some(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delta_overrides_the_free_runs_it_covers() {
        let run = |start, len, used| SpaceRun { start, len, used };
        let free = [(0, 10), (20, 10), (40, 5)];
        // Taken: the middle of the first run and across the second's end; freed: a run
        // between, touching the third.
        let delta = [run(3, 2, true), run(25, 10, true), run(35, 5, false)];
        assert_eq!(
            apply_delta(&free, &delta),
            [(0, 3), (5, 5), (20, 5), (35, 10)]
        );
        assert_eq!(apply_delta(&free, &[]), free);
        assert_eq!(apply_delta(&[], &[run(7, 2, false)]), [(7, 2)]);
    }

    #[test]
    fn the_union_of_runs_merges_those_that_overlap_or_touch() {
        let a = [(0, 2), (10, 5), (30, 1)];
        let b = [(2, 3), (12, 8), (40, 2)];
        let got: Vec<_> = union(a.into_iter(), b.into_iter()).collect();
        assert_eq!(got, [(0, 5), (10, 10), (30, 1), (40, 2)]);
        assert_eq!(union(a.into_iter(), [].into_iter()).collect::<Vec<_>>(), a);
        assert_eq!(union([].into_iter(), [].into_iter()).count(), 0);
    }
}
