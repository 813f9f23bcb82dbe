//! Writing a cleaned segment and swapping it in for the segments it replaces, as Kafka's
//! `replaceSegments` does, so that a power cut at any operation leaves either the old segments
//! or the new one (and the next open finishes or undoes the swap, as Kafka's `LogLoader` does).
//!
//! The cleaned segment takes the name of the first segment it replaces, `B`. The sequence:
//! 1. Its files are written as `B.log.cleaned`, `B.index.cleaned`, `B.timeindex.cleaned`,
//!    `B.txnindex.cleaned`, each synced.
//! 2. The three index files are renamed to `.swap` and the directory synced; then
//!    `B.log.cleaned` is renamed to `B.log.swap` and the directory synced. **That rename is the
//!    commit point**: from then on the swap is finished, never undone.
//! 3. Every file of the replaced segments (their `.log`, `.index`, `.timeindex`, `.txnindex`,
//!    `B`'s included) is unlinked; the directory is synced.
//! 4. `B.log.swap` is renamed to `B.log`, the directory synced; then the index files' `.swap`
//!    names are dropped and the directory synced.
//!
//! What an open finds, and does ([`finish_interrupted_clean`]), per base `B`:
//! - `B.log.swap`: committed. Its batches give its end `E`; every file with a final name of a
//!   segment based in `[B, E)` is an old one (no new file has its final name until the log's
//!   rename, which removes `B.log.swap`): they are unlinked, then step 4 is done.
//! - no `B.log.swap` but a `B.*.cleaned`: not committed (step 2 renames the log last, and only
//!   once the index renames are durable). Every `.cleaned` and `.swap` file of `B` is unlinked.
//! - only index `.swap` files: step 4 was cut after the log's rename; their renames are done.

use crate::format::Offset;
use crate::io::{self, AlignedBuf, FileId, Io, IoError, Op, OpenOptions, PAGE_SIZE_BYTES};
use crate::segment::{self, SegmentIndexes};
use std::path::{Path, PathBuf};

/// Bytes a cleaned segment's writer gathers before an O_DIRECT write.
pub const CLEAN_WRITE_CHUNK_BYTES: usize = 1 << 20;

const _: () = assert!(CLEAN_WRITE_CHUNK_BYTES.is_multiple_of(PAGE_SIZE_BYTES));

/// The suffix of a cleaned segment's files before the commit point.
pub const CLEANED_SUFFIX: &str = ".cleaned";
/// The suffix of a cleaned segment's files from the commit point until they take their names.
pub const SWAP_SUFFIX: &str = ".swap";

/// The segment file kinds, the log last: the order of the renames in step 2.
const INDEX_KINDS: [&str; 3] = ["index", "timeindex", "txnindex"];

fn named(dir: &Path, base: Offset, kind: &str, suffix: &str) -> PathBuf {
    dir.join(format!("{:020}.{kind}{suffix}", base.0))
}

/// The cleaned segment being written (`B.log.cleaned`), its indexes built on the way.
#[derive(Debug)]
pub(super) struct CleanedSegment {
    base: Offset,
    file: FileId,
    /// Bytes not yet written; they start at file position `written`.
    pending: Vec<u8>,
    written: u64,
    indexes: SegmentIndexes,
    next_offset: Offset,
}

impl CleanedSegment {
    /// Creates `B.log.cleaned` (empty).
    pub(super) fn create(
        io: &mut dyn Io,
        dir: &Path,
        base: Offset,
        interval_bytes: u32,
    ) -> Result<Self, IoError> {
        let file = io::open(
            io,
            &named(dir, base, "log", CLEANED_SUFFIX),
            OpenOptions {
                create: true,
                write: true,
                direct: true,
                ..OpenOptions::default()
            },
        )?;
        let mut others = Vec::new();
        io::run(io, Op::Truncate { file, len: 0 }, &mut others)?.result?;
        Ok(CleanedSegment {
            base,
            file,
            pending: Vec::with_capacity(CLEAN_WRITE_CHUNK_BYTES + PAGE_SIZE_BYTES),
            written: 0,
            indexes: SegmentIndexes::new(base, interval_bytes),
            next_offset: base,
        })
    }

    /// Bytes appended so far.
    pub(super) fn data_len(&self) -> u64 {
        self.written + self.pending.len() as u64
    }

    /// Appends one batch (`bytes`, whole) whose last offset and largest timestamp are given.
    pub(super) fn append(
        &mut self,
        io: &mut dyn Io,
        bytes: &[u8],
        last_offset: Offset,
        max_timestamp: i64,
    ) -> Result<(), IoError> {
        let position = self.data_len();
        self.indexes.on_append(
            position as u32,
            bytes.len() as u32,
            last_offset,
            max_timestamp,
        );
        self.next_offset = Offset(last_offset.0 + 1);
        self.pending.extend_from_slice(bytes);
        if self.pending.len() >= CLEAN_WRITE_CHUNK_BYTES {
            let whole = self.pending.len() / PAGE_SIZE_BYTES * PAGE_SIZE_BYTES;
            self.write_out(io, whole)?;
        }
        Ok(())
    }

    /// Writes the first `len` pending bytes (page-aligned in the file, `len` a page multiple
    /// or all pending bytes, zero-padded to a page).
    fn write_out(&mut self, io: &mut dyn Io, len: usize) -> Result<(), IoError> {
        let padded = len.div_ceil(PAGE_SIZE_BYTES) * PAGE_SIZE_BYTES;
        let mut buf = AlignedBuf::new(padded);
        let slice = buf.as_mut_slice();
        slice[..len].copy_from_slice(&self.pending[..len]);
        slice[len..padded].fill(0);
        let mut others = Vec::new();
        let done = io::run(
            io,
            Op::Write {
                file: self.file,
                offset: self.written,
                buf,
                range: 0..padded,
            },
            &mut others,
        )?;
        done.result?;
        self.pending.drain(..len);
        self.written += len as u64;
        Ok(())
    }

    /// Writes the rest, syncs, trims the file to its data and closes it; then writes the index
    /// files (`.cleaned`, synced) with `aborted` as its `.txnindex`. Returns the segment's data
    /// length, its end (the offset after its last batch) and its indexes.
    pub(super) fn finish(
        mut self,
        io: &mut dyn Io,
        dir: &Path,
        txn_index: &[u8],
    ) -> Result<(u64, Offset, SegmentIndexes), IoError> {
        let data_len = self.data_len();
        if !self.pending.is_empty() {
            self.write_out(io, self.pending.len())?;
        }
        let mut others = Vec::new();
        io::run(
            io,
            Op::Truncate {
                file: self.file,
                len: data_len,
            },
            &mut others,
        )?
        .result?;
        // The index files are written, then all four files are synced at once (their flushes
        // overlap on the device instead of following each other: a pass swaps a group per
        // segment of the log).
        let base = self.base;
        let mut files = vec![self.file];
        let written = [
            ("index", self.indexes.encode_offset_index()),
            ("timeindex", self.indexes.encode_time_index()),
            ("txnindex", txn_index.to_vec()),
        ]
        .into_iter()
        .try_for_each(|(kind, bytes)| {
            let file = io::open(
                io,
                &named(dir, base, kind, CLEANED_SUFFIX),
                OpenOptions {
                    create: true,
                    write: true,
                    ..OpenOptions::default()
                },
            )?;
            files.push(file);
            let mut buf = AlignedBuf::new(bytes.len().max(1));
            buf.as_mut_slice()[..bytes.len()].copy_from_slice(&bytes);
            for op in [
                Op::Truncate { file, len: 0 },
                Op::Write {
                    file,
                    offset: 0,
                    buf,
                    range: 0..bytes.len(),
                },
            ] {
                io::run(io, op, &mut others)?.result?;
            }
            Ok::<(), IoError>(())
        });
        let synced = written.and_then(|()| {
            let ids = files
                .iter()
                .map(|&file| io.submit(Op::Fdatasync { file }))
                .collect::<Vec<_>>();
            let mut first_error = None;
            for id in ids {
                // Every submitted sync is waited for, whatever happened to the others.
                match id.and_then(|id| io::wait_for(io, id)) {
                    Ok(c) => {
                        if let Err(e) = c.result {
                            first_error.get_or_insert(e);
                        }
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            first_error.map_or(Ok(()), Err)
        });
        for file in files {
            let _ = io::run(io, Op::Close { file }, &mut others);
        }
        synced?;
        Ok((data_len, self.next_offset, self.indexes))
    }

    /// Gives up: closes the file and unlinks every `.cleaned` file of its base.
    pub(super) fn abandon(self, io: &mut dyn Io, dir: &Path) {
        let mut others = Vec::new();
        let _ = io::run(io, Op::Close { file: self.file }, &mut others);
        remove_uncommitted(io, dir, self.base);
    }
}

/// Unlinks every `.cleaned` and `.swap` file of `base` (a swap not committed); failures are
/// ignored (the next open removes what is left).
pub(super) fn remove_uncommitted(io: &mut dyn Io, dir: &Path, base: Offset) {
    for kind in ["log", "index", "timeindex", "txnindex"] {
        for suffix in [CLEANED_SUFFIX, SWAP_SUFFIX] {
            let _ = super::super::unlink_if_present(io, named(dir, base, kind, suffix));
        }
    }
    let _ = io::fsync_dir(io, dir);
}

fn rename(io: &mut dyn Io, from: PathBuf, to: PathBuf) -> Result<(), IoError> {
    let mut others = Vec::new();
    io::run(io, Op::Rename { from, to }, &mut others)?.result?;
    Ok(())
}

/// Step 2: the commit point. After an error before the log's rename, nothing is committed (the
/// caller removes the `.cleaned` files); after it, the swap is committed.
pub(super) fn commit(io: &mut dyn Io, dir: &Path, base: Offset) -> Result<(), IoError> {
    for kind in INDEX_KINDS {
        rename(
            io,
            named(dir, base, kind, CLEANED_SUFFIX),
            named(dir, base, kind, SWAP_SUFFIX),
        )?;
    }
    io::fsync_dir(io, dir)?;
    rename(
        io,
        named(dir, base, "log", CLEANED_SUFFIX),
        named(dir, base, "log", SWAP_SUFFIX),
    )?;
    io::fsync_dir(io, dir)
}

/// Steps 3 and 4, after the commit point: the replaced segments' files go (`replaced`: their
/// bases, `base` among them), then the cleaned segment's files take their names.
pub(super) fn complete(
    io: &mut dyn Io,
    dir: &Path,
    base: Offset,
    replaced: &[Offset],
) -> Result<(), IoError> {
    for &old in replaced {
        for path in segment::file_paths(dir, old) {
            super::super::unlink_if_present(io, path)?;
        }
    }
    io::fsync_dir(io, dir)?;
    rename(
        io,
        named(dir, base, "log", SWAP_SUFFIX),
        named(dir, base, "log", ""),
    )?;
    io::fsync_dir(io, dir)?;
    for kind in INDEX_KINDS {
        let from = named(dir, base, kind, SWAP_SUFFIX);
        match rename(io, from, named(dir, base, kind, "")) {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    io::fsync_dir(io, dir)
}

/// Finishes or undoes a swap a crash interrupted (see the module docs). Runs before anything
/// else of an open reads the directory's segments.
///
/// # Errors
/// [`super::super::LogError::Corrupt`] when a committed `.log.swap` is damaged (it was synced
/// whole before the commit), or an I/O failure.
pub fn finish_interrupted_clean(io: &mut dyn Io, dir: &Path) -> Result<(), super::super::LogError> {
    use super::super::{classify, LogError};
    let names = io.list_dir(dir).map_err(classify)?;
    let mut bases: Vec<Offset> = names
        .iter()
        .filter_map(|n| {
            let stem = n
                .strip_suffix(CLEANED_SUFFIX)
                .or_else(|| n.strip_suffix(SWAP_SUFFIX))?;
            stem.split_once('.')?.0.parse::<i64>().ok().map(Offset)
        })
        .collect();
    bases.sort_unstable();
    bases.dedup();
    for base in bases {
        let has = |kind: &str, suffix: &str| {
            names
                .iter()
                .any(|n| *n == format!("{:020}.{kind}{suffix}", base.0))
        };
        if has("log", SWAP_SUFFIX) {
            let path = named(dir, base, "log", SWAP_SUFFIX);
            let file = io::open(
                io,
                &path,
                OpenOptions {
                    direct: true,
                    ..OpenOptions::default()
                },
            )
            .map_err(classify)?;
            let bytes = io::read_direct_all(io, file).map_err(classify);
            let mut others = Vec::new();
            let _ = io::run(io, Op::Close { file }, &mut others);
            let (end, _) = segment::index_batches(&bytes?, base, u32::MAX)
                .map_err(|what| LogError::Corrupt { file: path, what })?;
            let replaced: Vec<Offset> = segment::offsets_named(&names, "log")
                .into_iter()
                .chain(
                    INDEX_KINDS
                        .iter()
                        .flat_map(|k| segment::offsets_named(&names, k)),
                )
                .filter(|&b| b >= base && b < end.max(Offset(base.0 + 1)))
                .collect();
            for suffix in [CLEANED_SUFFIX] {
                for kind in ["log", "index", "timeindex", "txnindex"] {
                    super::super::unlink_if_present(io, named(dir, base, kind, suffix))
                        .map_err(classify)?;
                }
            }
            tracing::info!(dir = %dir.display(), base = base.0, end = end.0,
                "finishing a cleaned segment's swap a crash interrupted");
            complete(io, dir, base, &replaced).map_err(classify)?;
        } else if ["log", "index", "timeindex", "txnindex"]
            .iter()
            .any(|k| has(k, CLEANED_SUFFIX))
        {
            tracing::info!(dir = %dir.display(), base = base.0,
                "removing a cleaned segment a crash left uncommitted");
            remove_uncommitted(io, dir, base);
        } else {
            for kind in INDEX_KINDS {
                if has(kind, SWAP_SUFFIX) {
                    rename(
                        io,
                        named(dir, base, kind, SWAP_SUFFIX),
                        named(dir, base, kind, ""),
                    )
                    .map_err(classify)?;
                }
            }
            io::fsync_dir(io, dir).map_err(classify)?;
        }
    }
    Ok(())
}
