//! Volumes on NVRAM, laid out as reprogrammable NOR (`flash::NvramNor`): the block device and
//! the file system work on it, and a write cut part-way, which NVRAM leaves as a prefix,
//! loses only what no flush acknowledged.

use flash::{preset, DeviceSpec, FaultConfig, ImageMeta, NvramNor, NvramSim, Simulated};
use flashfs::{BlockDevice, Fs, FsConfig, Ftl, FtlConfig, NorSegments};

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
