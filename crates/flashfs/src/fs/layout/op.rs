//! The operations a commit that writes no index records, journal entries and append frames
//! alike (`fs::journal`, `fs::append`), and their encoding: what a replay applies over the index.
//! Layout: SPEC.md §8.5b.

use alloc::vec::Vec;

use super::{Ino, Timespec};
use crate::error::{Error, Result};

/// Entries and frames start and end on a word of the part (a journal block's header says
/// which), at most this: a whole number of words of any part.
pub const MAX_ALIGN: usize = 8;

/// Operation codes.
mod code {
    pub const ADD: u8 = 1;
    pub const UPDATE: u8 = 2;
    pub const REMOVE_FIRST: u8 = 3;
    pub const REMOVE_LAST: u8 = 4;
    pub const ATIME: u8 = 5;
    pub const ADD_PACKED: u8 = 6;
    pub const ADD_APPENDED: u8 = 7;
    pub const ADD_APPENDED_NEW: u8 = 8;
    pub const FRAMED: u8 = 9;
    pub const REMOVE_FIRST_LEN: u8 = 10;
    pub const ADD_AT: u8 = 11;
    pub const ADD_SPANNED: u8 = 12;
    pub const WRITE: u8 = 13;
    pub const CREATE: u8 = 14;
    pub const WRITE_BLOCK: u8 = 15;
}

/// What a journaled operation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpKind {
    /// [`Fs::record_add`](crate::fs::Fs::record_add).
    Add(Vec<u8>),
    /// [`Fs::record_update`](crate::fs::Fs::record_update) of record `n`.
    Update(u64, Vec<u8>),
    /// [`Fs::record_remove_first`](crate::fs::Fs::record_remove_first) of a record of `len`
    /// bytes (`None` in entries of file-system version 6 and before: the replay reads it).
    RemoveFirst {
        /// The removed record's length.
        len: Option<u64>,
    },
    /// [`Fs::record_remove_last`](crate::fs::Fs::record_remove_last).
    RemoveLast,
    /// A read set the access time.
    Atime,
    /// `count` [`Fs::record_add`](crate::fs::Fs::record_add)s of records whose bytes are at
    /// their places in the data block at `sector`, written before the entry; the block then
    /// holds its records (SPEC.md §8.4a).
    AddPacked {
        /// Where the block is.
        sector: u64,
        /// Records added.
        count: u64,
    },
    /// A [`Fs::record_add`](crate::fs::Fs::record_add) of a record of `len` bytes whose frame
    /// was programmed before the entry: in a new append block at `sector`, which it
    /// starts, or (file-system version 6) after the frames of the block holding the record
    /// before it (SPEC.md §8.4a).
    AddAppended {
        /// The record's length.
        len: u64,
        /// The append block it starts, if it starts one.
        sector: Option<u64>,
    },
    /// `count` frames (records added, oldest records removed) that, after the last the
    /// entries so far count in the file's append block, committed themselves (SPEC.md
    /// §8.5b).
    Framed {
        /// Frames applied.
        count: u64,
    },
    /// A [`Fs::record_add`](crate::fs::Fs::record_add) of a record of `len` bytes framed as
    /// frame `k` of the file's newest append block, before the entry (SPEC.md §8.4a).
    AddAt {
        /// The record's length.
        len: u64,
        /// Its frame's place among the block's frames.
        k: u64,
    },
    /// As [`OpKind::AddAt`], the frame going on at the front of a new append block at
    /// `sector`, which it starts.
    AddSpanned {
        /// The record's length.
        len: u64,
        /// Its frame's place among the first block's frames.
        k: u64,
        /// The block the rest of the frame starts.
        sector: u64,
    },
    /// A small [`Fs::write`](crate::fs::Fs::write) of `data` at `offset` of a regular file
    /// (file-system version 9): the bytes travel in the entry, not in a data block, so a
    /// small write and its `fsync` program the entry alone.
    Write {
        /// Where in the file.
        offset: u64,
        /// The bytes written.
        data: Vec<u8>,
    },
    /// A [`Fs::create`](crate::fs::Fs::create) of a regular file named `name` in the
    /// directory the operation names (file-system version 12): a new file and its `fsync`
    /// program the entry alone.
    Create {
        /// The new entry's name.
        name: Vec<u8>,
        /// The mode asked for.
        mode: u32,
        /// Owner.
        uid: u32,
        /// Group.
        gid: u32,
        /// The inode the file got: the replay gives it the same, or the entry does not
        /// apply.
        child: Ino,
    },
    /// Small [`Fs::write`](crate::fs::Fs::write)s that made the whole content of a regular
    /// file's block, up to its end or the file's (file-system version 14): the block was
    /// programmed as the data block at `sector` before the entry, which names it instead of
    /// carrying the bytes, so they are programmed once rather than in the entry and again at
    /// the checkpoint.
    WriteBlock {
        /// The file's block.
        block: u64,
        /// Where it was written.
        sector: u64,
        /// Bytes of the block the writes reached (the file is at least this long into it).
        len: u64,
    },
}

/// One journaled operation: replayed, it changes the index exactly as it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// The record file (for [`OpKind::Write`], the regular file; for [`OpKind::Atime`], any
    /// inode).
    pub ino: Ino,
    /// The clock's time when it ran (the inode's new times).
    pub time: Timespec,
    /// What it did.
    pub kind: OpKind,
}

fn nanos(t: Timespec) -> i128 {
    i128::from(t.sec) * 1_000_000_000 + i128::from(t.nsec)
}

fn from_nanos(n: i128) -> Option<Timespec> {
    let sec = i64::try_from(n.div_euclid(1_000_000_000)).ok()?;
    Some(Timespec {
        sec,
        nsec: n.rem_euclid(1_000_000_000) as u32,
    })
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes of one entry, parsed with bounds checks.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7F).checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn bytes(&mut self, n: u64) -> Option<Vec<u8>> {
        let n = usize::try_from(n).ok()?;
        if n > self.0.len() {
            return None;
        }
        let (a, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(a.to_vec())
    }
}

/// Encodes `ops` as an entry's operations, each time relative to the one before (the first
/// to `base`); `None` if a time is too far from the one before to encode.
pub fn encode_ops(ops: &[Op], base: Timespec) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut prev = nanos(base);
    for op in ops {
        let t = nanos(op.time);
        let delta = i64::try_from(t - prev).ok()?;
        prev = t;
        let created: [u64; 4];
        let (c, numbers, data) = match &op.kind {
            OpKind::Add(d) => (code::ADD, &[][..], Some(d)),
            OpKind::Update(n, d) => (code::UPDATE, core::slice::from_ref(n), Some(d)),
            OpKind::RemoveFirst { len: None } => (code::REMOVE_FIRST, &[][..], None),
            OpKind::RemoveFirst { len: Some(len) } => {
                (code::REMOVE_FIRST_LEN, core::slice::from_ref(len), None)
            }
            OpKind::RemoveLast => (code::REMOVE_LAST, &[][..], None),
            OpKind::Atime => (code::ATIME, &[][..], None),
            OpKind::AddPacked { sector, count } => (code::ADD_PACKED, &[*sector, *count][..], None),
            OpKind::AddAppended { len, sector: None } => {
                (code::ADD_APPENDED, core::slice::from_ref(len), None)
            }
            OpKind::AddAppended {
                len,
                sector: Some(sector),
            } => (code::ADD_APPENDED_NEW, &[*len, *sector][..], None),
            OpKind::Framed { count } => (code::FRAMED, core::slice::from_ref(count), None),
            OpKind::AddAt { len, k } => (code::ADD_AT, &[*len, *k][..], None),
            OpKind::AddSpanned { len, k, sector } => {
                (code::ADD_SPANNED, &[*len, *k, *sector][..], None)
            }
            OpKind::Write { offset, data } => {
                (code::WRITE, core::slice::from_ref(offset), Some(data))
            }
            OpKind::WriteBlock { block, sector, len } => {
                (code::WRITE_BLOCK, &[*block, *sector, *len][..], None)
            }
            OpKind::Create {
                name,
                mode,
                uid,
                gid,
                child,
            } => {
                created = [u64::from(*mode), u64::from(*uid), u64::from(*gid), *child];
                (code::CREATE, &created[..], Some(name))
            }
        };
        out.push(c);
        put_varint(&mut out, op.ino);
        put_varint(&mut out, ((delta << 1) ^ (delta >> 63)) as u64);
        for &n in numbers {
            put_varint(&mut out, n);
        }
        if let Some(d) = data {
            put_varint(&mut out, d.len() as u64);
            out.extend_from_slice(d);
        }
    }
    Some(out)
}

/// Decodes an entry's operations (times relative to `base`, as [`encode_ops`] wrote them).
pub fn decode_ops(mut b: &[u8], base: Timespec) -> Result<Vec<Op>> {
    let bad = Error::Corrupt("malformed journal entry");
    let mut ops = Vec::new();
    let mut prev = nanos(base);
    while !b.is_empty() {
        let mut c = Cursor(b);
        let op = (|| {
            let code = c.byte()?;
            let ino = c.varint()?;
            let z = c.varint()?;
            let delta = ((z >> 1) as i64) ^ -((z & 1) as i64);
            prev += i128::from(delta);
            let time = from_nanos(prev)?;
            let kind = match code {
                code::ADD => {
                    let n = c.varint()?;
                    OpKind::Add(c.bytes(n)?)
                }
                code::UPDATE => {
                    let r = c.varint()?;
                    let n = c.varint()?;
                    OpKind::Update(r, c.bytes(n)?)
                }
                code::REMOVE_FIRST => OpKind::RemoveFirst { len: None },
                code::REMOVE_FIRST_LEN => OpKind::RemoveFirst {
                    len: Some(c.varint()?),
                },
                code::REMOVE_LAST => OpKind::RemoveLast,
                code::ATIME => OpKind::Atime,
                code::ADD_PACKED => OpKind::AddPacked {
                    sector: c.varint()?,
                    count: c.varint()?,
                },
                code::ADD_APPENDED => OpKind::AddAppended {
                    len: c.varint()?,
                    sector: None,
                },
                code::ADD_APPENDED_NEW => OpKind::AddAppended {
                    len: c.varint()?,
                    sector: Some(c.varint()?),
                },
                code::FRAMED => OpKind::Framed { count: c.varint()? },
                code::ADD_AT => OpKind::AddAt {
                    len: c.varint()?,
                    k: c.varint()?,
                },
                code::ADD_SPANNED => OpKind::AddSpanned {
                    len: c.varint()?,
                    k: c.varint()?,
                    sector: c.varint()?,
                },
                code::WRITE => {
                    let offset = c.varint()?;
                    let n = c.varint()?;
                    OpKind::Write {
                        offset,
                        data: c.bytes(n)?,
                    }
                }
                code::WRITE_BLOCK => OpKind::WriteBlock {
                    block: c.varint()?,
                    sector: c.varint()?,
                    len: c.varint()?,
                },
                code::CREATE => {
                    let mode = u32::try_from(c.varint()?).ok()?;
                    let uid = u32::try_from(c.varint()?).ok()?;
                    let gid = u32::try_from(c.varint()?).ok()?;
                    let child = c.varint()?;
                    let n = c.varint()?;
                    OpKind::Create {
                        name: c.bytes(n)?,
                        mode,
                        uid,
                        gid,
                        child,
                    }
                }
                _ => return None,
            };
            Some(Op { ino, time, kind })
        })()
        .ok_or(bad.clone())?;
        ops.push(op);
        b = c.0;
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(sec: i64, nsec: u32) -> Timespec {
        Timespec { sec, nsec }
    }

    fn ops() -> Vec<Op> {
        alloc::vec![
            Op {
                ino: 7,
                time: t(100, 5),
                kind: OpKind::Add(alloc::vec![1, 2, 3]),
            },
            Op {
                ino: 300,
                time: t(99, 999_999_999),
                kind: OpKind::Update(1 << 40, Vec::new()),
            },
            Op {
                ino: 7,
                time: t(-5, 0),
                kind: OpKind::RemoveFirst { len: None },
            },
            Op {
                ino: 8,
                time: t(-5, 0),
                kind: OpKind::RemoveLast,
            },
            Op {
                ino: u64::MAX,
                time: t(1 << 33, 7),
                kind: OpKind::Atime,
            },
            Op {
                ino: 9,
                time: t(1 << 33, 7),
                kind: OpKind::AddPacked {
                    sector: 70_000,
                    count: 16,
                },
            },
            Op {
                ino: 9,
                time: t(1 << 33, 8),
                kind: OpKind::RemoveFirst { len: Some(4096) },
            },
            Op {
                ino: 10,
                time: t(1 << 33, 8),
                kind: OpKind::AddAt { len: 15, k: 33 },
            },
            Op {
                ino: 10,
                time: t(1 << 33, 9),
                kind: OpKind::AddSpanned {
                    len: 160,
                    k: 4,
                    sector: 1 << 31,
                },
            },
            Op {
                ino: 10,
                time: t(1 << 33, 9),
                kind: OpKind::Framed { count: 3 },
            },
            Op {
                ino: 1,
                time: t(1 << 33, 10),
                kind: OpKind::Create {
                    name: b"notes.txt".to_vec(),
                    mode: 0o100644,
                    uid: u32::MAX,
                    gid: 0,
                    child: 1 << 40,
                },
            },
            Op {
                ino: 1 << 40,
                time: t(1 << 33, 11),
                kind: OpKind::WriteBlock {
                    block: u64::from(u32::MAX) - 1,
                    sector: 1 << 31,
                    len: 512,
                },
            },
        ]
    }

    #[test]
    fn operations_round_trip_with_times_relative_to_the_one_before() {
        let base = t(100, 0);
        let b = encode_ops(&ops(), base).unwrap();
        assert_eq!(decode_ops(&b, base).unwrap(), ops());
        // An add of 15 bytes at the same time as the one before: code, inode, time,
        // length and the bytes.
        let one = [Op {
            ino: 9,
            time: base,
            kind: OpKind::Add(alloc::vec![0; 15]),
        }];
        assert_eq!(encode_ops(&one, base).unwrap().len(), 4 + 15);
        // Times too far apart for one delta are not encoded (the commit checkpoints).
        let far = [Op {
            ino: 1,
            time: t(i64::MAX, 0),
            ..one[0].clone()
        }];
        assert_eq!(encode_ops(&far, t(i64::MIN, 0)), None);
    }
}
