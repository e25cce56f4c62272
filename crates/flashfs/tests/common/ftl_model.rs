//! A workload of block-device operations and the model that says what may be read back
//! after a power cut: for each sector, the value at the last acknowledged flush or any value
//! written to it since.

use flashfs::{BlockDevice, Error, Ftl, FtlConfig, Segments};

use super::pattern;

/// One block-device operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Write `count` sectors from `sector` with content version `version`.
    Write {
        sector: u64,
        count: u64,
        version: u32,
    },
    /// Trim `count` sectors from `sector`.
    Trim { sector: u64, count: u64 },
    /// Flush.
    Flush,
}

/// A reproducible mixed workload over `sectors` sectors.
pub fn workload(seed: u64, sectors: u64, ops: usize) -> Vec<Op> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n.max(1)
    };
    let mut v = Vec::with_capacity(ops);
    for i in 0..ops {
        let r = next(100);
        let sector = next(sectors);
        let count = 1 + next(4.min(sectors - sector));
        v.push(match r {
            0..=79 => Op::Write {
                sector,
                count,
                version: i as u32 + 1,
            },
            80..=87 => Op::Trim { sector, count },
            _ => Op::Flush,
        });
    }
    v
}

/// Content a sector holds: `None` for zeros (never written or trimmed).
pub type Content = Option<u32>;

/// What each sector may hold.
pub struct Model {
    /// Value at the last acknowledged flush.
    flushed: Vec<Content>,
    /// Values written since (including the one in flight).
    since: Vec<Vec<Content>>,
    /// The value if nothing is lost.
    pub current: Vec<Content>,
}

impl Model {
    /// A device of `sectors` zeroed sectors.
    pub fn new(sectors: u64) -> Self {
        let n = sectors as usize;
        Model {
            flushed: vec![None; n],
            since: vec![Vec::new(); n],
            current: vec![None; n],
        }
    }

    /// Records that `op` was issued (before knowing whether it completed).
    pub fn issue(&mut self, op: Op) {
        match op {
            Op::Write {
                sector,
                count,
                version,
            } => {
                for k in sector..sector + count {
                    self.since[k as usize].push(Some(version));
                    self.current[k as usize] = Some(version);
                }
            }
            Op::Trim { sector, count } => {
                for k in sector..sector + count {
                    self.since[k as usize].push(None);
                    self.current[k as usize] = None;
                }
            }
            Op::Flush => {}
        }
    }

    /// Records that a flush was acknowledged.
    pub fn flushed(&mut self) {
        self.flushed.clone_from(&self.current);
        self.since.iter_mut().for_each(Vec::clear);
    }

    /// Checks what was read back from every sector after a cut.
    pub fn check_after_cut(&self, read: &[Content]) -> Result<(), String> {
        for (k, got) in read.iter().enumerate() {
            if *got != self.flushed[k] && !self.since[k].contains(got) {
                return Err(format!(
                    "sector {k}: read {got:?}, flushed {:?}, written since {:?}",
                    self.flushed[k], self.since[k]
                ));
            }
        }
        Ok(())
    }

    /// Pins the model to what was found after a cut (the device's state is now that).
    pub fn settle(&mut self, read: &[Content]) {
        self.current = read.to_vec();
        self.flushed();
    }
}

/// Applies an operation.
pub fn apply<D: Segments>(ftl: &mut Ftl<D>, op: Op) -> Result<(), Error> {
    let ss = ftl.sector_size();
    match op {
        Op::Write {
            sector,
            count,
            version,
        } => {
            let mut data = Vec::with_capacity(ss * count as usize);
            for k in sector..sector + count {
                data.extend(pattern(k, version, ss));
            }
            ftl.write(sector, &data)
        }
        Op::Trim { sector, count } => ftl.trim(sector, count),
        Op::Flush => ftl.flush(),
    }
}

/// Reads every sector and says which version it holds (`Err` if it matches none).
pub fn read_all<D: Segments>(
    ftl: &mut Ftl<D>,
    versions: &[Vec<u32>],
) -> Result<Vec<Content>, String> {
    let ss = ftl.sector_size();
    let mut buf = vec![0u8; ss];
    let mut out = Vec::new();
    for k in 0..ftl.sectors() {
        ftl.read(k, &mut buf)
            .map_err(|e| format!("read of sector {k}: {e}"))?;
        if buf.iter().all(|&b| b == 0) {
            out.push(None);
            continue;
        }
        let v = versions[k as usize]
            .iter()
            .copied()
            .find(|&v| pattern(k, v, ss) == buf);
        match v {
            Some(v) => out.push(Some(v)),
            None => {
                return Err(format!(
                    "sector {k} holds data no write put there (torn or misplaced)"
                ))
            }
        }
    }
    Ok(out)
}

/// Every version ever written to each sector by `ops`.
pub fn versions(ops: &[Op], sectors: u64) -> Vec<Vec<u32>> {
    let mut v = vec![Vec::new(); sectors as usize];
    for op in ops {
        if let Op::Write {
            sector,
            count,
            version,
        } = *op
        {
            for k in sector..sector + count {
                v[k as usize].push(version);
            }
        }
    }
    v
}

/// A config whose device is small enough to cut at every operation.
pub fn small_config() -> FtlConfig {
    FtlConfig::default()
}
