//! The file system's on-flash records, in one place: the superblock, the keys of the index
//! and the values stored under them. `SPEC.md` §8 describes the same bytes.
//!
//! Everything lives in one copy-on-write B+tree (as a btrfs file tree does): a key starts
//! with the inode number, then an item type, so an inode's attributes, extended attributes,
//! directory entries and extents sit together and one commit of one root makes any set of
//! changes durable at once. Integers in keys are big-endian, so byte order is numeric order;
//! integers in values are little-endian.

use alloc::vec::Vec;

use crate::error::{Error, Result};
use crate::index::NodePtr;
use crate::log::Shares;

pub mod append;
pub mod journal;
pub mod op;

/// Inode number.
pub type Ino = u64;

/// The root directory.
pub const ROOT_INO: Ino = 1;
/// The pseudo-inode whose items list the orphans: inodes without a name, still open.
pub const ORPHANS: Ino = 0;
/// The first inode number handed out after the root.
pub const FIRST_INO: Ino = 2;

/// Item types, the byte after the inode number in every key.
pub mod item {
    /// The inode's attributes.
    pub const INODE: u8 = 1;
    /// An extended attribute; the key goes on with its name.
    pub const XATTR: u8 = 2;
    /// A directory entry; the key goes on with its cookie (u64) and name.
    pub const DIRENT: u8 = 3;
    /// A run of file blocks; the key goes on with the first block (u64).
    pub const EXTENT: u8 = 4;
    /// Under [`super::ORPHANS`]: an inode to delete at mount; the key goes on with it (u64).
    pub const ORPHAN: u8 = 5;
    /// A record file's head ([`super::RecordHead`]): its presence makes a regular file a
    /// record file.
    pub const RECORDS: u8 = 6;
    /// A chunk of a record; the key goes on with the record number (u64) and the chunk
    /// number (u16).
    pub const RECORD: u8 = 7;
    /// A directory entry with an integer name; the key goes on with the name (u32).
    pub const INT_DIRENT: u8 = 8;
    /// Under [`super::FLAT`]: a name of the volume-wide flat namespace; the key goes on with
    /// the name.
    pub const FLAT_NAME: u8 = 9;
}

/// The pseudo-inode whose items are the volume-wide flat namespace (the orphan list's
/// pseudo-inode, under another item type).
pub const FLAT: Ino = ORPHANS;

/// The key of a record's chunk.
pub fn record_key(ino: Ino, n: u64, chunk: u16) -> Vec<u8> {
    let mut k = key_u64(ino, item::RECORD, n);
    k.extend_from_slice(&chunk.to_be_bytes());
    k
}

/// The record number and chunk number in the rest of a record chunk's key.
pub fn record_suffix(rest: &[u8]) -> Result<(u64, u16)> {
    if rest.len() != 10 {
        return Err(Error::Corrupt("malformed record key"));
    }
    let n = u64::from_be_bytes(rest[..8].try_into().expect("8 bytes"));
    let c = u16::from_be_bytes(rest[8..].try_into().expect("2 bytes"));
    Ok((n, c))
}

/// The key of a directory entry with an integer name.
pub fn int_dirent_key(dir: Ino, n: u32) -> Vec<u8> {
    let mut k = key(dir, item::INT_DIRENT);
    k.extend_from_slice(&n.to_be_bytes());
    k
}

/// The integer name in the rest of an integer directory entry's key.
pub fn int_dirent_name(rest: &[u8]) -> Result<u32> {
    rest.try_into()
        .map(u32::from_be_bytes)
        .map_err(|_| Error::Corrupt("malformed integer directory entry key"))
}

/// The key of a flat name.
pub fn flat_key(name: &[u8]) -> Vec<u8> {
    let mut k = key(FLAT, item::FLAT_NAME);
    k.extend_from_slice(name);
    k
}

/// Longest flat name, in bytes.
pub const FLAT_NAME_MAX: usize = 255;

/// The flat name in the rest of a flat name's key.
pub fn flat_name(rest: &[u8]) -> Result<&[u8]> {
    if rest.is_empty() || rest.len() > FLAT_NAME_MAX {
        return Err(Error::Corrupt("flat name key without a valid name"));
    }
    Ok(rest)
}

/// A record file's head: the value of its [`item::RECORDS`] item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHead {
    /// Bytes of every record, or 0 when records vary in length.
    pub record_size: u32,
    /// Records kept at most, the oldest overwritten beyond (a cyclic file), or 0 for no
    /// bound.
    pub capacity: u32,
    /// Number of the oldest record.
    pub first: u64,
    /// Number the next record added gets: the records are `first..next`.
    pub next: u64,
}

/// Longest record, in bytes. Larger content belongs in a regular file.
pub const RECORD_MAX: usize = 4096;

/// Bytes of an encoded record head.
pub const RECORD_HEAD_LEN: usize = 26;
const RECORD_HEAD_VERSION: u8 = 1;

impl RecordHead {
    /// Encodes the head.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(RECORD_HEAD_LEN);
        b.push(RECORD_HEAD_VERSION);
        b.push(0);
        b.extend_from_slice(&self.record_size.to_le_bytes());
        b.extend_from_slice(&self.capacity.to_le_bytes());
        b.extend_from_slice(&self.first.to_le_bytes());
        b.extend_from_slice(&self.next.to_le_bytes());
        b
    }

    /// Decodes a head, checking its version and that its numbers are in order.
    pub fn decode(b: &[u8]) -> Result<RecordHead> {
        if b.len() != RECORD_HEAD_LEN || b[0] != RECORD_HEAD_VERSION || b[1] != 0 {
            return Err(Error::Corrupt("malformed record file head"));
        }
        let mut r = Reader(&b[2..]);
        let h = RecordHead {
            record_size: r.u32(),
            capacity: r.u32(),
            first: r.u64(),
            next: r.u64(),
        };
        if h.first > h.next || (h.capacity > 0 && h.next - h.first > u64::from(h.capacity)) {
            return Err(Error::Corrupt(
                "record file head with its numbers out of order",
            ));
        }
        Ok(h)
    }
}

/// The key of an item without a suffix.
pub fn key(ino: Ino, ty: u8) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.extend_from_slice(&ino.to_be_bytes());
    k.push(ty);
    k
}

/// The key of an item with a u64 suffix (an extent's first block, an orphan).
pub fn key_u64(ino: Ino, ty: u8, n: u64) -> Vec<u8> {
    let mut k = key(ino, ty);
    k.extend_from_slice(&n.to_be_bytes());
    k
}

/// The key of an extended attribute.
pub fn xattr_key(ino: Ino, name: &[u8]) -> Vec<u8> {
    let mut k = key(ino, item::XATTR);
    k.extend_from_slice(name);
    k
}

/// The key of chunk `chunk` of attribute `name`'s value: the attribute's key, a zero byte
/// (which no name holds), the chunk's number.
pub fn xattr_chunk_key(ino: Ino, name: &[u8], chunk: u16) -> Vec<u8> {
    let mut k = xattr_key(ino, name);
    k.push(0);
    k.extend_from_slice(&chunk.to_be_bytes());
    k
}

/// The key of a directory entry.
pub fn dirent_key(dir: Ino, name: &[u8]) -> Vec<u8> {
    let mut k = key_u64(dir, item::DIRENT, cookie(name));
    k.extend_from_slice(name);
    k
}

/// The name in the rest of a directory entry's key (after its cookie).
pub fn dirent_name(rest: &[u8]) -> Result<&[u8]> {
    match rest.get(8..) {
        Some(name) if !name.is_empty() && name.len() <= 255 => Ok(name),
        _ => Err(Error::Corrupt("directory entry key without a valid name")),
    }
}

/// Splits a key into inode, item type and the rest.
pub fn split_key(k: &[u8]) -> Result<(Ino, u8, &[u8])> {
    if k.len() < 9 {
        return Err(Error::Corrupt("file-system key too short"));
    }
    let ino = u64::from_be_bytes(k[..8].try_into().expect("8 bytes"));
    Ok((ino, k[8], &k[9..]))
}

/// The u64 that follows the item type.
pub fn suffix_u64(rest: &[u8]) -> Result<u64> {
    rest.get(..8)
        .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
        .ok_or(Error::Corrupt("file-system key without its number"))
}

/// Cookie of the entry `.` in readdir.
pub const COOKIE_DOT: u64 = 1;
/// Cookie of the entry `..`.
pub const COOKIE_DOTDOT: u64 = 2;

/// A directory entry's readdir cookie: a 62-bit hash of its name, above the cookies of `.`
/// and `..`. Entries are keyed (and so listed) by cookie, so a listing resumed from a cookie
/// neither repeats nor skips entries when others come and go meanwhile. Two names of one
/// directory share a cookie with odds of about n²/2⁶³; they are then listed together.
pub fn cookie(name: &[u8]) -> u64 {
    // FNV-1a, then the splitmix64 finaliser so every name bit reaches every cookie bit.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> 2) + 3
}

/// Seconds and nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timespec {
    /// Seconds (negative before 1970).
    pub sec: i64,
    /// Nanoseconds, below 10⁹.
    pub nsec: u32,
}

/// What an inode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A symbolic link.
    Symlink,
    /// A named pipe.
    Fifo,
    /// A socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
}

/// `S_IFMT`: the file-type bits of a mode.
pub const S_IFMT: u32 = 0o170_000;

impl FileType {
    /// The type's `S_IF*` bits.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileType::Fifo => 0o010_000,
            FileType::CharDevice => 0o020_000,
            FileType::Directory => 0o040_000,
            FileType::BlockDevice => 0o060_000,
            FileType::Regular => 0o100_000,
            FileType::Symlink => 0o120_000,
            FileType::Socket => 0o140_000,
        }
    }

    /// The type a mode's `S_IF*` bits name.
    pub fn from_mode(mode: u32) -> Option<FileType> {
        Some(match mode & S_IFMT {
            0o010_000 => FileType::Fifo,
            0o020_000 => FileType::CharDevice,
            0o040_000 => FileType::Directory,
            0o060_000 => FileType::BlockDevice,
            0o100_000 => FileType::Regular,
            0o120_000 => FileType::Symlink,
            0o140_000 => FileType::Socket,
            _ => return None,
        })
    }

    /// Code in directory entries.
    fn code(self) -> u8 {
        (self.mode_bits() >> 12) as u8
    }

    fn from_code(c: u8) -> Option<FileType> {
        FileType::from_mode(u32::from(c) << 12)
    }
}

/// An inode's attributes: the value of its `INODE` item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inode {
    /// Type and permission bits (`S_IF*`, setuid, setgid, sticky, rwx).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Names of the inode (directories: 2 + subdirectories).
    pub nlink: u32,
    /// Bytes (a symlink: its target's length).
    pub size: u64,
    /// Last access.
    pub atime: Timespec,
    /// Last change of the content.
    pub mtime: Timespec,
    /// Last change of the inode.
    pub ctime: Timespec,
    /// Device number of a device node.
    pub rdev: u64,
    /// Blocks allocated to the file's extents.
    pub blocks: u64,
    /// A directory's parent (its `..`); 0 for other types, whose names may be many.
    pub parent: Ino,
}

/// Bytes of an encoded inode.
pub const INODE_LEN: usize = 1 + 4 * 4 + 8 + 3 * 12 + 3 * 8;
const INODE_VERSION: u8 = 1;

impl Inode {
    /// The file type its mode names.
    pub fn file_type(&self) -> Result<FileType> {
        FileType::from_mode(self.mode).ok_or(Error::Corrupt("inode of no known type"))
    }

    /// Encodes the inode.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(INODE_LEN);
        b.push(INODE_VERSION);
        for v in [self.mode, self.uid, self.gid, self.nlink] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&self.size.to_le_bytes());
        for t in [self.atime, self.mtime, self.ctime] {
            b.extend_from_slice(&t.sec.to_le_bytes());
            b.extend_from_slice(&t.nsec.to_le_bytes());
        }
        b.extend_from_slice(&self.rdev.to_le_bytes());
        b.extend_from_slice(&self.blocks.to_le_bytes());
        b.extend_from_slice(&self.parent.to_le_bytes());
        b
    }

    /// Decodes an inode, checking its version and fields.
    pub fn decode(b: &[u8]) -> Result<Inode> {
        if b.len() != INODE_LEN || b[0] != INODE_VERSION {
            return Err(Error::Corrupt("malformed inode"));
        }
        let mut r = Reader(&b[1..]);
        let (mode, uid, gid, nlink) = (r.u32(), r.u32(), r.u32(), r.u32());
        let size = r.u64();
        let mut t = || Timespec {
            sec: r.u64() as i64,
            nsec: r.u32(),
        };
        let (atime, mtime, ctime) = (t(), t(), t());
        let (rdev, blocks, parent) = (r.u64(), r.u64(), r.u64());
        let inode = Inode {
            mode,
            uid,
            gid,
            nlink,
            size,
            atime,
            mtime,
            ctime,
            rdev,
            blocks,
            parent,
        };
        inode.file_type()?;
        if [atime, mtime, ctime]
            .iter()
            .any(|t| t.nsec >= 1_000_000_000)
        {
            return Err(Error::Corrupt("inode time with nanoseconds past a second"));
        }
        Ok(inode)
    }
}

/// Little-endian fields read in order from a slice the caller checked the length of.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let (a, rest) = self.0.split_at(N);
        self.0 = rest;
        a.try_into().expect("length checked by the caller")
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

/// A directory entry's value: the inode it names and that inode's type.
pub fn encode_dirent(ino: Ino, ty: FileType) -> Vec<u8> {
    let mut b = Vec::with_capacity(9);
    b.extend_from_slice(&ino.to_le_bytes());
    b.push(ty.code());
    b
}

/// Decodes a directory entry's value.
pub fn decode_dirent(b: &[u8]) -> Result<(Ino, FileType)> {
    let bad = Error::Corrupt("malformed directory entry");
    if b.len() != 9 {
        return Err(bad);
    }
    let ino = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    let ty = FileType::from_code(b[8]).ok_or(bad)?;
    Ok((ino, ty))
}

/// A run of file blocks stored in consecutive sectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// First sector.
    pub start: u64,
    /// Blocks (sectors) in the run.
    pub len: u64,
    /// Allocated but never written (fallocate): reads as zeros, and the first write of each
    /// block goes to its sector in place, since no committed version shows what is there.
    pub unwritten: bool,
    /// An append block that starts with the rest of the frame the file's block before ends
    /// with (SPEC.md §8.4a): it holds bytes of the record before its first.
    pub continued: bool,
}

/// Bytes of an encoded extent.
pub const EXTENT_LEN: usize = 9;

impl Extent {
    /// Encodes the extent.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(EXTENT_LEN);
        b.extend_from_slice(&(self.start as u32).to_le_bytes());
        b.extend_from_slice(&(self.len as u32).to_le_bytes());
        b.push(u8::from(self.unwritten) | u8::from(self.continued) << 1);
        b
    }

    /// Decodes an extent.
    pub fn decode(b: &[u8]) -> Result<Extent> {
        // Bit 0 unwritten, bit 1 continued; never both.
        if b.len() != EXTENT_LEN || b[8] > 2 {
            return Err(Error::Corrupt("malformed extent"));
        }
        let mut r = Reader(b);
        let start = u64::from(r.u32());
        let len = u64::from(r.u32());
        if len == 0 {
            return Err(Error::Corrupt("empty extent"));
        }
        Ok(Extent {
            start,
            len,
            unwritten: b[8] == 1,
            continued: b[8] == 2,
        })
    }

    /// Decodes the extent mapping a file's blocks from `first` on a volume of `sectors`
    /// blocks, bounded as the mount's walk bounds it (a mount from the saved free-space map
    /// has not walked the index): it ends within the largest file (2³² − 1 blocks) and
    /// within the volume.
    pub fn decode_at(first: u64, b: &[u8], sectors: u64) -> Result<Extent> {
        let e = Extent::decode(b)?;
        if first
            .checked_add(e.len)
            .is_none_or(|end| end > u64::from(u32::MAX))
            || e.start + e.len > sectors
        {
            return Err(Error::Corrupt(
                "an extent past the largest file or the volume",
            ));
        }
        Ok(e)
    }
}

/// The superblock: sector 0 of the volume, rewritten by every commit. The block device
/// underneath writes a sector atomically (a torn write leaves the previous version), so
/// writing it is the commit point. Where written bytes can be programmed again
/// (reprogrammable NOR), a commit may instead append its superblock after the last one in
/// the same sector ([`SB_STRIDE`] bytes apart): the newest valid one counts, and a torn
/// append is an invalid record after the valid ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    /// Commits so far; each superblock has one more than the last.
    pub commit: u64,
    /// Root of the index.
    pub root: NodePtr,
    /// The next inode number to hand out (numbers are never reused).
    pub next_ino: Ino,
    /// Sectors the volume has (the block device's size).
    pub sectors: u64,
    /// Bytes per block (the sector size).
    pub block_size: u32,
    /// Generation of the index's last commit (the index's root may outlive many commits
    /// when spare pointers change it in place, so its own generation does not say).
    pub index_gen: u32,
    /// File bytes written by callers over the volume's life, up to this commit.
    pub user_bytes: u64,
    /// Slots the log programmed over the volume's life (data, index, superblocks and the
    /// cleaner's copies), up to this commit.
    pub flash_slots: u64,
    /// Slots migration moved from SLC segments to MLC ones over the volume's life (among
    /// `flash_slots`; version 11, 0 before).
    pub migrated_slots: u64,
    /// FlexFS's shares when this commit was written (version 11; `None` before it and on
    /// parts without an SLC mode).
    pub shares: Option<Shares>,
    /// Blocks of the journal (blocks 1..=N; 0 for none), fixed at format.
    pub journal_blocks: u16,
    /// Inodes of this commit (version 8; before it, only a walk of the index counts them).
    pub inodes: u64,
    /// The saved free-space map this commit names (version 8; none before).
    pub space: SpaceRef,
}

/// Where a commit's free space is written down (SPEC.md §8.5): a saved map of every block
/// (written at some earlier commit) and, after the superblock record in block 0, the
/// blocks whose state changed since that map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpaceRef {
    /// No map: the mount walks the index.
    None,
    /// The map at this block (its first) plus `delta` runs after the record describe this
    /// commit exactly.
    Current {
        /// The map's first block; it takes [`space_map_blocks`] consecutive blocks.
        at: u64,
        /// Runs of the delta after the record in block 0.
        delta: u16,
    },
    /// The map at this block is still in use (a later commit will name it with a delta)
    /// but does not describe this commit: the mount walks the index. An appended record
    /// has no room for a delta.
    Stale(u64),
}

impl SpaceRef {
    /// The map's first block, if the commit keeps one.
    pub fn map(self) -> Option<u64> {
        match self {
            SpaceRef::None => None,
            SpaceRef::Current { at, .. } | SpaceRef::Stale(at) => Some(at),
        }
    }
}

/// `delta` of a record whose map does not describe it.
const DELTA_STALE: u16 = u16::MAX;

/// The superblock's magic: "FFS1".
const SB_MAGIC: [u8; 4] = *b"FFS1";
/// Format version of everything in this module and of the index nodes: 2 since superblocks
/// may be appended in block 0 (a reader of version 1 would miss them), 3 since volumes may
/// have a journal (a reader of version 2 would miss its entries), 4 since record files of
/// fixed-size records may hold their records in data blocks (a reader of version 3 would
/// miss them), 5 since other record files may hold theirs in run blocks (a reader of version
/// 4 would miss those), 6 since frames in append blocks may commit themselves (a reader of
/// version 5 would miss the records they hold), 7 since append blocks pack frames without
/// padding, span, link and remove, and the journal has operations 10 to 12 (a reader of
/// version 6 would misread them). Versions 1 to 6, which have none of these, are read too.
/// 8 since the superblock counts inodes and names a saved free-space map, its block numbers
/// in 32 bits (a reader of version 7 would misread it). 9 since journal entries may carry
/// small writes of file data (operation 13) and volumes on media that cannot program
/// written bytes again may have a journal (a reader of version 8 would fail on them). 10
/// since the saved free-space map may hold free runs instead of bits (a reader of version
/// 9 would walk the index at every mount). 11 since a superblock on a part with an SLC mode
/// records what migration moved and FlexFS's shares, in a longer record (a reader of
/// version 10 would take the first 4 bytes of the migrated count for the checksum). 12
/// since the journal may hold creates of regular files (operation 14; a reader of version
/// 11 would fail on them). 13 since index branches record their children's generations
/// (node formats 3 and 4, SPEC.md §7.3; a reader of version 12 would refuse the nodes).
/// 14 since the journal may name a file's block written whole by small writes (operation
/// 15; a reader of version 13 would fail on it), and a file's last block is left erased
/// past the file's end, not zeroed (a writer of version 13 grew a file by allocation over
/// such bytes without zeroing them).
pub const FS_VERSION: u8 = 14;
/// Bytes of an encoded superblock record (68 before version 8), and of a long one (version
/// 11, on parts with an SLC mode: [`Superblock::shares`]).
pub const SB_LEN: usize = 72;
const SB_LONG_LEN: usize = 84;
/// Distance between superblock records appended in block 0 (a whole number of words of any
/// part), and between long ones; the rest of the block is erased. Parts that append
/// superblocks (reprogrammable NOR) have no SLC mode: their records stay short, seven to a
/// 512-byte block.
pub const SB_STRIDE: usize = 72;
const SB_LONG_STRIDE: usize = 88;
/// Bit of byte 5 that marks a long record.
const SB_LONG: u8 = 1;
/// The largest inode count a superblock keeps (48 bits).
const INODES_MAX: u64 = (1 << 48) - 1;

const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

impl Superblock {
    /// Whether the record is long: it holds migration's count and the shares, which only a
    /// part with an SLC mode has.
    fn long(&self) -> bool {
        self.shares.is_some() || self.migrated_slots > 0
    }

    /// The distance between this superblock's record and the next appended after it.
    pub fn stride(&self) -> usize {
        if self.long() {
            SB_LONG_STRIDE
        } else {
            SB_STRIDE
        }
    }

    /// Encodes the superblock into a sector, as its first record (the rest erased).
    pub fn encode(&self, sector: &mut [u8]) {
        sector.fill(0xFF);
        self.encode_record(&mut sector[..self.stride()]);
    }

    /// Encodes the superblock as one record of [`Superblock::stride`] bytes (its tail
    /// erased), to append after the records in block 0.
    pub fn encode_record(&self, rec: &mut [u8]) {
        rec.fill(0xFF);
        let long = self.long();
        let b = &mut rec[..if long { SB_LONG_LEN } else { SB_LEN }];
        b[0..4].copy_from_slice(&SB_MAGIC);
        b[4] = FS_VERSION;
        b[5] = if long { SB_LONG } else { 0 };
        b[6..8].copy_from_slice(&self.journal_blocks.to_le_bytes());
        b[8..16].copy_from_slice(&self.commit.to_le_bytes());
        // Blocks are the block device's sectors, numbered in 32 bits (a tag's key, SPEC.md §2.4).
        b[16..20].copy_from_slice(&(self.root.0 as u32).to_le_bytes());
        b[20..24].copy_from_slice(&(self.sectors as u32).to_le_bytes());
        b[24..32].copy_from_slice(&self.next_ino.to_le_bytes());
        b[32..36].copy_from_slice(&self.block_size.to_le_bytes());
        b[36..40].copy_from_slice(&self.index_gen.to_le_bytes());
        b[40..48].copy_from_slice(&self.user_bytes.to_le_bytes());
        b[48..56].copy_from_slice(&self.flash_slots.to_le_bytes());
        let (map, delta) = match self.space {
            SpaceRef::None => (0, 0),
            SpaceRef::Current { at, delta } => (at, delta),
            SpaceRef::Stale(at) => (at, DELTA_STALE),
        };
        b[56..60].copy_from_slice(&(map as u32).to_le_bytes());
        b[60..62].copy_from_slice(&delta.to_le_bytes());
        b[62..68].copy_from_slice(&self.inodes.min(INODES_MAX).to_le_bytes()[..6]);
        let mut at = 68;
        if long {
            b[68..76].copy_from_slice(&self.migrated_slots.to_le_bytes());
            let [alpha, gamma] = Shares::words(self.shares);
            b[76..78].copy_from_slice(&alpha.to_le_bytes());
            b[78..80].copy_from_slice(&gamma.to_le_bytes());
            at = 80;
        }
        let crc = CRC32.checksum(&b[..at]);
        b[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    }

    /// Decodes and checks the first superblock record of a sector.
    pub fn decode(sector: &[u8]) -> Result<Superblock> {
        let short = Error::Corrupt("sector too small for a superblock");
        // Only read once the log's header said the volume is a file system: a block 0
        // without the magic is damage (or a format that never finished), not another kind
        // of volume.
        if sector.get(0..4).ok_or(short.clone())? != SB_MAGIC {
            return Err(Error::Corrupt("the superblock is missing from block 0"));
        }
        let version = *sector.get(4).ok_or(short.clone())?;
        if !(1..=FS_VERSION).contains(&version) {
            return Err(Error::NotFormatted("unsupported file-system version"));
        }
        let long = version >= 11 && sector.get(5).is_some_and(|&f| f & SB_LONG != 0);
        let crc_at = match version {
            _ if long => 80,
            8.. => 68,
            _ => 64,
        };
        // A record of an earlier version may be the last before the block's end.
        let b = sector.get(..crc_at + 4).ok_or(short)?;
        if CRC32.checksum(&b[..crc_at]).to_le_bytes() != b[crc_at..crc_at + 4] {
            return Err(Error::Corrupt("superblock checksum mismatch"));
        }
        let journal_blocks = if version >= 3 {
            u16::from_le_bytes([b[6], b[7]])
        } else {
            0
        };
        let mut r = Reader(&b[8..]);
        let commit = r.u64();
        if version < 8 {
            return Ok(Superblock {
                commit,
                root: NodePtr(r.u64()),
                next_ino: r.u64(),
                sectors: r.u64(),
                block_size: r.u32(),
                index_gen: r.u32(),
                user_bytes: r.u64(),
                flash_slots: r.u64(),
                migrated_slots: 0,
                shares: None,
                journal_blocks,
                inodes: 0,
                space: SpaceRef::None,
            });
        }
        let (root, sectors) = (u64::from(r.u32()), u64::from(r.u32()));
        let (next_ino, block_size, index_gen) = (r.u64(), r.u32(), r.u32());
        let (user_bytes, flash_slots) = (r.u64(), r.u64());
        let map = u64::from(r.u32());
        let delta = u16::from_le_bytes(r.take());
        let mut inodes = [0u8; 8];
        inodes[..6].copy_from_slice(&r.take::<6>());
        let (migrated_slots, shares) = if long {
            let migrated = r.u64();
            let (alpha, gamma) = (u16::from_le_bytes(r.take()), u16::from_le_bytes(r.take()));
            (migrated, Shares::from_words(alpha, gamma))
        } else {
            (0, None)
        };
        let space = match (map, delta) {
            (0, _) => SpaceRef::None,
            (at, DELTA_STALE) => SpaceRef::Stale(at),
            (at, delta) => SpaceRef::Current { at, delta },
        };
        Ok(Superblock {
            commit,
            root: NodePtr(root),
            next_ino,
            sectors,
            block_size,
            index_gen,
            user_bytes,
            flash_slots,
            migrated_slots,
            shares,
            journal_blocks,
            inodes: u64::from_le_bytes(inodes),
            space,
        })
    }

    /// The newest superblock of block 0 and how many records precede it (0: it is the
    /// first). Records follow the first while each is a superblock of this version whose
    /// commit is one more than the one before and whose geometry is the same; an erased
    /// record, or one that fails its check (a torn append), ends them.
    pub fn decode_newest(sector: &[u8]) -> Result<(Superblock, usize)> {
        let mut sb = Superblock::decode(sector)?;
        let mut at = 0;
        // Version 1 never appended; appended records share the first record's version.
        let version = sector[4];
        if version < 2 {
            return Ok((sb, 0));
        }
        // Records end where the first record's delta begins.
        let end = sector.len().saturating_sub(sb.delta_bytes());
        // Appended records share the first's form, as they share its part.
        let stride = sb.stride();
        while let Some(rec) = sector[..end].get((at + 1) * stride..(at + 2) * stride) {
            if rec.iter().all(|&b| b == 0xFF) || rec[4] != version {
                break;
            }
            match Superblock::decode(rec) {
                Ok(next)
                    if next.commit == sb.commit + 1
                        && next.sectors == sb.sectors
                        && next.block_size == sb.block_size
                        && next.journal_blocks == sb.journal_blocks =>
                {
                    sb = next;
                    at += 1;
                }
                _ => break,
            }
        }
        Ok((sb, at))
    }

    /// Bytes at the end of block 0 that this record's delta takes (0 unless it is the
    /// first record and names a current map).
    pub fn delta_bytes(&self) -> usize {
        match self.space {
            SpaceRef::Current { delta, .. } => DELTA_HEADER + usize::from(delta) * RUN_BYTES,
            _ => 0,
        }
    }
}

/// A run of blocks in the same state: in use or free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpaceRun {
    /// First block.
    pub start: u64,
    /// Blocks.
    pub len: u64,
    /// In use (not free).
    pub used: bool,
}

/// The saved free-space map's block magic: "FSPM" for a block of bits, "FSPR" for a block
/// of free runs.
const MAP_MAGIC: [u8; 4] = *b"FSPM";
const MAP_RUNS_MAGIC: [u8; 4] = *b"FSPR";
/// Bytes of a runs map's first block after the header: its blocks and its runs (u32 each).
const RUNS_HEAD: usize = 8;
/// Bytes before a map block's bits: magic, the commit that wrote the map, the block's index
/// in the map, CRC-32C.
const MAP_HEADER: usize = 20;
/// Bytes before the runs of a delta: the map's commit and a CRC-32C.
const DELTA_HEADER: usize = 12;
/// Bytes of a delta's run: first block (u32) and length (u32, top bit: in use).
const RUN_BYTES: usize = 8;
/// Volumes with more blocks than this keep no saved map (a run's fields are 31 bits).
pub const MAP_MAX_BLOCKS: u64 = 1 << 31;

/// Volume blocks one block of the saved map covers.
pub fn map_bits(block_size: usize) -> u64 {
    (block_size.saturating_sub(MAP_HEADER) * 8) as u64
}

/// Blocks a saved map of a volume of `sectors` blocks takes.
pub fn space_map_blocks(sectors: u64, block_size: usize) -> u64 {
    sectors.div_ceil(map_bits(block_size).max(1))
}

/// Runs a delta can hold in block 0 beside the first superblock record.
pub fn delta_capacity(block_size: usize) -> usize {
    // Below `u16::MAX`, which the record reserves for a stale map.
    (block_size.saturating_sub(SB_LONG_STRIDE + DELTA_HEADER) / RUN_BYTES)
        .min(usize::from(DELTA_STALE - 1))
}

/// Free runs a block of a runs map holds: `first`, the map's first block, holds fewer.
pub fn runs_per_map_block(block_size: usize, first: bool) -> usize {
    let head = MAP_HEADER + if first { RUNS_HEAD } else { 0 };
    block_size.saturating_sub(head) / RUN_BYTES
}

/// Blocks a map of `runs` free runs takes (at least one).
pub fn runs_map_blocks(runs: usize, block_size: usize) -> u64 {
    let first = runs_per_map_block(block_size, true);
    let rest = runs_per_map_block(block_size, false).max(1);
    1 + runs.saturating_sub(first).div_ceil(rest) as u64
}

/// What a block of the saved map holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapBlock<'a> {
    /// One bit per volume block from the block's first, set where it is in use.
    Bits(&'a [u8]),
    /// Free runs, first block and length (u32 each), in order; the map's first block also
    /// says how many blocks and runs the map has (`head`).
    Runs {
        /// The map's blocks and runs, in its first block.
        head: Option<(u32, u32)>,
        /// The runs' bytes (any bytes after the map's last run are zero).
        runs: &'a [u8],
    },
}

impl MapBlock<'_> {
    /// The runs of a runs block, as (first block, length).
    pub fn runs(runs: &[u8]) -> impl Iterator<Item = (u64, u64)> + '_ {
        runs.chunks_exact(RUN_BYTES).map(|r| {
            (
                u64::from(u32::from_le_bytes([r[0], r[1], r[2], r[3]])),
                u64::from(u32::from_le_bytes([r[4], r[5], r[6], r[7]])),
            )
        })
    }
}

/// The blocks a map of runs holds, from its first block; `None` for a map of bits, or a
/// block that is not a sound first block of a map.
pub fn runs_map_len(block: &[u8]) -> Option<u64> {
    let sound = block.len() > MAP_HEADER + RUNS_HEAD
        && block[0..4] == MAP_RUNS_MAGIC
        && block[12..16] == [0; 4]
        && map_crc(block).to_le_bytes() == block[16..20];
    sound.then(|| {
        u64::from(u32::from_le_bytes([
            block[20], block[21], block[22], block[23],
        ]))
    })
}

/// Encodes block `index` of a runs map written by commit `commit`: `runs`, the runs it
/// holds (at most [`runs_per_map_block`], each under [`MAP_MAX_BLOCKS`]); the first block
/// also `head`, the map's blocks and runs.
pub fn encode_runs_map_block(
    block: &mut [u8],
    commit: u64,
    index: u32,
    head: Option<(u32, u32)>,
    runs: &[(u64, u64)],
) {
    block.fill(0);
    block[0..4].copy_from_slice(&MAP_RUNS_MAGIC);
    block[4..12].copy_from_slice(&commit.to_le_bytes());
    block[12..16].copy_from_slice(&index.to_le_bytes());
    let mut at = MAP_HEADER;
    if let Some((blocks, count)) = head {
        block[at..at + 4].copy_from_slice(&blocks.to_le_bytes());
        block[at + 4..at + 8].copy_from_slice(&count.to_le_bytes());
        at += RUNS_HEAD;
    }
    for (&(a, n), out) in runs.iter().zip(block[at..].chunks_exact_mut(RUN_BYTES)) {
        out[0..4].copy_from_slice(&(a as u32).to_le_bytes());
        out[4..8].copy_from_slice(&(n as u32).to_le_bytes());
    }
    let crc = map_crc(block);
    block[16..20].copy_from_slice(&crc.to_le_bytes());
}

/// Encodes block `index` of the map written by commit `commit`: `used(k)` says whether
/// volume block `k` (of `sectors`) is in use.
pub fn encode_map_block(
    block: &mut [u8],
    commit: u64,
    index: u32,
    sectors: u64,
    used: impl Fn(u64) -> bool,
) {
    let bits = map_bits(block.len());
    block.fill(0);
    block[0..4].copy_from_slice(&MAP_MAGIC);
    block[4..12].copy_from_slice(&commit.to_le_bytes());
    block[12..16].copy_from_slice(&index.to_le_bytes());
    let first = u64::from(index) * bits;
    for k in first..(first + bits).min(sectors) {
        if used(k) {
            let i = (k - first) as usize;
            block[MAP_HEADER + i / 8] |= 1 << (i % 8);
        }
    }
    let crc = map_crc(block);
    block[16..20].copy_from_slice(&crc.to_le_bytes());
}

/// Block `index` of the map written by commit `commit`; damage, or a block of another map,
/// is an error.
pub fn decode_map_block(block: &[u8], commit: u64, index: u32) -> Result<MapBlock<'_>> {
    let runs = block.get(0..4) == Some(&MAP_RUNS_MAGIC[..]);
    let head = if runs && index == 0 { RUNS_HEAD } else { 0 };
    if block.len() <= MAP_HEADER + head
        || (block[0..4] != MAP_MAGIC && !runs)
        || block[4..12] != commit.to_le_bytes()
        || block[12..16] != index.to_le_bytes()
    {
        return Err(Error::Corrupt("not a block of the free-space map"));
    }
    if map_crc(block).to_le_bytes() != block[16..20] {
        return Err(Error::Corrupt("free-space map checksum mismatch"));
    }
    let rest = &block[MAP_HEADER..];
    if !runs {
        return Ok(MapBlock::Bits(rest));
    }
    let word = |i: usize| u32::from_le_bytes([rest[i], rest[i + 1], rest[i + 2], rest[i + 3]]);
    Ok(MapBlock::Runs {
        head: (index == 0).then(|| (word(0), word(4))),
        runs: &rest[head..],
    })
}

fn map_crc(block: &[u8]) -> u32 {
    let mut d = CRC32.digest();
    d.update(&block[..16]);
    d.update(&block[MAP_HEADER..]);
    d.finalize()
}

/// Writes the delta of superblock `sb_commit` over the map of commit `map_commit` at the end
/// of block 0 (`runs` at most [`delta_capacity`], each under [`MAP_MAX_BLOCKS`]).
pub fn encode_delta(block: &mut [u8], sb_commit: u64, map_commit: u64, runs: &[SpaceRun]) {
    let at = block.len() - DELTA_HEADER - runs.len() * RUN_BYTES;
    let b = &mut block[at..];
    b[0..8].copy_from_slice(&map_commit.to_le_bytes());
    for (r, out) in runs
        .iter()
        .zip(b[DELTA_HEADER..].chunks_exact_mut(RUN_BYTES))
    {
        out[0..4].copy_from_slice(&(r.start as u32).to_le_bytes());
        let len = r.len as u32 | if r.used { 1 << 31 } else { 0 };
        out[4..8].copy_from_slice(&len.to_le_bytes());
    }
    let crc = delta_crc(b, sb_commit);
    b[8..12].copy_from_slice(&crc.to_le_bytes());
}

/// The map's commit and the runs of the delta `sb` names at the end of block 0.
pub fn decode_delta(block: &[u8], sb: &Superblock) -> Result<(u64, Vec<SpaceRun>)> {
    let n = sb.delta_bytes();
    let Some(b) = block.len().checked_sub(n).and_then(|at| block.get(at..)) else {
        return Err(Error::Corrupt("free-space delta beyond block 0"));
    };
    if n < DELTA_HEADER || delta_crc(b, sb.commit).to_le_bytes() != b[8..12] {
        return Err(Error::Corrupt("free-space delta checksum mismatch"));
    }
    let map_commit = Reader(&b[0..8]).u64();
    let runs = b[DELTA_HEADER..]
        .chunks_exact(RUN_BYTES)
        .map(|r| {
            let mut r = Reader(r);
            let (start, len) = (r.u32(), r.u32());
            SpaceRun {
                start: u64::from(start),
                len: u64::from(len & !(1 << 31)),
                used: len >> 31 == 1,
            }
        })
        .collect();
    Ok((map_commit, runs))
}

fn delta_crc(b: &[u8], sb_commit: u64) -> u32 {
    let mut d = CRC32.digest();
    d.update(&sb_commit.to_le_bytes());
    d.update(&b[..8]);
    d.update(&b[DELTA_HEADER..]);
    d.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_reject_damage() {
        let i = Inode {
            mode: 0o100_644,
            uid: 1,
            gid: 2,
            nlink: 1,
            size: 5,
            atime: Timespec { sec: -3, nsec: 7 },
            mtime: Timespec { sec: 9, nsec: 0 },
            ctime: Timespec { sec: 1, nsec: 2 },
            rdev: 0,
            blocks: 1,
            parent: 0,
        };
        let b = i.encode();
        assert_eq!(b.len(), INODE_LEN);
        assert_eq!(Inode::decode(&b), Ok(i));
        let mut bad = b.clone();
        bad[1..5].copy_from_slice(&0u32.to_le_bytes());
        assert!(Inode::decode(&bad).is_err());
        let e = Extent {
            start: 77,
            len: 3,
            unwritten: true,
            continued: false,
        };
        assert_eq!(Extent::decode(&e.encode()), Ok(e));
        let sb = Superblock {
            commit: 4,
            root: NodePtr(9),
            next_ino: 12,
            sectors: 1000,
            block_size: 512,
            index_gen: 3,
            user_bytes: 1 << 40,
            flash_slots: 77,
            migrated_slots: 33,
            shares: Some(Shares::new(0.5, 0.25)),
            journal_blocks: 5,
            inodes: 6,
            space: SpaceRef::Stale(40),
        };
        // A long record (a part with an SLC mode) and a short one (none), each with records
        // appended after it at its own stride.
        let short = Superblock {
            migrated_slots: 0,
            shares: None,
            ..sb
        };
        assert_eq!((sb.stride(), short.stride()), (SB_LONG_STRIDE, SB_STRIDE));
        for sb in [sb, short] {
            let n = sb.stride();
            let mut s = [0u8; 512];
            sb.encode(&mut s);
            assert_eq!(Superblock::decode(&s), Ok(sb));
            assert_eq!(Superblock::decode_newest(&s), Ok((sb, 0)));
            // Appended records: the newest valid one counts; a torn one ends them.
            let next = Superblock {
                commit: 5,
                root: NodePtr(11),
                ..sb
            };
            next.encode_record(&mut s[n..2 * n]);
            assert_eq!(Superblock::decode_newest(&s), Ok((next, 1)));
            let mut torn = s;
            let third = Superblock { commit: 6, ..next };
            third.encode_record(&mut torn[2 * n..3 * n]);
            assert_eq!(Superblock::decode_newest(&torn), Ok((third, 2)));
            torn[2 * n + 8] = 0;
            assert_eq!(Superblock::decode_newest(&torn), Ok((next, 1)));
            // A record that does not follow its predecessor is not a commit of this sequence.
            let mut skip = s;
            Superblock { commit: 9, ..next }.encode_record(&mut skip[2 * n..3 * n]);
            assert_eq!(Superblock::decode_newest(&skip), Ok((next, 1)));
            // Every bit of the record counts (a long one's last 4 bytes are padding).
            let len = if n == SB_LONG_STRIDE {
                SB_LONG_LEN
            } else {
                SB_LEN
            };
            for bit in 0..len * 8 {
                let mut d = s;
                d[bit / 8] ^= 1 << (bit % 8);
                assert_ne!(Superblock::decode(&d), Ok(sb), "bit {bit}");
            }
        }
        // Volumes of versions before 8 (68-byte records, blocks in 64 bits) still read;
        // those of version 1 never appended.
        let mut v1 = [0xFFu8; 512];
        v1[0..4].copy_from_slice(&SB_MAGIC);
        v1[4] = 1;
        v1[5] = 0;
        v1[6..8].copy_from_slice(&[0, 0]);
        for (at, v) in [
            (8, sb.commit),
            (16, sb.root.0),
            (24, sb.next_ino),
            (32, sb.sectors),
            (48, sb.user_bytes),
            (56, sb.flash_slots),
        ] {
            v1[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        v1[40..44].copy_from_slice(&sb.block_size.to_le_bytes());
        v1[44..48].copy_from_slice(&sb.index_gen.to_le_bytes());
        let crc = CRC32.checksum(&v1[..64]);
        v1[64..68].copy_from_slice(&crc.to_le_bytes());
        let v1_sb = Superblock {
            journal_blocks: 0,
            inodes: 0,
            space: SpaceRef::None,
            migrated_slots: 0,
            shares: None,
            ..sb
        };
        assert_eq!(Superblock::decode_newest(&v1), Ok((v1_sb, 0)));
        // Version 10: a short record's layout, whatever byte 5 holds.
        let v10_record = |sb: &Superblock, rec: &mut [u8]| {
            sb.encode_record(rec);
            rec[4] = 10;
            rec[5] = 0xA5;
            let crc = CRC32.checksum(&rec[..68]);
            rec[68..72].copy_from_slice(&crc.to_le_bytes());
        };
        let mut v10 = [0xFFu8; 512];
        v10_record(&short, &mut v10[..72]);
        let v10_next = Superblock { commit: 5, ..short };
        v10_record(&v10_next, &mut v10[72..144]);
        assert_eq!(Superblock::decode_newest(&v10), Ok((v10_next, 1)));
        assert_eq!(
            decode_dirent(&encode_dirent(5, FileType::Symlink)),
            Ok((5, FileType::Symlink))
        );
        let h = RecordHead {
            record_size: 15,
            capacity: 20,
            first: 7,
            next: 27,
        };
        assert_eq!(h.encode().len(), RECORD_HEAD_LEN);
        assert_eq!(RecordHead::decode(&h.encode()), Ok(h));
        let over = RecordHead { next: 28, ..h };
        assert!(RecordHead::decode(&over.encode()).is_err());
        let k = record_key(3, 9, 2);
        let (_, _, rest) = split_key(&k).unwrap();
        assert_eq!(record_suffix(rest), Ok((9, 2)));
        let k = int_dirent_key(3, 77);
        let (_, _, rest) = split_key(&k).unwrap();
        assert_eq!(int_dirent_name(rest), Ok(77));
    }

    #[test]
    fn space_maps_and_deltas_round_trip_and_reject_damage_and_strangers() {
        let used = |k: u64| k % 3 == 0 || (100..200).contains(&k);
        let sectors = 5000;
        let mut block = [0u8; 512];
        assert_eq!(space_map_blocks(sectors, 512), 2);
        encode_map_block(&mut block, 7, 1, sectors, used);
        let Ok(MapBlock::Bits(bits)) = decode_map_block(&block, 7, 1) else {
            panic!("not a block of bits");
        };
        let first = map_bits(512);
        for k in first..sectors {
            let i = (k - first) as usize;
            assert_eq!(bits[i / 8] & (1 << (i % 8)) != 0, used(k), "block {k}");
        }
        // Another commit's map, another block of it, or a flipped bit: refused.
        assert!(decode_map_block(&block, 8, 1).is_err());
        assert!(decode_map_block(&block, 7, 0).is_err());
        let mut bad = block;
        bad[300] ^= 4;
        assert!(decode_map_block(&bad, 7, 1).is_err());
        // A map of runs: its first block says its blocks and runs.
        let runs: Vec<(u64, u64)> = (0..70).map(|i| (i * 10, 3)).collect();
        assert_eq!(runs_per_map_block(512, true), 60);
        assert_eq!(runs_map_blocks(runs.len(), 512), 2);
        assert_eq!(runs_map_blocks(0, 512), 1);
        encode_runs_map_block(&mut block, 7, 0, Some((2, 70)), &runs[..60]);
        assert_eq!(runs_map_len(&block), Some(2));
        let Ok(MapBlock::Runs {
            head: Some((2, 70)),
            runs: got,
        }) = decode_map_block(&block, 7, 0)
        else {
            panic!("not the first block of runs");
        };
        assert!(MapBlock::runs(got).take(60).eq(runs[..60].iter().copied()));
        let mut next = [0u8; 512];
        encode_runs_map_block(&mut next, 7, 1, None, &runs[60..]);
        assert_eq!(runs_map_len(&next), None);
        let Ok(MapBlock::Runs {
            head: None,
            runs: got,
        }) = decode_map_block(&next, 7, 1)
        else {
            panic!("not a later block of runs");
        };
        assert!(MapBlock::runs(got).take(10).eq(runs[60..].iter().copied()));
        assert!(decode_map_block(&block, 8, 0).is_err());
        let mut bad = block;
        bad[100] ^= 1;
        assert!(decode_map_block(&bad, 7, 0).is_err());
        assert_eq!(runs_map_len(&bad), None);
        // A delta at the end of block 0, bound to its superblock's commit; appended records
        // stop before it.
        let sb = Superblock {
            commit: 9,
            root: NodePtr(3),
            next_ino: 4,
            sectors,
            block_size: 512,
            index_gen: 1,
            user_bytes: 0,
            flash_slots: 0,
            migrated_slots: 0,
            shares: None,
            journal_blocks: 0,
            inodes: 2,
            space: SpaceRef::Current { at: 40, delta: 2 },
        };
        let runs = [
            SpaceRun {
                start: 5,
                len: 3,
                used: true,
            },
            SpaceRun {
                start: 4999,
                len: 1,
                used: false,
            },
        ];
        let mut b0 = [0u8; 512];
        sb.encode(&mut b0);
        encode_delta(&mut b0, sb.commit, 6, &runs);
        assert_eq!(Superblock::decode_newest(&b0), Ok((sb, 0)));
        assert_eq!(decode_delta(&b0, &sb), Ok((6, runs.to_vec())));
        let other = Superblock { commit: 10, ..sb };
        assert!(decode_delta(&b0, &other).is_err());
        b0[511] ^= 1;
        assert!(decode_delta(&b0, &sb).is_err());
        assert_eq!(
            delta_capacity(512),
            (512 - SB_LONG_STRIDE - DELTA_HEADER) / RUN_BYTES
        );
    }

    #[test]
    fn keys_sort_by_inode_then_type_and_cookies_avoid_dot_entries() {
        assert!(key(1, item::EXTENT) < key(2, item::INODE));
        assert!(key_u64(1, item::EXTENT, 255) < key_u64(1, item::EXTENT, 256));
        for name in [&b"a"[..], b"", b"..", b"some long name"] {
            assert!(cookie(name) > COOKIE_DOTDOT);
        }
        assert_ne!(cookie(b"a"), cookie(b"b"));
    }
}
