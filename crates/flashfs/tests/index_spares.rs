//! Spare pointers in the file system's index on reprogrammable NOR: fewer nodes written per
//! commit than with path copying, and power cuts during such commits always mount the
//! previous or the new version, never a spare the cut left behind.

mod common;

use std::collections::BTreeMap;

use common::*;
use flash::{NorSim, Simulated};
use flashfs::fs::{Ino, SetAttr, ROOT_INO};
use flashfs::index::TreeConfig;
use flashfs::{Error, Fs, FsConfig, NorSegments};

type Dev = NorSegments<NorSim>;

const FILES: u32 = 60;

/// Test settings with TFFS's small fan-out (2–4 children), so the index is tall on a small
/// volume.
fn config(spares: Option<bool>) -> FsConfig {
    FsConfig {
        spare_pointers: spares,
        tree: TreeConfig {
            max_entries: Some(4),
            ..TreeConfig::default()
        },
        ..fs_config()
    }
}

/// A volume of `FILES` empty files, committed, and their modes.
fn populated(dev: Dev, spares: Option<bool>) -> (Fs<Dev>, BTreeMap<Ino, u32>) {
    let mut fs = Fs::format(dev, config(spares)).unwrap();
    let mut modes = BTreeMap::new();
    for i in 0..FILES {
        let a = fs
            .create(ROOT_INO, format!("file{i:03}").as_bytes(), 0o644, 0, 0)
            .unwrap();
        modes.insert(a.ino, 0o644);
    }
    fs.sync().unwrap();
    assert!(fs.index_height().unwrap() >= 4);
    (fs, modes)
}

fn chmod(fs: &mut Fs<Dev>, ino: Ino, mode: u32) -> Result<(), Error> {
    let set = SetAttr {
        mode: Some(mode),
        ..SetAttr::default()
    };
    fs.setattr(ino, set)?;
    Ok(())
}

fn check_modes(fs: &mut Fs<Dev>, modes: &BTreeMap<Ino, u32>) {
    for (&ino, &mode) in modes {
        assert_eq!(
            fs.getattr(ino).unwrap().inode.mode & 0o7777,
            mode,
            "inode {ino}"
        );
    }
}

fn remount_clean(dev: Dev, spares: Option<bool>) -> (Fs<Dev>, u64) {
    let mut fs = Fs::mount(dev, config(spares)).unwrap();
    let report = fs.check(false).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    (fs, report.garbage_spares)
}

/// Node writes per commit of one changed inode, with and without spare pointers.
fn writes_per_commit(spares: Option<bool>) -> (f64, u64) {
    let (mut fs, mut modes) = populated(nor(true), spares);
    let inos: Vec<Ino> = modes.keys().copied().collect();
    let before = fs.stats();
    let rounds = 40u32;
    for r in 0..rounds {
        let ino = inos[(r as usize * 7) % inos.len()];
        // Never the 0o644 it starts with: every round changes the inode.
        let mode = 0o400 | (r & 0o77);
        chmod(&mut fs, ino, mode).unwrap();
        fs.fsync(ino, false).unwrap();
        modes.insert(ino, mode);
    }
    let after = fs.stats();
    assert_eq!(after.commits - before.commits, u64::from(rounds));
    let writes = after.node_writes - before.node_writes;
    let patches = after.node_patches - before.node_patches;
    check_modes(&mut fs, &modes);
    let (mut fs, _) = remount_clean(fs.unmount().unwrap(), spares);
    check_modes(&mut fs, &modes);
    (writes as f64 / f64::from(rounds), patches)
}

#[test]
fn spare_pointers_write_fewer_nodes_per_commit() {
    let (copying, no_patches) = writes_per_commit(Some(false));
    let (spares, patches) = writes_per_commit(None);
    eprintln!("node writes per commit: {copying:.2} path copying, {spares:.2} spare pointers");
    assert_eq!(no_patches, 0);
    assert!(patches > 0);
    assert!(spares * 2.0 < copying, "{spares} vs {copying}");
}

#[test]
fn devices_that_cannot_patch_copy_paths_as_before() {
    let (mut fs, _) = populated(nor(false), None);
    let ino = fs.lookup(ROOT_INO, b"file007").unwrap().ino;
    let height = fs.index_height().unwrap() as u64;
    let before = fs.stats();
    chmod(&mut fs, ino, 0o600).unwrap();
    fs.sync().unwrap();
    let after = fs.stats();
    assert_eq!(after.node_patches, 0);
    assert_eq!(after.node_writes - before.node_writes, height);
}

/// Changes two inodes far apart in one commit: two leaves written, two spares set.
fn two_changes(fs: &mut Fs<Dev>, a: Ino, b: Ino) -> Result<(), Error> {
    chmod(fs, a, 0o600)?;
    chmod(fs, b, 0o600)?;
    fs.sync()
}

#[test]
fn power_cuts_during_a_spare_commit_mount_the_old_or_the_new_version() {
    let (fs, modes) = populated(nor(true), None);
    let inos: Vec<Ino> = modes.keys().copied().collect();
    let (a, b, c) = (inos[1], inos[inos.len() - 2], inos[inos.len() / 2]);
    let base = fs.unmount().unwrap();

    // How many device operations the commit takes.
    let mut fs = Fs::mount(base.clone(), config(None)).unwrap();
    let ops0 = fs.ftl_mut().log_mut().device_mut().flash().ops();
    let patches0 = fs.stats().node_patches;
    two_changes(&mut fs, a, b).unwrap();
    assert!(fs.stats().node_patches - patches0 >= 2);
    let total = fs.ftl_mut().log_mut().device_mut().flash().ops() - ops0;

    let (mut old_seen, mut new_seen, mut garbage_seen) = (0, 0, 0);
    // Every cut point, clean and torn; and, last, no cut.
    for k in 0..=total {
        for torn in [false, true] {
            let mut fs = Fs::mount(base.clone(), config(None)).unwrap();
            let cut = k < total;
            if cut {
                let flash = fs.ftl_mut().log_mut().device_mut().flash_mut();
                flash.schedule_cut(k, torn);
            }
            let r = two_changes(&mut fs, a, b);
            let mut dev = fs.into_device();
            if cut {
                assert!(
                    matches!(r, Err(Error::Flash(flash::FlashError::PowerLoss))),
                    "cut at {k}: {r:?}"
                );
                dev.flash_mut().reboot();
            } else {
                r.unwrap();
            }

            let (mut fs, garbage) = remount_clean(dev, None);
            garbage_seen += usize::from(garbage > 0);
            let got = fs.getattr(a).unwrap().inode.mode & 0o777;
            let mut want = modes.clone();
            if got == 0o600 {
                new_seen += 1;
                want.insert(a, 0o600);
                want.insert(b, 0o600);
            } else {
                old_seen += 1;
            }
            check_modes(&mut fs, &want);
            // Another commit reuses the generation of the one cut short: what it left in
            // spares must not come back.
            chmod(&mut fs, c, 0o640).unwrap();
            want.insert(c, 0o640);
            fs.sync().unwrap();
            check_modes(&mut fs, &want);
            let (mut fs, garbage) = remount_clean(fs.unmount().unwrap(), None);
            assert_eq!(garbage, 0, "cut at {k}");
            check_modes(&mut fs, &want);
        }
    }
    assert!(
        old_seen > 0 && new_seen > 0,
        "{old_seen} old, {new_seen} new"
    );
    // Some cuts fell between setting a spare and writing the superblock.
    assert!(garbage_seen > 0);
}

/// A node is programmed in place only in its spare area, so a read takes the bytes its write
/// put there and that area, and leaves out the erased bytes between: whatever lies there
/// (here, damage at rest in every node's gap) is never read, and spares set by commits are
/// still found. A read of whole slots would fail every damaged node's checksum.
#[test]
fn a_node_is_read_without_the_erased_bytes_before_its_spare_area() {
    use flash::NorFlash;
    use flashfs::Segments;
    let (mut fs, mut modes) = populated(nor(true), None);
    let inos: Vec<Ino> = modes.keys().copied().collect();
    for (r, &ino) in inos.iter().enumerate().step_by(7) {
        let mode = 0o400 | (r as u32 & 0o77);
        chmod(&mut fs, ino, mode).unwrap();
        fs.fsync(ino, false).unwrap();
        modes.insert(ino, mode);
    }
    assert!(fs.stats().node_patches > 0);
    let mut dev = fs.unmount().unwrap();
    let g = dev.geometry();
    let ss = g.slot_size as usize;
    let spare_at = ss - 16;
    let mut damaged = 0;
    for seg in 0..g.segments {
        for slot in 0..g.slots {
            let at = dev.data_at(seg, slot);
            let mut node = vec![0u8; ss];
            dev.flash_mut().read(at, &mut node).unwrap();
            // The written length its entry records (SPEC.md §2.2): a copy the cleaner made
            // of a node whose spare was set covers the whole slot.
            let mut entry = [0u8; 16];
            let entry_at = dev.entry_at(seg, slot);
            dev.flash_mut().read(entry_at, &mut entry).unwrap();
            let written = usize::from(u16::from_le_bytes([entry[12], entry[13]]) & 0x7FFF);
            // A node with a spare area (format 4), written well before the area.
            if node.starts_with(b"IX") && node[3] == 4 && written + 2 < spare_at {
                let gap = (written + spare_at) / 2;
                dev.flash_mut()
                    .corrupt_at_rest(at + gap as u64, &[0])
                    .unwrap();
                damaged += 1;
            }
        }
    }
    assert!(damaged > 0);
    let (mut fs, _) = remount_clean(dev, None);
    check_modes(&mut fs, &modes);
}
