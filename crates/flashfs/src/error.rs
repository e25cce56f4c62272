//! Errors of the file-system layers, each with the errno a POSIX caller expects.

use core::fmt;

use flash::FlashError;

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The medium failed in a way the layer could not hide (power loss, a worn-out device).
    Flash(FlashError),
    /// Data could not be read back: uncorrectable bit errors (EIO).
    Io,
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
}

impl Error {
    /// The errno a POSIX caller should see.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Flash(FlashError::PowerLoss) => 5, // EIO
            Error::Flash(_) | Error::Io => 5,
            Error::NoSpace => 28,
            Error::InvalidArgument(_) => 22,
            Error::NotFormatted(_) => 19, // ENODEV
            Error::Corrupt(_) => 117,     // EUCLEAN
            Error::ReadOnly => 30,
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
            Error::NoSpace => write!(f, "no space left on device"),
            Error::InvalidArgument(why) => write!(f, "invalid argument: {why}"),
            Error::NotFormatted(why) => write!(f, "not a flashfs volume: {why}"),
            Error::Corrupt(why) => write!(f, "corrupt volume: {why}"),
            Error::ReadOnly => write!(f, "read-only volume"),
        }
    }
}

impl core::error::Error for Error {}

/// Result of a file-system operation.
pub type Result<T> = core::result::Result<T, Error>;
