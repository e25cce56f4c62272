//! The three workloads of TFFS §5.1 — a fax machine, a cellular phone and an event recorder —
//! on the native file system, with integer names, record files and transactions.
//!
//! Every generator is seeded and deterministic. Each runs in an [`Env`], which counts the
//! user data written and held, makes the data durable where the workload's durability
//! policy says, and stops the run: at the first `ENOSPC` when measuring capacity, or when an
//! erase unit reaches the cycle limit when measuring endurance.
//!
//! What the paper leaves open, and what is chosen here (printed with every run):
//!
//! - fax history records: 32 bytes (the paper: "fixed-size records");
//! - SMS messages 20–160 bytes, appointments 16–64 bytes, address-book entries 24–96 bytes,
//!   uniformly (the paper: "variable-length records");
//! - the recorder's rare-event file keeps 100 records; its event file, for capacity, counts
//!   a "cycle" as 1,000 events (non-cyclic files, as the paper says), and for endurance keeps
//!   as many records as bring the device to its target fullness;
//! - durability: a fax page is durable once written (its data, the new page file and the
//!   history update commit together), the arrival transaction at its commit; the phone
//!   makes each event durable as it happens (a received SMS or a finished call is not lost
//!   to a dead battery); the recorder makes its events durable every 16 events (one
//!   512-byte block of them), losing at most the last 15 at a power cut.

use std::collections::VecDeque;

use flashfs::fs::{FileType, FsStats, Ino, RecordFormat, ROOT_INO};
use flashfs::{Error, Fs, LogStats, Segments};
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::error::BenchError;

/// Bytes of a fax page (TFFS §5.1).
pub const FAX_PAGE_BYTES: u64 = 51_300;
/// Pages per fax.
pub const FAX_PAGES: u32 = 4;
/// Bytes per write to a fax page file.
pub const FAX_WRITE_BYTES: usize = 1024;
/// Records of each fax history file (cyclic).
pub const FAX_HISTORY_RECORDS: u32 = 200;
/// Bytes of a fax history record (the paper does not give it).
pub const FAX_HISTORY_RECORD_BYTES: usize = 32;
/// Records of the fax's parameter file (4–32 bytes each).
pub const FAX_PARAM_RECORDS: u32 = 30;
/// Records of the fax's phonebook (32 bytes each).
pub const FAX_PHONEBOOK_RECORDS: u32 = 50;
/// Records of each of the phone's three call logs (cyclic).
pub const CALL_LOG_RECORDS: u32 = 20;
/// Bytes of a call-log record.
pub const CALL_RECORD_BYTES: usize = 15;
/// Appointments the phone starts with.
pub const INITIAL_APPOINTMENTS: u32 = 150;
/// Address-book entries the phone starts with.
pub const INITIAL_ADDRESSES: u32 = 50;
/// Bytes of an event record.
pub const EVENT_RECORD_BYTES: usize = 32;
/// Records of the recorder's configuration file (4–32 bytes each).
pub const RECORDER_CONFIG_RECORDS: u32 = 30;
/// Records the rare-event file keeps (the paper does not give it).
pub const RARE_RECORDS: u32 = 100;
/// Events per cycle of the event file when it is not cyclic (capacity runs).
pub const NOMINAL_EVENT_CYCLE: u64 = 1_000;
/// Records added between commits when an endurance run fills its static data (and the
/// phone's inbox and outbox) at the start.
pub const BULK_RECORDS: u64 = 64;
/// Events the recorder makes durable at once.
pub const RECORDER_SYNC_EVENTS: u64 = 16;

/// Which workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// A fax machine: 4-page faxes of 51,300-byte pages.
    Fax,
    /// A cellular phone: call logs, SMS, appointments, address book.
    Phone,
    /// An event recorder ("black box"): cyclic logs of 32-byte events.
    Recorder,
}

impl WorkloadKind {
    /// Every workload, in the paper's order.
    pub const ALL: [WorkloadKind; 3] = [
        WorkloadKind::Fax,
        WorkloadKind::Phone,
        WorkloadKind::Recorder,
    ];

    /// Name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Fax => "fax",
            WorkloadKind::Phone => "phone",
            WorkloadKind::Recorder => "recorder",
        }
    }

    /// Parses a name.
    pub fn from_name(s: &str) -> Option<WorkloadKind> {
        WorkloadKind::ALL.into_iter().find(|w| w.name() == s)
    }

    /// When the workload makes its data durable.
    pub fn durability(self) -> &'static str {
        match self {
            WorkloadKind::Fax => {
                "a commit per arrival transaction and per fax page (page data, page file and \
                 history update together)"
            }
            WorkloadKind::Phone => "a commit after every event (call, SMS, appointment change)",
            WorkloadKind::Recorder => "a commit every 16 events (one 512-byte block of events)",
        }
    }
}

/// What a run measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// Add data until the file system is full (§5.2): nothing is deleted, the recorder's
    /// files are not cyclic, the phone keeps every SMS.
    Capacity,
    /// Keep the device at `fullness` of its blocks, `static_share` of that static data and
    /// the rest changing (§5.3, Fig 8), until an erase unit reaches `cycles` erases.
    Endurance {
        /// Cycle limit of every erase unit.
        cycles: u32,
        /// Share of the file system's blocks kept in use.
        fullness: f64,
        /// Share of the blocks in use that is static.
        static_share: f64,
    },
}

/// Why a run stopped.
#[derive(Debug)]
pub enum Stop {
    /// The file system reported `ENOSPC` (the end of a capacity run).
    Full,
    /// An erase unit reached the cycle limit (the end of an endurance run).
    WornOut,
    /// The scenario does not fit the device (e.g. its changing share holds less than one
    /// fax page): the row cannot be measured, and says why.
    Infeasible(String),
    /// Anything else: the run failed.
    Failed(BenchError),
}

impl From<BenchError> for Stop {
    fn from(e: BenchError) -> Self {
        Stop::Failed(e)
    }
}

/// Result of a workload step.
pub type Step<T = ()> = std::result::Result<T, Stop>;

/// The counters at one moment of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mark {
    /// User data written so far.
    pub user_bytes: u64,
    /// Erases of all units so far (the log's wear record).
    pub erases: u64,
    /// The log's counters.
    pub log: LogStats,
    /// The file system's counters.
    pub fs: FsStats,
    /// Device time.
    pub device_time: core::time::Duration,
}

/// A file system under a workload, and what the workload did to it.
#[derive(Debug)]
pub struct Env<D: Segments> {
    /// The file system.
    pub fs: Fs<D>,
    /// User data written by completed operations: file bytes and record bytes added or
    /// updated.
    pub user_bytes: u64,
    /// User data the file system holds now (file sizes and records).
    pub live_bytes: u64,
    /// `live_bytes` at the last successful commit the workload asked for.
    pub durable_bytes: u64,
    /// `user_bytes` when the first erase unit reached the cycle limit.
    pub worn_out_at: Option<u64>,
    /// Operations done.
    pub ops: u64,
    /// Commits the workload asked for (syncs and transaction commits).
    pub syncs: u64,
    mode: Mode,
    erases_seen: u64,
    /// Most erases of any unit, as the log counts them.
    pub max_erases: u32,
    /// The counters when the endurance run reached its steady state (the device first at
    /// its target fullness); endurance is measured from there.
    pub steady: Option<Mark>,
    /// The counters when the first unit reached the cycle limit.
    pub worn: Option<Mark>,
}

impl<D: Segments> Env<D> {
    /// A workload environment on a freshly formatted file system.
    pub fn new(fs: Fs<D>, mode: Mode) -> Self {
        Env {
            fs,
            user_bytes: 0,
            live_bytes: 0,
            durable_bytes: 0,
            worn_out_at: None,
            ops: 0,
            syncs: 0,
            mode,
            erases_seen: 0,
            max_erases: 0,
            steady: None,
            worn: None,
        }
    }

    /// The counters now.
    pub fn mark(&self) -> Mark {
        let log = self.fs.ftl().log();
        Mark {
            user_bytes: self.user_bytes,
            // A segment's units are erased together.
            erases: log
                .segments()
                .iter()
                .map(|s| u64::from(s.erase_count))
                .sum::<u64>()
                * u64::from(log.device().units_per_segment()),
            log: *log.stats(),
            fs: self.fs.stats(),
            device_time: log.device().now(),
        }
    }

    /// The run has filled the device to its target: endurance counts from here (once).
    pub fn mark_steady(&mut self) {
        if self.steady.is_none() {
            self.steady = Some(self.mark());
        }
    }

    /// What the run measures.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Share of the file system's blocks in use.
    pub fn used_fraction(&self) -> f64 {
        let s = self.fs.statfs();
        if s.blocks == 0 {
            return 1.0;
        }
        (s.blocks - s.blocks_free) as f64 / s.blocks as f64
    }

    /// Blocks in use and blocks in all.
    pub fn used_blocks(&self) -> (u64, u64) {
        let s = self.fs.statfs();
        (s.blocks - s.blocks_free, s.blocks)
    }

    /// Runs one file-system operation that writes `written` user bytes and changes the
    /// bytes held by `live`; stops the run at `ENOSPC` (capacity) or wear-out (endurance).
    pub fn op<R>(
        &mut self,
        what: &str,
        written: u64,
        live: i64,
        f: impl FnOnce(&mut Fs<D>) -> flashfs::Result<R>,
    ) -> Step<R> {
        let before = self.user_bytes;
        match f(&mut self.fs) {
            Ok(r) => {
                self.user_bytes += written;
                self.live_bytes = self.live_bytes.saturating_add_signed(live);
                self.ops += 1;
                self.check_wear(before)?;
                Ok(r)
            }
            Err(e) => Err(self.stop(what, e, before)),
        }
    }

    /// Makes everything so far durable.
    pub fn sync(&mut self) -> Step {
        let before = self.user_bytes;
        match self.fs.sync() {
            Ok(()) => {
                self.syncs += 1;
                self.durable_bytes = self.live_bytes;
                self.check_wear(before)
            }
            Err(e) => Err(self.stop("sync", e, before)),
        }
    }

    fn stop(&mut self, what: &str, e: Error, before: u64) -> Stop {
        // An operation may have erased before failing: wear-out takes precedence.
        if let Err(s) = self.check_wear(before) {
            return s;
        }
        match (e, self.mode) {
            (Error::NoSpace, Mode::Capacity) => Stop::Full,
            (error, _) => Stop::Failed(BenchError::Fs {
                context: format!(
                    "{what} (after {} operations, {} user bytes written)",
                    self.ops, self.user_bytes
                ),
                error,
            }),
        }
    }

    /// Stops the run once an erase unit has reached the cycle limit; `before` is the user
    /// data written before the operation that got it there.
    fn check_wear(&mut self, before: u64) -> Step {
        let Mode::Endurance { cycles, .. } = self.mode else {
            return Ok(());
        };
        if self.worn_out_at.is_some() {
            return Err(Stop::WornOut);
        }
        let log = self.fs.ftl().log();
        let erases = log.stats().erases;
        if erases == self.erases_seen {
            return Ok(());
        }
        self.erases_seen = erases;
        self.max_erases = log
            .segments()
            .iter()
            .map(|s| s.erase_count)
            .max()
            .unwrap_or(0);
        if self.max_erases >= cycles {
            self.worn_out_at = Some(before);
            let mut m = self.mark();
            m.user_bytes = before;
            self.worn = Some(m);
            return Err(Stop::WornOut);
        }
        Ok(())
    }
}

/// A seeded generator of the workloads' choices and contents.
#[derive(Debug, Clone)]
struct Rng(Xoshiro256PlusPlus);

impl Rng {
    fn new(seed: u64, stream: u64) -> Rng {
        Rng(Xoshiro256PlusPlus::seed_from_u64(
            seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        ))
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.0.next_u64() % (hi - lo + 1) as u64) as usize
    }

    /// Fills `buf` with bytes of the generator.
    fn fill(&mut self, buf: &mut [u8]) {
        self.0.fill_bytes(buf);
    }
}

/// Mode of a new directory.
fn mode_dir() -> u32 {
    FileType::Directory.mode_bits() | 0o755
}

/// Creates record file number `n` in `dir` with `format`.
fn record_file<D: Segments>(env: &mut Env<D>, dir: Ino, n: u32, format: RecordFormat) -> Step<Ino> {
    let ino = env.op("creating a record file", 0, 0, |fs| {
        fs.create_int(dir, n, 0o644, 0, 0)
    })?;
    let ino = ino.ino;
    env.op("making it a record file", 0, 0, |fs| {
        fs.make_records(ino, format)
    })?;
    Ok(ino)
}

/// Adds `count` records of `lo..=hi` bytes (fixed when equal) to `ino`.
fn add_records<D: Segments>(
    env: &mut Env<D>,
    rng: &mut Rng,
    buf: &mut [u8],
    ino: Ino,
    count: u32,
    (lo, hi): (usize, usize),
) -> Step {
    for _ in 0..count {
        let len = rng.between(lo, hi);
        rng.fill(&mut buf[..len]);
        let data = &buf[..len];
        env.op("adding a record", len as u64, len as i64, |fs| {
            fs.record_add(ino, data)
        })?;
    }
    Ok(())
}

/// The workload: one of the three, with its state.
#[derive(Debug)]
pub enum Workload {
    /// A fax machine.
    Fax(Fax),
    /// A cellular phone.
    Phone(Phone),
    /// An event recorder.
    Recorder(Recorder),
}

impl Workload {
    /// A fresh workload of `kind`.
    pub fn new(kind: WorkloadKind, seed: u64) -> Workload {
        match kind {
            WorkloadKind::Fax => Workload::Fax(Fax::new(seed)),
            WorkloadKind::Phone => Workload::Phone(Phone::new(seed)),
            WorkloadKind::Recorder => Workload::Recorder(Recorder::new(seed)),
        }
    }

    /// Which workload.
    pub fn kind(&self) -> WorkloadKind {
        match self {
            Workload::Fax(_) => WorkloadKind::Fax,
            Workload::Phone(_) => WorkloadKind::Phone,
            Workload::Recorder(_) => WorkloadKind::Recorder,
        }
    }

    /// Runs the workload on `env` until it stops: full (capacity), worn out (endurance) or
    /// failed. `progress` hears the share of the run done, from 0 to 1, now and then.
    pub fn run<D: Segments>(&mut self, env: &mut Env<D>, progress: &mut dyn FnMut(f64)) -> Stop {
        let r = match self {
            Workload::Fax(w) => w.run(env, progress),
            Workload::Phone(w) => w.run(env, progress),
            Workload::Recorder(w) => w.run(env, progress),
        };
        match r {
            Ok(()) => Stop::Failed(BenchError::InvalidOptions(
                "the workload ended without filling or wearing out the device".into(),
            )),
            Err(s) => s,
        }
    }
}

/// How far a run is, for progress: used space (capacity) or wear (endurance).
fn share_done<D: Segments>(env: &Env<D>) -> f64 {
    match env.mode {
        Mode::Capacity => env.used_fraction(),
        Mode::Endurance { cycles, .. } => f64::from(env.max_erases) / f64::from(cycles.max(1)),
    }
}

/// Blocks to keep in use in an endurance run: (static part, total).
fn targets<D: Segments>(env: &Env<D>) -> Option<(u64, u64)> {
    let Mode::Endurance {
        fullness,
        static_share,
        ..
    } = env.mode
    else {
        return None;
    };
    let (_, blocks) = env.used_blocks();
    let total = (blocks as f64 * fullness) as u64;
    Some(((total as f64 * static_share) as u64, total))
}

/// One fax in the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaxEntry {
    /// Its directory's integer name in the root.
    pub name: u32,
    /// Its directory.
    pub dir: Ino,
    /// Its history record (in the received-fax history).
    pub record: u64,
    /// Its oldest page still stored (pages are numbered from 1).
    pub first_page: u32,
    /// Pages received so far (the newest stored page).
    pub pages: u32,
    /// Never deleted (the static data of an endurance run).
    pub keep: bool,
}

/// The fax machine (TFFS §5.1): a parameter file of 30 variable records (4–32 bytes) and a
/// phonebook of 50 fixed 32-byte records, made once and never touched; two cyclic history
/// files of 200 fixed-size records (received and sent; only receiving is simulated). Each
/// arriving fax is a transaction that adds a history record and creates the fax's
/// directory; then come 4 pages of 51,300 bytes, each its own file in that directory,
/// written in 1,024-byte writes, each page updating the fax's history record.
///
/// For endurance, the static data is faxes that are never deleted (the last of them may
/// have fewer pages, so the static share is met to a page), and room for each page is made
/// by deleting the oldest pages of the other faxes, a fax's directory going with its last
/// page. On the 448 KB parts the changing share holds fewer pages than a fax: there the
/// oldest pages of the fax being received go too, as in a machine that prints and drops
/// them.
#[derive(Debug)]
pub struct Fax {
    rng: Rng,
    history_in: Ino,
    history_out: Ino,
    next_name: u32,
    /// Faxes stored, oldest first.
    pub faxes: VecDeque<FaxEntry>,
    buf: Vec<u8>,
}

impl Fax {
    /// Integer name (in the root) of the parameter file; then the phonebook, the received
    /// and the sent history.
    pub const PARAMS: u32 = 1;
    /// Phonebook.
    pub const PHONEBOOK: u32 = 2;
    /// History of received faxes.
    pub const HISTORY_IN: u32 = 3;
    /// History of sent faxes.
    pub const HISTORY_OUT: u32 = 4;
    /// Integer name of the first fax's directory; the next ones follow.
    pub const FIRST_FAX: u32 = 1000;

    /// A fresh fax machine.
    pub fn new(seed: u64) -> Fax {
        Fax {
            rng: Rng::new(seed, 1),
            history_in: 0,
            history_out: 0,
            next_name: Self::FIRST_FAX,
            faxes: VecDeque::with_capacity(1024),
            buf: vec![0; FAX_WRITE_BYTES],
        }
    }

    /// The received-fax history file.
    pub fn history_in(&self) -> Ino {
        self.history_in
    }

    /// The sent-fax history file.
    pub fn history_out(&self) -> Ino {
        self.history_out
    }

    /// Creates and fills the parameter file, the phonebook and the two history files.
    pub fn setup<D: Segments>(&mut self, env: &mut Env<D>) -> Step {
        let mut buf = [0u8; 32];
        let params = record_file(env, ROOT_INO, Self::PARAMS, RecordFormat::variable())?;
        add_records(
            env,
            &mut self.rng,
            &mut buf,
            params,
            FAX_PARAM_RECORDS,
            (4, 32),
        )?;
        let book = record_file(env, ROOT_INO, Self::PHONEBOOK, RecordFormat::fixed(32))?;
        add_records(
            env,
            &mut self.rng,
            &mut buf,
            book,
            FAX_PHONEBOOK_RECORDS,
            (32, 32),
        )?;
        let history = RecordFormat::cyclic(FAX_HISTORY_RECORDS, FAX_HISTORY_RECORD_BYTES as u32);
        self.history_in = record_file(env, ROOT_INO, Self::HISTORY_IN, history)?;
        self.history_out = record_file(env, ROOT_INO, Self::HISTORY_OUT, history)?;
        env.sync()
    }

    /// A history record: fax number, pages so far, and the rest filled.
    fn history_record(&mut self, name: u32, pages: u32) -> [u8; FAX_HISTORY_RECORD_BYTES] {
        let mut r = [0u8; FAX_HISTORY_RECORD_BYTES];
        self.rng.fill(&mut r);
        r[0..4].copy_from_slice(&name.to_le_bytes());
        r[4..8].copy_from_slice(&pages.to_le_bytes());
        r
    }

    /// A fax arrives: the transaction that adds its history record and creates its
    /// directory. Its pages follow with [`Fax::page`].
    pub fn begin_fax<D: Segments>(&mut self, env: &mut Env<D>, keep: bool) -> Step {
        let name = self.next_name;
        self.next_name += 1;
        let history = self.history_in;
        let rec = self.history_record(name, 0);
        // A full cyclic history loses its oldest record in the same operation.
        let held = env
            .fs
            .records(history)
            .map_err(|e| fail("reading the history", e))?;
        let live = if held >= u64::from(FAX_HISTORY_RECORDS) {
            0
        } else {
            FAX_HISTORY_RECORD_BYTES as i64
        };
        let tid = env.op("beginning the arrival transaction", 0, 0, |fs| fs.begin())?;
        let arrival = env.op(
            "the arrival transaction",
            FAX_HISTORY_RECORD_BYTES as u64,
            live,
            |fs| {
                fs.in_tx(tid, |fs| {
                    let n = fs.record_add(history, &rec)?;
                    let dir = fs.create_int(ROOT_INO, name, mode_dir(), 0, 0)?;
                    Ok((n, dir.ino))
                })
            },
        );
        let (record, dir) = match arrival {
            Ok(v) => v,
            Err(s) => {
                let _ = env.fs.abort(tid);
                return Err(s);
            }
        };
        env.op("committing the arrival", 0, 0, |fs| fs.commit_tx(tid))?;
        env.syncs += 1;
        env.durable_bytes = env.live_bytes;
        self.faxes.push_back(FaxEntry {
            name,
            dir,
            record,
            first_page: 1,
            pages: 0,
            keep,
        });
        Ok(())
    }

    /// The next page of the newest fax: its file, written in 1 KB writes, and the history
    /// record's update, made durable together.
    pub fn page<D: Segments>(&mut self, env: &mut Env<D>) -> Step {
        let Some(&f) = self.faxes.back() else {
            return Err(Stop::Failed(BenchError::InvalidOptions(
                "a fax page without a fax".into(),
            )));
        };
        let page = f.pages + 1;
        let file = env.op("creating a page file", 0, 0, |fs| {
            fs.create_int(f.dir, page, 0o644, 0, 0)
        })?;
        let mut off = 0u64;
        while off < FAX_PAGE_BYTES {
            let n = (FAX_PAGE_BYTES - off).min(FAX_WRITE_BYTES as u64) as usize;
            self.rng.fill(&mut self.buf[..n]);
            let data = &self.buf[..n];
            env.op("writing a page", n as u64, n as i64, |fs| {
                fs.write(file.ino, off, data)
            })?;
            off += n as u64;
        }
        let rec = self.history_record(f.name, page);
        let history = self.history_in;
        env.op(
            "updating the history record",
            FAX_HISTORY_RECORD_BYTES as u64,
            0,
            |fs| fs.record_update(history, f.record, &rec),
        )?;
        env.sync()?;
        if let Some(f) = self.faxes.back_mut() {
            f.pages = page;
        }
        Ok(())
    }

    /// One fax arrives and is stored whole: the arrival transaction and its four pages.
    pub fn arrive<D: Segments>(&mut self, env: &mut Env<D>, keep: bool) -> Step {
        self.begin_fax(env, keep)?;
        for _ in 0..FAX_PAGES {
            self.page(env)?;
        }
        Ok(())
    }

    /// Deletes the oldest page not kept (the fax being received last of all), and the
    /// fax's directory with its last page; false if there is none.
    pub fn delete_oldest_page<D: Segments>(&mut self, env: &mut Env<D>) -> Step<bool> {
        let newest = self.faxes.len().saturating_sub(1);
        let Some(i) = self
            .faxes
            .iter()
            .enumerate()
            .position(|(i, f)| !f.keep && (i < newest || f.first_page <= f.pages))
        else {
            return Ok(false);
        };
        let f = self.faxes[i];
        if f.first_page <= f.pages {
            env.op("deleting a page", 0, -(FAX_PAGE_BYTES as i64), |fs| {
                fs.remove_int(f.dir, f.first_page)
            })?;
            self.faxes[i].first_page += 1;
        }
        let f = self.faxes[i];
        if f.first_page > f.pages && i < newest {
            env.op("deleting a fax directory", 0, 0, |fs| {
                fs.remove_int(ROOT_INO, f.name)
            })?;
            self.faxes.remove(i);
        }
        Ok(true)
    }

    fn run<D: Segments>(&mut self, env: &mut Env<D>, progress: &mut dyn FnMut(f64)) -> Step {
        self.setup(env)?;
        let Some((static_blocks, total)) = targets(env) else {
            loop {
                self.arrive(env, false)?;
                progress(share_done(env));
            }
        };
        // The static share, to a page.
        'fill: while env.used_blocks().0 < static_blocks {
            self.begin_fax(env, true)?;
            for _ in 0..FAX_PAGES {
                self.page(env)?;
                if env.used_blocks().0 >= static_blocks {
                    break 'fill;
                }
            }
            progress(share_done(env));
        }
        // A page takes its blocks and a few index nodes.
        let per_page = FAX_PAGE_BYTES.div_ceil(u64::from(env.fs.block_size())) + 8;
        let (used, blocks) = env.used_blocks();
        if used + per_page > blocks {
            return Err(Stop::Infeasible(format!(
                "after the static share ({used} of the file system's {blocks} blocks in use) a \
                 fax page ({per_page} blocks) does not fit"
            )));
        }
        loop {
            self.begin_fax(env, false)?;
            for _ in 0..FAX_PAGES {
                while env.used_blocks().0 + per_page > total {
                    env.mark_steady();
                    if !self.delete_oldest_page(env)? {
                        break;
                    }
                }
                self.page(env)?;
            }
            progress(share_done(env));
        }
    }
}

fn fail(what: &str, error: Error) -> Stop {
    Stop::Failed(BenchError::Fs {
        context: what.to_string(),
        error,
    })
}

/// One event of a simulated day of the phone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PhoneEvent {
    SmsIn,
    SmsOut,
    Received,
    Dialed,
    Missed,
    AddAppointment,
    DeleteAppointment,
}

/// The phone's daily activity (TFFS §5.1): 3 SMS in and 3 out, 10 calls received, 10
/// dialed, 5 missed, 5 appointments added and the 5 oldest deleted.
const DAY: [(PhoneEvent, u32); 7] = [
    (PhoneEvent::SmsIn, 3),
    (PhoneEvent::SmsOut, 3),
    (PhoneEvent::Received, 10),
    (PhoneEvent::Dialed, 10),
    (PhoneEvent::Missed, 5),
    (PhoneEvent::AddAppointment, 5),
    (PhoneEvent::DeleteAppointment, 5),
];

/// Bytes of an SMS message, at least and at most.
pub const SMS_BYTES: (usize, usize) = (20, 160);
/// Bytes of an appointment.
pub const APPOINTMENT_BYTES: (usize, usize) = (16, 64);
/// Bytes of an address-book entry.
pub const ADDRESS_BYTES: (usize, usize) = (24, 96);

/// The cellular phone (TFFS §5.1): three cyclic call logs of 20 records of 15 bytes (dialed,
/// received, missed), two SMS files (in, out), an appointments file and an address book,
/// all of variable-size records; it starts with 150 appointments and 50 address-book
/// entries and then lives day by day. For capacity, SMS messages are never deleted; for
/// endurance the static data is a file of saved SMS messages, the inbox and outbox start
/// filled to the target (added with a commit every 64 messages, as the static data), and
/// the oldest messages are deleted to stay there.
#[derive(Debug)]
pub struct Phone {
    rng: Rng,
    /// Call logs: dialed, received, missed.
    pub calls: [Ino; 3],
    /// SMS in and out.
    pub sms: [Ino; 2],
    /// Appointments.
    pub appointments: Ino,
    /// Address book.
    pub addresses: Ino,
    /// Saved messages (endurance only: the static data).
    pub saved: Ino,
    /// Days simulated.
    pub days: u64,
    day: Vec<PhoneEvent>,
    buf: Vec<u8>,
    /// Which SMS file to trim next (they alternate).
    trim_next: usize,
}

impl Phone {
    /// Integer names in the root: dialed, received, missed calls; SMS in, out;
    /// appointments; address book; saved SMS.
    pub const FILES: [u32; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

    /// A fresh phone.
    pub fn new(seed: u64) -> Phone {
        Phone {
            rng: Rng::new(seed, 2),
            calls: [0; 3],
            sms: [0; 2],
            appointments: 0,
            addresses: 0,
            saved: 0,
            days: 0,
            day: Vec::with_capacity(64),
            buf: vec![0; 256],
            trim_next: 0,
        }
    }

    /// Creates the files, the first 150 appointments and 50 address-book entries.
    pub fn setup<D: Segments>(&mut self, env: &mut Env<D>) -> Step {
        let log = RecordFormat::cyclic(CALL_LOG_RECORDS, CALL_RECORD_BYTES as u32);
        for i in 0..3 {
            self.calls[i] = record_file(env, ROOT_INO, Self::FILES[i], log)?;
        }
        for i in 0..2 {
            self.sms[i] = record_file(env, ROOT_INO, Self::FILES[3 + i], RecordFormat::variable())?;
        }
        self.appointments = record_file(env, ROOT_INO, Self::FILES[5], RecordFormat::variable())?;
        self.addresses = record_file(env, ROOT_INO, Self::FILES[6], RecordFormat::variable())?;
        add_records(
            env,
            &mut self.rng,
            &mut self.buf,
            self.appointments,
            INITIAL_APPOINTMENTS,
            APPOINTMENT_BYTES,
        )?;
        add_records(
            env,
            &mut self.rng,
            &mut self.buf,
            self.addresses,
            INITIAL_ADDRESSES,
            ADDRESS_BYTES,
        )?;
        env.sync()
    }

    /// Adds a record to a cyclic call log, which drops its oldest when full.
    fn call<D: Segments>(&mut self, env: &mut Env<D>, log: Ino) -> Step {
        let held = env
            .fs
            .records(log)
            .map_err(|e| fail("reading a call log", e))?;
        let live = if held >= u64::from(CALL_LOG_RECORDS) {
            0
        } else {
            CALL_RECORD_BYTES as i64
        };
        self.rng.fill(&mut self.buf[..CALL_RECORD_BYTES]);
        let data = &self.buf[..CALL_RECORD_BYTES];
        env.op("logging a call", CALL_RECORD_BYTES as u64, live, |fs| {
            fs.record_add(log, data)
        })?;
        Ok(())
    }

    /// Adds a record of `lo..=hi` bytes.
    fn add<D: Segments>(&mut self, env: &mut Env<D>, ino: Ino, (lo, hi): (usize, usize)) -> Step {
        let len = self.rng.between(lo, hi);
        self.rng.fill(&mut self.buf[..len]);
        let data = &self.buf[..len];
        env.op("adding a record", len as u64, len as i64, |fs| {
            fs.record_add(ino, data)
        })?;
        Ok(())
    }

    /// Removes the oldest record of `ino`.
    fn remove_first<D: Segments>(&mut self, env: &mut Env<D>, ino: Ino) -> Step {
        let info = env
            .fs
            .record_info(ino)
            .map_err(|e| fail("reading a record file", e))?;
        let len = env
            .fs
            .record_read(ino, info.first)
            .map_err(|e| fail("reading a record", e))?
            .len();
        env.op("removing a record", 0, -(len as i64), |fs| {
            fs.record_remove_first(ino)
        })?;
        Ok(())
    }

    /// One simulated day: the day's events in a random order, each made durable.
    pub fn day<D: Segments>(&mut self, env: &mut Env<D>) -> Step {
        self.day.clear();
        for (e, n) in DAY {
            for _ in 0..n {
                self.day.push(e);
            }
        }
        // Fisher-Yates, from the workload's generator.
        for i in (1..self.day.len()).rev() {
            let j = self.rng.between(0, i);
            self.day.swap(i, j);
        }
        let limit = targets(env).map(|t| t.1);
        for i in 0..self.day.len() {
            match self.day[i] {
                PhoneEvent::SmsIn | PhoneEvent::SmsOut => {
                    if let Some(total) = limit {
                        self.make_room(env, total)?;
                    }
                    let f = if self.day[i] == PhoneEvent::SmsIn {
                        self.sms[0]
                    } else {
                        self.sms[1]
                    };
                    self.add(env, f, SMS_BYTES)?;
                }
                PhoneEvent::Dialed => self.call(env, self.calls[0])?,
                PhoneEvent::Received => self.call(env, self.calls[1])?,
                PhoneEvent::Missed => self.call(env, self.calls[2])?,
                PhoneEvent::AddAppointment => {
                    self.add(env, self.appointments, APPOINTMENT_BYTES)?
                }
                PhoneEvent::DeleteAppointment => self.remove_first(env, self.appointments)?,
            }
            env.sync()?;
        }
        self.days += 1;
        Ok(())
    }

    /// Deletes old SMS messages (alternating between the two files) while the device is
    /// fuller than `total` blocks.
    fn make_room<D: Segments>(&mut self, env: &mut Env<D>, total: u64) -> Step {
        for _ in 0..16 {
            if env.used_blocks().0 < total {
                return Ok(());
            }
            let mut removed = false;
            for _ in 0..2 {
                let f = self.sms[self.trim_next];
                self.trim_next ^= 1;
                let held = env
                    .fs
                    .records(f)
                    .map_err(|e| fail("reading an SMS file", e))?;
                if held > 0 {
                    self.remove_first(env, f)?;
                    removed = true;
                    break;
                }
            }
            if !removed {
                return Ok(());
            }
        }
        Ok(())
    }

    fn run<D: Segments>(&mut self, env: &mut Env<D>, progress: &mut dyn FnMut(f64)) -> Step {
        self.setup(env)?;
        if let Some((static_blocks, _)) = targets(env) {
            // The static half: saved messages, never touched again.
            self.saved = record_file(env, ROOT_INO, Self::FILES[7], RecordFormat::variable())?;
            let mut n = 0u64;
            while env.used_blocks().0 < static_blocks {
                self.add(env, self.saved, SMS_BYTES)?;
                n += 1;
                if n.is_multiple_of(BULK_RECORDS) {
                    env.sync()?;
                }
            }
            env.sync()?;
            // The phone starts with its inbox and outbox filled to the target: at 6 SMS a
            // day they would take years (of wear) to get there.
            let total = targets(env).map_or(0, |t| t.1);
            let mut i = 0u64;
            while env.used_blocks().0 < total {
                self.add(env, self.sms[(i % 2) as usize], SMS_BYTES)?;
                i += 1;
                if i.is_multiple_of(BULK_RECORDS) {
                    env.sync()?;
                }
            }
            env.sync()?;
            env.mark_steady();
        }
        loop {
            self.day(env)?;
            progress(share_done(env));
        }
    }
}

/// The event recorder (TFFS §5.1): a cyclic file of 32-byte records receives every event, a
/// second cyclic file of 32-byte records one event per 10 full cycles of the first, and a
/// configuration file of 30 variable records (4–32 bytes) is filled at the start. For
/// capacity both logs are not cyclic (as the paper says); for endurance the static data is
/// an archive of 32-byte event records, and the event log keeps as many records as fill the
/// device to its target.
#[derive(Debug)]
pub struct Recorder {
    rng: Rng,
    /// The event log.
    pub events: Ino,
    /// The rare-event log.
    pub rare: Ino,
    /// The archive (endurance only: the static data).
    pub archive: Ino,
    /// Records the event log keeps (0: not cyclic).
    pub event_capacity: u32,
    /// Events recorded.
    pub recorded: u64,
    buf: [u8; EVENT_RECORD_BYTES],
}

impl Recorder {
    /// Integer names in the root: event log, rare-event log, configuration, archive.
    pub const FILES: [u32; 4] = [1, 2, 3, 4];

    /// A fresh recorder.
    pub fn new(seed: u64) -> Recorder {
        Recorder {
            rng: Rng::new(seed, 3),
            events: 0,
            rare: 0,
            archive: 0,
            event_capacity: 0,
            recorded: 0,
            buf: [0; EVENT_RECORD_BYTES],
        }
    }

    /// Creates the files: the event log keeping `event_capacity` records (0: not cyclic),
    /// the rare-event log ([`RARE_RECORDS`], or not cyclic with `event_capacity` 0) and the
    /// filled configuration file.
    pub fn setup<D: Segments>(&mut self, env: &mut Env<D>, event_capacity: u32) -> Step {
        self.event_capacity = event_capacity;
        let size = EVENT_RECORD_BYTES as u32;
        let (events, rare) = if event_capacity == 0 {
            (RecordFormat::fixed(size), RecordFormat::fixed(size))
        } else {
            (
                RecordFormat::cyclic(event_capacity, size),
                RecordFormat::cyclic(RARE_RECORDS, size),
            )
        };
        self.events = record_file(env, ROOT_INO, Self::FILES[0], events)?;
        self.rare = record_file(env, ROOT_INO, Self::FILES[1], rare)?;
        let config = record_file(env, ROOT_INO, Self::FILES[2], RecordFormat::variable())?;
        let mut buf = [0u8; 32];
        add_records(
            env,
            &mut self.rng,
            &mut buf,
            config,
            RECORDER_CONFIG_RECORDS,
            (4, 32),
        )?;
        env.sync()
    }

    /// Events per cycle of the event log.
    fn cycle(&self) -> u64 {
        if self.event_capacity == 0 {
            NOMINAL_EVENT_CYCLE
        } else {
            u64::from(self.event_capacity)
        }
    }

    /// Adds a 32-byte record to `ino`, which keeps `capacity` records (0: all).
    fn log<D: Segments>(&mut self, env: &mut Env<D>, ino: Ino, capacity: u32, held: u64) -> Step {
        self.rng.fill(&mut self.buf);
        self.buf[..8].copy_from_slice(&self.recorded.to_le_bytes());
        let live = if capacity > 0 && held >= u64::from(capacity) {
            0
        } else {
            EVENT_RECORD_BYTES as i64
        };
        let data = &self.buf;
        env.op(
            "recording an event",
            EVENT_RECORD_BYTES as u64,
            live,
            |fs| fs.record_add(ino, data),
        )?;
        Ok(())
    }

    /// One event: into the event log, and every 10 cycles of it into the rare-event log;
    /// durable every [`RECORDER_SYNC_EVENTS`] events.
    pub fn event<D: Segments>(&mut self, env: &mut Env<D>) -> Step {
        let cap = self.event_capacity;
        self.log(env, self.events, cap, self.recorded)?;
        self.recorded += 1;
        if self.recorded.is_multiple_of(10 * self.cycle()) {
            let rare_cap = if cap == 0 { 0 } else { RARE_RECORDS };
            let held = self.recorded / (10 * self.cycle()) - 1;
            self.log(env, self.rare, rare_cap, held)?;
        }
        if self.recorded.is_multiple_of(RECORDER_SYNC_EVENTS) {
            env.sync()?;
        }
        Ok(())
    }

    fn run<D: Segments>(&mut self, env: &mut Env<D>, progress: &mut dyn FnMut(f64)) -> Step {
        let Some((static_blocks, total)) = targets(env) else {
            self.setup(env, 0)?;
            loop {
                self.event(env)?;
                if self.recorded.is_multiple_of(1024) {
                    progress(share_done(env));
                }
            }
        };
        // The static half first: an archive of event records. How many blocks it takes per
        // record sizes the event log so that, full, it brings the device to its target.
        let (before, _) = env.used_blocks();
        self.archive = record_file(env, ROOT_INO, Self::FILES[3], RecordFormat::fixed(32))?;
        let mut archived = 0u64;
        while env.used_blocks().0 < static_blocks.max(before + 1) {
            self.log(env, self.archive, 0, archived)?;
            archived += 1;
            if archived.is_multiple_of(BULK_RECORDS) {
                env.sync()?;
            }
        }
        env.sync()?;
        let (after, _) = env.used_blocks();
        let per_block = archived as f64 / (after - before).max(1) as f64;
        let room = total.saturating_sub(after);
        let capacity = ((room as f64 * per_block) as u64).clamp(64, u64::from(u32::MAX)) as u32;
        self.setup(env, capacity)?;
        loop {
            if self.recorded == u64::from(capacity) {
                env.mark_steady();
            }
            self.event(env)?;
            if self.recorded.is_multiple_of(1024) {
                progress(share_done(env));
            }
        }
    }
}
