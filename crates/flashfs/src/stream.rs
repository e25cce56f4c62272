//! A block device as a seekable byte stream (`std::io::{Read, Write, Seek}`), so any code
//! written for disk images — a FAT implementation, an image exporter — runs on the FTL.
//! Partial sectors are read, patched and written back whole.

use std::io::{self, Read, Seek, SeekFrom, Write};

use crate::ftl::BlockDevice;

/// A byte stream over a block device.
#[derive(Debug)]
pub struct BlockStream<B> {
    dev: B,
    pos: u64,
    sector: Vec<u8>,
}

fn io_err(e: crate::Error) -> io::Error {
    io::Error::from_raw_os_error(e.errno())
}

impl<B: BlockDevice> BlockStream<B> {
    /// A stream at offset 0 of `dev`.
    pub fn new(dev: B) -> Self {
        let ss = dev.sector_size();
        BlockStream {
            dev,
            pos: 0,
            sector: vec![0; ss],
        }
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.dev.sectors() * self.dev.sector_size() as u64
    }

    /// Whether the device has no sectors.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The device underneath.
    pub fn device(&mut self) -> &mut B {
        &mut self.dev
    }

    /// Gives the device back.
    pub fn into_inner(self) -> B {
        self.dev
    }
}

impl<B: BlockDevice> Read for BlockStream<B> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let ss = self.sector.len() as u64;
        if self.pos >= self.len() || buf.is_empty() {
            return Ok(0);
        }
        let (sector, off) = (self.pos / ss, (self.pos % ss) as usize);
        let n = buf
            .len()
            .min(ss as usize - off)
            .min((self.len() - self.pos) as usize);
        self.dev.read(sector, &mut self.sector).map_err(io_err)?;
        buf[..n].copy_from_slice(&self.sector[off..off + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl<B: BlockDevice> Write for BlockStream<B> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let ss = self.sector.len() as u64;
        if buf.is_empty() {
            return Ok(0);
        }
        if self.pos >= self.len() {
            return Err(io::Error::from_raw_os_error(28));
        }
        let (sector, off) = (self.pos / ss, (self.pos % ss) as usize);
        let n = buf.len().min(ss as usize - off);
        if n == ss as usize {
            self.dev.write(sector, &buf[..n]).map_err(io_err)?;
        } else {
            self.dev.read(sector, &mut self.sector).map_err(io_err)?;
            self.sector[off..off + n].copy_from_slice(&buf[..n]);
            self.dev.write(sector, &self.sector).map_err(io_err)?;
        }
        self.pos += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.dev.flush().map_err(io_err)
    }
}

impl<B: BlockDevice> Seek for BlockStream<B> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let target = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len().checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = target.ok_or_else(|| io::Error::from_raw_os_error(22))?;
        Ok(self.pos)
    }
}
