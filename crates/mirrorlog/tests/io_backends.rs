//! The `Io` contract, run identically against the io_uring backend (real files under the
//! system temp dir, O_DIRECT on) and the simulated disk: round trips of page-aligned writes and
//! reads, many operations in flight at once, short reads at end of file, fallocate in both
//! modes, truncate, rename, unlink, the alignment and queue-depth refusals, closing with work in
//! flight, and buffers coming back in completions. Then what only the simulated disk can show:
//! a crash keeps exactly the synced bytes, ENOSPC and EIO injection, and the write log.

use mirrorlog::internals::io::{
    self, AlignedBuf, Completion, Done, FallocateMode, FileId, Io, IoError, Op, OpenOptions,
    SimConfig, SimIo, UringIo, PAGE_SIZE_BYTES,
};
use std::path::{Path, PathBuf};

const DIRECT: OpenOptions = OpenOptions {
    create: true,
    write: true,
    direct: true,
    directory: false,
};

fn page_of(byte: u8, pages: usize) -> AlignedBuf {
    let mut b = AlignedBuf::new(pages * PAGE_SIZE_BYTES);
    b.as_mut_slice().fill(byte);
    b
}

fn done(io: &mut dyn Io, op: Op) -> Completion {
    let mut others = Vec::new();
    let c = io::run(io, op, &mut others).expect("submit");
    assert!(others.is_empty());
    c
}

fn ok(io: &mut dyn Io, op: Op) -> Done {
    done(io, op).result.expect("operation succeeds")
}

fn read(io: &mut dyn Io, file: FileId, offset: u64, len: usize) -> Vec<u8> {
    let c = done(
        io,
        Op::Read {
            file,
            offset,
            buf: AlignedBuf::new(len),
            len: len.div_ceil(PAGE_SIZE_BYTES) * PAGE_SIZE_BYTES,
        },
    );
    let Ok(Done::Transferred { bytes }) = c.result else {
        panic!("read failed: {:?}", c.result);
    };
    c.buf.unwrap().as_slice()[..bytes.min(len)].to_vec()
}

/// The contract both backends must meet. `dir` is where files go.
fn conformance(io: &mut dyn Io, dir: &Path) {
    let path = dir.join("00000000000000000000.log");
    let file = io::open(io, &path, DIRECT).unwrap();

    // Round trip: two pages, synced, read back.
    let c = done(
        io,
        Op::Write {
            file,
            offset: 0,
            buf: page_of(0xab, 2),
            range: 0..2 * PAGE_SIZE_BYTES,
        },
    );
    assert!(matches!(c.result, Ok(Done::Transferred { bytes: 8192 })));
    assert_eq!(c.buf.expect("the buffer comes back").capacity(), 8192);
    ok(io, Op::Fdatasync { file });
    assert_eq!(read(io, file, 0, 8192), vec![0xab; 8192]);

    // Many writes in flight at once, completed in any order.
    let n = 64.min(io.capacity());
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(
            io.submit(Op::Write {
                file,
                offset: ((2 + i) * PAGE_SIZE_BYTES) as u64,
                buf: page_of(i as u8, 1),
                range: 0..PAGE_SIZE_BYTES,
            })
            .unwrap(),
        );
    }
    assert_eq!(io.in_flight(), n);
    let mut completions = Vec::new();
    while completions.len() < n {
        io.complete(1, &mut completions).unwrap();
    }
    assert_eq!(io.in_flight(), 0);
    let mut seen: Vec<_> = completions.iter().map(|c| c.id).collect();
    seen.sort();
    assert_eq!(seen, ids);
    assert!(completions
        .iter()
        .all(|c| c.result.is_ok() && c.buf.is_some()));
    for i in 0..n {
        assert_eq!(
            read(io, file, ((2 + i) * PAGE_SIZE_BYTES) as u64, 16),
            vec![i as u8; 16]
        );
    }

    // An empty write completes with nothing written.
    let c = done(
        io,
        Op::Write {
            file,
            offset: 0,
            buf: page_of(0, 1),
            range: 0..0,
        },
    );
    assert!(matches!(c.result, Ok(Done::Transferred { bytes: 0 })));

    // A chain runs in order: two writes, then the fdatasync, with no round trip between.
    let ids = io
        .submit_chain(vec![
            Op::Write {
                file,
                offset: 0,
                buf: page_of(0xc1, 1),
                range: 0..PAGE_SIZE_BYTES,
            },
            Op::Write {
                file,
                offset: PAGE_SIZE_BYTES as u64,
                buf: page_of(0xc2, 1),
                range: 0..PAGE_SIZE_BYTES,
            },
            Op::Fdatasync { file },
        ])
        .unwrap();
    let mut chain = Vec::new();
    while chain.len() < 3 {
        io.complete(1, &mut chain).unwrap();
    }
    let mut got: Vec<_> = chain.iter().map(|c| c.id).collect();
    got.sort();
    assert_eq!(got, ids);
    assert!(chain.iter().all(|c| c.result.is_ok()));
    assert_eq!(read(io, file, 0, 8192)[4095..4097], [0xc1, 0xc2]);
    // A failing member (a write to a read-only file) cancels the rest of its chain; unlink
    // and close cannot be chained.
    let read_only = io::open(
        io,
        &path,
        OpenOptions {
            create: false,
            write: false,
            direct: true,
            directory: false,
        },
    )
    .unwrap();
    io.submit_chain(vec![
        Op::Write {
            file: read_only,
            offset: 0,
            buf: page_of(1, 1),
            range: 0..PAGE_SIZE_BYTES,
        },
        Op::Fdatasync { file },
    ])
    .unwrap();
    let mut chain = Vec::new();
    while chain.len() < 2 {
        io.complete(1, &mut chain).unwrap();
    }
    chain.sort_by_key(|c| c.id);
    assert!(
        matches!(
            chain[0].result,
            Err(IoError::Os {
                errno: libc::EBADF,
                ..
            })
        ),
        "{:?}",
        chain[0].result
    );
    assert!(
        matches!(chain[1].result, Err(IoError::Canceled { .. })),
        "{:?}",
        chain[1].result
    );
    assert!(matches!(
        io.submit_chain(vec![Op::Unlink { path: path.clone() }]),
        Err(IoError::NotChainable { .. })
    ));
    ok(io, Op::Close { file: read_only });

    // A read past the end is short, not an error.
    let size = ((2 + n) * PAGE_SIZE_BYTES) as u64;
    let c = done(
        io,
        Op::Read {
            file,
            offset: size - PAGE_SIZE_BYTES as u64,
            buf: AlignedBuf::new(3 * PAGE_SIZE_BYTES),
            len: 3 * PAGE_SIZE_BYTES,
        },
    );
    assert!(matches!(c.result, Ok(Done::Transferred { bytes: 4096 })));

    // A large write (several MiB) completes in full.
    let big = 8 << 20;
    let c = done(
        io,
        Op::Write {
            file,
            offset: size,
            buf: page_of(0x5a, big / PAGE_SIZE_BYTES),
            range: 0..big,
        },
    );
    assert!(matches!(c.result, Ok(Done::Transferred { bytes }) if bytes == big));
    assert_eq!(
        read(io, file, size + big as u64 - 4096, 4096),
        vec![0x5a; 4096]
    );

    // O_DIRECT takes page-aligned transfers only; nothing is queued on refusal.
    let misaligned = io.submit(Op::Write {
        file,
        offset: 100,
        buf: page_of(1, 1),
        range: 0..PAGE_SIZE_BYTES,
    });
    assert!(matches!(
        misaligned,
        Err(IoError::Misaligned { offset: 100, .. })
    ));
    let bad_range = io.submit(Op::Write {
        file,
        offset: 0,
        buf: page_of(1, 1),
        range: 0..2 * PAGE_SIZE_BYTES,
    });
    assert!(matches!(bad_range, Err(IoError::BadRange { .. })));
    assert_eq!(io.in_flight(), 0);

    // fallocate: Extend grows the size (zeroes), KeepSize does not.
    let other = dir.join("prealloc");
    let f2 = io::open(io, &other, DIRECT).unwrap();
    ok(
        io,
        Op::Fallocate {
            file: f2,
            offset: 0,
            len: 1 << 20,
            mode: FallocateMode::KeepSize,
        },
    );
    assert_eq!(
        read(io, f2, 0, 4096),
        Vec::<u8>::new(),
        "KeepSize leaves the size at 0"
    );
    ok(
        io,
        Op::Fallocate {
            file: f2,
            offset: 0,
            len: 1 << 20,
            mode: FallocateMode::Extend,
        },
    );
    assert_eq!(read(io, f2, (1 << 20) - 4096, 4096), vec![0; 4096]);
    ok(
        io,
        Op::Truncate {
            file: f2,
            len: 8192,
        },
    );
    assert_eq!(read(io, f2, 0, 16384).len(), 8192);

    // Close refuses while work is in flight, then closes.
    let id = io
        .submit(Op::Fdatasync { file: f2 })
        .expect("fdatasync queued");
    assert!(matches!(
        io.submit(Op::Close { file: f2 }),
        Err(IoError::FileBusy { in_flight: 1, .. })
    ));
    let mut cs = Vec::new();
    while !cs.iter().any(|c: &Completion| c.id == id) {
        io.complete(1, &mut cs).unwrap();
    }
    ok(io, Op::Close { file: f2 });
    assert!(matches!(
        io.submit(Op::Fsync { file: f2 }),
        Err(IoError::UnknownFile(_))
    ));

    // Rename (temp + rename, as snapshots do), then unlink.
    let renamed = dir.join("renamed");
    ok(
        io,
        Op::Rename {
            from: other.clone(),
            to: renamed.clone(),
        },
    );
    let missing = done(
        io,
        Op::Open {
            path: other,
            options: OpenOptions {
                create: false,
                ..DIRECT
            },
        },
    );
    assert!(matches!(
        missing.result,
        Err(IoError::Os {
            errno: libc::ENOENT,
            ..
        })
    ));
    let f3 = io::open(io, &renamed, DIRECT).unwrap();
    assert_eq!(read(io, f3, 0, 8192).len(), 8192);
    ok(io, Op::Close { file: f3 });
    ok(io, Op::Unlink { path: renamed });
    let d = io::open(
        io,
        dir,
        OpenOptions {
            directory: true,
            ..OpenOptions::default()
        },
    )
    .unwrap();
    ok(io, Op::Fsync { file: d });

    // The queue depth is a hard bound.
    let cap = io.capacity();
    for _ in 0..cap {
        io.submit(Op::Fdatasync { file }).unwrap();
    }
    assert!(matches!(
        io.submit(Op::Fdatasync { file }),
        Err(IoError::QueueFull { .. })
    ));
    let mut cs = Vec::new();
    while io.in_flight() > 0 {
        io.complete(io.in_flight(), &mut cs).unwrap();
    }
    assert_eq!(cs.len(), cap);

    // A doorbell wait completes once another thread rings, and never before; a disk operation
    // submitted beside it completes without waiting for the ring.
    let bell = std::sync::Arc::new(mirrorlog::internals::io::Doorbell::new().unwrap());
    let wait = io
        .submit(Op::WaitDoorbell {
            doorbell: bell.clone(),
        })
        .unwrap();
    let sync = io.submit(Op::Fdatasync { file }).unwrap();
    let mut cs = Vec::new();
    io.complete(1, &mut cs).unwrap();
    assert!(cs.iter().all(|c| c.id != wait), "completed before any ring");
    while !cs.iter().any(|c| c.id == sync) {
        io.complete(1, &mut cs).unwrap();
    }
    assert!(cs.iter().all(|c| c.id != wait));
    let remote = bell.clone();
    let ringer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        remote.ring();
    });
    let mut cs = Vec::new();
    io.complete(1, &mut cs).unwrap();
    assert_eq!(cs.len(), 1);
    assert_eq!(cs[0].id, wait);
    assert!(cs[0].result.is_ok());
    assert_eq!(bell.drain(), 1);
    ringer.join().unwrap();
}

#[test]
fn io_uring_backend_meets_the_contract() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let mut io = UringIo::new(128).expect("io_uring is available on this kernel");
    assert!(
        io.deferred_taskrun(),
        "kernel 6.x offers SINGLE_ISSUER | DEFER_TASKRUN"
    );
    conformance(&mut io, dir.path());
}

/// The page-cache mode meets the same contract (alignment rules included), and a file whose
/// filesystem refuses O_DIRECT — procfs, which has no direct I/O — is refused with the typed
/// error naming it in direct mode, yet opens in page-cache mode.
#[test]
fn io_uring_page_cache_mode_meets_the_contract_and_direct_refusal_is_typed() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let mut io = UringIo::new(128)
        .unwrap()
        .with_caching(io::FileCaching::PageCache);
    conformance(&mut io, dir.path());

    let proc_file = PathBuf::from("/proc/self/status");
    let read_direct = OpenOptions {
        direct: true,
        ..OpenOptions::default()
    };
    let mut direct = UringIo::new(8).unwrap();
    let refused = done(
        &mut direct,
        Op::Open {
            path: proc_file.clone(),
            options: read_direct,
        },
    );
    match refused.result {
        Err(IoError::DirectUnsupported { path }) => assert_eq!(path, proc_file),
        other => panic!("expected DirectUnsupported, got {other:?}"),
    }
    let mut cached = UringIo::new(8)
        .unwrap()
        .with_caching(io::FileCaching::PageCache);
    assert!(matches!(
        ok(
            &mut cached,
            Op::Open {
                path: proc_file,
                options: read_direct,
            },
        ),
        Done::Opened(_)
    ));
}

#[test]
fn simulated_backend_meets_the_contract() {
    for seed in 0..8 {
        let mut io = SimIo::new(SimConfig {
            seed,
            capacity: 128,
            ..SimConfig::default()
        });
        conformance(&mut io, Path::new("/sim"));
    }
}

/// A new file whose directory entry is durable (its directory fsynced), for tests of what a
/// power cut does to its bytes.
fn sim_file(io: &mut SimIo, name: &str) -> (FileId, PathBuf) {
    let path = PathBuf::from(name);
    let file = io::open(io, &path, DIRECT).unwrap();
    io::fsync_dir(io, path.parent().unwrap()).unwrap();
    (file, path)
}

#[test]
fn a_power_cut_forgets_directory_entries_not_yet_fsynced() {
    let mut io = SimIo::new(SimConfig::default());
    let dir = Path::new("/sim/ns");
    let (kept, kept_path) = sim_file(&mut io, "/sim/ns/kept");
    ok(
        &mut io,
        Op::Write {
            file: kept,
            offset: 0,
            buf: page_of(1, 1),
            range: 0..4096,
        },
    );
    ok(&mut io, Op::Fdatasync { file: kept });
    // Created and synced, but its entry never was: gone after the cut.
    let fresh_path = dir.join("fresh");
    let fresh = io::open(&mut io, &fresh_path, DIRECT).unwrap();
    ok(&mut io, Op::Fdatasync { file: fresh });
    // Renamed and unlinked without a directory fsync: the old names come back.
    let moved_path = dir.join("moved");
    ok(
        &mut io,
        Op::Rename {
            from: kept_path.clone(),
            to: moved_path.clone(),
        },
    );
    let after = io.crash(1);
    assert!(
        after.file_bytes(&fresh_path).is_none(),
        "an unsynced create"
    );
    assert!(
        after.file_bytes(&moved_path).is_none(),
        "an unsynced rename"
    );
    assert_eq!(after.file_bytes(&kept_path).unwrap(), &[1u8; 4096][..]);
    ok(
        &mut io,
        Op::Unlink {
            path: moved_path.clone(),
        },
    );
    let after = io.crash(2);
    assert_eq!(
        after.file_bytes(&kept_path).unwrap(),
        &[1u8; 4096][..],
        "an unsynced unlink: the file is back with its synced bytes"
    );
    // Once the directory is fsynced, the namespace is as it is now.
    io::fsync_dir(&mut io, dir).unwrap();
    let after = io.crash(3);
    assert!(after.file_bytes(&kept_path).is_none());
    assert!(after.file_bytes(&moved_path).is_none());
    assert!(after.file_bytes(&fresh_path).is_some());
}

#[test]
fn crash_keeps_exactly_the_synced_bytes() {
    let mut io = SimIo::new(SimConfig::default());
    let (file, path) = sim_file(&mut io, "/sim/a.log");
    ok(
        &mut io,
        Op::Write {
            file,
            offset: 0,
            buf: page_of(1, 1),
            range: 0..4096,
        },
    );
    ok(&mut io, Op::Fdatasync { file });
    ok(
        &mut io,
        Op::Write {
            file,
            offset: 4096,
            buf: page_of(2, 1),
            range: 0..4096,
        },
    );
    let after = io.crash(7);
    assert_eq!(after.file_bytes(&path).unwrap(), &[1u8; 4096][..]);
    assert_eq!(
        io.file_bytes(&path).unwrap().len(),
        8192,
        "the live disk still has both pages"
    );
    assert_eq!(io.writes().len(), 2);
    assert_eq!(io.writes()[1].range, 4096..8192);
}

#[test]
fn disk_full_is_typed_and_recoverable() {
    let mut io = SimIo::new(SimConfig {
        disk_capacity_bytes: Some(8192),
        ..SimConfig::default()
    });
    let (file, path) = sim_file(&mut io, "/sim/full.log");
    for (i, expect_ok) in [(0u64, true), (1, true), (2, false)] {
        let c = done(
            &mut io,
            Op::Write {
                file,
                offset: i * 4096,
                buf: page_of(9, 1),
                range: 0..4096,
            },
        );
        assert_eq!(c.result.is_ok(), expect_ok, "page {i}");
        if !expect_ok {
            assert!(matches!(c.result, Err(IoError::NoSpace { .. })));
            assert!(c.buf.is_some(), "the buffer comes back on failure too");
        }
    }
    assert_eq!(
        io.file_bytes(&path).unwrap().len(),
        8192,
        "nothing of the failed write landed"
    );
    io.set_disk_capacity(None);
    ok(
        &mut io,
        Op::Write {
            file,
            offset: 8192,
            buf: page_of(9, 1),
            range: 0..4096,
        },
    );
}

#[test]
fn injected_fsync_failures_are_reported() {
    let mut io = SimIo::new(SimConfig {
        fail_syncs_from: Some(1),
        ..SimConfig::default()
    });
    // No directory fsync here: it would count as the first sync.
    let file = io::open(&mut io, Path::new("/sim/eio.log"), DIRECT).unwrap();
    ok(&mut io, Op::Fdatasync { file });
    let c = done(&mut io, Op::Fdatasync { file });
    assert!(matches!(
        c.result,
        Err(IoError::Os {
            errno: libc::EIO,
            ..
        })
    ));
}

#[test]
fn simulated_completion_order_depends_on_the_seed() {
    let order = |seed| {
        let mut io = SimIo::new(SimConfig {
            seed,
            ..SimConfig::default()
        });
        let (file, _) = sim_file(&mut io, "/sim/o.log");
        for i in 0..16 {
            io.submit(Op::Write {
                file,
                offset: i * 4096,
                buf: page_of(0, 1),
                range: 0..4096,
            })
            .unwrap();
        }
        let mut cs = Vec::new();
        while io.in_flight() > 0 {
            io.complete(1, &mut cs).unwrap();
        }
        cs.iter().map(|c| c.id.0).collect::<Vec<_>>()
    };
    assert_eq!(order(3), order(3), "replayable");
    assert_ne!(order(3), order(4), "and not always submission order");
}

#[test]
fn torn_crashes_keep_synced_bytes_and_vary_the_rest_by_sector() {
    let mut io = SimIo::new(SimConfig::default());
    let (file, path) = sim_file(&mut io, "/sim/torn.log");
    ok(
        &mut io,
        Op::Write {
            file,
            offset: 0,
            buf: page_of(1, 1),
            range: 0..4096,
        },
    );
    ok(&mut io, Op::Fdatasync { file });
    ok(
        &mut io,
        Op::Write {
            file,
            offset: 0,
            buf: page_of(2, 2),
            range: 0..8192,
        },
    );
    let mut outcomes = std::collections::BTreeSet::new();
    for seed in 0..64 {
        let after = io.crash_with(seed, mirrorlog::internals::io::CrashModel::Torn);
        let bytes = after.file_bytes(&path).unwrap();
        assert!(bytes.len() >= 4096, "synced bytes always survive");
        // Each 512-byte sector of the first page is old (1), new (2) or garbage, never mixed
        // within a sector unless garbage.
        let first = &bytes[..512];
        let kind = if first.iter().all(|&b| b == 1) {
            "old"
        } else if first.iter().all(|&b| b == 2) {
            "new"
        } else {
            "garbage"
        };
        outcomes.insert(kind);
    }
    assert_eq!(
        outcomes.len(),
        3,
        "kept, lost and torn outcomes all occur: {outcomes:?}"
    );
}

#[test]
fn io_uring_registers_buffers_and_recycles_them() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let mut io = UringIo::new(16).unwrap();
    let mut buf = io.buffer(64 << 10);
    // As root (CI, here) the memlock limit does not apply; elsewhere plain buffers are the
    // documented fallback and the round trip below holds either way.
    let registered = buf.is_registered();
    buf.as_mut_slice().fill(0x7e);
    let file = io::open(&mut io, &dir.path().join("fixed"), DIRECT).unwrap();
    let c = done(
        &mut io,
        Op::Write {
            file,
            offset: 0,
            buf,
            range: 0..(64 << 10),
        },
    );
    assert!(matches!(c.result, Ok(Done::Transferred { bytes }) if bytes == 64 << 10));
    let back = c.buf.unwrap();
    assert_eq!(back.is_registered(), registered);
    // A registered buffer reads too (ReadFixed), and a recycled one is handed out again.
    let c = done(
        &mut io,
        Op::Read {
            file,
            offset: 0,
            buf: back,
            len: 64 << 10,
        },
    );
    let back = c.buf.unwrap();
    assert!(back.as_slice().iter().all(|&b| b == 0x7e));
    let address = back.as_slice().as_ptr();
    io.recycle(back);
    let again = io.buffer(64 << 10);
    if registered {
        assert_eq!(
            again.as_slice().as_ptr(),
            address,
            "the registered buffer is reused"
        );
    }
    // Plain buffers still work alongside.
    let c = done(
        &mut io,
        Op::Read {
            file,
            offset: 0,
            buf: AlignedBuf::new(4096),
            len: 4096,
        },
    );
    assert!(c.buf.unwrap().as_slice().iter().all(|&b| b == 0x7e));
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"));
    if root {
        assert!(
            registered,
            "as root on kernel 6.x, registration is available"
        );
    }
}

#[test]
fn io_uring_flush_hands_queued_operations_over_without_reaping() {
    // A queued write reaches the file after `flush` alone: the caller can do other work (the
    // next append's validation) while a commit round is on the device. Without the flush the
    // write would wait in the submission queue until the next `complete`.
    let dir = tempfile::tempdir().unwrap();
    let mut io = UringIo::new(8).unwrap();
    let path = dir.path().join("flushed");
    let file = io::open(&mut io, &path, DIRECT).unwrap();
    io.submit(Op::Write {
        file,
        offset: 0,
        buf: page_of(0x5a, 1),
        range: 0..PAGE_SIZE_BYTES,
    })
    .unwrap();
    io.flush().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let landed = loop {
        let bytes = std::fs::read(&path).unwrap();
        if bytes.len() == PAGE_SIZE_BYTES && bytes.iter().all(|&b| b == 0x5a) {
            break true;
        }
        if std::time::Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert!(
        landed,
        "the flushed write reached the file before any complete()"
    );
    let mut out = Vec::new();
    io.complete(1, &mut out).unwrap();
    assert_eq!(out.len(), 1);
    assert!(out[0].result.is_ok());
    // Nothing queued: flushing again is a no-op.
    io.flush().unwrap();
}
