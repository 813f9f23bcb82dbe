//! Whole-file helpers over [`Io`] for the small files of a partition (indexes, snapshots,
//! checkpoints, markers): set-up and shutdown paths, not the append path.

use super::{open, run, AlignedBuf, Done, FileId, Io, IoError, Op, OpenOptions, PAGE_SIZE_BYTES};
use std::path::Path;

/// Writes `bytes` as the whole content of `path` (buffered), syncs and closes it.
///
/// # Errors
/// Any operation's failure.
pub fn write_file(io: &mut dyn Io, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    let file = open(
        io,
        path,
        OpenOptions {
            create: true,
            write: true,
            ..OpenOptions::default()
        },
    )?;
    let mut buf = AlignedBuf::new(bytes.len());
    buf.as_mut_slice()[..bytes.len()].copy_from_slice(bytes);
    let mut others = Vec::new();
    for op in [
        Op::Truncate { file, len: 0 },
        Op::Write {
            file,
            offset: 0,
            buf,
            range: 0..bytes.len(),
        },
        Op::Fdatasync { file },
        Op::Close { file },
    ] {
        run(io, op, &mut others)?.result?;
    }
    Ok(())
}

/// Replaces `dir/name` atomically: temp file, fsync, rename, fsync of the directory.
///
/// # Errors
/// Any operation's failure.
pub fn write_file_atomically(
    io: &mut dyn Io,
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> Result<(), IoError> {
    let temp = dir.join(format!("{name}.tmp"));
    write_file(io, &temp, bytes)?;
    let mut others = Vec::new();
    run(
        io,
        Op::Rename {
            from: temp,
            to: dir.join(name),
        },
        &mut others,
    )?
    .result?;
    fsync_dir(io, dir)
}

/// Makes the entries of `dir` durable (creates, renames and unlinks done in it so far).
///
/// # Errors
/// Any operation's failure.
pub fn fsync_dir(io: &mut dyn Io, dir: &Path) -> Result<(), IoError> {
    let mut others = Vec::new();
    let d = open(
        io,
        dir,
        OpenOptions {
            directory: true,
            ..OpenOptions::default()
        },
    )?;
    let synced = run(io, Op::Fsync { file: d }, &mut others).and_then(|c| c.result);
    let closed = run(io, Op::Close { file: d }, &mut others).and_then(|c| c.result);
    synced.and(closed).map(|_| ())
}

/// Reads a small file whole (buffered). The file is closed whatever happens.
///
/// # Errors
/// Any operation's failure (`ENOENT` for a missing file).
pub fn read_file(io: &mut dyn Io, path: &Path) -> Result<Vec<u8>, IoError> {
    let file = open(io, path, OpenOptions::default())?;
    let mut others = Vec::new();
    let read = read_open_file(io, file, &mut others);
    let closed = run(io, Op::Close { file }, &mut others).and_then(|c| c.result);
    let out = read?;
    closed?;
    Ok(out)
}

/// Reads a small file whole if it exists: `Ok(None)` for `ENOENT` alone. Any other failure
/// (`EIO`, `EACCES`, ...) is an error, never taken for absence: a file that exists but cannot
/// be read must not be mistaken for a state that never had it.
///
/// # Errors
/// Any operation's failure other than the file being absent.
pub fn read_file_if_present(io: &mut dyn Io, path: &Path) -> Result<Option<Vec<u8>>, IoError> {
    match read_file(io, path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

fn read_open_file(
    io: &mut dyn Io,
    file: super::FileId,
    others: &mut Vec<super::Completion>,
) -> Result<Vec<u8>, IoError> {
    let mut out = Vec::new();
    let chunk = 64 << 10;
    loop {
        let c = run(
            io,
            Op::Read {
                file,
                offset: out.len() as u64,
                buf: AlignedBuf::new(chunk),
                len: chunk,
            },
            others,
        )?;
        let got = match c.result? {
            Done::Transferred { bytes } => bytes,
            _ => 0,
        };
        if let Some(buf) = c.buf {
            out.extend_from_slice(&buf.as_slice()[..got]);
        }
        if got < chunk {
            return Ok(out);
        }
    }
}

/// Reads up to `len` bytes at `position` of a file opened `direct`, with one page-aligned
/// read; fewer bytes come back only at end of file.
///
/// # Errors
/// The read's failure.
pub fn read_direct(
    io: &mut dyn Io,
    file: FileId,
    position: u64,
    len: usize,
) -> Result<Vec<u8>, IoError> {
    let page = PAGE_SIZE_BYTES as u64;
    let start = position - position % page;
    let skip = (position - start) as usize;
    let span = (skip + len).div_ceil(PAGE_SIZE_BYTES) * PAGE_SIZE_BYTES;
    let mut others = Vec::new();
    // From the `Io`'s pool (a shard reuses its idle buffers): a fresh mapping per read costs
    // a page fault and a zeroed page for every 4 KiB read.
    let buf = io.buffer(span);
    let c = run(
        io,
        Op::Read {
            file,
            offset: start,
            buf,
            len: span,
        },
        &mut others,
    )?;
    let got = match &c.result {
        Ok(Done::Transferred { bytes }) => *bytes,
        _ => 0,
    };
    let end = got.min(skip + len);
    let out = c
        .buf
        .as_ref()
        .and_then(|b| b.as_slice().get(skip..end))
        .unwrap_or_default()
        .to_vec();
    if let Some(buf) = c.buf {
        io.recycle(buf);
    }
    c.result?;
    Ok(out)
}

/// Reads a whole file opened `direct` (its size unknown) with large aligned reads.
///
/// # Errors
/// A read's failure.
pub fn read_direct_all(io: &mut dyn Io, file: FileId) -> Result<Vec<u8>, IoError> {
    let chunk = 4 << 20;
    let mut out = Vec::new();
    loop {
        let got = read_direct(io, file, out.len() as u64, chunk)?;
        let n = got.len();
        out.extend_from_slice(&got);
        if n < chunk {
            return Ok(out);
        }
    }
}

/// Reads a file opened `direct` front to back in page-aligned chunks with several reads in
/// flight, handing the chunks out in file order: while the caller works on one chunk, the
/// next ones are on their way (recovery validates batches at memory speed while the disk
/// streams). Buffers come from [`Io::buffer`]; give each back with [`Io::recycle`]. The
/// reader expects to be the only user of the `Io` while it runs (open-time recovery).
#[derive(Debug)]
pub struct SequentialReader {
    file: FileId,
    len: u64,
    chunk_bytes: usize,
    depth: usize,
    next_position: u64,
    /// Submitted reads in file order.
    in_flight: std::collections::VecDeque<(super::OpId, u64, usize)>,
    /// Completions that arrived ahead of the front read.
    early: Vec<super::Completion>,
}

/// One chunk of a [`SequentialReader`].
#[derive(Debug)]
pub struct Chunk {
    /// Position in the file of the first byte.
    pub position: u64,
    /// The buffer; `bytes` of it are valid.
    pub buf: AlignedBuf,
    /// Bytes read (fewer than the chunk size only at the end of the file).
    pub bytes: usize,
}

impl Chunk {
    /// The bytes read.
    #[must_use]
    pub fn data(&self) -> &[u8] {
        self.buf.as_slice().get(..self.bytes).unwrap_or_default()
    }
}

impl SequentialReader {
    /// A reader of `[start, len)` of `file` (`start` page-aligned) in chunks of `chunk_bytes`
    /// (rounded up to pages) with up to `depth` reads in flight.
    #[must_use]
    pub fn new(file: FileId, start: u64, len: u64, chunk_bytes: usize, depth: usize) -> Self {
        let page = PAGE_SIZE_BYTES as u64;
        SequentialReader {
            file,
            len,
            chunk_bytes: chunk_bytes.max(1).div_ceil(PAGE_SIZE_BYTES) * PAGE_SIZE_BYTES,
            depth: depth.max(1),
            next_position: start - start % page,
            in_flight: std::collections::VecDeque::new(),
            early: Vec::new(),
        }
    }

    /// The next chunk in file order, or `None` at the end.
    ///
    /// # Errors
    /// A read's failure (the reader is spent then: [`SequentialReader::stop`] it).
    pub fn next(&mut self, io: &mut dyn Io) -> Result<Option<Chunk>, IoError> {
        while self.in_flight.len() < self.depth && self.next_position < self.len {
            // A small file (or the last piece of one) gets a buffer of its size, not a chunk.
            let rest = (self.len - self.next_position).div_ceil(PAGE_SIZE_BYTES as u64)
                * PAGE_SIZE_BYTES as u64;
            let len = self.chunk_bytes.min(rest as usize);
            let buf = io.buffer(len);
            let id = io.submit(Op::Read {
                file: self.file,
                offset: self.next_position,
                buf,
                len,
            })?;
            self.in_flight.push_back((id, self.next_position, len));
            self.next_position += len as u64;
        }
        let Some(&(front, position, asked)) = self.in_flight.front() else {
            return Ok(None);
        };
        loop {
            if let Some(i) = self.early.iter().position(|c| c.id == front) {
                let c = self.early.swap_remove(i);
                self.in_flight.pop_front();
                let bytes = match c.result {
                    Ok(Done::Transferred { bytes }) => bytes,
                    Ok(_) => 0,
                    Err(e) => {
                        if let Some(buf) = c.buf {
                            io.recycle(buf);
                        }
                        return Err(e);
                    }
                };
                // A read's completion always carries its buffer back.
                let buf = c.buf.unwrap_or_else(|| AlignedBuf::new(0));
                let bytes = bytes.min(buf.as_slice().len());
                if bytes < asked {
                    // End of file: nothing after this chunk.
                    self.len = self.len.min(position + bytes as u64);
                }
                return Ok(Some(Chunk {
                    position,
                    buf,
                    bytes,
                }));
            }
            io.complete(1, &mut self.early)?;
        }
    }

    /// Reaps the reads still in flight (after an early stop) and recycles their buffers.
    ///
    /// # Errors
    /// The ring's failure.
    pub fn stop(mut self, io: &mut dyn Io) -> Result<(), IoError> {
        let ids: Vec<super::OpId> = self.in_flight.iter().map(|&(id, _, _)| id).collect();
        while ids.iter().any(|id| !self.early.iter().any(|c| c.id == *id)) {
            io.complete(1, &mut self.early)?;
        }
        for c in self.early.drain(..) {
            if let Some(buf) = c.buf {
                io.recycle(buf);
            }
        }
        Ok(())
    }
}
