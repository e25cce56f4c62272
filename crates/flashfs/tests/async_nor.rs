//! A file system on an async NOR driver (`embedded-storage-async`, as async firmware's
//! are), through `flash::blocking::Blocking` and `flash::adapter::EmbeddedNor`.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use embedded_storage::nor_flash::{ErrorType, NorFlashError, NorFlashErrorKind};
use embedded_storage_async::nor_flash::{NorFlash, ReadNorFlash};
use flash::adapter::EmbeddedNor;
use flash::blocking::Blocking;
use flashfs::{Fs, FsConfig, NorSegments};

/// Pending at its first poll: a transfer in flight.
#[derive(Default)]
struct InFlight(bool);
impl Future for InFlight {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            return Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[derive(Debug)]
struct OutOfBounds;
impl NorFlashError for OutOfBounds {
    fn kind(&self) -> NorFlashErrorKind {
        NorFlashErrorKind::OutOfBounds
    }
}

/// A 256 KiB async chip of 4 KiB sectors, 4-byte words, whose operations each wait once.
struct AsyncChip(Vec<u8>);
impl ErrorType for AsyncChip {
    type Error = OutOfBounds;
}
impl ReadNorFlash for AsyncChip {
    const READ_SIZE: usize = 1;
    async fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), OutOfBounds> {
        InFlight::default().await;
        let o = offset as usize;
        bytes.copy_from_slice(self.0.get(o..o + bytes.len()).ok_or(OutOfBounds)?);
        Ok(())
    }
    fn capacity(&self) -> usize {
        self.0.len()
    }
}
impl NorFlash for AsyncChip {
    const WRITE_SIZE: usize = 4;
    const ERASE_SIZE: usize = 4096;
    async fn erase(&mut self, from: u32, to: u32) -> Result<(), OutOfBounds> {
        InFlight::default().await;
        self.0[from as usize..to as usize].fill(0xFF);
        Ok(())
    }
    async fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), OutOfBounds> {
        InFlight::default().await;
        let o = offset as usize;
        let dst = self.0.get_mut(o..o + bytes.len()).ok_or(OutOfBounds)?;
        for (d, s) in dst.iter_mut().zip(bytes) {
            *d &= s;
        }
        Ok(())
    }
}

#[test]
fn a_file_system_on_an_async_chip_formats_writes_and_mounts_again() {
    let chip = AsyncChip(vec![0xFF; 256 << 10]);
    let dev = NorSegments::new(EmbeddedNor::new(Blocking::new(chip)).unwrap(), 512).unwrap();
    let mut fs = Fs::format(dev, FsConfig::default()).unwrap();
    let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7) as u8).collect();
    fs.write_file(b"/log", &data).unwrap();
    let dev = fs.unmount().unwrap();
    let mut fs = Fs::mount(dev, FsConfig::default()).unwrap();
    assert_eq!(fs.read_file(b"/log").unwrap(), data);
}
