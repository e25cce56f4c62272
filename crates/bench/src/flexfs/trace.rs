//! A mobile workload (FlexFS §5.2 replays a trace of a phone's applications; this is a
//! seeded synthetic trace of the kinds it describes, not that trace): text messages
//! appended to a message store whose pages are also rewritten, call records, photos taken
//! and viewed, songs added and played, and a web cache of small files created, read and
//! evicted. Operations are separated by idle gaps (exponential, mean 1 s, at most 10 s),
//! where the log migrates; the volume starts with songs and photos on it.
//!
//! A request is one `read` or `write` call (an operation's `fsync` counts in its last
//! write); its response time is device time from its arrival (after the gap, or the end
//! of the request before it) to its end, so a migration step it arrives into counts.
//! Throughput: bytes over the device time of the requests.

use std::collections::VecDeque;
use std::time::Duration;

use flash::stats::Histogram;
use flashfs::fs::ROOT_INO;
use flashfs::{Fs, Regions};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::{config, device, now, response_us, Dev, Experiment, FlexfsOptions, FlexfsRow};
use crate::error::{Context, Result};

/// Bytes per read or write call of bulk data.
const IO: usize = 64 << 10;

/// Songs, photos and cache files the phone keeps (the oldest deleted): at most about
/// 40% of the part with the song being added, so that SLC-only (half) holds it all.
const SONGS: usize = 2;
const PHOTOS: usize = 3;
const CACHE: usize = 32;

/// A file of the phone's: name, inode, size.
type File = (String, u64, u64);

/// The phone: its files (oldest first) and the requests' timing.
struct Phone {
    rng: Xoshiro256PlusPlus,
    data: Vec<u8>,
    made: u64,
    sms: File,
    calls: File,
    photos: VecDeque<File>,
    songs: VecDeque<File>,
    cache: VecDeque<File>,
    /// A sixteenth of the part: a song is 3/4 to 5/4 of it, a photo 1/4 to 1/2 (on 64 MiB,
    /// 3–5 MiB and 1–2 MiB).
    unit: u64,
    /// When the next request arrives.
    arrival: Duration,
    reads: Histogram,
    writes: Histogram,
    read_bytes: u64,
    written: u64,
    read_time: Duration,
    write_time: Duration,
}

type Io<T> = flashfs::Result<T>;

impl Phone {
    fn below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n.max(1)
    }

    fn new_file(&mut self, fs: &mut Fs<Dev>, kind: &str) -> Io<File> {
        self.made += 1;
        let name = format!("{kind}{:06}", self.made);
        let ino = fs.create(ROOT_INO, name.as_bytes(), 0o644, 0, 0)?.ino;
        Ok((name, ino, 0))
    }

    /// Writes `len` bytes at `off` of `ino` in calls of [`IO`], the last followed by an
    /// `fsync`; each call is a timed request.
    fn write(&mut self, fs: &mut Fs<Dev>, ino: u64, off: u64, len: usize) -> Io<()> {
        let mut done = 0;
        while done < len {
            let t0 = self.arrival.min(now(fs));
            let n = (len - done).min(IO);
            fs.write(ino, off + done as u64, &self.data[..n])?;
            done += n;
            if done == len {
                fs.fsync(ino, false)?;
            }
            let took = now(fs) - t0;
            self.writes.record(took);
            self.write_time += took;
            self.written += n as u64;
            self.arrival = now(fs);
        }
        Ok(())
    }

    /// Reads `len` bytes at `off` of `ino` in timed calls of [`IO`].
    fn read(&mut self, fs: &mut Fs<Dev>, ino: u64, off: u64, len: u64) -> Io<()> {
        let mut buf = vec![0u8; IO];
        let mut at = off;
        while at < off + len {
            let t0 = self.arrival.min(now(fs));
            let want = (off + len - at).min(IO as u64) as usize;
            let n = fs.read(ino, at, &mut buf[..want])?;
            let took = now(fs) - t0;
            self.reads.record(took);
            self.read_time += took;
            self.read_bytes += n as u64;
            self.arrival = now(fs);
            if n == 0 {
                break;
            }
            at += n as u64;
        }
        Ok(())
    }

    /// A new file of `size` bytes, kept in `list` (at most `keep`, the oldest deleted).
    fn add(&mut self, fs: &mut Fs<Dev>, kind: &str, size: u64, keep: usize) -> Io<()> {
        let (name, ino, _) = self.new_file(fs, kind)?;
        self.write(fs, ino, 0, size as usize)?;
        let list = match kind {
            "photo" => &mut self.photos,
            "song" => &mut self.songs,
            _ => &mut self.cache,
        };
        list.push_back((name, ino, size));
        while list.len() > keep {
            if let Some((old, _, _)) = list.pop_front() {
                fs.unlink(ROOT_INO, old.as_bytes())?;
            }
        }
        Ok(())
    }

    /// Reads a random file of `list` whole, or `part` bytes of it at a random place.
    fn view(&mut self, fs: &mut Fs<Dev>, which: &str, part: Option<u64>) -> Io<()> {
        let list = if which == "photo" {
            &self.photos
        } else {
            &self.songs
        };
        if list.is_empty() {
            return Ok(());
        }
        let i = self.rng.next_u64() as usize % list.len();
        let (_, ino, size) = list[i];
        let (off, len) = match part {
            Some(p) if p < size => (self.below((size - p) / 4096) * 4096, p),
            _ => (0, size),
        };
        self.read(fs, ino, off, len)
    }

    /// One operation of the trace.
    fn step(&mut self, fs: &mut Fs<Dev>) -> Io<()> {
        let kb = |k: u64| k << 10;
        match self.below(100) {
            // A text message appended to the store; now and then a page of it rewritten.
            0..=24 => {
                let n = 160 + self.below(864) as usize;
                let (_, ino, size) = self.sms;
                self.write(fs, ino, size, n)?;
                self.sms.2 += n as u64;
                if self.below(3) == 0 {
                    let page = self.below(self.sms.2.min(kb(64)) / 4096) * 4096;
                    self.write(fs, ino, page, 4096)?;
                }
            }
            // A call record.
            25..=34 => {
                let (_, ino, size) = self.calls;
                self.write(fs, ino, size, 128)?;
                self.calls.2 += 128;
            }
            // A photo taken.
            35..=39 => {
                let size = self.unit / 4 + self.below(self.unit / 4);
                self.add(fs, "photo", size, PHOTOS)?;
            }
            // A photo viewed.
            40..=49 => self.view(fs, "photo", None)?,
            // A song played (a minute of it).
            50..=64 => self.view(fs, "song", Some(self.unit / 4))?,
            // A song added.
            65..=66 => {
                let size = self.unit * 3 / 4 + self.below(self.unit / 2);
                self.add(fs, "song", size, SONGS)?;
            }
            // A page browsed: a cache file made, another read.
            _ => {
                let size = kb(8 + self.below(56));
                self.add(fs, "cache", size, CACHE)?;
                let i = self.rng.next_u64() as usize % self.cache.len();
                let (_, ino, size) = self.cache[i];
                self.read(fs, ino, 0, size)?;
            }
        }
        Ok(())
    }
}

/// Runs the trace under `r`.
pub fn run(opts: &FlexfsOptions, r: Regions, volume_bytes: u64) -> Result<FlexfsRow> {
    let what = || format!("trace {}", r.name());
    let mut fs = Fs::format(device(&opts.preset, opts.mib)?, config(r)).context(what)?;
    let mut phone = Phone {
        rng: Xoshiro256PlusPlus::seed_from_u64(opts.seed ^ 0x5A5),
        data: (0..IO).map(|i| (i * 31 + 7) as u8).collect(),
        made: 0,
        sms: Default::default(),
        calls: Default::default(),
        photos: VecDeque::new(),
        songs: VecDeque::new(),
        cache: VecDeque::new(),
        unit: (opts.mib << 20) / 16,
        arrival: Duration::ZERO,
        reads: Histogram::default(),
        writes: Histogram::default(),
        read_bytes: 0,
        written: 0,
        read_time: Duration::ZERO,
        write_time: Duration::ZERO,
    };
    let setup = (|| -> Io<()> {
        phone.sms = phone.new_file(&mut fs, "sms")?;
        phone.calls = phone.new_file(&mut fs, "calls")?;
        for _ in 0..SONGS {
            phone.add(&mut fs, "song", phone.unit, SONGS)?;
        }
        for _ in 0..PHOTOS {
            phone.add(&mut fs, "photo", phone.unit * 3 / 8, PHOTOS)?;
        }
        Ok(())
    })();
    setup.context(what)?;
    // The set-up's requests are not the trace's.
    phone.reads = Histogram::default();
    phone.writes = Histogram::default();
    (phone.read_bytes, phone.written) = (0, 0);
    (phone.read_time, phone.write_time) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..opts.trace_ops {
        // Exponential gaps of mean 1 s, cut at 10 s.
        let u = (phone.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let gap = Duration::from_secs_f64((-(1.0 - u).ln()).min(10.0));
        phone.arrival = now(&fs) + gap;
        fs.idle(gap).context(what)?;
        phone.step(&mut fs).context(what)?;
    }
    let mut row = FlexfsRow::new(Experiment::Trace, r.name().into(), opts, &fs, volume_bytes);
    let kbps = |bytes: u64, t: Duration| bytes as f64 / 1e3 / t.as_secs_f64().max(1e-9);
    row.write_kbps = kbps(phone.written, phone.write_time);
    row.read_kbps = Some(kbps(phone.read_bytes, phone.read_time));
    row.chunks = u64::from(opts.trace_ops);
    let [mean, p50, p99, p999, max] = response_us(&phone.writes);
    row.write_us = Some(mean);
    row.p50_us = Some(p50);
    row.p99_us = Some(p99);
    row.p999_us = Some(p999);
    row.max_us = Some(max);
    row.read_us = Some(response_us(&phone.reads)[0]);
    Ok(row)
}

/// The trace runs as a table, with each setting's throughput against SLC-only's.
pub fn table(rows: &[&FlexfsRow]) -> String {
    let slc = rows.iter().find(|r| r.config == "slc-only");
    let vs = |v: f64, of: fn(&FlexfsRow) -> f64| {
        slc.map_or("-".into(), |s| {
            format!("{:.1}%", 100.0 * v / of(s).max(1e-9))
        })
    };
    let mut s = String::from(
        "TRACE       CONFIG     OPS  READ us  WRITE us  P99 WRITE us  READ KB/s  WRITE KB/s  READ vs SLC  WRITE vs SLC  MIGRATED MiB\n",
    );
    for r in rows {
        let read = r.read_kbps.unwrap_or(0.0);
        s.push_str(&format!(
            "{:<11} {:<10} {:>4}  {:>7.0}  {:>8.0}  {:>12.0}  {:>9.0}  {:>10.0}  {:>11}  {:>12}  {:>12.1}\n",
            r.experiment,
            r.config,
            r.chunks,
            r.read_us.unwrap_or(0.0),
            r.write_us.unwrap_or(0.0),
            r.p99_us.unwrap_or(0.0),
            read,
            r.write_kbps,
            vs(read, |s| s.read_kbps.unwrap_or(0.0)),
            vs(r.write_kbps, |s| s.write_kbps),
            r.migrated_mib
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trace runs under the FlexFS settings and the two single-mode ones, reads and
    /// writes both measured, and migration happens only where it should.
    #[test]
    fn the_trace_measures_reads_and_writes() {
        let opts = FlexfsOptions::quick();
        let rows: Vec<FlexfsRow> = [Regions::SlcOnly, Regions::MlcOnly, Regions::Dynamic]
            .into_iter()
            .map(|r| run(&opts, r, 1).unwrap())
            .collect();
        for r in &rows {
            assert!(r.read_kbps.unwrap() > 0.0 && r.write_kbps > 0.0, "{r:?}");
            assert!(r.read_us.unwrap() > 0.0 && r.write_us.unwrap() > 0.0);
        }
        // MLC programs are slower than SLC's.
        assert!(rows[1].write_kbps < rows[0].write_kbps);
        assert_eq!(rows[0].migrated_mib, 0.0);
        assert!(table(&rows.iter().collect::<Vec<_>>()).contains("slc-only"));
    }
}
