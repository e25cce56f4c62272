//! Data damaged at rest is reported, never returned: every slot's data carries a checksum
//! beside its tag (SPEC.md §2.4). On each medium (a NOR preset, the NAND presets with 16 and
//! with 12 free spare bytes), sectors and files are written, bytes of one stored data page
//! are damaged through the simulator, and after a remount reading them is an error that says
//! where, while everything else reads back right.

mod common;

use common::*;
use flash::{preset, DeviceSpec, ImageMeta, NandFlash, NandSim, NorFlash, NorSim};
use flashfs::fs::ROOT_INO;
use flashfs::media::tag::{Kind, TagLayout};
use flashfs::{
    BlockDevice, Damage, Error, Fs, Ftl, FtlConfig, LogConfig, NandSegments, NorSegments, Segments,
};

/// How a stored page is damaged.
#[derive(Debug, Clone, Copy)]
enum How {
    /// One bit flipped.
    Flip(usize),
    /// The whole data area replaced by random bytes.
    Random(u32),
    /// The slot reads as erased: on NAND the whole page (tag too), on NOR its data area.
    Erased,
}

/// A medium whose stored bytes a test can damage.
trait Poke: Segments {
    fn damage(&mut self, seg: u32, slot: u32, how: How);
}

fn damaged(mut data: Vec<u8>, how: How) -> Vec<u8> {
    match how {
        How::Flip(bit) => {
            let n = data.len();
            data[bit / 8 % n] ^= 1 << (bit % 8)
        }
        How::Random(seed) => {
            let mut x = seed | 1;
            for b in &mut data {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
        }
        How::Erased => data.fill(0xFF),
    }
    data
}

impl Poke for NorSegments<NorSim> {
    fn damage(&mut self, seg: u32, slot: u32, how: How) {
        let at = self.data_at(seg, slot);
        let mut data = vec![0u8; self.geometry().slot_size as usize];
        self.flash_mut().read(at, &mut data).unwrap();
        let data = damaged(data, how);
        self.flash_mut().corrupt_at_rest(at, &data).unwrap();
    }
}

impl Poke for NandSegments<NandSim> {
    fn damage(&mut self, seg: u32, slot: u32, how: How) {
        let at = self.slot_page(seg, slot);
        if let How::Erased = how {
            self.flash_mut().erase_page_at_rest(at).unwrap();
            return;
        }
        let mut data = vec![0u8; self.geometry().slot_size as usize];
        self.flash_mut().read_page(at, &mut data, &mut []).unwrap();
        let data = damaged(data, how);
        self.flash_mut().corrupt_at_rest(at, 0, &data).unwrap();
    }
}

/// A NOR part of the m29dw640d preset's geometry, 16 units of it.
fn m29dw640d() -> NorSegments<NorSim> {
    let DeviceSpec::Nor(spec) = preset::lookup("m29dw640d").unwrap().spec else {
        unreachable!()
    };
    let spec = flash::NorSpec {
        units: 16,
        banks: 1,
        ..spec
    };
    NorSegments::new(
        NorSim::new(spec, ImageMeta::new("m29dw640d", 1)).unwrap(),
        512,
    )
    .unwrap()
}

/// A NAND part of a preset's geometry, `blocks` blocks of it, no factory bad blocks.
fn nand_preset(name: &str, blocks: u32) -> NandSegments<NandSim> {
    let DeviceSpec::Nand(spec) = preset::lookup(name).unwrap().spec else {
        unreachable!()
    };
    let spec = flash::NandSpec {
        blocks,
        factory_bad_permille: 0,
        ..spec
    };
    NandSegments::new(NandSim::new(spec, ImageMeta::new(name, 1)).unwrap()).unwrap()
}

/// Volumes that keep checkpoints even when small, so a mount restores the map (an erased
/// page then still has an owner that expects it).
fn ftl_config() -> FtlConfig {
    FtlConfig {
        log: LogConfig {
            checkpoint_min_segments: 4,
            ..LogConfig::default()
        },
        ..FtlConfig::default()
    }
}

/// The slot holding the newest version of sector `key`.
fn newest_slot<D: Segments>(dev: &mut D, key: u32) -> (u32, u32) {
    let (seg, slot, _) = valid_tags(dev)
        .into_iter()
        .filter(|(_, _, t)| t.kind == Kind::Sector && t.key == key)
        .max_by_key(|(_, _, t)| (t.seq, t.copy))
        .expect("sector written");
    (seg, slot)
}

fn assert_damaged(r: flashfs::Result<()>, sector: u64) {
    match r {
        Err(Error::Damaged(Damage {
            sector: Some(s), ..
        })) if s == sector => {}
        r => panic!("sector {sector}: {r:?}, not an error naming it"),
    }
}

/// Sectors 0..8 written once, sector 3 twice (so an older version exists to come back);
/// the newest version of sector 3 damaged at rest.
fn ftl_case<D: Poke>(dev: D, how: How) {
    let cfg = ftl_config();
    let mut ftl = Ftl::format(dev, cfg).unwrap();
    let ss = ftl.sector_size();
    for k in 0..8 {
        ftl.write(k, &pattern(k, 1, ss)).unwrap();
    }
    ftl.write(3, &pattern(3, 2, ss)).unwrap();
    let mut dev = ftl.close().unwrap();
    let (seg, slot) = newest_slot(&mut dev, 3);
    dev.damage(seg, slot, how);
    let mut ftl = Ftl::mount(dev, cfg).unwrap();
    let mut buf = vec![0u8; ss];
    for k in 0..8 {
        if k == 3 {
            let r = ftl.read(3, &mut buf);
            assert!(
                matches!(r, Err(Error::Damaged(d)) if d.slot == Some((seg, slot))),
                "{how:?}: {r:?}"
            );
            assert_eq!(r.unwrap_err().errno(), 5, "EIO");
        } else {
            ftl.read(k, &mut buf).unwrap();
            assert_eq!(buf, pattern(k, 1, ss), "{how:?}: sector {k}");
        }
    }
    // Still an error, never the older version: now, after a remount, after a scan.
    assert_damaged(ftl.read(3, &mut buf), 3);
    let mut ftl = Ftl::mount(ftl.close().unwrap(), cfg).unwrap();
    assert_damaged(ftl.read(3, &mut buf), 3);
    let scan = FtlConfig {
        log: LogConfig {
            scan_mount: true,
            ..cfg.log
        },
        ..cfg
    };
    let mut ftl = Ftl::mount(ftl.close().unwrap(), scan).unwrap();
    assert_damaged(ftl.read(3, &mut buf), 3);
    // Written again, it reads again; the rest of the volume works on.
    ftl.write(3, &pattern(3, 3, ss)).unwrap();
    ftl.read(3, &mut buf).unwrap();
    assert_eq!(buf, pattern(3, 3, ss));
    ftl.write(9, &pattern(9, 1, ss)).unwrap();
    let mut ftl = Ftl::mount(ftl.close().unwrap(), cfg).unwrap();
    for k in (0..8).chain([9]) {
        ftl.read(k, &mut buf).unwrap();
        let v = if k == 3 { 3 } else { 1 };
        assert_eq!(buf, pattern(k, v, ss), "sector {k} at the end");
    }
}

/// Three files of three blocks each; block 1 of the middle one damaged at rest.
fn fs_case<D: Poke>(dev: D, how: How) {
    let mut fs = Fs::format(dev, fs_config()).unwrap();
    let bs = fs.block_size() as usize;
    let content = |i: u64| pattern(1000 + i, 7, 3 * bs);
    let mut inos = Vec::new();
    for i in 0..3 {
        let name = format!("f{i}");
        let a = fs.create(ROOT_INO, name.as_bytes(), 0o644, 0, 0).unwrap();
        fs.write(a.ino, 0, &content(i)).unwrap();
        inos.push(a.ino);
    }
    let victim = inos[1];
    let extents = fs.extents(victim).unwrap();
    let sector = extents
        .iter()
        .find_map(|(b, e)| (*b <= 1 && 1 < b + e.len).then(|| e.start + (1 - b)))
        .expect("block 1 mapped");
    let mut dev = fs.unmount().unwrap();
    let (seg, slot) = newest_slot(&mut dev, sector as u32);
    dev.damage(seg, slot, how);
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    let mut buf = vec![0u8; 3 * bs];
    match fs.read(victim, 0, &mut buf) {
        Err(Error::Damaged(d)) => {
            assert_eq!(d.file, Some((victim, bs as u64)), "{how:?}: {d:?}");
            assert_eq!(d.sector, Some(sector));
            let msg = Error::Damaged(d).to_string();
            assert!(
                msg.contains(&format!("inode {victim} at byte {bs}")),
                "{msg}"
            );
        }
        r => panic!("{how:?}: a read of the damaged file gave {r:?}"),
    }
    // Its undamaged blocks still read; so do the other files.
    let mut first = vec![0u8; bs];
    assert_eq!(fs.read(victim, 0, &mut first).unwrap(), bs);
    assert_eq!(first, content(1)[..bs]);
    for i in [0, 2] {
        assert_eq!(fs.read(inos[i], 0, &mut buf).unwrap(), 3 * bs);
        assert_eq!(buf, content(i as u64), "{how:?}: file {i}");
    }
    // The volume keeps working: a new file, a remount.
    let a = fs.create(ROOT_INO, b"after", 0o644, 0, 0).unwrap();
    fs.write(a.ino, 0, b"still writable").unwrap();
    let mut fs = Fs::mount(fs.unmount().unwrap(), fs_config()).unwrap();
    assert!(matches!(
        fs.read(victim, 0, &mut buf),
        Err(Error::Damaged(_))
    ));
    let mut small = [0u8; 14];
    fs.read(a.ino, 0, &mut small).unwrap();
    assert_eq!(&small, b"still writable");
}

const CASES: [How; 4] = [How::Flip(0), How::Flip(2001), How::Random(77), How::Erased];

#[test]
fn nor_m29dw640d_sectors() {
    for how in CASES {
        ftl_case(m29dw640d(), how);
    }
}

#[test]
fn nor_m29dw640d_files() {
    for how in CASES {
        fs_case(m29dw640d(), how);
    }
}

#[test]
fn nand_w25n01gv_sectors() {
    assert_eq!(
        nand_preset("w25n01gv", 8).tag_layout(),
        TagLayout::Wide,
        "16 free spare bytes: tag and CRC-32C"
    );
    for how in CASES {
        ftl_case(nand_preset("w25n01gv", 64), how);
    }
}

#[test]
fn nand_w25n01gv_files() {
    for how in CASES {
        fs_case(nand_preset("w25n01gv", 64), how);
    }
}

#[test]
fn nand_128m_sectors() {
    assert_eq!(
        nand_preset("nand-128m", 8).tag_layout(),
        TagLayout::Compact,
        "12 free spare bytes: the compact entry"
    );
    for how in CASES {
        ftl_case(nand_preset("nand-128m", 64), how);
    }
}

#[test]
fn nand_128m_files() {
    for how in CASES {
        fs_case(nand_preset("nand-128m", 64), how);
    }
}

/// The data checksum lives beside the tag, not inside it: a damaged data checksum is
/// damaged data (the scan still finds the newest version and reports it), and the sector
/// size stays the page size on every medium.
#[test]
fn sectors_keep_their_size_and_a_damaged_checksum_is_damage() {
    assert_eq!(
        Ftl::format(nand_preset("nand-128m", 16), ftl_config())
            .unwrap()
            .sector_size(),
        512
    );
    let mut ftl = Ftl::format(nand(), ftl_config()).unwrap();
    let ss = ftl.sector_size();
    ftl.write(1, &pattern(1, 1, ss)).unwrap();
    ftl.write(1, &pattern(1, 2, ss)).unwrap();
    let mut dev = ftl.close().unwrap();
    let (seg, slot) = newest_slot(&mut dev, 1);
    // The last spare byte of the entry: part of the data CRC.
    let at = dev.slot_page(seg, slot);
    let mut spare = [0u8; 16];
    dev.flash_mut().read_page(at, &mut [], &mut spare).unwrap();
    spare[15] ^= 0x10;
    dev.flash_mut().corrupt_at_rest(at, ss, &spare).unwrap();
    let scan = FtlConfig {
        log: LogConfig {
            scan_mount: true,
            ..LogConfig::default()
        },
        ..FtlConfig::default()
    };
    let mut ftl = Ftl::mount(dev, scan).unwrap();
    let mut buf = vec![0u8; ss];
    assert_damaged(ftl.read(1, &mut buf), 1);
}

/// A file's block whose page reads as erased on a volume mounted by a scan: the scan finds
/// no tag for its sector, so the block device holds no version of it; the file's extent
/// says it was written, so the read is damage, not a block of zeros.
#[test]
fn an_erased_file_block_on_a_scanned_volume_is_damage_not_zeros() {
    let scan = flashfs::FsConfig {
        ftl: FtlConfig {
            log: LogConfig {
                scan_mount: true,
                ..LogConfig::default()
            },
            ..FtlConfig::default()
        },
        ..fs_config()
    };
    let mut fs = Fs::format(nand_preset("w25n01gv", 64), scan).unwrap();
    let bs = fs.block_size() as usize;
    let a = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    fs.write(a.ino, 0, &pattern(5, 5, 2 * bs)).unwrap();
    let (b, e) = fs.extents(a.ino).unwrap()[0];
    let sector = e.start + (1 - b);
    let mut dev = fs.unmount().unwrap();
    let (seg, slot) = newest_slot(&mut dev, sector as u32);
    dev.damage(seg, slot, How::Erased);
    let mut fs = Fs::mount(dev, scan).unwrap();
    let mut buf = vec![0u8; 2 * bs];
    match fs.read(a.ino, 0, &mut buf) {
        Err(Error::Damaged(d)) => {
            assert_eq!(d.file, Some((a.ino, bs as u64)));
            assert_eq!(d.sector, Some(sector));
            assert_eq!(d.slot, None, "no slot holds it any more");
        }
        r => panic!("{r:?}"),
    }
    let mut first = vec![0u8; bs];
    fs.read(a.ino, 0, &mut first).unwrap();
    assert_eq!(first, pattern(5, 5, 2 * bs)[..bs]);
}

/// `fsck` reads every block in use and names the file and byte range a damaged block held.
#[test]
fn the_check_names_the_file_and_range_of_damaged_data() {
    for how in [How::Flip(77), How::Erased] {
        let mut fs = Fs::format(nand_preset("nand-128m", 64), fs_config()).unwrap();
        let bs = fs.block_size() as u64;
        let a = fs.create(ROOT_INO, b"victim", 0o644, 0, 0).unwrap();
        fs.write(a.ino, 0, &pattern(9, 9, 4 * bs as usize)).unwrap();
        let b = fs.create(ROOT_INO, b"bystander", 0o644, 0, 0).unwrap();
        fs.write(b.ino, 0, &pattern(8, 8, 4 * bs as usize)).unwrap();
        let (first, e) = fs.extents(a.ino).unwrap()[0];
        let sector = e.start + (2 - first);
        let mut dev = fs.unmount().unwrap();
        let (seg, slot) = newest_slot(&mut dev, sector as u32);
        dev.damage(seg, slot, how);
        let mut fs = Fs::mount(dev, fs_config()).unwrap();
        let report = fs.check(false).unwrap();
        assert!(!report.is_clean());
        let p = report
            .problems
            .iter()
            .find(|p| p.ino == Some(a.ino))
            .unwrap_or_else(|| panic!("{how:?}: {:?}", report.problems));
        assert!(
            p.what
                .starts_with(&format!("bytes {}-{} (block {sector})", 2 * bs, 3 * bs - 1)),
            "{}",
            p.what
        );
        assert!(report.problems.iter().all(|p| p.ino != Some(b.ino)));
    }
}

/// A slot that holds another key than the map names is damage, never another sector's data
/// (which passes its own checksum). The at-rest torture found it (nand-128m, kawaguchi-random,
/// seed 841, cut 542): sector 0 read back sector 153's data after a page of the open segment
/// read as erased and its slot was written again while a map still named it.
#[test]
fn a_slot_holding_another_key_is_damage() {
    let mut ftl = Ftl::format(nand_preset("nand-128m", 64), ftl_config()).unwrap();
    let ss = ftl.sector_size();
    ftl.write(1, &pattern(1, 1, ss)).unwrap();
    let mut dev = ftl.close().unwrap();
    let (seg, slot) = newest_slot(&mut dev, 1);
    let mut ftl = Ftl::mount(dev, ftl_config()).unwrap();
    let at = flashfs::SlotAddr { seg, slot };
    let mut buf = vec![0u8; ss];
    ftl.log_mut()
        .read_expecting(at, 1, Kind::Sector, &mut buf, None)
        .unwrap();
    assert_eq!(buf, pattern(1, 1, ss));
    assert_eq!(
        ftl.log_mut()
            .read_expecting(at, 2, Kind::Sector, &mut buf, None),
        Err(Error::Io)
    );
    assert_eq!(
        ftl.log_mut()
            .read_expecting(at, 1, Kind::Trim, &mut buf, None),
        Err(Error::Io)
    );
}

/// Bytes past a file's end are zeros when the file grows over them, whatever its last block
/// holds there on flash. Writes leave zeros there, but damage can bring back older content
/// of that sector (a scan that lost the newest version's tag): the at-rest torture found a
/// file grown after such damage showing erased bytes where zeros belong (st10f280,
/// fs-small-writes, seed 500016, cut 105, torn).
#[test]
fn growing_a_file_shows_zeros_past_its_old_end_whatever_the_block_holds() {
    // Grown by a write inside the last block, by a write past it and by truncate.
    for grow in 0..3 {
        let mut fs = Fs::format(nand_preset("nand-128m", 64), fs_config()).unwrap();
        let bs = fs.block_size() as usize;
        let f = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
        fs.write(f.ino, 0, &pattern(3, 3, 100)).unwrap();
        fs.sync().unwrap();
        let sector = fs.extents(f.ino).unwrap()[0].1.start;
        // The block as damage may leave it: the file's bytes, then something else.
        let mut block = pattern(3, 3, 100);
        block.resize(bs, 0xA5);
        fs.ftl_mut().write(sector, &block).unwrap();
        let mut fs = Fs::mount(fs.unmount().unwrap(), fs_config()).unwrap();
        let end = match grow {
            0 => {
                fs.write(f.ino, 200, b"x").unwrap();
                201
            }
            1 => {
                fs.write(f.ino, 3 * bs as u64, b"x").unwrap();
                3 * bs + 1
            }
            _ => {
                let size = Some(2 * bs as u64);
                fs.setattr(
                    f.ino,
                    flashfs::fs::SetAttr {
                        size,
                        ..Default::default()
                    },
                )
                .unwrap();
                2 * bs
            }
        };
        // Before and after a remount: the zeros are on flash, not only in RAM.
        let zeros = if grow == 0 { 100..200 } else { 100..bs };
        for round in 0..2 {
            let mut got = vec![0u8; end];
            assert_eq!(fs.read(f.ino, 0, &mut got).unwrap(), end);
            assert_eq!(got[..100], pattern(3, 3, 100)[..], "grow {grow}");
            assert!(
                got[zeros.clone()].iter().all(|&b| b == 0),
                "grow {grow} round {round}"
            );
            fs = Fs::mount(fs.unmount().unwrap(), fs_config()).unwrap();
        }
    }
}

/// Sectors 0..100 written on `nand-128m` (64 blocks), closed, the page of sector 40's slot
/// made to read as erased, tag included, and mounted again.
fn sector_40_erased() -> Ftl<NandSegments<NandSim>> {
    let mut ftl = Ftl::format(nand_preset("nand-128m", 64), ftl_config()).unwrap();
    let ss = ftl.sector_size();
    for k in 0..100 {
        ftl.write(k, &pattern(k, 2, ss)).unwrap();
    }
    let mut dev = ftl.close().unwrap();
    let (seg, slot) = newest_slot(&mut dev, 40);
    dev.damage(seg, slot, How::Erased);
    Ftl::mount(dev, ftl_config()).unwrap()
}

/// A live slot whose page reads as erased, tag included, names no sector: the log keeps a
/// count of live slots per segment, not a bit per slot, so the scrub finds it by the count
/// (fewer live slots found than counted), the cleaner asks the owner for the slot by its
/// address, and the sector is reported lost rather than left naming an erased page.
#[test]
fn a_live_slot_whose_tag_is_gone_is_found_by_the_count_and_reported_lost() {
    let mut ftl = sector_40_erased();
    let ss = ftl.sector_size();
    let (report, lost) = ftl.scrub().unwrap();
    assert_eq!(lost, [40]);
    assert_eq!(report.lost_slots, 1, "{report:?}");
    assert!(report.refreshed >= 1, "{report:?}");
    let mut buf = vec![0u8; ss];
    for k in (0..100).filter(|&k| k != 40) {
        ftl.read(k, &mut buf).unwrap();
        assert_eq!(buf, pattern(k, 2, ss), "sector {k}");
    }
    assert_damaged(ftl.read(40, &mut buf), 40);
    let mut ftl = Ftl::mount(ftl.close().unwrap(), ftl_config()).unwrap();
    assert_damaged(ftl.read(40, &mut buf), 40);
}

/// Every valid slot holding a loss record.
fn loss_records<D: Segments>(dev: &mut D) -> Vec<(u32, u32)> {
    valid_tags(dev)
        .into_iter()
        .filter(|(_, _, t)| t.kind == Kind::Lost)
        .map(|(seg, slot, _)| (seg, slot))
        .collect()
}

/// A loss record is kept twice, in two segments: damage at rest destroying either copy
/// leaves the sector failing with EIO after a mount that scans (which has no map to say the
/// sector held data), instead of reading as never written; written again, the sector reads
/// back.
#[test]
fn a_loss_record_outlives_the_loss_of_either_copy() {
    let scan = FtlConfig {
        log: LogConfig {
            scan_mount: true,
            ..ftl_config().log
        },
        ..ftl_config()
    };
    for destroyed in 0..2 {
        let mut ftl = sector_40_erased();
        let ss = ftl.sector_size();
        assert_eq!(ftl.scrub().unwrap().1, [40]);
        let mut dev = ftl.close().unwrap();
        let copies = loss_records(&mut dev);
        assert_eq!(copies.len(), 2, "copies of the loss record: {copies:?}");
        assert_ne!(copies[0].0, copies[1].0, "both copies in one segment");
        let (seg, slot) = copies[destroyed];
        dev.damage(seg, slot, How::Erased);
        let mut ftl = Ftl::mount(dev, scan).unwrap();
        let mut buf = vec![0u8; ss];
        assert_damaged(ftl.read(40, &mut buf), 40);
        // Closed and mounted again, from the checkpoint this time: still lost, and the copy
        // left is kept.
        let mut ftl = Ftl::mount(ftl.close().unwrap(), ftl_config()).unwrap();
        assert_damaged(ftl.read(40, &mut buf), 40);
        ftl.write(40, &pattern(40, 3, ss)).unwrap();
        let mut ftl = Ftl::mount(ftl.close().unwrap(), scan).unwrap();
        ftl.read(40, &mut buf).unwrap();
        assert_eq!(buf, pattern(40, 3, ss));
    }
}

/// Every valid slot holding a trim record.
fn trim_records<D: Segments>(dev: &mut D) -> Vec<(u32, u32)> {
    valid_tags(dev)
        .into_iter()
        .filter(|(_, _, t)| t.kind == Kind::Trim)
        .map(|(seg, slot, _)| (seg, slot))
        .collect()
}

/// A trim record is kept twice, in two segments, as a loss record is: damage at rest
/// destroying either copy must not bring back the versions it hides, whether the mount rolls
/// forward over the record (a power cut after the trim's flush) or scans the whole log.
#[test]
fn a_trim_record_outlives_the_loss_of_either_copy() {
    let scan = FtlConfig {
        log: LogConfig {
            scan_mount: true,
            ..ftl_config().log
        },
        ..ftl_config()
    };
    for (destroyed, config) in [(0, ftl_config()), (1, ftl_config()), (0, scan), (1, scan)] {
        let mut ftl = Ftl::format(nand_preset("nand-128m", 64), ftl_config()).unwrap();
        let ss = ftl.sector_size();
        for k in 0..100 {
            ftl.write(k, &pattern(k, 2, ss)).unwrap();
        }
        let mut ftl = Ftl::mount(ftl.close().unwrap(), ftl_config()).unwrap();
        ftl.trim(40, 10).unwrap();
        ftl.flush().unwrap();
        let mut dev = ftl.into_device();
        let copies = trim_records(&mut dev);
        assert_eq!(copies.len(), 2, "copies of the trim record: {copies:?}");
        assert_ne!(copies[0].0, copies[1].0, "both copies in one segment");
        let (seg, slot) = copies[destroyed];
        dev.damage(seg, slot, How::Erased);
        let mut ftl = Ftl::mount(dev, config).unwrap();
        let mut buf = vec![0u8; ss];
        for k in 0..100 {
            let trimmed = (40..50).contains(&k);
            assert_eq!(ftl.is_mapped(k).unwrap(), !trimmed, "sector {k}");
            if !trimmed {
                ftl.read(k, &mut buf).unwrap();
                assert_eq!(buf, pattern(k, 2, ss), "sector {k}");
            }
        }
        // Closed and mounted again, from the checkpoint, then by a scan: still trimmed.
        let mut ftl = Ftl::mount(ftl.close().unwrap(), ftl_config()).unwrap();
        assert!(!ftl.is_mapped(45).unwrap());
        let mut ftl = Ftl::mount(ftl.close().unwrap(), scan).unwrap();
        assert!(!ftl.is_mapped(45).unwrap());
    }
}

/// A scrub reads every live slot back: a slot whose errors the ECC still corrects has its
/// segment moved to a fresh one (the data reads back, the errors are gone); a slot that no
/// longer reads back is reported lost, by sector, and keeps reading as lost after a remount;
/// the file system names the file and range that lost it.
#[test]
fn a_scrub_moves_wearing_data_and_reports_what_was_lost() {
    let mut ftl = Ftl::format(nand_preset("nand-128m", 64), ftl_config()).unwrap();
    let ss = ftl.sector_size();
    for k in 0..100 {
        ftl.write(k, &pattern(k, 1, ss)).unwrap();
    }
    let mut dev = ftl.close().unwrap();
    let (worn_seg, worn_slot) = newest_slot(&mut dev, 10);
    let t = dev.flash().spec().ecc.correctable as u8;
    let at = dev.slot_page(worn_seg, worn_slot);
    dev.flash_mut().inject_bit_errors(at, t).unwrap();
    let (seg, slot) = newest_slot(&mut dev, 70);
    dev.damage(seg, slot, How::Flip(3));
    let mut ftl = Ftl::mount(dev, ftl_config()).unwrap();
    let (report, lost) = ftl.scrub().unwrap();
    assert_eq!(lost, [70]);
    assert_eq!(report.lost_slots, 1);
    assert!(report.corrected_bits >= u64::from(t), "{report:?}");
    assert!(report.refreshed >= 1, "{report:?}");
    assert!(report.slots >= 99, "{report:?}");
    // Sector 10 moved: the slot with the errors no longer holds it. The power goes right
    // after the scrub, and the mount still restores from a checkpoint (the scrub wrote one
    // once its copies had left the checkpoint's set).
    let mut dev = ftl.into_device();
    assert_ne!(newest_slot(&mut dev, 10), (worn_seg, worn_slot));
    let mut ftl = Ftl::mount(dev, ftl_config()).unwrap();
    assert!(ftl.log().restored());
    let mut buf = vec![0u8; ss];
    for k in (0..100).filter(|&k| k != 70) {
        ftl.read(k, &mut buf).unwrap();
        assert_eq!(buf, pattern(k, 1, ss), "sector {k}");
    }
    assert_damaged(ftl.read(70, &mut buf), 70);
    // A second scrub finds nothing more.
    let (report, lost) = ftl.scrub().unwrap();
    assert!(lost.is_empty());
    assert_eq!((report.lost_slots, report.refreshed), (0, 0), "{report:?}");

    // The file system names the file and range.
    let mut fs = Fs::format(nand_preset("nand-128m", 64), fs_config()).unwrap();
    let bs = fs.block_size() as u64;
    let a = fs.create(ROOT_INO, b"victim", 0o644, 0, 0).unwrap();
    fs.write(a.ino, 0, &pattern(9, 9, 4 * bs as usize)).unwrap();
    let sector = fs.extents(a.ino).unwrap()[0].1.start + 1;
    let mut dev = fs.unmount().unwrap();
    let (seg, slot) = newest_slot(&mut dev, sector as u32);
    dev.damage(seg, slot, How::Flip(11));
    let mut fs = Fs::mount(dev, fs_config()).unwrap();
    let (report, problems) = fs.scrub().unwrap();
    assert_eq!(report.lost_slots, 1);
    assert!(
        problems.iter().any(|p| p.path.as_deref() == Some("/victim")
            && p.what.starts_with(&format!("bytes {}-{}", bs, 2 * bs - 1))),
        "{problems:?}"
    );
}

/// A damaged block of the saved free-space map (SPEC.md §8.5) costs the mount its shortcut,
/// never a file: the mount walks the index instead, the next checkpoint writes a new map and
/// frees the damaged one, and the mount after that reads the new map.
#[test]
fn a_damaged_free_space_map_makes_the_mount_walk() {
    let mut config = fs_config();
    config.ftl.log.checkpoint_min_segments = 4;
    for how in CASES {
        let mut fs = Fs::format(nand_preset("w25n01gv", 32), config).unwrap();
        let bs = fs.block_size() as usize;
        let a = fs.create(ROOT_INO, b"a", 0o644, 0, 0).unwrap().ino;
        fs.write(a, 0, &pattern(5, 1, 5 * bs)).unwrap();
        let map = fs.space_map().expect("a map");
        let mut dev = fs.unmount().unwrap();
        let (seg, slot) = newest_slot(&mut dev, map.start as u32);
        dev.damage(seg, slot, how);
        let mut fs = Fs::mount(dev, config).unwrap();
        assert!(
            !fs.stats().mounted_from_map,
            "{how:?}: the damaged map was read"
        );
        let mut buf = vec![0u8; 5 * bs];
        assert_eq!(fs.read(a, 0, &mut buf).unwrap(), 5 * bs);
        assert_eq!(buf, pattern(5, 1, 5 * bs), "{how:?}");
        // Still in use until a commit names another map: nothing else takes it.
        assert_eq!(fs.space_map(), Some(map.clone()));
        let b = fs.create(ROOT_INO, b"b", 0o644, 0, 0).unwrap().ino;
        fs.write(b, 0, b"after").unwrap();
        fs.checkpoint().unwrap();
        assert_ne!(fs.space_map(), Some(map.clone()), "{how:?}");
        let r = fs.check(false).unwrap();
        assert!(r.is_clean(), "{how:?}: {:?}", r.problems);
        let mut fs = Fs::mount(fs.unmount().unwrap(), config).unwrap();
        assert!(fs.stats().mounted_from_map, "{how:?}: the new map");
        assert_eq!(fs.read(a, 0, &mut buf).unwrap(), 5 * bs);
        assert_eq!(buf, pattern(5, 1, 5 * bs), "{how:?}");
    }
}

/// Small reads of a damaged block go through the read cache: each is an error naming the
/// file's byte and the sector, the first and every one after it (the cache keeps only
/// blocks that passed their check), while the blocks around it are read, and kept, as
/// usual.
#[test]
fn small_reads_of_a_damaged_block_are_errors_every_time() {
    for how in [How::Flip(77), How::Random(5)] {
        let config = flashfs::FsConfig {
            read_cache_bytes: 64 << 10,
            ..fs_config()
        };
        let mut fs = Fs::format(nand_preset("nand-128m", 64), config).unwrap();
        let bs = fs.block_size() as usize;
        let data = pattern(6, 6, 3 * bs);
        let a = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
        fs.write(a.ino, 0, &data).unwrap();
        let (b, e) = fs.extents(a.ino).unwrap()[0];
        let sector = e.start + (1 - b);
        let mut dev = fs.unmount().unwrap();
        let (seg, slot) = newest_slot(&mut dev, sector as u32);
        dev.damage(seg, slot, how);
        let mut fs = Fs::mount(dev, config).unwrap();
        for _ in 0..3 {
            for off in (0..3 * bs).step_by(100) {
                let mut buf = [0u8; 64];
                let r = fs.read(a.ino, off as u64, &mut buf);
                let end = (off + 64).min(3 * bs);
                if (off / bs..=(end - 1) / bs).contains(&1) {
                    match r {
                        Err(Error::Damaged(d)) => {
                            assert_eq!(d.sector, Some(sector), "{how:?} at {off}");
                            assert_eq!(d.file, Some((a.ino, bs as u64)), "{how:?} at {off}");
                        }
                        r => panic!("{how:?} at {off}: {r:?}"),
                    }
                } else {
                    assert_eq!(r, Ok(end - off), "{how:?} at {off}");
                    assert_eq!(buf[..end - off], data[off..end], "{how:?} at {off}");
                }
            }
        }
        let st = fs.read_cache_stats();
        assert_eq!(st.blocks, 2, "{how:?}: {st:?}");
    }
}

/// On NOR, where a commit appends its superblock in place after the records block 0
/// holds: block 0's slot damaged at rest, found by the cleaner in the session (a loss),
/// and the next commit wrote its superblock as a patch of that lost sector, which failed
/// ("a patch of a sector without data"), and the sync with it. Block 0 is now written anew
/// (found by flashfs torture on st10f280).
#[test]
fn a_commit_after_block_0_was_lost_writes_block_0_anew() {
    let mut fs = Fs::format(nor(true), fs_config()).unwrap();
    let bs = fs.block_size() as usize;
    let a = fs.create(ROOT_INO, b"f", 0o644, 0, 0).unwrap();
    for v in 0..3 {
        fs.write(a.ino, 0, &pattern(1, v, 2 * bs)).unwrap();
        fs.sync().unwrap();
    }
    assert!(fs.stats().superblock_appends > 0, "commits append in place");
    let dev = fs.ftl_mut().log_mut().device_mut();
    let (seg, slot) = newest_slot(dev, 0);
    dev.damage(seg, slot, How::Random(7));
    // Found damaged, as the cleaner finds it when it copies the slot: a loss.
    let mut block = vec![0u8; bs];
    assert_damaged(fs.ftl_mut().read_sectors(0, &mut block, true), 0);
    fs.write(a.ino, 0, &pattern(1, 3, 2 * bs)).unwrap();
    fs.sync().unwrap();
    let mut fs = Fs::mount(fs.unmount().unwrap(), fs_config()).unwrap();
    let mut buf = vec![0u8; 2 * bs];
    fs.read(a.ino, 0, &mut buf).unwrap();
    assert_eq!(buf, pattern(1, 3, 2 * bs));
}
