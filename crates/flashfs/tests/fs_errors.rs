//! A commit that fails part way (not a power cut: the device reports an error and keeps
//! running) returns the file system to the version on flash, and a later sync really
//! writes a new one.

mod common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use common::*;
use flashfs::media::tag::{SegHeader, Tag, TagState};
use flashfs::media::HeaderState;
use flashfs::{Error, Fs, SegGeometry, Segments};

/// A device whose barriers fail while `fail` is set.
struct FailingSync<D> {
    dev: D,
    fail: Rc<Cell<bool>>,
}

impl<D: Segments> Segments for FailingSync<D> {
    fn geometry(&self) -> SegGeometry {
        self.dev.geometry()
    }
    fn bank_of(&self, seg: u32) -> u32 {
        self.dev.bank_of(seg)
    }
    fn read_header(&mut self, seg: u32) -> flashfs::Result<HeaderState> {
        self.dev.read_header(seg)
    }
    fn write_header(&mut self, seg: u32, header: &SegHeader) -> flashfs::Result<()> {
        self.dev.write_header(seg, header)
    }
    fn read_tags(&mut self, seg: u32, out: &mut [TagState]) -> flashfs::Result<()> {
        self.dev.read_tags(seg, out)
    }
    fn written_end(&mut self, seg: u32, slots: u32) -> flashfs::Result<Option<u32>> {
        self.dev.written_end(seg, slots)
    }
    fn unwritten(&mut self, seg: u32) -> flashfs::Result<bool> {
        self.dev.unwritten(seg)
    }
    fn read_written_tags(
        &mut self,
        seg: u32,
        first: u32,
        out: &mut [TagState],
    ) -> flashfs::Result<()> {
        self.dev.read_written_tags(seg, first, out)
    }
    fn read_slot(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> flashfs::Result<()> {
        self.dev.read_slot(seg, slot, buf)
    }
    fn write_slot(&mut self, seg: u32, slot: u32, tag: &Tag, data: &[u8]) -> flashfs::Result<()> {
        self.dev.write_slot(seg, slot, tag, data)
    }
    fn slot_erased(&mut self, seg: u32, slot: u32) -> flashfs::Result<bool> {
        self.dev.slot_erased(seg, slot)
    }
    fn risks_earlier_slot(&self, slot: u32) -> bool {
        self.dev.risks_earlier_slot(slot)
    }
    fn units_per_segment(&self) -> u32 {
        self.dev.units_per_segment()
    }
    fn patch_align(&self) -> u32 {
        self.dev.patch_align()
    }
    fn reserved_slots(&self) -> u32 {
        self.dev.reserved_slots()
    }
    fn can_patch(&self) -> bool {
        self.dev.can_patch()
    }
    fn patch_slot(&mut self, seg: u32, slot: u32, off: usize, b: &[u8]) -> flashfs::Result<()> {
        self.dev.patch_slot(seg, slot, off, b)
    }
    fn erase(&mut self, seg: u32, background: bool) -> flashfs::Result<()> {
        self.dev.erase(seg, background)
    }
    fn is_bad(&mut self, seg: u32) -> flashfs::Result<bool> {
        self.dev.is_bad(seg)
    }
    fn is_retired(&mut self, seg: u32) -> flashfs::Result<bool> {
        self.dev.is_retired(seg)
    }
    fn mark_bad(&mut self, seg: u32) -> flashfs::Result<()> {
        self.dev.mark_bad(seg)
    }
    fn sync(&mut self) -> flashfs::Result<()> {
        if self.fail.get() {
            return Err(Error::Io);
        }
        self.dev.sync()
    }
    fn power_cut(&mut self) {
        self.dev.power_cut()
    }
    fn resume_slot(&mut self, seg: u32, used: u32) -> flashfs::Result<Option<u32>> {
        self.dev.resume_slot(seg, used)
    }
    fn now(&self) -> Duration {
        self.dev.now()
    }
    fn idle(&mut self, d: Duration) {
        self.dev.idle(d)
    }
    fn erase_time(&self) -> Duration {
        self.dev.erase_time()
    }
}

fn failed_commit_returns_to_the_version_on_flash<D: Segments>(dev: D) {
    let fail = Rc::new(Cell::new(false));
    let dev = FailingSync {
        dev,
        fail: fail.clone(),
    };
    let mut fs = Fs::format(dev, fs_config()).unwrap();
    fs.write_file(b"/kept", b"synced").unwrap();
    fs.sync().unwrap();
    // Enough files that the index has a few levels, then a few changes since the last
    // commit (fewer than the commit budget, so none commits on its own).
    for i in 0..40 {
        fs.write_file(format!("/old{i}").as_bytes(), b"synced too")
            .unwrap();
    }
    fs.sync().unwrap();
    let commits = fs.commit_count();
    for i in 0..3 {
        fs.write_file(format!("/lost{i}").as_bytes(), b"never synced")
            .unwrap();
    }
    assert_eq!(
        fs.commit_count(),
        commits,
        "the changes committed on their own"
    );
    fail.set(true);
    assert_eq!(fs.sync(), Err(Error::Io));
    fail.set(false);
    // Back to the version on flash: the unsynced files are gone, the synced one is there.
    assert_eq!(fs.commit_count(), commits);
    assert_eq!(fs.stat_path(b"/lost0"), Err(Error::NotFound));
    assert_eq!(fs.read_file(b"/kept").unwrap(), b"synced");
    assert_eq!(fs.read_file(b"/old39").unwrap(), b"synced too");
    let report = fs.check(false).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    // A new change and sync really commit, and survive a remount.
    fs.write_file(b"/after", b"durable").unwrap();
    fs.sync().unwrap();
    assert_eq!(fs.commit_count(), commits + 1);
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    assert_eq!(fs.read_file(b"/after").unwrap(), b"durable");
    assert_eq!(fs.read_file(b"/kept").unwrap(), b"synced");
    assert_eq!(fs.stat_path(b"/lost0"), Err(Error::NotFound));
    let report = fs.check(false).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

#[test]
fn failed_commit_on_nand() {
    failed_commit_returns_to_the_version_on_flash(nand());
}

#[test]
fn failed_commit_on_nor_with_spare_pointers() {
    failed_commit_returns_to_the_version_on_flash(nor(true));
    failed_commit_returns_to_the_version_on_flash(nor(false));
}

/// A file read (its extent map kept in RAM), then changed and read in small pieces (its
/// blocks kept in the read cache), then the commit fails: reads show the version on flash
/// again, not the extents or blocks of the lost changes.
fn failed_commit_forgets_extent_maps<D: Segments>(dev: D) {
    use flashfs::fs::{SetAttr, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE};
    let fail = Rc::new(Cell::new(false));
    let dev = FailingSync {
        dev,
        fail: fail.clone(),
    };
    let mut fs = Fs::format(dev, fs_config()).unwrap();
    let bs = fs.block_size() as usize;
    let synced: Vec<u8> = (0..6 * bs).map(|i| (i % 251) as u8).collect();
    let ino = fs.write_file(b"/f", &synced).unwrap().ino;
    fs.sync().unwrap();
    assert_eq!(fs.read_file(b"/f").unwrap(), synced);
    fs.write(ino, bs as u64 + 3, &vec![7; 2 * bs]).unwrap();
    let mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
    fs.fallocate(ino, mode, 4 * bs as u64, bs as u64).unwrap();
    let set = SetAttr {
        size: Some(5 * bs as u64 + 1),
        ..Default::default()
    };
    fs.setattr(ino, set).unwrap();
    assert_ne!(fs.read_file(b"/f").unwrap(), synced);
    // Small reads keep the changed blocks in the read cache.
    let small_reads = |fs: &mut Fs<_>| {
        let size = fs.getattr(ino).unwrap().inode.size as usize;
        let mut out = vec![0; size];
        for (i, c) in out.chunks_mut(40).enumerate() {
            fs.read(ino, i as u64 * 40, c).unwrap();
        }
        out
    };
    assert_eq!(small_reads(&mut fs), fs.read_file(b"/f").unwrap());
    fail.set(true);
    assert_eq!(fs.sync(), Err(Error::Io));
    fail.set(false);
    assert_eq!(fs.read_file(b"/f").unwrap(), synced);
    assert_eq!(small_reads(&mut fs), synced);
    let mut block = vec![0; bs];
    fs.read(ino, 4 * bs as u64, &mut block).unwrap();
    assert_eq!(block, synced[4 * bs..5 * bs]);
    let report = fs.check(false).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

#[test]
fn failed_commit_forgets_extent_maps_on_nand() {
    failed_commit_forgets_extent_maps(nand());
}

#[test]
fn failed_commit_forgets_extent_maps_on_nor() {
    failed_commit_forgets_extent_maps(nor(false));
}
