//! What the firmware does with its files, in each build.

#[cfg(not(feature = "baseline"))]
pub use fs::*;

#[cfg(feature = "baseline")]
pub use baseline::*;

/// The file system on the board's NOR part.
#[cfg(not(feature = "baseline"))]
mod fs {
    use flash::adapter::EmbeddedNor;
    use flashfs::fs::{Atime, Ino, Timespec, ROOT_INO};
    use flashfs::{Error, Fs, FsConfig, NorSegments, Result};

    use crate::nor::Nor;

    /// The device as the file system sees it.
    type Dev = NorSegments<EmbeddedNor<Nor>>;

    /// Bytes of a slot, the file system's block on NOR.
    const SLOT: u32 = 512;

    /// The errno-like code an error is reported as.
    pub fn error_code(e: &Error) -> u32 {
        e.errno() as u32
    }

    fn device() -> Result<Dev> {
        NorSegments::new(EmbeddedNor::multiwrite(Nor::take())?, SLOT)
    }

    /// Settings for a part with little RAM: small caches and write buffer.
    fn config() -> FsConfig {
        let mut c = FsConfig {
            clock: now,
            write_buffer_bytes: 2 * SLOT as usize,
            extent_maps: 2,
            tid_window: 4,
            ..FsConfig::default()
        };
        c.tree.cache_bytes = 8 << 10;
        c.ftl.map_cache = 4 << 10;
        if cfg!(feature = "read-only") {
            // A read must not write its file's access time.
            c.atime = Atime::Never;
        }
        c
    }

    /// The wall clock: seconds since boot from a real-time counter (a stub here).
    fn now() -> Timespec {
        // SAFETY: a free-running counter register of the board (see crate::nor's doc).
        let sec = unsafe { core::ptr::read_volatile(0x4000_2404 as *const u32) };
        Timespec {
            sec: sec as i64,
            nsec: 0,
        }
    }

    fn lookup(fs: &mut Fs<Dev>, dir: Ino, name: &[u8]) -> Result<Option<Ino>> {
        match fs.lookup(dir, name) {
            Ok(a) => Ok(Some(a.ino)),
            Err(Error::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Mounts, reads the boot counter and the newest sample, lists the root.
    #[cfg(feature = "read-only")]
    pub fn run() -> Result<()> {
        let mut fs = Fs::mount(device()?, config())?;
        let mut boots = [0u8; 4];
        if let Some(ino) = lookup(&mut fs, ROOT_INO, b"boots")? {
            fs.read(ino, 0, &mut boots)?;
        }
        let mut seen = u32::from_le_bytes(boots);
        let log = fs.resolve(b"/log")?;
        for e in fs.readdir(log, 0, 16)? {
            let attr = fs.getattr(e.ino)?;
            seen = seen.wrapping_add(attr.inode.size as u32);
        }
        if let Some(ino) = lookup(&mut fs, log, b"samples")? {
            let n = fs.records(ino)?;
            if n > 0 {
                let rec = fs.record_read(ino, n - 1)?;
                seen = seen.wrapping_add(rec.len() as u32);
            }
        }
        crate::nor::report(seen);
        Ok(())
    }

    /// A boot of a data logger: mounts (formats a blank part), counts the boot, adds a
    /// sample to a cyclic record file, rotates a log file, changes two files in one
    /// transaction, lets the cleaner work, unmounts.
    #[cfg(not(feature = "read-only"))]
    pub fn run() -> Result<()> {
        use flashfs::fs::{RecordFormat, RenameFlags};

        let mut fs = match Fs::mount(device()?, config()) {
            Ok(fs) => fs,
            Err(Error::NotFormatted(_)) => Fs::format(device()?, config())?,
            Err(e) => return Err(e),
        };

        // The boot counter: read, count, write back durably.
        let boots = match lookup(&mut fs, ROOT_INO, b"boots")? {
            Some(ino) => ino,
            None => fs.create(ROOT_INO, b"boots", 0o644, 0, 0)?.ino,
        };
        let mut n = [0u8; 4];
        fs.read(boots, 0, &mut n)?;
        let count = u32::from_le_bytes(n).wrapping_add(1);
        fs.write(boots, 0, &count.to_le_bytes())?;
        fs.fsync(boots, false)?;

        // A sample, in a cyclic file of the last 1,024.
        let log = match lookup(&mut fs, ROOT_INO, b"log")? {
            Some(ino) => ino,
            None => fs.mkdir(ROOT_INO, b"log", 0o755, 0, 0)?.ino,
        };
        let samples = match lookup(&mut fs, log, b"samples")? {
            Some(ino) => ino,
            None => {
                let format = RecordFormat::cyclic(1024, 16);
                fs.create_records(log, b"samples", format, 0o644, 0, 0)?.ino
            }
        };
        let mut sample = [0u8; 16];
        sample[..4].copy_from_slice(&count.to_le_bytes());
        sample[4..8].copy_from_slice(&now().sec.to_le_bytes()[..4]);
        fs.record_add(samples, &sample)?;

        // The text log: appended to, rotated when large, the oldest removed.
        let text = match lookup(&mut fs, log, b"boot.txt")? {
            Some(ino) => ino,
            None => fs.create(log, b"boot.txt", 0o644, 0, 0)?.ino,
        };
        let line = *b"boot: flash file system mounted\n";
        fs.append(text, &line)?;
        if fs.getattr(text)?.inode.size > 16 << 10 {
            if lookup(&mut fs, log, b"boot.old")?.is_some() {
                fs.unlink(log, b"boot.old")?;
            }
            fs.rename(log, b"boot.txt", log, b"boot.old", RenameFlags::default())?;
        }

        // The settings and their checksum change together or not at all.
        let tid = fs.begin()?;
        let written = fs.in_tx(tid, |fs| {
            let cfg = fs.create(ROOT_INO, b"settings.new", 0o644, 0, 0)?.ino;
            let mut block = [0u8; 256];
            for (i, b) in block.iter_mut().enumerate() {
                *b = (i as u32).wrapping_mul(count) as u8;
            }
            fs.write(cfg, 0, &block)?;
            fs.rename(
                ROOT_INO,
                b"settings.new",
                ROOT_INO,
                b"settings",
                Default::default(),
            )?;
            let sum = block.iter().fold(0u32, |s, &b| s.rotate_left(5) ^ b as u32);
            let crc = match lookup(fs, ROOT_INO, b"settings.sum")? {
                Some(ino) => ino,
                None => fs.create(ROOT_INO, b"settings.sum", 0o644, 0, 0)?.ino,
            };
            fs.write(crc, 0, &sum.to_le_bytes())
        });
        match written {
            Ok(_) => fs.commit_tx(tid)?,
            Err(e) => {
                fs.abort(tid)?;
                return Err(e);
            }
        }

        // Read back what was written and check it.
        let settings = fs.resolve(b"/settings")?;
        let mut back = [0u8; 256];
        if fs.read(settings, 0, &mut back)? != back.len() || back[1] != count as u8 {
            return Err(Error::Io);
        }
        let mut entries = 0;
        let mut cookie = 0;
        loop {
            let page = fs.readdir(ROOT_INO, cookie, 8)?;
            let Some(last) = page.last() else { break };
            cookie = last.cookie;
            entries += page.len();
        }
        let free = fs.statfs().blocks_free;
        crate::nor::report((entries as u32) << 24 | free as u32);

        // Idle time for the cleaner, then a clean unmount (the next mount is then fast).
        fs.idle(core::time::Duration::from_millis(50))?;
        fs.unmount()?;
        Ok(())
    }
}

/// The board without the file system: the driver and the heap used directly.
#[cfg(feature = "baseline")]
mod baseline {
    use alloc::vec;
    use embedded_storage::nor_flash::{NorFlash, ReadNorFlash};

    use crate::nor::{Nor, NorError};

    /// The code an error is reported as.
    pub fn error_code(_: &NorError) -> u32 {
        5
    }

    /// Counts the boot in the first sector, programmed afresh.
    pub fn run() -> Result<(), NorError> {
        let mut nor = Nor::take();
        let mut sector = vec![0u8; Nor::ERASE_SIZE];
        nor.read(0, &mut sector)?;
        let count = u32::from_le_bytes([sector[0], sector[1], sector[2], sector[3]]);
        sector[..4].copy_from_slice(&count.wrapping_add(1).to_le_bytes());
        nor.erase(0, Nor::ERASE_SIZE as u32)?;
        nor.write(0, &sector)?;
        crate::nor::report(count);
        Ok(())
    }
}
