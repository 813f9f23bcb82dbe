//! The baselines every workload runs in the same process, on the same device: `raw-odirect`
//! (aligned O_DIRECT writes and reads through io_uring, the device limit), `buffered`
//! (write(2) + fdatasync, the page-cache design Kafka uses) and the raw reader recovery is
//! compared with.

use crate::measure::{timed, Side};
use mirrorlog::internals::io::{
    self, AlignedBuf, FallocateMode, FileCaching, Io, Op, OpenOptions, UringIo,
};
use mirrorlog::internals::recovery;
use mirrorlog::internals::segment::{self};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// `count` files of `len` bytes each, preallocated, for the O_DIRECT baseline.
pub(crate) struct RawFiles {
    caching: FileCaching,
    paths: Vec<PathBuf>,
    positions: Vec<AtomicU64>,
    len: u64,
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
            let file = io::open(
                &mut io,
                &path,
                OpenOptions {
                    create: true,
                    write: true,
                    direct: true,
                    ..OpenOptions::default()
                },
            )
            .map_err(|e| format!("{}: {e} (O_DIRECT unsupported?)", path.display()))?;
            let mut others = Vec::new();
            for op in [
                Op::Fallocate {
                    file,
                    offset: 0,
                    len,
                    mode: FallocateMode::Extend,
                },
                Op::Fsync { file },
                Op::Close { file },
            ] {
                io::run(&mut io, op, &mut others)
                    .and_then(|c| c.result)
                    .map_err(|e| e.to_string())?;
            }
            paths.push(path);
        }
        Ok(RawFiles {
            caching,
            positions: (0..count).map(|_| AtomicU64::new(0)).collect(),
            paths,
            len,
        })
    }

    /// Writes `bytes` (page-rounded) at the file's next position with O_DIRECT, then
    /// fdatasync, through a ring of the calling thread.
    pub(crate) fn write_sync(
        &self,
        io: &mut UringIo,
        file: io::FileId,
        i: usize,
        bytes: usize,
    ) -> u64 {
        let span = bytes.div_ceil(4096) * 4096;
        let mut at = self.positions[i].fetch_add(span as u64, Ordering::Relaxed);
        if at + span as u64 > self.len {
            self.positions[i].store(span as u64, Ordering::Relaxed);
            at = 0;
        }
        let mut buf = AlignedBuf::new(span);
        buf.as_mut_slice().fill(0x5a);
        let mut others = Vec::new();
        let ok = io::run(
            io,
            Op::Write {
                file,
                offset: at,
                buf,
                range: 0..span,
            },
            &mut others,
        )
        .and_then(|c| c.result)
        .and_then(|_| io::run(io, Op::Fdatasync { file }, &mut others).and_then(|c| c.result));
        if ok.is_ok() {
            bytes as u64
        } else {
            0
        }
    }
}

/// A baseline thread's ring and its open files.
pub(crate) type ThreadRing = (UringIo, Vec<io::FileId>);

/// A raw-odirect side: each thread opens its own ring and its files.
pub(crate) fn raw_side(
    side: &mut Side,
    raw: &RawFiles,
    threads: usize,
    secs: f64,
    bytes: usize,
    files_per_thread: usize,
) {
    let rings: Vec<std::sync::Mutex<Option<ThreadRing>>> =
        (0..threads).map(|_| std::sync::Mutex::new(None)).collect();
    timed(side, threads, secs, &|t, n| {
        let mut slot = rings[t]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_none() {
            let Ok(mut io) = ring(8, raw.caching) else {
                return 0;
            };
            let files = (0..files_per_thread)
                .filter_map(|k| {
                    io::open(
                        &mut io,
                        &raw.paths[(t * files_per_thread + k) % raw.paths.len()],
                        OpenOptions {
                            write: true,
                            direct: true,
                            ..OpenOptions::default()
                        },
                    )
                    .ok()
                })
                .collect();
            *slot = Some((io, files));
        }
        let Some((io, files)) = slot.as_mut() else {
            return 0;
        };
        let k = (n as usize) % files.len().max(1);
        let Some(&file) = files.get(k) else { return 0 };
        raw.write_sync(
            io,
            file,
            (t * files_per_thread + k) % raw.paths.len(),
            bytes,
        )
    });
}

/// A buffered side: write(2) + fdatasync per operation on per-thread files.
pub(crate) fn buffered_side(
    side: &mut Side,
    dir: &Path,
    threads: usize,
    secs: f64,
    bytes: usize,
    tag: &str,
) {
    let files: Vec<std::fs::File> = (0..threads)
        .filter_map(|t| {
            std::fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .open(dir.join(format!("buffered-{tag}-{t}")))
                .ok()
        })
        .collect();
    let positions: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let data = vec![0x5au8; bytes];
    timed(side, threads, secs, &|t, _| {
        let Some(f) = files.get(t) else { return 0 };
        let at = positions[t].fetch_add(bytes as u64, Ordering::Relaxed);
        if f.write_all_at(&data, at)
            .and_then(|()| f.sync_data())
            .is_ok()
        {
            bytes as u64
        } else {
            0
        }
    });
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
        let mut others = Vec::new();
        io::run(io, Op::Close { file }, &mut others)
            .and_then(|c| c.result)
            .map_err(|e| e.to_string())?;
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
