//! Power cuts at every device operation of small file-system scenarios, clean and torn:
//! after each, the volume mounts, `fsck` finds it clean, and it holds a state that existed —
//! every operation entirely applied or entirely absent, and everything a `fsync` or `sync`
//! acknowledged there byte for byte. Then random workloads are cut again and again, during
//! the work and during the recovery mount.

mod common;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use common::*;
use flashfs::fs::{
    Ino, RecordFormat, RenameFlags, SetAttr, XattrFlags, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE,
};
use flashfs::media::tag::{SegHeader, Tag, TagState};
use flashfs::media::HeaderState;
use flashfs::{Error, Fs, FsConfig, SegGeometry, Segments};
use flashfs_bench::torture::SimSegments as Sim;

/// A device the test keeps a hand on while a file system owns it: after a mount the power
/// cut, the device is still there to reboot.
struct Shared<D>(Rc<RefCell<D>>);

impl<D> Shared<D> {
    fn new(dev: D) -> (Self, Rc<RefCell<D>>) {
        let rc = Rc::new(RefCell::new(dev));
        (Shared(rc.clone()), rc)
    }
}

impl<D: Segments> Segments for Shared<D> {
    fn geometry(&self) -> SegGeometry {
        self.0.borrow().geometry()
    }
    fn bank_of(&self, seg: u32) -> u32 {
        self.0.borrow().bank_of(seg)
    }
    fn read_header(&mut self, seg: u32) -> flashfs::Result<HeaderState> {
        self.0.borrow_mut().read_header(seg)
    }
    fn write_header(&mut self, seg: u32, header: &SegHeader) -> flashfs::Result<()> {
        self.0.borrow_mut().write_header(seg, header)
    }
    fn read_tags(&mut self, seg: u32, out: &mut [TagState]) -> flashfs::Result<()> {
        self.0.borrow_mut().read_tags(seg, out)
    }
    fn written_end(&mut self, seg: u32, slots: u32) -> flashfs::Result<Option<u32>> {
        self.0.borrow_mut().written_end(seg, slots)
    }
    fn unwritten(&mut self, seg: u32) -> flashfs::Result<bool> {
        self.0.borrow_mut().unwritten(seg)
    }
    fn read_written_tags(
        &mut self,
        seg: u32,
        first: u32,
        out: &mut [TagState],
    ) -> flashfs::Result<()> {
        self.0.borrow_mut().read_written_tags(seg, first, out)
    }
    fn read_slot(&mut self, seg: u32, slot: u32, buf: &mut [u8]) -> flashfs::Result<()> {
        self.0.borrow_mut().read_slot(seg, slot, buf)
    }
    fn write_slot(&mut self, seg: u32, slot: u32, tag: &Tag, data: &[u8]) -> flashfs::Result<()> {
        self.0.borrow_mut().write_slot(seg, slot, tag, data)
    }
    fn slot_erased(&mut self, seg: u32, slot: u32) -> flashfs::Result<bool> {
        self.0.borrow_mut().slot_erased(seg, slot)
    }
    fn risks_earlier_slot(&self, slot: u32) -> bool {
        self.0.borrow().risks_earlier_slot(slot)
    }
    fn units_per_segment(&self) -> u32 {
        self.0.borrow().units_per_segment()
    }
    fn patch_align(&self) -> u32 {
        self.0.borrow().patch_align()
    }
    fn reserved_slots(&self) -> u32 {
        self.0.borrow().reserved_slots()
    }
    fn can_patch(&self) -> bool {
        self.0.borrow().can_patch()
    }
    fn patch_slot(
        &mut self,
        seg: u32,
        slot: u32,
        offset: usize,
        bytes: &[u8],
    ) -> flashfs::Result<()> {
        self.0.borrow_mut().patch_slot(seg, slot, offset, bytes)
    }
    fn erase(&mut self, seg: u32, background: bool) -> flashfs::Result<()> {
        self.0.borrow_mut().erase(seg, background)
    }
    fn is_bad(&mut self, seg: u32) -> flashfs::Result<bool> {
        self.0.borrow_mut().is_bad(seg)
    }
    fn is_retired(&mut self, seg: u32) -> flashfs::Result<bool> {
        self.0.borrow_mut().is_retired(seg)
    }
    fn mark_bad(&mut self, seg: u32) -> flashfs::Result<()> {
        self.0.borrow_mut().mark_bad(seg)
    }
    fn sync(&mut self) -> flashfs::Result<()> {
        self.0.borrow_mut().sync()
    }
    fn power_cut(&mut self) {
        self.0.borrow_mut().power_cut()
    }
    fn resume_slot(&mut self, seg: u32, used: u32) -> flashfs::Result<Option<u32>> {
        self.0.borrow_mut().resume_slot(seg, used)
    }
    fn now(&self) -> Duration {
        self.0.borrow().now()
    }
    fn idle(&mut self, d: Duration) {
        self.0.borrow_mut().idle(d)
    }
    fn erase_time(&self) -> Duration {
        self.0.borrow().erase_time()
    }
}

/// A mounted volume and the device under it.
struct Vol<D: Sim> {
    fs: Fs<Shared<D>>,
    dev: Rc<RefCell<D>>,
}

impl<D: Sim> Vol<D> {
    fn mount(dev: D, config: FsConfig) -> Result<Self, (Error, D)> {
        let (shared, rc) = Shared::new(dev);
        match Fs::mount(shared, config) {
            Ok(fs) => Ok(Vol { fs, dev: rc }),
            Err(e) => Err((e, take(rc))),
        }
    }

    fn powered(&self) -> bool {
        self.dev.borrow().sim().is_powered()
    }

    fn ops(&self) -> u64 {
        self.dev.borrow().sim().ops()
    }

    fn schedule_cut(&self, k: u64, torn: bool) {
        self.dev.borrow_mut().sim_mut().schedule_cut(k, torn);
    }

    /// The device as the power left it, rebooted.
    fn cut_off(self) -> D {
        drop(self.fs);
        let mut dev = take(self.dev);
        dev.sim_mut().set_faults(Default::default());
        dev.sim_mut().reboot();
        dev
    }
}

fn take<D>(rc: Rc<RefCell<D>>) -> D {
    Rc::try_unwrap(rc)
        .ok()
        .expect("the file system is gone")
        .into_inner()
}

/// One step of a scenario; paths from the root.
#[derive(Debug, Clone)]
enum Step {
    Create(String),
    Mkdir(String),
    Symlink(String, usize),
    /// Path, offset, length, seed.
    Write(String, u64, usize, u8),
    Truncate(String, u64),
    Unlink(String),
    Rmdir(String),
    Rename(String, String),
    Exchange(String, String),
    Link(String, String),
    SetXattr(String, usize),
    Fallocate(String, u64, u64),
    Punch(String, u64, u64),
    /// Opens the file into a handle slot.
    Open(String, usize),
    /// Writes through a handle (offset, length, seed); nothing if it is not open.
    WriteOpen(usize, u64, usize, u8),
    /// Closes a handle, if it is open.
    Release(usize),
    Fsync(String),
    Sync,
    /// A record file: path, capacity (0: no bound), record size (0: any).
    Records(String, u32, u32),
    /// Adds a record: length, seed.
    Add(String, usize, u8),
    /// Replaces the record `back` before the newest: length, seed.
    Update(String, u64, usize, u8),
    RemoveFirst(String),
    RemoveLast(String),
}

impl Step {
    fn syncs(&self) -> bool {
        matches!(self, Step::Sync | Step::Fsync(_))
    }
}

fn s(p: &str) -> String {
    p.to_string()
}

fn data(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(13)
                .wrapping_add(u32::from(seed) * 101) as u8
        })
        .collect()
}

fn split(path: &str) -> (&str, &[u8]) {
    let i = path.rfind('/').expect("absolute path");
    (&path[..i], &path.as_bytes()[i + 1..])
}

fn apply<D: Segments>(
    fs: &mut Fs<D>,
    step: &Step,
    handles: &mut BTreeMap<usize, Ino>,
) -> Result<(), Error> {
    let parent = |fs: &mut Fs<D>, p: &str| -> Result<(Ino, Vec<u8>), Error> {
        let (d, n) = split(p);
        Ok((fs.resolve(d.as_bytes())?, n.to_vec()))
    };
    match step {
        Step::Create(p) => {
            let (d, n) = parent(fs, p)?;
            fs.create(d, &n, 0o644, 0, 0).map(drop)
        }
        Step::Mkdir(p) => {
            let (d, n) = parent(fs, p)?;
            fs.mkdir(d, &n, 0o755, 0, 0).map(drop)
        }
        Step::Symlink(p, len) => {
            let (d, n) = parent(fs, p)?;
            fs.symlink(d, &n, &data(7, *len), 0, 0).map(drop)
        }
        Step::Write(p, off, len, seed) => {
            let ino = fs.resolve(p.as_bytes())?;
            fs.write(ino, *off, &data(*seed, *len)).map(drop)
        }
        Step::Truncate(p, size) => {
            let ino = fs.resolve(p.as_bytes())?;
            let set = SetAttr {
                size: Some(*size),
                ..Default::default()
            };
            fs.setattr(ino, set).map(drop)
        }
        Step::Unlink(p) => {
            let (d, n) = parent(fs, p)?;
            fs.unlink(d, &n)
        }
        Step::Rmdir(p) => {
            let (d, n) = parent(fs, p)?;
            fs.rmdir(d, &n)
        }
        Step::Rename(a, b) | Step::Exchange(a, b) => {
            let (d1, n1) = parent(fs, a)?;
            let (d2, n2) = parent(fs, b)?;
            let flags = RenameFlags {
                exchange: matches!(step, Step::Exchange(..)),
                ..Default::default()
            };
            fs.rename(d1, &n1, d2, &n2, flags)
        }
        Step::Link(a, b) => {
            let ino = fs.resolve(a.as_bytes())?;
            let (d, n) = parent(fs, b)?;
            fs.link(ino, d, &n).map(drop)
        }
        Step::SetXattr(p, len) => {
            let ino = fs.resolve(p.as_bytes())?;
            fs.setxattr(ino, b"user.x", &data(3, *len), XattrFlags::default())
        }
        Step::Fallocate(p, off, len) => {
            let ino = fs.resolve(p.as_bytes())?;
            fs.fallocate(ino, 0, *off, *len)
        }
        Step::Punch(p, off, len) => {
            let ino = fs.resolve(p.as_bytes())?;
            fs.fallocate(ino, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, *off, *len)
        }
        Step::Open(p, slot) => {
            let ino = fs.resolve(p.as_bytes())?;
            fs.open(ino)?;
            if let Some(old) = handles.insert(*slot, ino) {
                fs.release(old)?;
            }
            Ok(())
        }
        Step::WriteOpen(slot, off, len, seed) => match handles.get(slot) {
            Some(&ino) => fs.write(ino, *off, &data(*seed, *len)).map(drop),
            None => Ok(()),
        },
        Step::Release(slot) => match handles.remove(slot) {
            Some(ino) => fs.release(ino),
            None => Ok(()),
        },
        Step::Fsync(p) => {
            let ino = fs.resolve(p.as_bytes())?;
            fs.fsync(ino, false)
        }
        Step::Sync => fs.sync(),
        Step::Records(p, capacity, record_size) => {
            let (d, n) = parent(fs, p)?;
            let format = RecordFormat {
                record_size: *record_size,
                capacity: *capacity,
            };
            fs.create_records(d, &n, format, 0o644, 0, 0).map(drop)
        }
        Step::Add(p, len, seed) => {
            let ino = fs.resolve(p.as_bytes())?;
            fs.record_add(ino, &data(*seed, *len)).map(drop)
        }
        Step::Update(p, back, len, seed) => {
            let ino = fs.resolve(p.as_bytes())?;
            let info = fs.record_info(ino)?;
            let n = (info.next.checked_sub(1 + back))
                .filter(|&n| n >= info.first)
                .ok_or(Error::NotFound)?;
            fs.record_update(ino, n, &data(*seed, *len))
        }
        Step::RemoveFirst(p) => {
            let ino = fs.resolve(p.as_bytes())?;
            fs.record_remove_first(ino)
        }
        Step::RemoveLast(p) => {
            let ino = fs.resolve(p.as_bytes())?;
            fs.record_remove_last(ino)
        }
    }
}

type Dump = BTreeMap<Vec<u8>, Entry>;

/// A fresh volume on `dev`, unmounted.
fn formatted<D: Sim>(dev: D, config: FsConfig) -> D {
    Fs::format(dev, config).unwrap().unmount().unwrap()
}

/// Runs `steps` on `base` without a cut: the state after each step (the first: before any),
/// and the device operations the run takes.
fn reference<D: Sim>(base: &D, steps: &[Step], config: FsConfig) -> (Vec<Dump>, u64) {
    let mut v = Vol::mount(base.clone(), config).ok().unwrap();
    let start = v.ops();
    let mut handles = BTreeMap::new();
    let mut states = vec![dump(&mut v.fs).unwrap().0];
    for (i, step) in steps.iter().enumerate() {
        apply(&mut v.fs, step, &mut handles).unwrap_or_else(|e| panic!("step {i} {step:?}: {e}"));
        states.push(dump(&mut v.fs).unwrap().0);
    }
    let ops = v.ops() - start;
    (states, ops)
}

/// Mounts after a cut and checks: `fsck` clean, nothing unreachable kept, the state one of
/// `states[lo..=hi]`. Returns the index of the state found (the latest if several match).
fn recover<D: Sim>(
    dev: D,
    config: FsConfig,
    states: &[Dump],
    lo: usize,
    hi: usize,
    what: &str,
) -> (Vol<D>, usize) {
    let mut v =
        Vol::mount(dev, config).unwrap_or_else(|(e, _)| panic!("{what}: mount failed: {e}"));
    let report =
        v.fs.check(false)
            .unwrap_or_else(|e| panic!("{what}: check: {e}"));
    assert!(
        report.is_clean(),
        "{what}: check found {:?}",
        report.problems
    );
    let (got, inodes) = dump(&mut v.fs).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(
        v.fs.statfs().files,
        inodes as u64,
        "{what}: inodes counted but not reachable"
    );
    let hi = hi.min(states.len() - 1);
    match (lo..=hi).rev().find(|&i| states[i] == got) {
        Some(i) => (v, i),
        None => {
            let near = (lo..=hi)
                .map(|i| format!("state {i}:\n{}", diff(&got, &states[i])))
                .collect::<Vec<_>>()
                .join("");
            panic!(
                "{what}: the volume is in no state from {lo} to {hi}:\n{}differences with each:\n{near}",
                show(&got)
            );
        }
    }
}

/// Runs `steps` on a copy of `base`, cut after `k` device operations (torn or not). Returns
/// the device, rebooted, the steps done, the state the last sync made durable and whether
/// the cut came.
fn run_until_cut<D: Sim>(
    base: &D,
    steps: &[Step],
    config: FsConfig,
    k: u64,
    torn: bool,
) -> (D, usize, usize, bool) {
    let mut v = Vol::mount(base.clone(), config).ok().unwrap();
    v.schedule_cut(k, torn);
    let mut handles = BTreeMap::new();
    let mut durable = 0;
    let mut done = 0;
    for (i, step) in steps.iter().enumerate() {
        let r = apply(&mut v.fs, step, &mut handles);
        // A step may even finish in RAM after the power went: it is not acknowledged.
        if !v.powered() {
            break;
        }
        r.unwrap_or_else(|e| panic!("cut at {k}: step {i} {step:?}: {e}"));
        done = i + 1;
        if step.syncs() {
            durable = i + 1;
        }
    }
    let cut = !v.powered();
    if cut {
        // With the power gone, the file system answers errors, never panics, whatever
        // state the failed step left in RAM: a sync, and the checkpoint an unmount writes.
        let _ = v.fs.sync();
        let _ = v.fs.checkpoint();
    }
    (v.cut_off(), done, durable, cut)
}

/// After recovery the volume takes new work and keeps it across a remount.
fn keeps_working<D: Sim>(mut v: Vol<D>, config: FsConfig, what: &str) {
    let fs = &mut v.fs;
    let before = dump(fs).unwrap().0;
    let f = fs
        .create(flashfs::fs::ROOT_INO, b"after-the-cut", 0o600, 0, 0)
        .unwrap_or_else(|e| panic!("{what}: create after recovery: {e}"));
    fs.write(f.ino, 0, &data(99, 1500))
        .unwrap_or_else(|e| panic!("{what}: write after recovery: {e}"));
    fs.sync().unwrap();
    let dev = v.cut_off();
    let mut v = Vol::mount(dev, config).ok().unwrap();
    let mut after = dump(&mut v.fs).unwrap().0;
    assert_eq!(
        after.remove(&b"/after-the-cut"[..]).map(|e| e.content),
        Some(Content::File(data(99, 1500))),
        "{what}: the file written after recovery"
    );
    assert_eq!(after, before, "{what}: the rest after recovery");
    let report = v.fs.check(false).unwrap();
    assert!(report.is_clean(), "{what}: {:?}", report.problems);
}

/// Cuts `steps` at every device operation, clean and torn. Returns the cuts made.
fn every_cut<D: Sim>(dev: D, config: FsConfig, steps: &[Step]) -> u64 {
    cuts_every(dev, config, steps, 1)
}

/// Cuts `steps` at every `stride`th device operation (and the last), clean and torn.
/// Returns the cuts made.
fn cuts_every<D: Sim>(dev: D, config: FsConfig, steps: &[Step], stride: u64) -> u64 {
    let base = formatted(dev, config);
    let (states, total) = reference(&base, steps, config);
    assert!(total >= 4, "only {total} device operations");
    let mut cuts = 0;
    for k in (0..=total).filter(|k| k % stride == 0 || *k == total) {
        for torn in [false, true] {
            let what = format!("cut after {k} of {total} device operations (torn {torn})");
            let (dev, done, durable, cut) = run_until_cut(&base, steps, config, k, torn);
            assert_eq!(cut, k < total, "{what}: cut fired {cut}");
            if !cut {
                assert_eq!(done, steps.len());
            }
            let (fs, found) = recover(dev, config, &states, durable, done + 1, &what);
            if k % 5 == 0 {
                keeps_working(fs, config, &format!("{what}, state {found}"));
            }
            cuts += 1;
        }
    }
    cuts
}

fn on_every_device(steps: &[Step], config: FsConfig) {
    every_cut(nor(true), config, steps);
    every_cut(nor(false), config, steps);
    every_cut(nand(), config, steps);
}

/// Commits after every operation: the cut points then fall inside operations' commits.
fn eager() -> FsConfig {
    FsConfig {
        dirty_limit: Some(1),
        ..fs_config()
    }
}

#[test]
fn create_write_fsync() {
    let steps = [
        Step::Create(s("/f")),
        Step::Write(s("/f"), 0, 3000, 1),
        Step::Fsync(s("/f")),
        Step::Write(s("/f"), 1000, 200, 2),
        Step::Create(s("/g")),
        Step::Write(s("/g"), 700, 100, 3),
        Step::Fsync(s("/g")),
        Step::Write(s("/f"), 2900, 900, 4),
    ];
    on_every_device(&steps, fs_config());
}

/// Small writes between syncs wait in RAM (`FsConfig::write_buffer_bytes`): a cut keeps every
/// synced one and a prefix of the rest, never a torn or lost synced write. With one buffer
/// every other file written evicts a block; with eager commits every operation's commit
/// takes the buffered blocks along.
#[test]
fn small_writes_between_syncs() {
    let mut steps = vec![Step::Create(s("/a")), Step::Create(s("/b")), Step::Sync];
    for i in 0..12u8 {
        let at = u64::from(i) * 70;
        steps.push(Step::Write(s("/a"), at, 70, i));
        steps.push(Step::Write(s("/b"), u64::from(i) * 3, 40, i + 100));
        if i % 4 == 3 {
            steps.push(Step::Fsync(s("/a")));
        }
    }
    steps.extend([
        Step::Truncate(s("/a"), 300),
        Step::Write(s("/a"), 290, 20, 50),
        Step::Open(s("/b"), 0),
        Step::WriteOpen(0, 600, 30, 51),
        Step::Release(0),
        Step::Unlink(s("/b")),
        Step::Write(s("/a"), 1000, 10, 52),
        Step::Sync,
        Step::Write(s("/a"), 5, 5, 53),
    ]);
    on_every_device(&steps, fs_config());
    let one = FsConfig {
        // One block of the test parts' 512 bytes.
        write_buffer_bytes: 512,
        ..fs_config()
    };
    every_cut(nand(), one, &steps);
    every_cut(nor(true), eager(), &steps);
    // The microcontroller profile, and the same with one cached node, so a failed step
    // may fail reading the index after its block went to RAM.
    let small = FsConfig {
        atime: flashfs::fs::Atime::Never,
        clock: still_clock,
        ..FsConfig::small_ram()
    };
    let mut one_node = small;
    one_node.tree.cache_bytes = 0;
    one_node.tree.cache_nodes = 1;
    every_cut(nor(false), small, &steps);
    every_cut(nand(), one_node, &steps);
}

/// Small writes each made durable by an `fsync` are journal entries carrying their bytes
/// where the volume has a journal (reprogrammable NOR by default, NAND when asked); a
/// punch between them changes a block waiting in RAM, which the journal does not hold, so
/// its sync is a checkpoint. A cut keeps every synced write, whether the block it landed
/// in was programmed, evicted or still waiting in RAM when the power went.
#[test]
fn small_synced_writes_in_the_journal() {
    let mut steps = vec![
        Step::Create(s("/f")),
        Step::Write(s("/f"), 0, 1500, 1),
        Step::Create(s("/g")),
        Step::Sync,
    ];
    for i in 0..10u8 {
        // Overwrites, and appends past the end.
        steps.push(Step::Write(s("/f"), u64::from(i) * 397 % 1700, 60, i + 10));
        if i % 3 == 1 {
            steps.push(Step::Write(s("/g"), u64::from(i) * 50, 50, i + 40));
        }
        steps.push(Step::Fsync(s("/f")));
    }
    steps.extend([
        Step::Punch(s("/f"), 1210, 40),
        Step::Fsync(s("/f")),
        Step::Write(s("/f"), 1000, 40, 60),
        Step::Fsync(s("/f")),
        Step::Write(s("/f"), 3000, 30, 61),
        Step::Fsync(s("/g")),
        Step::Write(s("/g"), 10, 20, 62),
    ]);
    on_every_device(&steps, fs_config());
    let one = FsConfig {
        // One block of the test parts' 512 bytes.
        write_buffer_bytes: 512,
        ..fs_config()
    };
    every_cut(nand(), one, &steps);
    every_cut(nor(true), one, &steps);
    let journaled = FsConfig {
        journal_blocks: Some(8),
        ..fs_config()
    };
    every_cut(nand(), journaled, &steps);
    every_cut(nor(false), journaled, &steps);
}

#[test]
fn rename_over_an_existing_file() {
    let steps = [
        Step::Create(s("/a")),
        Step::Write(s("/a"), 0, 1200, 1),
        Step::Create(s("/b")),
        Step::Write(s("/b"), 0, 2000, 2),
        Step::Mkdir(s("/d")),
        Step::Sync,
        Step::Rename(s("/a"), s("/b")),
        Step::Sync,
        Step::Create(s("/c")),
        Step::Rename(s("/b"), s("/d/c")),
        Step::Exchange(s("/c"), s("/d/c")),
        Step::Link(s("/c"), s("/d/link")),
        Step::Rename(s("/d/link"), s("/c")),
    ];
    on_every_device(&steps, fs_config());
    every_cut(nand(), eager(), &steps);
}

#[test]
fn truncate_down_and_up() {
    let steps = [
        Step::Create(s("/t")),
        Step::Write(s("/t"), 0, 5 * 512 + 77, 1),
        Step::Sync,
        Step::Truncate(s("/t"), 700),
        Step::Truncate(s("/t"), 5000),
        Step::Sync,
        Step::Write(s("/t"), 4000, 600, 2),
        Step::Truncate(s("/t"), 0),
        Step::Truncate(s("/t"), 1000),
    ];
    on_every_device(&steps, fs_config());
}

#[test]
fn unlink_while_open() {
    let steps = [
        Step::Create(s("/u")),
        Step::Write(s("/u"), 0, 4000, 1),
        Step::Sync,
        Step::Open(s("/u"), 0),
        Step::Unlink(s("/u")),
        Step::WriteOpen(0, 3000, 3000, 2),
        Step::Sync,
        Step::Create(s("/v")),
        Step::Release(0),
        Step::Sync,
    ];
    on_every_device(&steps, fs_config());
    every_cut(nor(false), eager(), &steps);
}

#[test]
fn directory_trees() {
    let steps = [
        Step::Mkdir(s("/a")),
        Step::Mkdir(s("/a/b")),
        Step::Mkdir(s("/a/b/c")),
        Step::Create(s("/a/b/c/f")),
        Step::Symlink(s("/a/l"), 700),
        Step::Sync,
        Step::Rename(s("/a/b"), s("/x")),
        Step::Unlink(s("/x/c/f")),
        Step::Rmdir(s("/x/c")),
        Step::Mkdir(s("/a/y")),
        Step::Rename(s("/x"), s("/a/y")),
        Step::Sync,
        Step::Rmdir(s("/a/y")),
        Step::Unlink(s("/a/l")),
        Step::Rmdir(s("/a")),
    ];
    on_every_device(&steps, fs_config());
    every_cut(nand(), eager(), &steps);
}

#[test]
fn a_write_over_many_blocks_is_atomic() {
    let steps = [
        Step::Create(s("/w")),
        Step::Write(s("/w"), 0, 20 * 512, 1),
        Step::Sync,
        // Unaligned, over 18 blocks: old or new, never mixed.
        Step::Write(s("/w"), 100, 9000, 2),
        Step::Write(s("/w"), 5000, 12000, 3),
        Step::Sync,
    ];
    on_every_device(&steps, fs_config());
}

/// Operations whose working version spans several steps inside: a symbolic link and its
/// target, a punched hole with partial blocks at both edges, attributes, preallocation.
/// Committing after every operation puts commits right after each of them (regression: a
/// symbolic link was committed before its target was written).
#[test]
fn symlinks_holes_and_attributes_with_eager_commits() {
    let steps = [
        Step::Symlink(s("/l"), 1300),
        Step::Create(s("/p")),
        Step::Write(s("/p"), 0, 6 * 512, 1),
        Step::SetXattr(s("/p"), 600),
        Step::Punch(s("/p"), 300, 3 * 512),
        Step::Fallocate(s("/p"), 2000, 3000),
        Step::Write(s("/p"), 4096, 100, 2),
        Step::SetXattr(s("/l"), 10),
    ];
    every_cut(nor(true), eager(), &steps);
    every_cut(nor(false), eager(), &steps);
    every_cut(nand(), eager(), &steps);
    every_cut(nand(), fs_config(), &steps);
}

/// A random path-based workload over a few names, not filling the volume.
/// Record operations committed one by one are journal entries on reprogrammable NOR (SPEC.md
/// §8.5b): appended in place, in fragments over several blocks when large, replayed by
/// the mount. Cut at every device operation, each acknowledged one is there after the
/// replay, and the one in flight entirely or not at all.
#[test]
fn journaled_record_operations() {
    let log = s("/log");
    let var = s("/var");
    let mut steps = vec![
        Step::Records(log.clone(), 5, 24),
        Step::Records(var.clone(), 0, 0),
        Step::Sync,
    ];
    // A cyclic file wrapping, an entry per operation.
    for i in 0..8u8 {
        steps.push(Step::Add(log.clone(), 24, i));
        steps.push(Step::Sync);
    }
    // Variable records changing length, removed at both ends.
    for i in 0..4u8 {
        steps.push(Step::Add(var.clone(), 10 + 30 * usize::from(i), 20 + i));
    }
    steps.push(Step::Sync);
    steps.push(Step::Update(var.clone(), 1, 140, 30));
    steps.push(Step::Sync);
    steps.push(Step::RemoveFirst(var.clone()));
    steps.push(Step::RemoveLast(var.clone()));
    steps.push(Step::Sync);
    // Adds in one entry whose frames fill one append block and start the next.
    for i in 0..8u8 {
        steps.push(Step::Add(var.clone(), 70, 40 + i));
    }
    steps.push(Step::Sync);
    // An entry larger than a block (updates hold their records): its fragments fill fresh
    // blocks.
    for i in 0..8u8 {
        steps.push(Step::Update(var.clone(), 1 + u64::from(i % 2), 70, 50 + i));
    }
    let large = steps.len();
    steps.push(Step::Sync);
    steps.push(Step::Add(log.clone(), 24, 60));
    steps.push(Step::Sync);
    // A change the journal does not take: the commit is a checkpoint, then entries again.
    steps.push(Step::Add(log.clone(), 24, 61));
    steps.push(Step::Create(s("/f")));
    steps.push(Step::Sync);
    steps.push(Step::Add(log.clone(), 24, 62));
    steps.push(Step::Sync);
    // The scenario is what it says: commits as entries, one spanning blocks.
    let base = formatted(nor(true), fs_config());
    let mut v = Vol::mount(base, fs_config()).ok().unwrap();
    let mut handles = BTreeMap::new();
    for (i, step) in steps.iter().enumerate() {
        let before = v.fs.stats();
        apply(&mut v.fs, step, &mut handles).unwrap();
        let after = v.fs.stats();
        if i == large {
            assert_eq!(
                after.journal_entries,
                before.journal_entries + 1,
                "{after:?}"
            );
            assert!(
                after.journal_bytes - before.journal_bytes > 512,
                "{after:?}"
            );
            assert!(after.journal_blocks > before.journal_blocks, "{after:?}");
        }
    }
    let st = v.fs.stats();
    assert!(st.journal_entries >= 6, "{st:?}");
    assert!(st.journal_entries + st.frame_commits >= 12, "{st:?}");
    let cuts = every_cut(nor(true), fs_config(), &steps);
    assert!(cuts >= 60, "{cuts} cuts");
    // Where the journal cannot be, the same steps are ordinary commits.
    every_cut(nor(false), fs_config(), &steps);
}

/// Adds after the first in an append block commit themselves by their frames (SPEC.md
/// §8.5b): no entry. Cut at every device operation — between a frame's bytes and its commit
/// bit among them — each acknowledged add is there after the mount, the one in flight
/// entirely or not at all, and the entries after such adds (removals at both ends, an
/// update, a framed add after them, a commit whose first add commits itself and whose
/// next operation is an entry's) apply after them, not before; an add after an entry's
/// operation in one commit waits for the entry, and so do adds to a block the replay
/// forgets (after an add kept as items and a removal from the end).
#[test]
fn frames_that_commit_themselves() {
    let calls = s("/calls");
    let sms = s("/sms");
    let mut steps = vec![
        Step::Records(calls.clone(), 6, 15),
        Step::Records(sms.clone(), 0, 0),
        Step::Sync,
    ];
    let mut seed = 0u8;
    let mut add = |steps: &mut Vec<Step>, f: &String, len: usize| {
        seed += 1;
        steps.push(Step::Add(f.clone(), len, seed));
    };
    // A cyclic call log wrapping, a commit per call.
    for _ in 0..9 {
        add(&mut steps, &calls, 15);
        steps.push(Step::Sync);
    }
    for len in [40, 90, 20] {
        add(&mut steps, &sms, len);
        steps.push(Step::Sync);
    }
    // A removal from the front, after records that committed themselves.
    steps.push(Step::RemoveFirst(sms.clone()));
    steps.push(Step::Sync);
    add(&mut steps, &sms, 60);
    steps.push(Step::Sync);
    // A removal from the end: the next add starts a block.
    steps.push(Step::RemoveLast(sms.clone()));
    steps.push(Step::Sync);
    for len in [30, 50] {
        add(&mut steps, &sms, len);
        steps.push(Step::Sync);
    }
    // An update of a record that committed itself.
    steps.push(Step::Update(sms.clone(), 0, 70, 90));
    steps.push(Step::Sync);
    // One commit: an add that commits itself, then a removal in an entry.
    add(&mut steps, &sms, 25);
    steps.push(Step::RemoveFirst(calls.clone()));
    steps.push(Step::Sync);
    // One commit whose add stays items (an update and a removal from the end are in it):
    // the replay forgets the block, whose next frame the file's number now matches again,
    // so the adds after it must not commit themselves there.
    add(&mut steps, &sms, 45);
    steps.push(Step::Update(sms.clone(), 1, 33, 91));
    steps.push(Step::RemoveLast(sms.clone()));
    steps.push(Step::Sync);
    for len in [26, 27] {
        add(&mut steps, &sms, len);
        steps.push(Step::Sync);
    }
    // One commit: a removal, then an add, which must wait for the entry.
    steps.push(Step::RemoveFirst(calls.clone()));
    add(&mut steps, &sms, 35);
    steps.push(Step::Sync);
    // Adds in one commit: the first commits itself, the others are framed for the entry.
    for len in [100, 110, 120] {
        add(&mut steps, &sms, len);
    }
    steps.push(Step::Sync);
    add(&mut steps, &calls, 15);
    steps.push(Step::Sync);
    // The scenario is what it says.
    let base = formatted(nor(true), fs_config());
    let (states, _) = reference(&base, &steps, fs_config());
    assert!(states.len() > steps.len());
    let v = uncut(&steps);
    let st = v.fs.stats();
    assert!(st.frame_commits >= 12, "{st:?}");
    assert!(st.journal_entries >= 5, "{st:?}");
    let cuts = every_cut(nor(true), fs_config(), &steps);
    assert!(cuts >= 100, "{cuts} cuts");
}

/// Append blocks as version 7 packs them (SPEC.md §8.4a): a call log of 15-byte records,
/// which are their bytes alone, wrapping through blocks whose last frame goes on in the
/// next; messages of any length going on in new blocks, committed by their own frames (the
/// replay follows the link) and by entries (an add after a removal from the end); removals
/// of the oldest message that commit themselves as frames; blocks a checkpoint covered,
/// freed by those removals and taken again in the same epoch; an update of a record whose
/// frame spans two blocks; a removal from the end of the record after a frame that goes on.
/// Cut at every device operation, clean and torn.
#[test]
fn packed_frames_that_go_on_and_removals() {
    let (calls, sms) = (s("/calls"), s("/sms"));
    let mut steps = calls_and_messages(6, 14);
    let mut seed = 0u8;
    let mut add = |steps: &mut Vec<Step>, f: &String, len: usize| {
        seed = seed.wrapping_add(1);
        steps.push(Step::Add(f.clone(), len, seed));
        steps.push(Step::Sync);
    };
    // 40 calls: a block holds 33 of them; the 34th goes on in the next.
    for _ in 0..40 {
        add(&mut steps, &calls, 15);
    }
    // Messages filling three blocks, most of them going on from one to the next.
    for len in [150, 90, 120, 140, 60, 130, 100, 150, 110, 45] {
        add(&mut steps, &sms, len);
    }
    // A change the journal does not take: a checkpoint covers the blocks so far. An add in
    // an entry then leads the replay to the messages' block again.
    steps.push(Step::Create(s("/f")));
    steps.push(Step::Sync);
    add(&mut steps, &sms, 40);
    // The oldest messages removed, each by a frame of its own: the first blocks are freed,
    // and the messages after them take them again.
    for _ in 0..5 {
        steps.push(Step::RemoveFirst(sms.clone()));
        steps.push(Step::Sync);
    }
    for len in [140, 20, 150, 80] {
        add(&mut steps, &sms, len);
    }
    // An update of a message whose frame goes on in the next block, and of the newest.
    steps.push(Step::Update(sms.clone(), 3, 70, 200));
    steps.push(Step::Update(sms.clone(), 0, 10, 201));
    steps.push(Step::Sync);
    // A removal from the end, then adds: the first after it goes in an entry, framed anew.
    steps.push(Step::RemoveLast(sms.clone()));
    steps.push(Step::Sync);
    for len in [130, 150] {
        add(&mut steps, &sms, len);
    }
    // One commit: a removal from the end and adds after it, which wait for its entry.
    steps.push(Step::RemoveLast(sms.clone()));
    steps.push(Step::Add(sms.clone(), 140, 210));
    steps.push(Step::Add(sms.clone(), 150, 211));
    steps.push(Step::Sync);
    add(&mut steps, &calls, 15);
    add(&mut steps, &sms, 30);
    // The scenario is what it says: most operations commit themselves (entries: the first
    // add of each file and of each epoch, removals before an epoch's first add, the
    // update, the removals from the end and the adds after them).
    let v = uncut(&steps);
    let st = v.fs.stats();
    assert!(st.frame_commits >= 50, "{st:?}");
    assert!(st.journal_entries <= 14, "{st:?}");
    let cuts = every_cut(nor(true), fs_config(), &steps);
    assert!(cuts >= 300, "{cuts} cuts");
}

/// A cyclic call log whose adds commit themselves by their frames wraps past its first
/// block, which they free; messages then start new blocks, where free blocks are few. The
/// replay frees that block only where an entry counts those frames, so it is free only once
/// such an entry is durable: the first message's entry counts them, and a later message
/// takes the block. Cut at every third device operation, clean and torn.
#[test]
fn a_block_freed_by_frames_waits_for_their_count() {
    let (calls, sms) = (s("/calls"), s("/sms"));
    let mut steps = calls_and_messages(20, 20);
    // A block holds 33 calls: the 53rd frees the first block, and all but the first add
    // of each block and epoch commit themselves.
    for seed in 0..56u8 {
        steps.push(Step::Add(calls.clone(), 15, seed));
        steps.push(Step::Sync);
        if seed == 40 {
            // A change the journal does not take: a checkpoint covers the first block,
            // so the replay of the epoch does not read it.
            steps.push(Step::Mkdir(s("/f")));
            steps.push(Step::Sync);
        }
    }
    for (len, seed) in [(150, 100), (140, 101), (130, 102), (150, 103)] {
        steps.push(Step::Add(sms.clone(), len, seed));
        steps.push(Step::Sync);
    }
    // An update of the newest call, an entry on a file whose frames were counted.
    steps.push(Step::Update(calls.clone(), 0, 15, 104));
    steps.push(Step::Sync);
    for (len, seed) in [(150, 105), (140, 106), (130, 107), (150, 108), (120, 109)] {
        steps.push(Step::Add(sms.clone(), len, seed));
        steps.push(Step::Sync);
    }
    // The scenario is what it says: the first block is freed, and a message takes it once
    // the frames are counted, not before (without waiting, the first message would).
    let mut v = uncut(&steps[..8]);
    let first_block = blocks(&mut v.fs, "/calls")[0];
    apply_all(&mut v, &steps[8..]);
    let sms_blocks = blocks(&mut v.fs, "/sms");
    assert!(
        sms_blocks[0] != first_block && sms_blocks.contains(&first_block),
        "the first calls' block {first_block}, the messages' {sms_blocks:?}"
    );
    let st = v.fs.stats();
    assert!(st.frame_commits >= 50, "{st:?}");
    let cuts = cuts_every(nor(true), fs_config(), &steps, 3);
    assert!(cuts >= 100, "{cuts} cuts");
}

/// A fresh reprogrammable-NOR volume after `steps`, none of them cut.
fn uncut(steps: &[Step]) -> Vol<impl Sim> {
    let base = formatted(nor(true), fs_config());
    let mut v = Vol::mount(base, fs_config()).ok().unwrap();
    apply_all(&mut v, steps);
    v
}

/// Applies `steps` to `v`, each of which must succeed.
fn apply_all<D: Sim>(v: &mut Vol<D>, steps: &[Step]) {
    let mut handles = BTreeMap::new();
    for step in steps {
        apply(&mut v.fs, step, &mut handles).unwrap();
    }
}

/// The first steps of a phone: a cyclic log `/calls` of `calls` records of 15 bytes, a file
/// `/sms` of messages of any length, and a file filling the volume but for `spare` blocks,
/// so that freed blocks are soon taken again.
fn calls_and_messages(calls: u32, spare: usize) -> Vec<Step> {
    let free = {
        let fs = Fs::format(nor(true), fs_config()).unwrap();
        fs.statfs().blocks_free as usize
    };
    vec![
        Step::Records(s("/calls"), calls, 15),
        Step::Records(s("/sms"), 0, 0),
        Step::Create(s("/big")),
        Step::Write(s("/big"), 0, (free - spare) * 512, 9),
        Step::Sync,
    ]
}

/// The sectors of the file at `path`.
fn blocks<D: Segments>(fs: &mut Fs<D>, path: &str) -> Vec<u64> {
    let ino = fs.resolve(path.as_bytes()).unwrap();
    let extents = fs.extents(ino).unwrap();
    extents
        .iter()
        .flat_map(|(_, e)| e.start..e.start + e.len)
        .collect()
}

fn workload(seed: u64, n: usize) -> Vec<Step> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let files = ["/f0", "/f1", "/f2", "/d/f3", "/d/f4", "/d/e/f5"];
    let dirs = ["/d", "/d/e"];
    let mut steps = vec![Step::Mkdir(s("/d")), Step::Mkdir(s("/d/e"))];
    for f in files {
        steps.push(Step::Create(s(f)));
    }
    // Record files, whose operations are journal entries where there is a journal.
    let records = ["/r0", "/d/r1"];
    steps.push(Step::Records(s(records[0]), 6, 20));
    steps.push(Step::Records(s(records[1]), 0, 0));
    for _ in 0..n {
        let f = s(files[next(files.len() as u64) as usize]);
        let g = s(files[next(files.len() as u64) as usize]);
        let r = s(records[next(2) as usize]);
        let len = if r == records[0] {
            20
        } else {
            next(300) as usize
        };
        let step = match next(28) {
            20..=22 => Step::Add(r, len, next(250) as u8),
            23 => Step::Update(r, next(3), len, next(250) as u8),
            24 => Step::RemoveFirst(r),
            25 => Step::RemoveLast(r),
            26 | 27 => Step::Sync,
            0..=5 => Step::Write(f, next(6000), 1 + next(3000) as usize, next(250) as u8),
            6 => Step::Truncate(f, next(7000)),
            7 => Step::Sync,
            8 => Step::Fsync(f),
            9 => Step::Rename(f, g),
            10 => Step::Exchange(f, g),
            11 => Step::Unlink(f),
            12 => Step::Create(f),
            13 => {
                // An open file loses its name: an orphan for the next mount to delete.
                steps.push(Step::Open(f.clone(), next(2) as usize));
                Step::Unlink(f)
            }
            14 => Step::Release(next(2) as usize),
            // (No writes through handles: a recovery has none, so a replay could not
            // repeat them.)
            15 => Step::Fallocate(f, next(6000), 1 + next(2000)),
            16 => Step::SetXattr(f, next(400) as usize),
            17 => Step::Punch(f, next(5000), 1 + next(3000)),
            18 => {
                let d = dirs[next(2) as usize];
                if next(2) == 0 {
                    Step::Mkdir(format!("{d}/x"))
                } else {
                    Step::Rmdir(format!("{d}/x"))
                }
            }
            _ => Step::Link(f, g),
        };
        steps.push(step);
    }
    steps
}

/// Whether a step's failure is one the workload runs into by design (a name that is not
/// there, or already is): such a step changes nothing.
fn expected_failure(e: &Error) -> bool {
    matches!(
        e,
        Error::NotFound | Error::Exists | Error::NotEmpty | Error::IsDir | Error::NotDir
    )
}

/// Random workloads, cut again and again at random points (clean or torn), sometimes
/// during the recovery mount; after each cut the volume must be clean and in a state
/// between the last acknowledged sync and the step cut off, and the workload goes on from
/// that state.
fn chained_cuts<D: Sim>(dev: D, seeds: std::ops::Range<u64>) {
    let config = fs_config();
    let base = formatted(dev, config);
    let mut mount_cuts = 0;
    for seed in seeds {
        let steps = workload(seed, 160);
        // The reference: the state after each step; steps that fail leave it as it was.
        let mut v = Vol::mount(base.clone(), config).ok().unwrap();
        let start = v.ops();
        let mut handles = BTreeMap::new();
        let mut states = vec![dump(&mut v.fs).unwrap().0];
        for step in &steps {
            if let Err(e) = apply(&mut v.fs, step, &mut handles) {
                assert!(expected_failure(&e), "seed {seed} {step:?}: {e}");
            }
            states.push(dump(&mut v.fs).unwrap().0);
        }
        // Cuts fall anywhere in about a quarter of the whole run.
        let span = (v.ops() - start) / 4 + 2;
        drop(v);
        let mut x = seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1;
        let mut rnd = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut dev = base.clone();
        let (mut lo, mut hi) = (0, 0);
        let mut rounds = 0;
        let (mut last, mut stuck) = (usize::MAX, 0);
        loop {
            rounds += 1;
            assert!(rounds < 10_000, "seed {seed}: no progress");
            let what = format!("seed {seed} round {rounds}");
            // Now and then the power goes during the recovery mount too (a mount that
            // deletes orphans commits).
            if rnd(3) == 0 {
                dev.sim_mut().schedule_cut(rnd(4), rnd(2) == 0);
                dev = match Vol::mount(dev, config) {
                    Ok(v) => {
                        mount_cuts += u32::from(!v.powered());
                        v.cut_off()
                    }
                    Err((e, mut dev)) => {
                        assert!(!dev.sim().is_powered(), "{what}: recovery mount: {e}");
                        mount_cuts += 1;
                        dev.sim_mut().set_faults(Default::default());
                        dev.sim_mut().reboot();
                        dev
                    }
                };
            }
            let what = format!(
                "{what} (steps {lo}..{hi}: {:?})",
                &steps[lo.min(steps.len())..hi.min(steps.len())]
            );
            let (mut v, at) = recover(dev, config, &states, lo, hi, &what);
            if at == steps.len() {
                break;
            }
            // A run that keeps being cut before its next commit gets longer and longer.
            stuck = if at == last { stuck + 1 } else { 0 };
            last = at;
            v.schedule_cut(rnd(span << stuck.min(8)), rnd(2) == 0);
            let mut handles = BTreeMap::new();
            lo = at;
            hi = at;
            for (i, step) in steps.iter().enumerate().skip(at) {
                let r = apply(&mut v.fs, step, &mut handles);
                if !v.powered() {
                    break;
                }
                hi = i + 1;
                match r {
                    Ok(()) if step.syncs() => lo = i + 1,
                    Ok(()) => {}
                    Err(e) => assert!(expected_failure(&e), "{what}: step {i} {step:?}: {e}"),
                }
            }
            if v.powered() && v.fs.sync().is_ok() && v.powered() {
                // The whole workload ran: it must all be there.
                lo = hi;
            }
            // The step cut off may have been committed whole.
            hi += 1;
            dev = v.cut_off();
        }
        assert!(rounds > 3, "seed {seed}: only {rounds} rounds");
    }
    assert!(mount_cuts > 0, "no cut during a mount");
}

#[test]
fn chained_random_cuts_on_nor() {
    chained_cuts(nor(false), 0..200);
}

#[test]
fn chained_random_cuts_on_reprogrammable_nor() {
    chained_cuts(nor(true), 300..500);
}

#[test]
fn chained_random_cuts_on_nand() {
    chained_cuts(nand(), 100..300);
}
