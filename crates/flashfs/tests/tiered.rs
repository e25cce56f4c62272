//! Volumes on two devices (FRASH): NVRAM beside NAND, the metadata on the NVRAM's segments
//! and the data on the NAND's, one log over both (`flashfs::media::tiered`).

use flash::{preset, DeviceSpec, ImageMeta, NandSim, NorSim, NvramSim, NvramSpec, Simulated};
use flashfs::log::FastShare;
use flashfs::media::tag::{Kind, Tag, TagState};
use flashfs::media::tiered::{NvramBesideNor, NvramNand, Tiered, MIN_FAST_SEGMENTS};
use flashfs::media::Tier;
use flashfs::{
    BlockDevice, Error, Fs, FsConfig, Ftl, FtlConfig, LogConfig, NandSegments, NorSegments,
    Segments,
};

type Hybrid = NvramNand<NvramSim, NandSim>;

/// nand-128m cut to `blocks` blocks, beside FRAM of `nvram_kib` KiB.
fn hybrid(blocks: u32, nvram_kib: u64) -> Hybrid {
    let DeviceSpec::Nand(spec) = preset::lookup("nand-128m").unwrap().spec else {
        unreachable!()
    };
    let spec = flash::NandSpec {
        blocks,
        factory_bad_permille: 0,
        ..spec
    };
    let nand = NandSim::new(spec, ImageMeta::new("nand", 1)).unwrap();
    let DeviceSpec::Nvram(fram) = preset::lookup("fram-8m").unwrap().spec else {
        unreachable!()
    };
    let fram = NvramSpec {
        size: nvram_kib << 10,
        ..fram
    };
    let nvram = NvramSim::new(fram, ImageMeta::new("fram", 1)).unwrap();
    Tiered::nvram_beside_nand(nvram, nand).unwrap()
}

fn data(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(seed) >> 3) as u8)
        .collect()
}

fn nand_reads(dev: &Hybrid) -> u64 {
    dev.bulk().flash().stats().reads
}

fn fast_segments_in_use<D: Segments>(fs: &Fs<D>) -> usize {
    let log = fs.ftl().log();
    (0..log.geometry().segments)
        .filter(|&s| log.device().tier(s) == Tier::Fast)
        .filter(|&s| log.segments()[s as usize].live() > 0)
        .count()
}

/// Metadata only on the NVRAM: file data there is turned off.
fn metadata_only() -> FsConfig {
    FsConfig {
        fast_tier_file_bytes: 0,
        ..FsConfig::default()
    }
}

#[test]
fn metadata_goes_to_the_nvram_and_data_to_the_nand() {
    let mut fs = Fs::format(hybrid(1024, 512), metadata_only()).unwrap();
    for i in 0..40u32 {
        let name = format!("/f{i}");
        fs.write_file(name.as_bytes(), &data(3000 + i as usize * 100, i + 3))
            .unwrap();
    }
    fs.sync().unwrap();
    let dev = fs.unmount().unwrap();
    let nvram = dev.fast().flash().nvram().stats().bytes_programmed;
    let nand = dev.bulk().flash().stats().bytes_programmed;
    assert!(nvram > 0, "the NVRAM took the metadata");
    let stored: u64 = (0..40).map(|i| 3000 + i * 100).sum();
    assert!(nand >= stored, "the NAND took the data: {nand} < {stored}");
    // The index, journal and checkpoint would take far more than this on the NAND.
    assert!(
        nand < stored * 13 / 10,
        "metadata went to the NAND: {nand} bytes for {stored}"
    );
    let mut fs = Fs::mount(dev, metadata_only()).unwrap();
    for i in 0..40u32 {
        let name = format!("/f{i}");
        assert_eq!(
            fs.read_file(name.as_bytes()).unwrap(),
            data(3000 + i as usize * 100, i + 3)
        );
    }
    assert!(fast_segments_in_use(&fs) > 0, "live metadata on the NVRAM");
}

/// Live slots on the NVRAM, and the slots it has beside its anchors.
fn fast_live_and_room<D: Segments>(fs: &Fs<D>) -> (u64, u64) {
    let log = fs.ftl().log();
    let slots = u64::from(log.geometry().slots);
    let fast: Vec<u32> = (0..log.geometry().segments)
        .filter(|&s| log.device().tier(s) == Tier::Fast)
        .collect();
    let live = fast
        .iter()
        .map(|&s| u64::from(log.segments()[s as usize].live()))
        .sum();
    (live, (fast.len() as u64 - 2) * slots)
}

/// The first 16 KiB of every file go to the NVRAM while data takes less than half of its
/// slots (`FsConfig::fast_tier_file_bytes`): a small file costs no NAND program, a large
/// one only its first blocks' worth less; once the half is taken, data goes to the NAND
/// and the metadata keeps the NVRAM.
#[test]
fn small_files_go_to_the_nvram_while_it_has_room() {
    let mut fs = Fs::format(hybrid(2048, 1024), FsConfig::default()).unwrap();
    fs.sync().unwrap();
    let nand = |fs: &Fs<Hybrid>| {
        let dev = fs.ftl().log().device();
        dev.bulk().flash().stats().bytes_programmed
    };
    let nand0 = nand(&fs);
    for i in 0..40u32 {
        let name = format!("/s{i}");
        fs.write_file(name.as_bytes(), &data(2048, i + 1)).unwrap();
    }
    fs.sync().unwrap();
    // Segment headers at most: 80 KiB of data and their metadata went to the NVRAM.
    assert!(nand(&fs) - nand0 < 4096, "{} NAND bytes", nand(&fs) - nand0);
    // A large file: its first 16 KiB on the NVRAM, the rest on the NAND.
    let nand1 = nand(&fs);
    fs.write_file(b"/large", &data(64 << 10, 99)).unwrap();
    fs.sync().unwrap();
    let on_nand = nand(&fs) - nand1;
    assert!(
        (48 << 10..56 << 10).contains(&on_nand),
        "{on_nand} NAND bytes for 48 KiB past the file's first 16 KiB"
    );
    // Small files until data has half of the NVRAM: later ones go to the NAND.
    let (_, room) = fast_live_and_room(&fs);
    let files = (room / 8 + 200) as u32;
    for i in 0..files {
        let name = format!("/t{i}");
        fs.write_file(name.as_bytes(), &data(4096, i + 7)).unwrap();
    }
    fs.sync().unwrap();
    assert_ne!(fs.ftl().log().fast_tier_share(), FastShare::Any);
    let (live, room) = fast_live_and_room(&fs);
    assert!(
        live < room * 3 / 4,
        "{live} of {room} NVRAM slots live: data took more than its half"
    );
    // Past the half, a file whose data lies on the NVRAM is rewritten there (its old
    // version goes at the commit); one on the NAND stays on the NAND.
    let rewrite = |fs: &mut Fs<Hybrid>, path: &str, content: &[u8]| {
        let ino = fs.resolve(path.as_bytes()).unwrap();
        fs.write(ino, 0, content).unwrap();
        fs.sync().unwrap();
    };
    let nand2 = nand(&fs);
    rewrite(&mut fs, "/s3", &data(2048, 333));
    assert_eq!(
        nand(&fs),
        nand2,
        "the rewrite of a file on the NVRAM went to the NAND"
    );
    let last = format!("/t{}", files - 1);
    rewrite(&mut fs, &last, &data(4096, 444));
    assert!(
        nand(&fs) - nand2 >= 4096,
        "the rewrite of a file on the NAND left it"
    );
    let (live, room) = fast_live_and_room(&fs);
    assert!(live < room * 3 / 4, "{live} of {room} NVRAM slots live");
    let dev = fs.unmount().unwrap();
    // The metadata stayed on the NVRAM: the mount after a close reads no NAND.
    let before = nand_reads(&dev);
    let mut fs = Fs::mount(dev, FsConfig::default()).unwrap();
    assert_eq!(nand_reads(fs.ftl().log().device()), before);
    for i in (0..40u32).step_by(7) {
        let name = format!("/s{i}");
        assert_eq!(fs.read_file(name.as_bytes()).unwrap(), data(2048, i + 1));
    }
    assert_eq!(fs.read_file(b"/s3").unwrap(), data(2048, 333));
    assert_eq!(fs.read_file(last.as_bytes()).unwrap(), data(4096, 444));
    for i in (0..files - 1).step_by(13) {
        let name = format!("/t{i}");
        assert_eq!(fs.read_file(name.as_bytes()).unwrap(), data(4096, i + 7));
    }
    assert_eq!(fs.read_file(b"/large").unwrap(), data(64 << 10, 99));
    // Deleting small files gives the NVRAM back to data.
    for i in 0..files {
        let name = format!("/t{i}");
        fs.remove_path(name.as_bytes()).unwrap();
    }
    fs.sync().unwrap();
    assert_eq!(fs.ftl().log().fast_tier_share(), FastShare::Any);
    assert!(fs.check(false).unwrap().is_clean());
}

/// After a clean unmount the mount reads the NVRAM only: the closed root describes the log
/// whole, and nothing was programmed after it.
#[test]
fn a_mount_after_a_close_reads_no_nand() {
    let mut fs = Fs::format(hybrid(2048, 1024), FsConfig::default()).unwrap();
    for i in 0..100u32 {
        let name = format!("/f{i}");
        fs.write_file(name.as_bytes(), &data(10_000, i + 1))
            .unwrap();
    }
    let dev = fs.unmount().unwrap();
    let before = nand_reads(&dev);
    let fs = Fs::mount(dev, FsConfig::default()).unwrap();
    assert_eq!(nand_reads(fs.ftl().log().device()), before);
    // A session that writes reopens the root first; the next mount after a cut rolls
    // forward and finds what was synced.
    let mut fs = fs;
    fs.write_file(b"/late", &data(5000, 77)).unwrap();
    fs.sync().unwrap();
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, FsConfig::default()).unwrap();
    assert_eq!(fs.read_file(b"/late").unwrap(), data(5000, 77));
    assert_eq!(fs.read_file(b"/f42").unwrap(), data(10_000, 43));
}

/// Metadata alone (directories, a sync after each) stays on the NVRAM while it has free
/// segments: a checkpoint's set gives the metadata head only a quarter of its segments, and
/// once it has opened them a new checkpoint gives it more, rather than its next segment
/// coming from the NAND.
#[test]
fn synced_metadata_stays_on_the_nvram_while_it_has_room() {
    let mut fs = Fs::format(hybrid(2048, 1024), FsConfig::default()).unwrap();
    fs.sync().unwrap();
    let log = fs.ftl().log();
    let fast_free = (0..log.geometry().segments)
        .filter(|&s| log.device().tier(s) == Tier::Fast)
        .filter(|&s| log.segments()[s as usize].live() == 0)
        .count();
    let nand = |fs: &Fs<Hybrid>| fs.ftl().log().device().bulk().flash().stats().programs;
    let nvram = |fs: &Fs<Hybrid>| {
        let dev = fs.ftl().log().device();
        dev.fast().flash().nvram().stats().bytes_programmed
    };
    let (nand0, nvram0) = (nand(&fs), nvram(&fs));
    for i in 0..150u32 {
        let name = format!("/e{i}");
        fs.mkdir_path(name.as_bytes()).unwrap();
        fs.sync().unwrap();
    }
    let slot = u64::from(fs.ftl().log().geometry().slot_size);
    let slots = fs.ftl().log().geometry().slots as u64;
    let written = nvram(&fs) - nvram0;
    // More than the set's share of the NVRAM, less than the NVRAM's free segments hold.
    assert!(written > 4 * slots * slot, "{written} bytes on the NVRAM");
    assert!(
        written < fast_free as u64 * slots * slot * 3 / 4,
        "{written} bytes, {fast_free} free segments"
    );
    assert_eq!(nand(&fs) - nand0, 0, "metadata went to the NAND");
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, FsConfig::default()).unwrap();
    assert!(fs.resolve(b"/e149").is_ok());
    assert!(fs.check(false).unwrap().is_clean());
}

/// An NVRAM too small for the metadata: it spills to the NAND, and nothing is lost.
#[test]
fn metadata_spills_to_the_nand_when_the_nvram_is_full() {
    let dev = hybrid(512, 72);
    assert_eq!(dev.fast_segments(), MIN_FAST_SEGMENTS, "the smallest NVRAM");
    let mut fs = Fs::format(dev, FsConfig::default()).unwrap();
    for i in 0..300u32 {
        let name = format!("/f{i}");
        fs.write_file(name.as_bytes(), &data(700, i + 5)).unwrap();
    }
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, FsConfig::default()).unwrap();
    for i in 0..300u32 {
        let name = format!("/f{i}");
        assert_eq!(fs.read_file(name.as_bytes()).unwrap(), data(700, i + 5));
    }
    let report = fs.check(false).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

/// Writes larger than the NAND's share of a checkpoint's set of segments stay on the NAND:
/// once that share is used up the log opens NAND segments outside the set, rather than
/// taking the NVRAM's share of it for data while the NAND has room.
#[test]
fn data_stays_on_the_nand_when_a_checkpoints_set_runs_out() {
    let fs = Ftl::format(hybrid(8192, 8192), FtlConfig::default()).unwrap();
    let dev = fs.close().unwrap();
    // The mount takes the set the close's checkpoint named.
    let mut ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
    let chunk = 2048u64;
    for i in 0..4 {
        ftl.write(i * chunk, &data(chunk as usize * 512, i as u32 + 1))
            .unwrap();
    }
    ftl.flush().unwrap();
    let log = ftl.log();
    let fast_live: u64 = (0..log.geometry().segments)
        .filter(|&s| log.device().tier(s) == Tier::Fast)
        .map(|s| u64::from(log.segments()[s as usize].live()))
        .sum();
    // The sector map and the checkpoint take a few dozen slots; 8,192 slots of data were
    // written.
    assert!(fast_live < 200, "{fast_live} slots live on the NVRAM");
    for i in 0..4 {
        let mut buf = vec![0u8; chunk as usize * 512];
        ftl.read(i * chunk, &mut buf).unwrap();
        assert!(buf == data(chunk as usize * 512, i as u32 + 1));
    }
}

#[test]
fn the_two_devices_must_have_segments_of_one_shape() {
    let DeviceSpec::Nand(spec) = preset::lookup("nand-128m").unwrap().spec else {
        unreachable!()
    };
    let spec = flash::NandSpec {
        blocks: 64,
        factory_bad_permille: 0,
        ..spec
    };
    let nand = NandSegments::new(NandSim::new(spec, ImageMeta::new("nand", 1)).unwrap()).unwrap();
    let DeviceSpec::Nvram(fram) = preset::lookup("cy15b102q").unwrap().spec else {
        unreachable!()
    };
    let sim = NvramSim::new(fram, ImageMeta::new("fram", 1)).unwrap();
    let nvram = NorSegments::new(flash::NvramNor::new(sim).unwrap(), 512).unwrap();
    let g = nand.geometry();
    assert!(matches!(
        Tiered::new(nvram, nand.clone()),
        Err(Error::InvalidArgument(_))
    ));
    // The shape alike, the NVRAM must still hold both anchors and a segment of metadata.
    let nvram_of = |kib: u64| {
        let fram = NvramSpec {
            size: kib << 10,
            ..fram
        };
        let sim = NvramSim::new(fram, ImageMeta::new("fram", 1)).unwrap();
        NorSegments::with_slots(flash::NvramNor::new(sim).unwrap(), g.slot_size, g.slots).unwrap()
    };
    let two = nvram_of(48);
    assert_eq!(two.geometry().segments, 2);
    assert!(matches!(
        Tiered::new(two, nand.clone()),
        Err(Error::InvalidArgument(_))
    ));
    let three = nvram_of(72);
    assert_eq!(three.geometry().segments, MIN_FAST_SEGMENTS);
    assert!(Tiered::new(three, nand).is_ok());
}

fn ftl_config() -> FtlConfig {
    FtlConfig {
        log: LogConfig {
            checkpoint_min_segments: 4,
            ..LogConfig::default()
        },
        ..FtlConfig::default()
    }
}

const SECTORS: u64 = 40;

/// The workload cut below: sectors written in rounds, a flush after every fourth write.
/// Keeps the sectors' contents as last flushed, as last written, and the write under way.
fn workload(
    ftl: &mut Ftl<Hybrid>,
    flushed: &mut [u8],
    written: &mut [u8],
    in_flight: &mut Option<(u64, u8)>,
) -> flashfs::Result<()> {
    for i in 0..400u64 {
        let sector = (i * 7) % SECTORS;
        let v = (i % 250 + 1) as u8;
        // A write the cut interrupts may land or not.
        *in_flight = Some((sector, v));
        ftl.write(sector, &[v; 512])?;
        *in_flight = None;
        written[sector as usize] = v;
        if i % 4 == 3 {
            ftl.flush()?;
            flushed.copy_from_slice(written);
        }
    }
    ftl.flush()?;
    flushed.copy_from_slice(written);
    Ok(())
}

/// Every cut, on either device (torn: the NVRAM keeps a prefix of the write, the NAND a
/// garbled page), during writes, flushes, checkpoints and cleaning: each sector then reads
/// as flushed last, or as written after.
#[test]
fn every_cut_on_either_device_loses_nothing_flushed() {
    let base = {
        let ftl = Ftl::format(hybrid(64, 256), ftl_config()).unwrap();
        ftl.close().unwrap()
    };
    // Operations the workload takes on each device, uncut.
    let (nvram_ops, nand_ops) = {
        let mut ftl = Ftl::mount(base.clone(), ftl_config()).unwrap();
        let dev = ftl.log().device();
        let (v0, n0) = (dev.fast().flash().nvram().ops(), dev.bulk().flash().ops());
        let mut f = [0u8; SECTORS as usize];
        let mut w = f;
        workload(&mut ftl, &mut f, &mut w, &mut None).unwrap();
        let dev = ftl.log().device();
        (
            dev.fast().flash().nvram().ops() - v0,
            dev.bulk().flash().ops() - n0,
        )
    };
    assert!(nvram_ops > 10 && nand_ops > 300, "{nvram_ops} {nand_ops}");
    let mut cuts = 0;
    for on_nvram in [true, false] {
        let ops = if on_nvram { nvram_ops } else { nand_ops };
        for at in 0..ops {
            let mut ftl = Ftl::mount(base.clone(), ftl_config()).unwrap();
            let dev = ftl.log_mut().device_mut();
            if on_nvram {
                dev.fast_mut()
                    .flash_mut()
                    .nvram_mut()
                    .schedule_cut(at, true);
            } else {
                dev.bulk_mut().flash_mut().schedule_cut(at, true);
            }
            let mut flushed = [0u8; SECTORS as usize];
            let mut written = flushed;
            let mut in_flight = None;
            let r = workload(&mut ftl, &mut flushed, &mut written, &mut in_flight);
            assert!(r.is_err(), "cut {at} (nvram: {on_nvram}) never came");
            cuts += 1;
            let mut dev = ftl.into_device();
            dev.fast_mut().flash_mut().nvram_mut().reboot();
            dev.bulk_mut().flash_mut().reboot();
            let mut ftl = Ftl::mount(dev, ftl_config())
                .unwrap_or_else(|e| panic!("cut {at} (nvram: {on_nvram}): mount: {e}"));
            for s in 0..SECTORS {
                let mut back = [0u8; 512];
                ftl.read(s, &mut back)
                    .unwrap_or_else(|e| panic!("cut {at} (nvram: {on_nvram}) sector {s}: {e}"));
                let (f, w) = (flushed[s as usize], written[s as usize]);
                let cut = in_flight.filter(|&(at, _)| at == s).map(|(_, v)| v);
                assert!(
                    back == [f; 512]
                        || back == [w; 512]
                        || cut.is_some_and(|v| back == [v; 512])
                        || (f == 0 && back == [0xFF; 512]),
                    "cut {at} (nvram: {on_nvram}) sector {s}: read {}, flushed {f}, written {w}",
                    back[0]
                );
            }
        }
    }
    assert_eq!(cuts, nvram_ops + nand_ops);
}

/// A session after a close appends the close's root again before its first program, so a
/// mount after a cut rolls forward from it instead of trusting the close: what the session
/// synced (an unlink, a rewrite) is found.
#[test]
fn a_session_after_a_close_is_found_after_a_cut() {
    let mut fs = Fs::format(hybrid(256, 256), FsConfig::default()).unwrap();
    for i in 0..8u32 {
        fs.write_file(format!("/f{i}").as_bytes(), &data(6000, i + 1))
            .unwrap();
    }
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, FsConfig::default()).unwrap();
    fs.remove_path(b"/f3").unwrap();
    fs.write_file(b"/f5", &data(4000, 99)).unwrap();
    fs.sync().unwrap();
    // No unmount: as a power cut after the sync.
    let dev = fs.into_device();
    let mut fs = Fs::mount(dev, FsConfig::default()).unwrap();
    assert!(fs.read_file(b"/f3").is_err(), "the unlink was synced");
    assert_eq!(fs.read_file(b"/f5").unwrap(), data(4000, 99));
    assert_eq!(fs.read_file(b"/f4").unwrap(), data(6000, 5));
}

/// Metadata written many times over what the NVRAM holds stays there: the NVRAM's segments
/// are cleaned on their own once few are free, though the NAND has hundreds free (the
/// cleaner's threshold counts both tiers).
#[test]
fn the_nvram_is_cleaned_on_its_own() {
    let mut fs = Fs::format(hybrid(1024, 256), FsConfig::default()).unwrap();
    let nvram = |fs: &Fs<Hybrid>| {
        let dev = fs.ftl().log().device();
        dev.fast().flash().nvram().stats().bytes_programmed
    };
    let nand = |fs: &Fs<Hybrid>| fs.ftl().log().device().bulk().flash().stats().programs;
    let (nvram0, nand0) = (nvram(&fs), nand(&fs));
    for i in 0..1500u32 {
        let name = format!("/e{}", i % 50);
        fs.write_file(name.as_bytes(), b"").unwrap();
        fs.sync().unwrap();
    }
    let written = nvram(&fs) - nvram0;
    assert!(
        written > 4 * 256 * 1024,
        "{written} bytes: more than the NVRAM holds"
    );
    // Segment headers and a few spilled slots at most; the metadata itself (thousands of
    // slots) went to the NVRAM.
    let spilled = nand(&fs) - nand0;
    assert!(spilled < 100, "{spilled} NAND pages programmed");
    let dev = fs.unmount().unwrap();
    let before = nand_reads(&dev);
    let mut fs = Fs::mount(dev, FsConfig::default()).unwrap();
    assert_eq!(nand_reads(fs.ftl().log().device()), before);
    assert_eq!(fs.read_file(b"/e49").unwrap(), b"");
    assert!(fs.check(false).unwrap().is_clean());
}

type HybridNor = NvramBesideNor<NvramSim, NorSim>;

/// The W25Q64JV (SPI NOR, whose tag entries wait in RAM for a program page) beside the
/// 256 KiB CY15B102Q FRAM.
fn hybrid_nor() -> HybridNor {
    let DeviceSpec::Nor(spec) = preset::lookup("w25q64jv").unwrap().spec else {
        unreachable!()
    };
    let nor = NorSim::new(spec, ImageMeta::new("nor", 1)).unwrap();
    let DeviceSpec::Nvram(fram) = preset::lookup("cy15b102q").unwrap().spec else {
        unreachable!()
    };
    let nvram = NvramSim::new(fram, ImageMeta::new("fram", 1)).unwrap();
    Tiered::nvram_beside_nor(nvram, NorSegments::new(nor, 512).unwrap()).unwrap()
}

/// NVRAM beside NOR flash is a volume like NVRAM beside NAND: the NOR keeps its own
/// segments, the NVRAM's hold as many slots; small files and metadata go to the NVRAM, the
/// rest of the data to the NOR, and a mount after a close reads nothing of the NOR.
#[test]
fn nvram_beside_nor_keeps_metadata_and_small_files_off_the_nor() {
    let dev = hybrid_nor();
    let (f, b) = (dev.fast().geometry(), dev.bulk().geometry());
    assert_eq!((b.segments, b.slots, b.slot_size), (512, 30, 512));
    assert_eq!((f.slots, f.slot_size), (30, 512));
    assert_eq!(f.segments, 16, "256 KiB in segments of two 8 KiB units");
    let nor_programmed = |d: &HybridNor| d.bulk().flash().stats().bytes_programmed;

    let mut fs = Fs::format(dev, FsConfig::default()).unwrap();
    let before = nor_programmed(fs.ftl().log().device());
    for i in 0..8u32 {
        fs.write_file(format!("/small{i}").as_bytes(), &data(700, i + 1))
            .unwrap();
        fs.sync().unwrap();
    }
    assert_eq!(
        nor_programmed(fs.ftl().log().device()),
        before,
        "small files and their metadata cost no NOR program"
    );
    fs.write_file(b"/large", &data(200_000, 9)).unwrap();
    fs.sync().unwrap();
    let large = nor_programmed(fs.ftl().log().device()) - before;
    assert!(
        (180_000..240_000).contains(&large),
        "the large file's data past its first 16 KiB went to the NOR: {large} bytes"
    );

    let dev = fs.unmount().unwrap();
    let reads = dev.bulk().flash().stats().reads;
    let mut fs = Fs::mount(dev, FsConfig::default()).unwrap();
    assert_eq!(
        fs.ftl().log().device().bulk().flash().stats().reads,
        reads,
        "a mount after a close reads the NVRAM only"
    );
    for i in 0..8u32 {
        assert_eq!(
            fs.read_file(format!("/small{i}").as_bytes()).unwrap(),
            data(700, i + 1)
        );
    }
    assert_eq!(fs.read_file(b"/large").unwrap(), data(200_000, 9));
    fs.check(true).unwrap();
}

/// The SPI NOR's tag entries wait in RAM until a program page fills or a barrier; on two
/// devices the log asks for them before an erase on the NVRAM, which may destroy the only
/// other copy of the slots they vouch for ([`Segments::program_waiting`]): after it, a cut
/// no longer takes them.
#[test]
fn waiting_nor_entries_are_programmed_when_asked() {
    let mut dev = hybrid_nor();
    let split = dev.fast_segments();
    let (seg, slot_size) = (split + 3, dev.geometry().slot_size as usize);
    dev.erase(seg, false).unwrap();
    let tag = Tag {
        key: 7,
        seq: 1,
        kind: Kind::Sector,
        copy: false,
    };
    dev.write_slot(seg, 0, &tag, &vec![0x42; slot_size])
        .unwrap();
    let after_cut = |d: &HybridNor| {
        let mut d = d.clone();
        d.power_cut();
        d.read_tag(seg, 0).unwrap()
    };
    assert_eq!(after_cut(&dev), TagState::Erased, "the entry waits in RAM");
    dev.program_waiting().unwrap();
    assert_eq!(after_cut(&dev), TagState::Valid(tag));
}

/// A volume on two devices never programs a written slot again, so a slot on the NVRAM is
/// read as far as its write went (the written length its entry records) and the rest is
/// the erased bytes the write left: a half-full index node costs half a slot's accesses.
/// Bytes past that length are never returned as data, whatever lies there; a byte changed
/// below it is damage.
#[test]
fn a_slot_on_the_nvram_is_read_as_far_as_it_was_written() {
    use flash::{Nvram, Simulated};
    let mut dev = hybrid(64, 512);
    let (seg, slot_size) = (2, dev.geometry().slot_size as usize);
    assert_eq!(dev.tier(seg), Tier::Fast);
    dev.erase(seg, false).unwrap();
    let tag = Tag {
        key: 9,
        seq: 1,
        kind: Kind::Sector,
        copy: false,
    };
    let payload = data(100, 7);
    dev.write_slot(seg, 1, &tag, &payload).unwrap();
    let mut want = vec![0xFFu8; slot_size];
    want[..100].copy_from_slice(&payload);
    let at = dev.fast().data_at(seg, 1);

    // Bytes past the written length hold something else (a stray write, damage at rest):
    // the slot still reads as written, and only its written bytes and entry are read.
    dev.fast_mut()
        .flash_mut()
        .nvram_mut()
        .write(at + 300, &[0u8; 8])
        .unwrap();
    let bytes_read = |d: &Hybrid| d.fast().flash().stats().bytes_read;
    let before = bytes_read(&dev);
    let mut buf = vec![0u8; slot_size];
    assert_eq!(
        dev.read_slot_tag(seg, 1, &mut buf),
        Ok(TagState::Valid(tag))
    );
    assert_eq!(buf, want);
    let read = bytes_read(&dev) - before;
    assert!((100..=100 + 16).contains(&read), "{read} bytes read");
    dev.read_slot(seg, 1, &mut buf).unwrap();
    assert_eq!(buf, want);

    // The medium alone reads the whole slot (its slots may be programmed again in place
    // past the written length) and returns those bytes.
    let mut whole = vec![0u8; slot_size];
    assert_eq!(
        dev.fast_mut().read_slot_tag(seg, 1, &mut whole),
        Ok(TagState::Valid(tag))
    );
    assert_eq!(&whole[300..308], &[0u8; 8]);

    // A byte changed inside the written length fails the data checksum.
    dev.fast_mut()
        .flash_mut()
        .nvram_mut()
        .write(at + 50, &[!payload[50]])
        .unwrap();
    assert_eq!(dev.read_slot(seg, 1, &mut buf), Err(Error::Io));
    // A slot whose entry reads erased is damage where data was expected, its data unread.
    let before = bytes_read(&dev);
    assert_eq!(dev.read_slot(seg, 5, &mut buf), Err(Error::Io));
    assert!(bytes_read(&dev) - before <= 16);
}
