//! Volumes on NVRAM, laid out as reprogrammable NOR (`flash::NvramNor`): the block device and
//! the file system work on it, and a write cut part-way, which NVRAM leaves as a prefix,
//! loses only what no flush acknowledged.

use flash::{preset, DeviceSpec, FaultConfig, ImageMeta, NorFlash, NvramNor, NvramSim, Simulated};
use flashfs::{BlockDevice, Fs, FsConfig, Ftl, FtlConfig, NorSegments, Segments};

type Part = NorSegments<NvramNor<NvramSim>>;

fn part(name: &str) -> Part {
    let DeviceSpec::Nvram(spec) = preset::lookup(name).unwrap().spec else {
        panic!("{name} is NVRAM")
    };
    let sim = NvramSim::new(spec, ImageMeta::new(name, 1)).unwrap();
    NorSegments::new(NvramNor::new(sim).unwrap(), 512).unwrap()
}

#[test]
fn the_file_system_keeps_files_on_fram_across_mounts() {
    let mut fs = Fs::format(part("cy15b102q"), FsConfig::default()).unwrap();
    fs.mkdir_path(b"/logs").unwrap();
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
    fs.write_file(b"/logs/a", &data).unwrap();
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, FsConfig::default()).unwrap();
    assert_eq!(fs.read_file(b"/logs/a").unwrap(), data);
}

/// A cut inside the write of a sector's tag entry leaves a prefix of it on NVRAM (the
/// simulator draws its length): the sector reads as before the write or after it, never as
/// damage. Before log format 14 the entry's check covered only the tag, ahead of the data
/// checksum, so most prefixes read as a valid tag over an unfinished checksum.
#[test]
fn a_cut_inside_a_tag_entry_leaves_the_sector_old_or_new_never_damaged() {
    let base = {
        let mut ftl = Ftl::format(part("cy15b102q"), FtlConfig::default()).unwrap();
        ftl.write(3, &[0xA1; 512]).unwrap();
        ftl.flush().unwrap();
        ftl.close().unwrap()
    };
    for seed in 0..64 {
        let mut ftl = Ftl::mount(base.clone(), FtlConfig::default()).unwrap();
        let flash = ftl.log_mut().device_mut().flash_mut();
        flash.set_faults(FaultConfig {
            seed,
            ..FaultConfig::default()
        });
        // The data, then the entry, torn.
        flash.schedule_cut(1, true);
        assert!(ftl.write(3, &[0xB2; 512]).is_err(), "seed {seed}: the cut");
        let mut dev = ftl.into_device();
        dev.flash_mut().reboot();
        let mut ftl = Ftl::mount(dev, FtlConfig::default()).unwrap();
        let mut back = [0u8; 512];
        ftl.read(3, &mut back)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(
            back == [0xA1; 512] || back == [0xB2; 512],
            "seed {seed}: neither version"
        );
    }
}

/// On NVRAM a segment is taken back by writing `0xFF` over its header and tag summary only
/// (SPEC.md §2.2b): its slots' old data stays until they are written again, over it, and
/// reads back as written; a slot is unwritten when its entry is.
#[test]
fn a_segment_is_taken_back_by_its_header_and_tags_alone() {
    use flashfs::media::tag::{SegHeader, Tag, TagState};
    use flashfs::media::HeaderState;
    // Segments of 256 slots, as beside a NAND part.
    let DeviceSpec::Nvram(spec) = preset::lookup("fram-8m").unwrap().spec else {
        unreachable!()
    };
    let sim = NvramSim::new(spec, ImageMeta::new("fram-8m", 1)).unwrap();
    let mut d = NorSegments::with_slots(NvramNor::new(sim).unwrap(), 512, 256).unwrap();
    let slots = d.geometry().slots;
    let header = SegHeader {
        head: 2,
        slc: false,
        erase_count: 1,
        open_seq: 1,
        volume: flashfs::media::tag::Volume {
            format: 1,
            slot_shift: 9,
            unit_shift: 0,
            size: 100,
            anchors: None,
            regions: 0xFF,
        },
    };
    let tag = |key: u32, seq: u64| Tag {
        key,
        seq,
        kind: flashfs::media::tag::Kind::Sector,
        copy: false,
    };
    d.write_header(1, &header).unwrap();
    for slot in 0..slots {
        d.write_slot(1, slot, &tag(slot, u64::from(slot) + 2), &[0x5A; 512])
            .unwrap();
    }
    let written = |d: &Part| d.flash().stats().bytes_programmed;
    let before = written(&d);
    d.erase(1, false).unwrap();
    let reset = written(&d) - before;
    let segment = u64::from(slots) * 512;
    assert!(
        reset * 20 < segment,
        "{reset} bytes written to take back a segment of {segment}"
    );
    assert_eq!(d.read_header(1).unwrap(), HeaderState::Erased);
    assert!(d.unwritten(1).unwrap());
    let mut raw = [0u8; 512];
    let at = d.data_at(1, 7);
    d.flash_mut().read(at, &mut raw).unwrap();
    assert_eq!(raw, [0x5A; 512], "the old data stays");
    assert!(d.slot_erased(1, 7).unwrap());
    assert_eq!(d.read_tag(1, 7).unwrap(), TagState::Erased);
    // Written again over the old data: a slot whose data ends in erased bytes, and one
    // with bits set that the old data had cleared.
    d.write_header(1, &header).unwrap();
    let mut short = [0xFFu8; 512];
    short[..100].fill(0x33);
    d.write_slot(1, 7, &tag(9, 900), &short).unwrap();
    d.write_slot(1, 8, &tag(10, 901), &[0xA5; 512]).unwrap();
    let mut back = [0u8; 512];
    assert_eq!(
        d.read_slot_tag(1, 7, &mut back).unwrap(),
        TagState::Valid(tag(9, 900))
    );
    assert_eq!(back, short);
    d.read_slot(1, 8, &mut back).unwrap();
    assert_eq!(back, [0xA5; 512]);
}
