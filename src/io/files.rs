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
    let d = open(
        io,
        dir,
        OpenOptions {
            directory: true,
            ..OpenOptions::default()
        },
    )?;
    run(io, Op::Fsync { file: d }, &mut others)?.result?;
    run(io, Op::Close { file: d }, &mut others)?.result?;
    Ok(())
}

/// Reads a small file whole (buffered).
///
/// # Errors
/// Any operation's failure (`ENOENT` for a missing file).
pub fn read_file(io: &mut dyn Io, path: &Path) -> Result<Vec<u8>, IoError> {
    let file = open(io, path, OpenOptions::default())?;
    let mut out = Vec::new();
    let mut others = Vec::new();
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
            &mut others,
        )?;
        let got = match c.result? {
            Done::Transferred { bytes } => bytes,
            _ => 0,
        };
        if let Some(buf) = c.buf {
            out.extend_from_slice(&buf.as_slice()[..got]);
        }
        if got < chunk {
            break;
        }
    }
    run(io, Op::Close { file }, &mut others)?.result?;
    Ok(out)
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
    let c = run(
        io,
        Op::Read {
            file,
            offset: start,
            buf: AlignedBuf::new(span),
            len: span,
        },
        &mut others,
    )?;
    let got = match c.result? {
        Done::Transferred { bytes } => bytes,
        _ => 0,
    };
    let end = got.min(skip + len);
    Ok(c.buf
        .as_ref()
        .and_then(|b| b.as_slice().get(skip..end))
        .unwrap_or_default()
        .to_vec())
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
