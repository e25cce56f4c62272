//! Async NOR drivers as blocking ones: an `embedded-storage-async` chip (the drivers of
//! async firmware, embassy's among them) behind the blocking `embedded-storage` traits, so
//! [`EmbeddedNor`](crate::adapter::EmbeddedNor) makes it a flashfs medium:
//!
//! ```ignore
//! let nor = EmbeddedNor::new(Blocking::new(async_chip))?;
//! ```
//!
//! The file system is synchronous: each operation's future is polled to completion before
//! the call returns (spinning while it is pending, as a DMA transfer or an erase finishes).
//! Other tasks of the executor do not run meanwhile, so run the file system in a task of
//! its own priority (embassy's `InterruptExecutor`) where that matters. The alternative, an
//! async file system, would make every layer a future for the sake of the waits of one.

use embassy_futures::block_on;
use embedded_storage::nor_flash as blocking;
use embedded_storage_async::nor_flash as asynch;

/// An async NOR chip seen as a blocking one.
#[derive(Debug)]
pub struct Blocking<F>(F);

impl<F> Blocking<F> {
    /// Wraps an async chip.
    pub fn new(flash: F) -> Self {
        Blocking(flash)
    }

    /// Gives the chip back.
    pub fn into_inner(self) -> F {
        self.0
    }
}

impl<F: blocking::ErrorType> blocking::ErrorType for Blocking<F> {
    type Error = F::Error;
}

impl<F: asynch::ReadNorFlash> blocking::ReadNorFlash for Blocking<F> {
    const READ_SIZE: usize = F::READ_SIZE;

    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), Self::Error> {
        block_on(self.0.read(offset, bytes))
    }

    fn capacity(&self) -> usize {
        self.0.capacity()
    }
}

impl<F: asynch::NorFlash> blocking::NorFlash for Blocking<F> {
    const WRITE_SIZE: usize = F::WRITE_SIZE;
    const ERASE_SIZE: usize = F::ERASE_SIZE;

    fn erase(&mut self, from: u32, to: u32) -> Result<(), Self::Error> {
        block_on(self.0.erase(from, to))
    }

    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), Self::Error> {
        block_on(self.0.write(offset, bytes))
    }
}

impl<F: asynch::MultiwriteNorFlash> blocking::MultiwriteNorFlash for Blocking<F> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::EmbeddedNor;
    use crate::medium::NorFlash;
    use alloc::vec::Vec;
    use core::future::Future;
    use core::pin::Pin;
    use core::task::{Context, Poll};
    use embedded_storage::nor_flash::{ErrorType, NorFlashError, NorFlashErrorKind};

    /// Pending at its first poll, ready at the second: a transfer in flight.
    #[derive(Default)]
    struct InFlight(bool);
    impl Future for InFlight {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    #[derive(Debug)]
    struct ChipError;
    impl NorFlashError for ChipError {
        fn kind(&self) -> NorFlashErrorKind {
            NorFlashErrorKind::OutOfBounds
        }
    }

    /// An async chip of 4 KiB sectors whose every operation waits once.
    struct AsyncChip {
        bytes: Vec<u8>,
        polls: usize,
    }
    impl ErrorType for AsyncChip {
        type Error = ChipError;
    }
    impl asynch::ReadNorFlash for AsyncChip {
        const READ_SIZE: usize = 1;
        async fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), ChipError> {
            InFlight::default().await;
            self.polls += 1;
            let o = offset as usize;
            let src = self.bytes.get(o..o + bytes.len()).ok_or(ChipError)?;
            bytes.copy_from_slice(src);
            Ok(())
        }
        fn capacity(&self) -> usize {
            self.bytes.len()
        }
    }
    impl asynch::NorFlash for AsyncChip {
        const WRITE_SIZE: usize = 1;
        const ERASE_SIZE: usize = 4096;
        async fn erase(&mut self, from: u32, to: u32) -> Result<(), ChipError> {
            InFlight::default().await;
            self.polls += 1;
            self.bytes[from as usize..to as usize].fill(0xFF);
            Ok(())
        }
        async fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), ChipError> {
            InFlight::default().await;
            self.polls += 1;
            for (d, s) in self.bytes[offset as usize..].iter_mut().zip(bytes) {
                *d &= s;
            }
            Ok(())
        }
    }

    #[test]
    fn an_async_chip_is_a_medium_whose_operations_complete_before_returning() {
        let chip = AsyncChip {
            bytes: alloc::vec![0xFF; 16 * 4096],
            polls: 0,
        };
        let mut nor = EmbeddedNor::new(Blocking::new(chip)).unwrap();
        assert_eq!((nor.spec().unit_size, nor.spec().units), (4096, 16));
        nor.program(4100, b"flash").unwrap();
        let mut b = [0u8; 5];
        nor.read(4100, &mut b).unwrap();
        assert_eq!(&b, b"flash");
        nor.erase(1).unwrap();
        nor.read(4100, &mut b).unwrap();
        assert_eq!(b, [0xFF; 5]);
        assert_eq!(nor.into_inner().into_inner().polls, 4);
    }
}
