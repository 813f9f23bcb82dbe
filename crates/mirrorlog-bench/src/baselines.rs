//! The baselines the I/O workloads run in the same process, on the same device, at the same
//! concurrency (what each models: `docs/benchmark.md`):
//! - `raw-odirect`: the device limit for the same durable work. Each append writes the file's
//!   tail page(s) — the partial page rewritten, as the engine's commit record does — with
//!   O_DIRECT through io_uring, the write and its fdatasync linked in one submission, from a
//!   registered buffer reused for every append. Files are preallocated segments of the engine's
//!   segment size; one that fills is emptied and preallocated afresh, so both sides write into
//!   fresh (unwritten) extents at the same rate, never into recycled ones.
//! - `buffered`: Kafka's page-cache design (`file.preallocate=false`, its default): `pwrite`
//!   then `fdatasync` per append on a growing file, a new file at the segment size.
//! - the raw reader recovery is compared with.

use crate::measure::{timed, Side};
use mirrorlog::internals::io::{
    self, AlignedBuf, Completion, FallocateMode, FileCaching, FileId, Io, Op, OpenOptions, UringIo,
    PAGE_SIZE_BYTES,
};
use mirrorlog::internals::recovery;
use mirrorlog::internals::segment::{self};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

const PAGE: u64 = PAGE_SIZE_BYTES as u64;

/// `count` preallocated segment files of `len` bytes for the O_DIRECT baseline.
pub(crate) struct RawFiles {
    caching: FileCaching,
    paths: Vec<PathBuf>,
    len: u64,
}

fn run_all(io: &mut dyn Io, ops: Vec<Op>) -> Result<(), String> {
    let mut others = Vec::new();
    for op in ops {
        io::run(io, op, &mut others)
            .and_then(|c| c.result)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

impl RawFiles {
    pub(crate) fn new(
        dir: &Path,
        count: usize,
        len: u64,
        caching: FileCaching,
    ) -> Result<Self, String> {
        let mut io = ring(8, caching)?;
        let mut paths = Vec::new();
        for i in 0..count {
            let path = dir.join(format!("raw-{i}"));
            let file = io::open(&mut io, &path, direct_open(true))
                .map_err(|e| format!("{}: {e} (O_DIRECT unsupported?)", path.display()))?;
            run_all(
                &mut io,
                vec![
                    Op::Fallocate {
                        file,
                        offset: 0,
                        len,
                        mode: FallocateMode::Extend,
                    },
                    Op::Fsync { file },
                    Op::Close { file },
                ],
            )?;
            paths.push(path);
        }
        Ok(RawFiles {
            caching,
            paths,
            len,
        })
    }
}

fn direct_open(create: bool) -> OpenOptions {
    OpenOptions {
        create,
        write: true,
        direct: true,
        ..OpenOptions::default()
    }
}

/// One file of a raw writer: where its data ends, and its reused (registered) buffer.
struct RawFile {
    id: FileId,
    end: u64,
    buf: Option<AlignedBuf>,
}

/// A thread's raw O_DIRECT writer: its own ring and files.
pub(crate) struct RawWriter {
    io: UringIo,
    files: Vec<RawFile>,
    len: u64,
    done: Vec<Completion>,
    /// fdatasyncs issued.
    pub(crate) syncs: u64,
}

impl RawWriter {
    /// A writer over `raw`'s files `indexes` (each file belongs to one writer).
    pub(crate) fn open(raw: &RawFiles, indexes: &[usize]) -> Result<Self, String> {
        let mut io = ring(8, raw.caching)?;
        let mut files = Vec::with_capacity(indexes.len());
        for &i in indexes {
            let path = &raw.paths[i % raw.paths.len()];
            let id = io::open(&mut io, path, direct_open(false))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            files.push(RawFile {
                id,
                end: 0,
                buf: None,
            });
        }
        Ok(RawWriter {
            io,
            files,
            len: raw.len,
            done: Vec::with_capacity(2),
            syncs: 0,
        })
    }

    /// Appends `bytes` bytes to file `k` durably: the pages from the one holding the file's end
    /// to the new end are written from the reused buffer, with the fdatasync linked to the
    /// write. A file that would overflow its segment is emptied and preallocated afresh first
    /// (the engine rolls to a new, preallocated segment there).
    pub(crate) fn append(&mut self, k: usize, bytes: usize) -> Result<u64, String> {
        let len = self.len;
        let Some(f) = self.files.get_mut(k) else {
            return Err(format!("raw writer has no file {k}"));
        };
        if f.end + bytes as u64 > len {
            let file = f.id;
            f.end = 0;
            run_all(
                &mut self.io,
                vec![
                    Op::Truncate { file, len: 0 },
                    Op::Fallocate {
                        file,
                        offset: 0,
                        len,
                        mode: FallocateMode::Extend,
                    },
                ],
            )?;
        }
        let f = &mut self.files[k];
        let floor = f.end / PAGE * PAGE;
        let span = ((f.end + bytes as u64 - floor).div_ceil(PAGE) * PAGE) as usize;
        let buf = match f.buf.take() {
            Some(b) if b.capacity() >= span => b,
            _ => {
                let mut b = self.io.buffer(span.max(bytes + 2 * PAGE_SIZE_BYTES));
                b.as_mut_slice().fill(0x5a);
                b
            }
        };
        let file = f.id;
        self.io
            .submit_chain(vec![
                Op::Write {
                    file,
                    offset: floor,
                    buf,
                    range: 0..span,
                },
                Op::Fdatasync { file },
            ])
            .map_err(|e| e.to_string())?;
        self.done.clear();
        while self.done.len() < 2 {
            self.io
                .complete(2 - self.done.len(), &mut self.done)
                .map_err(|e| e.to_string())?;
        }
        self.syncs += 1;
        let mut result = Ok(bytes as u64);
        for c in self.done.drain(..) {
            if let Some(b) = c.buf {
                self.files[k].buf = Some(b);
            }
            if let Err(e) = c.result {
                result = Err(e.to_string());
            }
        }
        self.files[k].end += bytes as u64;
        result
    }
}

/// A raw-odirect side: `threads` threads, each with its own writer over `files_per_thread`
/// files, each call one durable append of `bytes` bytes.
pub(crate) fn raw_side(
    side: &mut Side,
    raw: &RawFiles,
    threads: usize,
    secs: f64,
    bytes: usize,
    files_per_thread: usize,
) {
    let writers: Vec<Mutex<Option<RawWriter>>> = (0..threads).map(|_| Mutex::new(None)).collect();
    timed(side, threads, secs, &|t, n| {
        let mut slot = writers[t]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            let indexes: Vec<usize> = (0..files_per_thread)
                .map(|k| t * files_per_thread + k)
                .collect();
            *slot = Some(RawWriter::open(raw, &indexes)?);
        }
        let Some(w) = slot.as_mut() else {
            return Err("raw writer missing".into());
        };
        let k = (n as usize) % files_per_thread.max(1);
        w.append(k, bytes)
    });
}

/// Per-thread files of the buffered side, kept across rounds: each grows to `len`, then the
/// next append starts a new file (a segment roll).
pub(crate) struct BufferedFiles {
    dir: PathBuf,
    tag: String,
    len: u64,
    files: Vec<Mutex<(std::fs::File, u64, u32)>>,
}

impl BufferedFiles {
    pub(crate) fn new(dir: &Path, tag: &str, threads: usize, len: u64) -> Result<Self, String> {
        let files = (0..threads)
            .map(|t| Self::create(dir, tag, t, 0).map(|f| Mutex::new((f, 0, 0))))
            .collect::<Result<_, _>>()?;
        Ok(BufferedFiles {
            dir: dir.to_path_buf(),
            tag: tag.to_string(),
            len,
            files,
        })
    }

    fn create(dir: &Path, tag: &str, t: usize, generation: u32) -> Result<std::fs::File, String> {
        let path = dir.join(format!("buffered-{tag}-{t}-{generation}"));
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// One durable append of `data` by thread `t`: `pwrite` at the end, then `fdatasync`.
    pub(crate) fn append(&self, t: usize, data: &[u8]) -> Result<u64, String> {
        let mut g = self.files[t]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if g.1 + data.len() as u64 > self.len {
            let generation = g.2 + 1;
            let old = self.dir.join(format!("buffered-{}-{t}-{}", self.tag, g.2));
            *g = (
                Self::create(&self.dir, &self.tag, t, generation)?,
                0,
                generation,
            );
            std::fs::remove_file(&old).map_err(|e| format!("{}: {e}", old.display()))?;
        }
        let at = g.1;
        g.0.write_all_at(data, at)
            .and_then(|()| g.0.sync_data())
            .map_err(|e| format!("buffered append: {e}"))?;
        g.1 += data.len() as u64;
        Ok(data.len() as u64)
    }
}

/// A buffered side: one durable append of `bytes` bytes per call, per-thread files.
pub(crate) fn buffered_side(
    side: &mut Side,
    files: &BufferedFiles,
    threads: usize,
    secs: f64,
    bytes: usize,
) {
    let data = vec![0x5au8; bytes];
    timed(side, threads, secs, &|t, _| files.append(t, &data));
}

/// Reads every segment file up to its preallocated space with recovery's read size and depth.
pub(crate) fn raw_read(io: &mut UringIo, dir: &Path) -> Result<u64, String> {
    let names = io.list_dir(dir).map_err(|e| e.to_string())?;
    let mut bytes = 0u64;
    for b in segment::offsets_named(&names, "log") {
        let file = io::open(
            io,
            &segment::log_path(dir, b),
            OpenOptions {
                direct: true,
                ..OpenOptions::default()
            },
        )
        .map_err(|e| e.to_string())?;
        let len = io.file_len(file).map_err(|e| e.to_string())?;
        let mut reader = io::SequentialReader::new(
            file,
            0,
            len,
            recovery::READ_BYTES,
            recovery::READS_IN_FLIGHT,
        );
        while let Some(chunk) = reader.next(io).map_err(|e| e.to_string())? {
            let zeroes = chunk.data().iter().all(|&x| x == 0);
            if !zeroes {
                bytes += chunk.bytes as u64;
            }
            io.recycle(chunk.buf);
            if zeroes {
                break;
            }
        }
        reader.stop(io).map_err(|e| e.to_string())?;
        run_all(io, vec![Op::Close { file }])?;
    }
    Ok(bytes)
}

/// A ring whose `direct` opens follow `caching` (`--page-cache` turns O_DIRECT off for every
/// side alike).
pub(crate) fn ring(entries: u32, caching: FileCaching) -> Result<UringIo, String> {
    Ok(UringIo::new(entries)
        .map_err(|e| e.to_string())?
        .with_caching(caching))
}
