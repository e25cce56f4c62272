//! Errors of the file-system layers, each with the errno a POSIX caller expects.

use core::fmt;

use flash::FlashError;

/// Where damaged data was found ([`Error::Damaged`]): as much as the layer that reported
/// it knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Damage {
    /// The slot (segment, slot in it) whose data failed its check, when known.
    pub slot: Option<(u32, u32)>,
    /// The block device's sector.
    pub sector: Option<u64>,
    /// The file (inode number) and the byte offset in it of the damaged block.
    pub file: Option<(u64, u64)>,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "damaged data")?;
        if let Some((ino, off)) = self.file {
            write!(f, " in inode {ino} at byte {off}")?;
        }
        match (self.sector, self.slot) {
            (Some(s), Some((seg, slot))) => write!(f, " (sector {s}, segment {seg} slot {slot})")?,
            (Some(s), None) => write!(f, " (sector {s})")?,
            (None, Some((seg, slot))) => write!(f, " (segment {seg} slot {slot})")?,
            (None, None) => {}
        }
        write!(
            f,
            ": it failed its checksum or was lost, and is not returned"
        )
    }
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The medium failed in a way the layer could not hide (power loss, a worn-out device).
    Flash(FlashError),
    /// Data could not be read back: uncorrectable bit errors (EIO).
    Io,
    /// Data read back does not match its checksum, or reads as erased where it was written,
    /// or was lost to such damage before: it is not handed out (EIO). Says where.
    Damaged(Damage),
    /// No free space is left, even after cleaning (ENOSPC).
    NoSpace,
    /// An argument is out of range or malformed (EINVAL).
    InvalidArgument(&'static str),
    /// The device holds no volume of this kind, or one of an unsupported version.
    NotFormatted(&'static str),
    /// The volume was damaged beyond what the layer can use (EUCLEAN).
    Corrupt(&'static str),
    /// The volume is read-only, e.g. after the spare blocks ran out (EROFS).
    ReadOnly,
    /// No such file or directory (ENOENT).
    NotFound,
    /// The name exists already (EEXIST).
    Exists,
    /// A directory was needed (ENOTDIR).
    NotDir,
    /// The operation does not apply to a directory (EISDIR).
    IsDir,
    /// The directory is not empty (ENOTEMPTY).
    NotEmpty,
    /// A name longer than 255 bytes, or a path or link target longer than 4095 (ENAMETOOLONG).
    NameTooLong,
    /// No such extended attribute (ENODATA).
    NoAttribute,
    /// A file or attribute value larger than the volume allows (EFBIG, E2BIG for attributes).
    TooBig,
    /// The inode has as many links as it can have (EMLINK).
    TooManyLinks,
    /// Too many symbolic links in a path (ELOOP).
    Loop,
    /// Not allowed on this kind of object, e.g. a hard link to a directory (EPERM).
    NotPermitted(&'static str),
    /// The volume does not support this (EOPNOTSUPP).
    Unsupported(&'static str),
    /// No open file with this handle, or no open transaction with this identifier (EBADF).
    BadHandle,
    /// A transaction cannot be serialized with the others and has been aborted, or an
    /// atomic operation touched what an open transaction changed (EDEADLK).
    Conflict,
    /// Every transaction identifier of the window is in use (EAGAIN).
    TooManyTransactions,
}

impl Error {
    /// Whether the error says data could not be read back whole (uncorrectable, or failing
    /// its checksum): the rest of the volume works on.
    pub fn is_unreadable(&self) -> bool {
        matches!(self, Error::Io | Error::Damaged(_))
    }

    /// The error with the file and byte offset of the damaged block added, where it is
    /// damage; `offset` turns the damaged sector (if known) into the byte offset in the file.
    pub fn in_file(self, ino: u64, offset: impl FnOnce(Option<u64>) -> u64) -> Error {
        match self {
            Error::Damaged(mut d) => {
                d.file = Some((ino, offset(d.sector)));
                Error::Damaged(d)
            }
            Error::Io => Error::Damaged(Damage {
                file: Some((ino, offset(None))),
                ..Damage::default()
            }),
            e => e,
        }
    }

    /// The errno a POSIX caller should see.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Flash(FlashError::PowerLoss) => 5, // EIO
            Error::Flash(_) | Error::Io | Error::Damaged(_) => 5,
            Error::NoSpace => 28,
            Error::InvalidArgument(_) => 22,
            Error::NotFormatted(_) => 19, // ENODEV
            Error::Corrupt(_) => 117,     // EUCLEAN
            Error::ReadOnly => 30,
            Error::NotFound => 2,
            Error::Exists => 17,
            Error::NotDir => 20,
            Error::IsDir => 21,
            Error::NotEmpty => 39,
            Error::NameTooLong => 36,
            Error::NoAttribute => 61,
            Error::TooBig => 27,
            Error::TooManyLinks => 31,
            Error::Loop => 40,
            Error::NotPermitted(_) => 1,
            Error::Unsupported(_) => 95,
            Error::BadHandle => 9,
            Error::Conflict => 35,
            Error::TooManyTransactions => 11,
        }
    }
}

impl From<FlashError> for Error {
    fn from(e: FlashError) -> Self {
        match e {
            FlashError::Uncorrectable { .. } => Error::Io,
            e => Error::Flash(e),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Flash(e) => write!(f, "flash: {e}"),
            Error::Io => write!(f, "input/output error: data could not be read back"),
            Error::Damaged(d) => write!(f, "input/output error: {d}"),
            Error::NoSpace => write!(f, "no space left on device"),
            Error::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
            Error::NotFormatted(why) => write!(f, "not a flashfs volume: {why}"),
            Error::Corrupt(why) => write!(f, "corrupt volume: {why}"),
            Error::ReadOnly => write!(f, "read-only volume"),
            Error::NotFound => write!(f, "no such file or directory"),
            Error::Exists => write!(f, "file exists"),
            Error::NotDir => write!(f, "not a directory"),
            Error::IsDir => write!(f, "is a directory"),
            Error::NotEmpty => write!(f, "directory not empty"),
            Error::NameTooLong => write!(f, "file name too long"),
            Error::NoAttribute => write!(f, "no such attribute"),
            Error::TooBig => write!(f, "file or attribute too large"),
            Error::TooManyLinks => write!(f, "too many links"),
            Error::Loop => write!(f, "too many levels of symbolic links"),
            Error::NotPermitted(why) => write!(f, "operation not permitted: {why}"),
            Error::Unsupported(why) => write!(f, "operation not supported: {why}"),
            Error::BadHandle => write!(f, "bad file handle"),
            Error::Conflict => write!(f, "conflict between transactions"),
            Error::TooManyTransactions => write!(f, "transaction identifiers exhausted"),
        }
    }
}

impl core::error::Error for Error {}

/// Result of a file-system operation.
pub type Result<T> = core::result::Result<T, Error>;
