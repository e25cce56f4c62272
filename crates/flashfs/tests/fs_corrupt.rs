//! Damaged file-system images: bytes and bits flipped anywhere in the flash, images cut
//! short, and well-formed sectors full of garbage where the file system keeps its index.
//! Mounting, checking, reading and writing such a volume returns data, a typed error or a
//! report — never a panic, never a hang.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::*;
use flash::store::{RamStore, Store};
use flash::{NandSim, NorSim};
use flashfs::fs::{check_device, RecordFormat, XattrFlags, ROOT_INO};
use flashfs::{BlockDevice, Error, Fs, NandSegments, NorSegments, Segments};

/// Longest any one damaged image may take: far beyond what a healthy one needs.
const PATIENCE: Duration = Duration::from_secs(60);

fn rng(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move |m| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m.max(1)
    }
}

/// A volume with files, holes, directories, links, attributes and a few commits' worth of
/// history on flash.
fn populate<D: Segments>(dev: D) -> D {
    let mut fs = Fs::format(dev, fs_config()).unwrap();
    fs.mkdir_path(b"/d").unwrap();
    fs.mkdir_path(b"/d/e").unwrap();
    for round in 0..3u8 {
        for (i, name) in [&b"/a"[..], b"/d/b", b"/d/e/c"].iter().enumerate() {
            let data = vec![round.wrapping_mul(31) ^ i as u8; 700 + 1300 * i];
            let f = fs.write_file(name, &data).unwrap();
            fs.write(f.ino, 9000, b"after a hole").unwrap();
        }
        fs.sync().unwrap();
    }
    let a = fs.resolve(b"/a").unwrap();
    fs.link(a, ROOT_INO, b"hard").unwrap();
    fs.symlink(ROOT_INO, b"sym", b"/d/e/c", 0, 0).unwrap();
    fs.setxattr(a, b"user.v", &[5; 600], XattrFlags::default())
        .unwrap();
    fs.fallocate(a, 0, 20_000, 3000).unwrap();
    // Records committed one by one: on reprogrammable NOR, frames in append blocks.
    let log = fs
        .create_records(ROOT_INO, b"log", RecordFormat::variable(), 0o644, 0, 0)
        .unwrap();
    for i in 0..24u8 {
        fs.record_add(log.ino, &vec![i; 10 + 7 * usize::from(i)])
            .unwrap();
        fs.sync().unwrap();
    }
    fs.unmount().unwrap()
}

fn nand_image() -> RamStore {
    populate(nand()).into_inner().into_store()
}

fn nor_image() -> RamStore {
    populate(nor(true)).into_inner().into_store()
}

/// What became of a damaged volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// The simulator refused the image (its own header or tables).
    NoDevice,
    /// The volume did not mount: a typed error.
    NoMount,
    /// It mounted and the check found problems.
    Problems,
    /// It mounted and looked clean.
    Clean,
}

/// Mounts, checks, lists, reads and writes; any error is fine, a panic is not.
fn exercise<D: Segments>(dev: D, fresh: impl Fn() -> Option<D>) -> Outcome {
    let (report, _) = check_device(dev, fs_config(), false);
    if !report.mounted {
        assert!(
            !report.problems.is_empty(),
            "a volume that does not mount has a reason"
        );
    }
    let Some(dev) = fresh() else {
        return Outcome::NoDevice;
    };
    let mut fs = match Fs::mount(dev, fs_config()) {
        Ok(fs) => fs,
        Err(e) => {
            // Typed, and with a readable cause.
            assert!(!e.to_string().is_empty());
            assert!(report.problems.iter().any(|p| p.what.contains("mount")));
            return Outcome::NoMount;
        }
    };
    assert!(
        report.mounted,
        "check_device did not mount what Fs::mount did"
    );
    let outcome = match fs.check(false) {
        Ok(r) if r.is_clean() => Outcome::Clean,
        _ => Outcome::Problems,
    };
    let _ = dump(&mut fs);
    let _ = fs.list_dir(b"/");
    let _ = fs.read_file(b"/a");
    let _ = fs.resolve_follow(b"/sym");
    let _ = fs.write_file(b"/new", &[7; 3000]);
    let _ = fs.remove_path(b"/d/b");
    let _ = fs.rename_path(b"/d/e", b"/moved");
    let _ = fs.sync();
    let _ = fs.check(true);
    let _ = fs.gc();
    let dev = fs.into_device();
    // Whatever the repairs did, the volume mounts as before or fails as cleanly.
    if let Ok(mut fs) = Fs::mount(dev, fs_config()) {
        let _ = fs.check(false);
        let _ = dump(&mut fs);
    }
    outcome
}

/// Runs `f` on another thread and fails if it takes longer than [`PATIENCE`].
fn bounded<T: Send + 'static>(what: String, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(PATIENCE) {
        Ok(v) => {
            worker.join().unwrap();
            v
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no answer in {PATIENCE:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The worker panicked: re-raise its panic here.
            match worker.join() {
                Err(p) => std::panic::resume_unwind(p),
                Ok(()) => unreachable!(),
            }
        }
    }
}

fn nand_from(store: &RamStore) -> Option<NandSegments<NandSim>> {
    let sim = NandSim::open(store.clone()).ok()?;
    NandSegments::new(sim).ok()
}

fn nor_from(store: &RamStore) -> Option<NorSegments<NorSim>> {
    let sim = NorSim::open(store.clone()).ok()?;
    NorSegments::new(sim, 512).ok()
}

/// Flips bytes and bits of the data area (past the simulator's header and tables, which it
/// checks itself).
fn damage(store: &mut RamStore, seed: u64, hits: u64) {
    let mut r = rng(seed);
    let len = store.len();
    for _ in 0..hits {
        let at = 8192 + r(len - 8192);
        let mut b = [0u8];
        store.read(at, &mut b).unwrap();
        // Half single bits, half whole bytes.
        let x = if r(2) == 0 {
            1 << r(8)
        } else {
            1 + r(255) as u8
        };
        store.write(at, &[b[0] ^ x]).unwrap();
    }
}

fn cases(default: u64) -> u64 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every outcome of a run of damaged images, counted.
fn tally(outcomes: &[Outcome]) -> [usize; 4] {
    let mut t = [0; 4];
    for &o in outcomes {
        t[o as usize] += 1;
    }
    t
}

fn random_damage<D: Segments + 'static>(
    image: RamStore,
    open: fn(&RamStore) -> Option<D>,
    seeds: std::ops::Range<u64>,
) -> [usize; 4] {
    let mut outcomes = Vec::new();
    for seed in seeds {
        let mut store = image.clone();
        let hits = 1 + rng(seed ^ 0xABCD)(64);
        damage(&mut store, seed, hits);
        let o = bounded(format!("seed {seed}, {hits} hits"), move || {
            match open(&store) {
                Some(dev) => exercise(dev, || open(&store)),
                None => Outcome::NoDevice,
            }
        });
        outcomes.push(o);
    }
    tally(&outcomes)
}

#[test]
fn flipped_bits_and_bytes_on_nand() {
    let t = random_damage(nand_image(), nand_from, 0..cases(40));
    // Damage this widespread shows somewhere.
    assert!(t[1] + t[2] > 0, "no damage ever noticed: {t:?}");
}

#[test]
fn flipped_bits_and_bytes_on_nor() {
    let t = random_damage(nor_image(), nor_from, 1000..1000 + cases(40));
    assert!(t[1] + t[2] > 0, "no damage ever noticed: {t:?}");
}

/// The undamaged images are clean: the damage tests measure damage, not the baseline.
#[test]
fn undamaged_images_are_clean() {
    let store = nand_image();
    assert_eq!(
        exercise(nand_from(&store).unwrap(), || nand_from(&store)),
        Outcome::Clean
    );
    let store = nor_image();
    assert_eq!(
        exercise(nor_from(&store).unwrap(), || nor_from(&store)),
        Outcome::Clean
    );
}

/// Images cut short: the end of the flash reads erased from some point on (a copy that
/// stopped early), or the image file itself is shorter than the device.
#[test]
fn truncated_images() {
    for (image, nand) in [(nand_image(), true), (nor_image(), false)] {
        let len = image.len();
        let mut outcomes = Vec::new();
        for i in 1..12u64 {
            let cut = 8192 + (len - 8192) * i / 12;
            let mut erased = image.clone();
            erased.zero(cut, len - cut).unwrap();
            let mut short = RamStore::new(cut);
            let mut buf = vec![0; cut as usize];
            image.read(0, &mut buf).unwrap();
            short.write(0, &buf).unwrap();
            for store in [erased, short] {
                let o = bounded(format!("cut at byte {cut}"), move || {
                    if nand {
                        match nand_from(&store) {
                            Some(d) => exercise(d, || nand_from(&store)),
                            None => Outcome::NoDevice,
                        }
                    } else {
                        match nor_from(&store) {
                            Some(d) => exercise(d, || nor_from(&store)),
                            None => Outcome::NoDevice,
                        }
                    }
                });
                outcomes.push(o);
            }
        }
        let t = tally(&outcomes);
        // Losing the end of the flash loses data the volume uses, somewhere along the way.
        assert!(t[1] + t[2] > 0, "truncation never noticed: {t:?}");
    }
}

/// Well-formed sectors (the block device below checks nothing more) whose content is
/// garbage, where the file system keeps its superblock, index and data: a superblock or an
/// index node of garbage never mounts unnoticed, and garbage anywhere is refused, reported
/// or read as data.
fn garbage_sectors<D: Segments + Clone + Send + 'static>(dev: D, seeds: std::ops::Range<u64>) {
    let base = populate(dev);
    // Which sectors hold what: index nodes start with their magic, unused ones read as zeros.
    let (nodes, used) = {
        let mut fs = Fs::mount(base.clone(), fs_config()).unwrap();
        let mut buf = vec![0u8; fs.block_size() as usize];
        let (mut nodes, mut used) = (Vec::new(), Vec::new());
        for k in 1..fs.ftl().sectors() {
            fs.ftl_mut().read(k, &mut buf).unwrap();
            if buf.starts_with(b"IX") {
                nodes.push(k);
            }
            if buf.iter().any(|&b| b != 0) {
                used.push(k);
            }
        }
        (nodes, used)
    };
    assert!(nodes.len() > 1 && used.len() > nodes.len());
    let mut outcomes = Vec::new();
    for seed in seeds {
        let mut r = rng(seed);
        let mut fs = Fs::mount(base.clone(), fs_config()).unwrap();
        let ss = fs.block_size() as usize;
        // What this case hits: the superblock, an index node, a sector in use, any sector.
        let target = r(4);
        let mut must_notice = false;
        // (One hit on the superblock: a second could flip the first back.)
        let hits = if target == 0 { 1 } else { 1 + r(3) };
        for _ in 0..hits {
            let k = match target {
                0 => 0,
                1 => nodes[r(nodes.len() as u64) as usize],
                2 => used[r(used.len() as u64) as usize],
                _ => r(fs.ftl().sectors()),
            };
            let mut buf = vec![0u8; ss];
            fs.ftl_mut().read(k, &mut buf).unwrap();
            match r(3) {
                // The superblock: one bit of what it holds.
                _ if k == 0 => {
                    buf[r(52) as usize] ^= 1 << r(8);
                    must_notice = true;
                }
                // Random bytes.
                0 => {
                    buf.iter_mut().for_each(|b| *b = r(256) as u8);
                    must_notice |= nodes.contains(&k);
                }
                // One bit.
                1 => buf[r(ss as u64) as usize] ^= 1 << r(8),
                // A run of zeros or ones inside.
                _ => {
                    let a = r(ss as u64) as usize;
                    let b = (a + 1 + r(64) as usize).min(ss);
                    let v = if r(2) == 0 { 0 } else { 0xFF };
                    buf[a..b].fill(v);
                }
            }
            fs.ftl_mut().write(k, &buf).unwrap();
        }
        fs.ftl_mut().flush().unwrap();
        let dev = fs.into_device();
        let o = bounded(format!("seed {seed}"), move || {
            let again = dev.clone();
            exercise(dev, move || Some(again.clone()))
        });
        if must_notice {
            assert_ne!(
                o,
                Outcome::Clean,
                "seed {seed}: garbage in the superblock or index unnoticed"
            );
        }
        outcomes.push(o);
    }
    let t = tally(&outcomes);
    assert!(
        t[1] + t[2] > outcomes.len() / 4,
        "garbage rarely noticed: {t:?}"
    );
}

#[test]
fn garbage_sectors_on_nand() {
    garbage_sectors(nand(), 0..cases(48));
}

#[test]
fn garbage_sectors_on_nor() {
    garbage_sectors(nor(false), 500..500 + cases(48));
}

/// A volume of another kind, or none at all, is refused with a typed error.
#[test]
fn foreign_and_blank_devices() {
    assert!(matches!(
        Fs::mount(nand(), fs_config()),
        Err(Error::NotFormatted(_) | Error::Corrupt(_))
    ));
    let ftl = flashfs::Ftl::format(nor(false), flashfs::FtlConfig::default()).unwrap();
    assert!(matches!(
        Fs::mount(ftl.into_device(), fs_config()),
        Err(Error::NotFormatted(_))
    ));
    let (report, dev) = check_device(nand(), fs_config(), false);
    assert!(!report.mounted && dev.is_none() && !report.problems.is_empty());
}

/// A volume whose superblock block lost its content (the page decayed, or was overwritten)
/// is damage, not a foreign volume: the log's header says it is a file system.
#[test]
fn a_lost_superblock_is_damage_not_a_foreign_volume() {
    use flashfs::BlockDevice;
    let mut fs = Fs::format(nand(), fs_config()).unwrap();
    let ss = fs.block_size() as usize;
    fs.ftl_mut().write(0, &vec![0u8; ss]).unwrap();
    let dev = fs.into_device();
    assert!(matches!(
        Fs::mount(dev, fs_config()),
        Err(Error::Corrupt("the superblock is missing from block 0"))
    ));
}

/// A damaged frame length in an append block: reading the records it held is an error,
/// not a panic or wrong bytes, and `fsck` names the records missing.
#[test]
fn a_damaged_append_block_is_reported() {
    let mut fs = Fs::mount(populate(nor(true)), fs_config()).unwrap();
    let log = fs.resolve(b"/log").unwrap();
    assert_eq!(fs.record_list(log).unwrap().len(), 24);
    let ss = fs.block_size() as usize;
    let mut buf = vec![0u8; ss];
    let mut found = None;
    for k in 1..fs.ftl().sectors() {
        fs.ftl_mut().read(k, &mut buf).unwrap();
        // The magic, no continuation, then the first frame: record 1, 17 bytes of 1
        // (record 0 went with the file's creation, a checkpoint, as items).
        if buf[..3] == [0xA7, 0xFF, 0xFF] && buf[7] == 17 && buf[8..25] == [1; 17] {
            found = Some(k);
        }
    }
    let k = found.expect("the log's first append block");
    fs.ftl_mut().read(k, &mut buf).unwrap();
    // A length past the largest record: no frame.
    buf[7..9].copy_from_slice(&[0x7F, 0xF0]);
    fs.ftl_mut().write(k, &buf).unwrap();
    assert_eq!(fs.record_read(log, 0).unwrap(), [0; 10]);
    assert!(matches!(fs.record_read(log, 1), Err(Error::Corrupt(_))));
    assert!(matches!(fs.record_list(log), Err(Error::Corrupt(_))));
    let report = fs.check(false).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.what.contains("in no item and no data block")),
        "{:?}",
        report.problems
    );
}

/// An entry that counts frames which committed themselves, replayed where those frames no
/// longer say so (a bit set again by damage): the mount reports damage instead of adding a
/// record that is not there, or panicking.
#[test]
fn frames_an_entry_counts_that_are_not_committed_are_damage() {
    // The first add starts a block (an entry); the next two commit themselves; the
    // update's entry counts them. The power then goes.
    let volume = |damage: bool| {
        let mut fs = Fs::format(nor(true), fs_config()).unwrap();
        let f = fs
            .create_records(ROOT_INO, b"sms", RecordFormat::variable(), 0o644, 0, 0)
            .unwrap()
            .ino;
        fs.sync().unwrap();
        for i in 0..3u8 {
            fs.record_add(f, &[i + 1; 20]).unwrap();
            fs.sync().unwrap();
        }
        assert_eq!(fs.stats().frame_commits, 2);
        fs.record_update(f, 0, &[9; 20]).unwrap();
        fs.sync().unwrap();
        let mut buf = vec![0u8; fs.block_size() as usize];
        let last = buf.len() - 1;
        let mut found = None;
        for k in 1..fs.ftl().sectors() {
            fs.ftl_mut().read(k, &mut buf).unwrap();
            // The magic, then the first frame: its length and 20 bytes of 1 (an entry
            // committed it), the second, 20 bytes of 2, and the last byte: the bits of
            // frames 1 and 2 clear.
            if buf[..3] == [0xA7, 0xFF, 0xFF]
                && buf[7..9] == [20, 1]
                && buf[28..30] == [20, 2]
                && buf[last] == 0xF9
            {
                found = Some(k);
            }
        }
        let k = found.expect("the file's append block");
        if damage {
            buf[last] |= 0x02;
            fs.ftl_mut().write(k, &buf).unwrap();
            fs.ftl_mut().flush().unwrap();
        }
        (fs.into_device(), f)
    };
    let (dev, f) = volume(false);
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    let list = fs.record_list(f).unwrap();
    let firsts: Vec<u8> = list.iter().map(|r| r.1[0]).collect();
    assert_eq!(
        firsts,
        [9, 2, 3],
        "intact, the replay finds the records before the count"
    );
    let (dev, _) = volume(true);
    assert!(matches!(
        Fs::mount(dev, fs_config()),
        Err(Error::Corrupt(
            "a journal entry counts frames that are not there"
        ))
    ));
}
