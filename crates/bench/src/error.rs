//! Errors of the benchmarks.

use std::fmt;

/// What stopped a benchmark.
#[derive(Debug)]
pub enum BenchError {
    /// The simulated flash refused an operation.
    Flash {
        /// What the benchmark was doing.
        context: String,
        /// The device's error.
        error: flash::FlashError,
    },
    /// The file-system layer under test failed (e.g. `NoSpace`).
    Fs {
        /// What the benchmark was doing.
        context: String,
        /// The layer's error.
        error: flashfs::Error,
    },
    /// littlefs returned an error.
    Littlefs {
        /// What the benchmark was doing.
        context: String,
        /// littlefs's error code (negative errno), and the flash error behind it if a
        /// callback failed.
        error: String,
    },
    /// The options cannot be run.
    InvalidOptions(String),
    /// Data read back differs from what was written.
    Mismatch(String),
    /// Writing a report or plot failed.
    Io(std::io::Error),
    /// Formatting a report failed.
    Report(String),
    /// Drawing a plot failed.
    Plot(String),
    /// A worker thread panicked.
    Worker(String),
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BenchError::Flash { context, error } => write!(f, "{context}: flash: {error}"),
            BenchError::Fs { context, error } => write!(f, "{context}: {error}"),
            BenchError::Littlefs { context, error } => write!(f, "{context}: littlefs: {error}"),
            BenchError::InvalidOptions(why) => write!(f, "invalid benchmark options: {why}"),
            BenchError::Mismatch(why) => write!(f, "data read back differs: {why}"),
            BenchError::Io(e) => write!(f, "{e}"),
            BenchError::Report(why) => write!(f, "report: {why}"),
            BenchError::Plot(why) => write!(f, "plot: {why}"),
            BenchError::Worker(why) => write!(f, "benchmark worker failed: {why}"),
        }
    }
}

// Each message already includes the error underneath; a source chain would repeat it.
impl std::error::Error for BenchError {}

impl From<std::io::Error> for BenchError {
    fn from(e: std::io::Error) -> Self {
        BenchError::Io(e)
    }
}

/// Result of a benchmark.
pub type Result<T> = std::result::Result<T, BenchError>;

/// Adds context to errors of the layers underneath.
pub(crate) trait Context<T> {
    /// Labels the error with what was being done.
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> Context<T> for std::result::Result<T, flashfs::Error> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|error| BenchError::Fs {
            context: what(),
            error,
        })
    }
}

impl<T> Context<T> for std::result::Result<T, flash::FlashError> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|error| BenchError::Flash {
            context: what(),
            error,
        })
    }
}
