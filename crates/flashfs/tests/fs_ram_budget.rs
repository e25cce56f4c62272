//! One RAM budget for the file system's caches and buffers (`FsConfig::ram_budget`): shared
//! out over them as documented, and the heap a workload takes with it stays within the
//! budget over what it takes with a budget of nothing — while the default configuration,
//! whose caches are larger, takes more.

mod common;

use common::{fs_config, nand_spec};
use flash::{DeviceSpec, ImageMeta, NandSim, NandSpec, NorSim};
use flashfs::fs::{Ino, ROOT_INO};
use flashfs::{Fs, FsConfig, NandSegments, NorSegments};
use flashfs_bench::heap::{CountingAlloc, HeapMeter};
use flashfs_bench::tffs::Uncounted;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

type Dev = NandSegments<Uncounted<NandSim>>;

/// 300 blocks of 64 pages of 512 bytes (9.4 MiB): checkpoints kept, the map paged. The
/// simulator's own storage is not counted.
fn device() -> Dev {
    let spec = NandSpec {
        blocks: 300,
        pages_per_block: 64,
        ..nand_spec()
    };
    let sim = NandSim::new(spec, ImageMeta::new("test-nand-300x64", 1)).unwrap();
    NandSegments::new(Uncounted(sim)).unwrap()
}

fn budget(bytes: Option<usize>) -> FsConfig {
    FsConfig {
        ram_budget: bytes,
        ..fs_config()
    }
}

/// A deterministic stream of numbers.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

/// Many small files, a file made of many extents by overwrites at random places, every
/// byte read back in small pieces, a sync now and then.
fn work(fs: &mut Fs<Dev>, round: u8) {
    let mut rng = Lcg(7);
    let mut files: Vec<Ino> = Vec::new();
    for i in 0..300 {
        let name = format!("{}{i:03}", char::from(b'a' + round));
        let ino = fs
            .create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)
            .unwrap()
            .ino;
        fs.write(ino, 0, &[i as u8; 1500]).unwrap();
        files.push(ino);
        if i % 50 == 49 {
            fs.sync().unwrap();
        }
    }
    let big = fs
        .create(ROOT_INO, &[b'A' + round], 0o644, 0, 0)
        .unwrap()
        .ino;
    // The workload's own buffers on the stack: only the file system's heap is measured.
    let chunk = [0x5Au8; 4096];
    for k in 0..128 {
        fs.write(big, k * 4096, &chunk).unwrap();
    }
    for k in 0..600u32 {
        let at = rng.next(1024) * 512;
        fs.write(big, at, &[k as u8; 512]).unwrap();
        if k % 100 == 99 {
            fs.sync().unwrap();
        }
    }
    let mut buf = [0u8; 200];
    for &ino in files.iter().chain([&big]) {
        let size = fs.getattr(ino).unwrap().inode.size;
        let mut off = 0;
        while off < size {
            off += fs.read(ino, off, &mut buf).unwrap() as u64;
        }
    }
    for _ in 0..2000 {
        let at = rng.next((512 << 10) - 200);
        fs.read(big, at, &mut buf).unwrap();
    }
    fs.sync().unwrap();
}

/// The heap the workload's mount and run take at their peak, on a volume formatted and
/// filled once with the default settings.
fn peak(config: FsConfig) -> u64 {
    let mut fs = Fs::format(device(), fs_config()).unwrap();
    work(&mut fs, 0);
    let dev = fs.unmount().unwrap();
    let meter = HeapMeter::start();
    let mut fs = Fs::mount(dev, config).unwrap();
    work(&mut fs, 1);
    let peak = meter.peak();
    drop(fs);
    peak
}

#[test]
fn a_budget_is_shared_out_over_the_caches_and_buffers() {
    let c = budget(Some(256 << 10)).budgeted(2048);
    assert_eq!(c.ftl.map_cache, 80 << 10);
    assert_eq!(c.tree.cache_bytes, 64 << 10);
    assert_eq!(c.dirty_limit, Some(24));
    assert_eq!(c.extent_map_extents, (32 << 10) / 48);
    assert_eq!(c.extent_maps, 8);
    assert_eq!(c.write_buffer_bytes, 16 << 10);
    assert_eq!(c.read_cache_bytes, 16 << 10);
    // Without a budget the settings stay as they are; with a tiny one the caches keep
    // nothing but the dirty nodes a commit needs.
    let none = budget(None);
    let same = none.budgeted(2048);
    assert_eq!(same.ftl.map_cache, none.ftl.map_cache);
    assert_eq!(same.tree.cache_bytes, none.tree.cache_bytes);
    assert_eq!(same.dirty_limit, none.dirty_limit);
    let tiny = budget(Some(1024)).budgeted(2048);
    assert_eq!(tiny.dirty_limit, Some(8));
    assert_eq!(tiny.extent_maps, 0);
    assert_eq!(tiny.write_buffer_bytes / 2048, 0);
}

#[test]
fn the_heap_stays_within_the_budget_over_a_budget_of_nothing() {
    assert!(CountingAlloc::installed());
    let floor = peak(budget(Some(0)));
    let mut peaks = Vec::new();
    for bytes in [16usize << 10, 64 << 10, 256 << 10] {
        let p = peak(budget(Some(bytes)));
        assert!(
            p <= floor + bytes as u64,
            "budget {bytes}: peak {p} over the floor {floor}"
        );
        peaks.push(p);
    }
    // The workload uses what it is given, and the default caches take more than the
    // smaller budgets.
    assert!(peaks[0] < peaks[2], "{peaks:?}");
    let default = peak(fs_config());
    assert!(
        default > floor + (64 << 10),
        "default {default}, floor {floor}"
    );
}

/// The heap the small-RAM profile's synced 64-byte writes at random places in a 32 KiB
/// file take at their peak on the W25Q64JV, after `writes` of them, with at most
/// `freed_runs` runs of freed blocks kept. Each write is a journal entry; every block it
/// rewrites frees the block before, which the journal's replay reads, so it waits for the
/// checkpoint.
fn synced_random_writes_peak(freed_runs: usize, writes: u32) -> u64 {
    let Ok(DeviceSpec::Nor(spec)) = flash::preset::lookup("w25q64jv").map(|p| p.spec) else {
        panic!("w25q64jv is a NOR preset");
    };
    let sim = NorSim::new(spec, ImageMeta::new("w25q64jv", 3)).unwrap();
    let dev = NorSegments::new(Uncounted(sim), 512).unwrap();
    let config = FsConfig {
        freed_runs,
        atime: fs_config().atime,
        clock: fs_config().clock,
        ..FsConfig::small_ram()
    };
    let meter = HeapMeter::start();
    let mut fs = Fs::format(dev, config).unwrap();
    let ino = fs.create(ROOT_INO, b"random", 0o644, 0, 0).unwrap().ino;
    fs.write(ino, 0, &[0u8; 32 << 10]).unwrap();
    fs.fsync(ino, false).unwrap();
    let mut rng = Lcg(11);
    for k in 0..writes {
        fs.write(ino, rng.next(512) * 64, &[k as u8; 64]).unwrap();
        fs.fsync(ino, false).unwrap();
    }
    let peak = meter.peak();
    drop(fs);
    peak
}

#[test]
fn freed_blocks_waiting_for_a_checkpoint_take_bounded_ram() {
    // Bounded, the peak does not grow with the writes; unbounded, the list of freed
    // blocks does, 16 bytes a run (measured: 55,360 bytes after either count bounded;
    // 55,360 and 71,932 unbounded).
    let (short, long) = (400, 1600);
    let bounded = (
        synced_random_writes_peak(FsConfig::small_ram().freed_runs, short),
        synced_random_writes_peak(FsConfig::small_ram().freed_runs, long),
    );
    let unbounded = (
        synced_random_writes_peak(usize::MAX, short),
        synced_random_writes_peak(usize::MAX, long),
    );
    assert!(bounded.1 <= bounded.0 + (4 << 10), "bounded: {bounded:?}");
    assert!(
        unbounded.1 >= unbounded.0 + (8 << 10),
        "unbounded: {unbounded:?}"
    );
}
