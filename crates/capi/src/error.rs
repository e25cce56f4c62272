//! Errors as C sees them: negative errno values, with a message for each.
//!
//! The values are Linux's errno numbers (the library's `flashfs::Error::errno`), named
//! here because a firmware's C library may number errno differently. A C enum rather than
//! macros: its negative values need no parentheses.

use flashfs::Error;

/// What a call returns on failure (0 or a count on success). Callbacks return these too.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum flashfs_error {
    /// Success.
    FLASHFS_OK = 0,
    /// Operation not permitted.
    FLASHFS_ERR_PERM = -1,
    /// No such file or directory.
    FLASHFS_ERR_NOENT = -2,
    /// Input/output error: the flash failed, or data did not read back as written.
    FLASHFS_ERR_IO = -5,
    /// Bad file or directory handle, or transaction.
    FLASHFS_ERR_BADF = -9,
    /// Transaction identifiers exhausted.
    FLASHFS_ERR_AGAIN = -11,
    /// Out of memory.
    FLASHFS_ERR_NOMEM = -12,
    /// File exists.
    FLASHFS_ERR_EXIST = -17,
    /// Not a flashfs volume.
    FLASHFS_ERR_NODEV = -19,
    /// Not a directory.
    FLASHFS_ERR_NOTDIR = -20,
    /// Is a directory.
    FLASHFS_ERR_ISDIR = -21,
    /// Invalid argument.
    FLASHFS_ERR_INVAL = -22,
    /// File too large.
    FLASHFS_ERR_FBIG = -27,
    /// No space left on the device.
    FLASHFS_ERR_NOSPC = -28,
    /// Read-only volume.
    FLASHFS_ERR_ROFS = -30,
    /// Too many links.
    FLASHFS_ERR_MLINK = -31,
    /// Conflict between transactions: the transaction was rolled back.
    FLASHFS_ERR_DEADLK = -35,
    /// File name too long.
    FLASHFS_ERR_NAMETOOLONG = -36,
    /// Directory not empty.
    FLASHFS_ERR_NOTEMPTY = -39,
    /// Too many levels of symbolic links.
    FLASHFS_ERR_LOOP = -40,
    /// No such attribute.
    FLASHFS_ERR_NODATA = -61,
    /// Bad message: uncorrectable bit errors (returned by a NAND read callback).
    FLASHFS_ERR_BADMSG = -74,
    /// Operation not supported.
    FLASHFS_ERR_NOTSUP = -95,
    /// Corrupt volume: run a check.
    FLASHFS_ERR_CORRUPT = -117,
}

use flashfs_error::*;

/// Every code with its message.
const MESSAGES: &[(flashfs_error, &[u8])] = &[
    (FLASHFS_OK, b"success\0"),
    (FLASHFS_ERR_PERM, b"operation not permitted\0"),
    (FLASHFS_ERR_NOENT, b"no such file or directory\0"),
    (FLASHFS_ERR_IO, b"input/output error\0"),
    (FLASHFS_ERR_BADF, b"bad handle\0"),
    (FLASHFS_ERR_AGAIN, b"transaction identifiers exhausted\0"),
    (FLASHFS_ERR_NOMEM, b"out of memory\0"),
    (FLASHFS_ERR_EXIST, b"file exists\0"),
    (FLASHFS_ERR_NODEV, b"not a flashfs volume\0"),
    (FLASHFS_ERR_NOTDIR, b"not a directory\0"),
    (FLASHFS_ERR_ISDIR, b"is a directory\0"),
    (FLASHFS_ERR_INVAL, b"invalid argument\0"),
    (FLASHFS_ERR_FBIG, b"file too large\0"),
    (FLASHFS_ERR_NOSPC, b"no space left on device\0"),
    (FLASHFS_ERR_ROFS, b"read-only volume\0"),
    (FLASHFS_ERR_MLINK, b"too many links\0"),
    (FLASHFS_ERR_DEADLK, b"conflict between transactions\0"),
    (FLASHFS_ERR_NAMETOOLONG, b"file name too long\0"),
    (FLASHFS_ERR_NOTEMPTY, b"directory not empty\0"),
    (FLASHFS_ERR_LOOP, b"too many levels of symbolic links\0"),
    (FLASHFS_ERR_NODATA, b"no such attribute\0"),
    (FLASHFS_ERR_BADMSG, b"uncorrectable bit errors\0"),
    (FLASHFS_ERR_NOTSUP, b"operation not supported\0"),
    (FLASHFS_ERR_CORRUPT, b"corrupt volume\0"),
];

impl flashfs_error {
    /// The code as a C function returns it.
    pub(crate) const fn code(self) -> i32 {
        self as i32
    }
}

/// The negative errno of a library error.
pub(crate) fn code(e: &Error) -> i32 {
    -e.errno()
}

/// A message for a code this library returns (a static, NUL-terminated string).
pub(crate) fn message(code: i32) -> &'static [u8] {
    MESSAGES
        .iter()
        .find(|(e, _)| e.code() == code)
        .map_or(b"unknown error\0", |(_, m)| m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_of_the_library_has_a_named_code_and_a_message() {
        let errors = [
            Error::Io,
            Error::NoSpace,
            Error::InvalidArgument("x"),
            Error::NotFormatted("x"),
            Error::Corrupt("x"),
            Error::ReadOnly,
            Error::NotFound,
            Error::Exists,
            Error::NotDir,
            Error::IsDir,
            Error::NotEmpty,
            Error::NameTooLong,
            Error::NoAttribute,
            Error::TooBig,
            Error::TooManyLinks,
            Error::Loop,
            Error::NotPermitted("x"),
            Error::Unsupported("x"),
            Error::BadHandle,
            Error::Conflict,
            Error::TooManyTransactions,
        ];
        for e in errors {
            let m = message(code(&e));
            assert_ne!(m, b"unknown error\0", "{e}: errno {}", e.errno());
        }
    }
}
