//! The io_uring backend's short-transfer continuation and cancelled linked chains (//! item 4), on real files:
//! - with every transfer capped to one page (`UringIo::cap_transfers`, fault injection), each
//!   longer read or write completes short and is continued; a chain's `fdatasync` waits for
//!   the whole write before it (linked to the first part, it would not cover the rest), and
//!   the partition log's commit protocol, rolls, reads, close, reopen and recovery give back
//!   every acknowledged byte;
//! - a real short write from the kernel in a linked chain (in a child process under
//!   `RLIMIT_FSIZE`): the kernel cancels the rest of the chain with `ECANCELED`, the backend
//!   holds the cancelled `fdatasync` and continues the write; the continuation fails
//!   (`EFBIG`), so the write reports that error and the `fdatasync` is cancelled, never
//!   reported done. At the log, the commit round that met it fails and poisons the partition,
//!   and recovery keeps exactly what was acknowledged.

// `setrlimit` and `signal` for the child process, which has no safe wrapper in our deps.
#![allow(unsafe_code)]

mod common;

use mirrorlog::api::Origin;
use mirrorlog::format::{BatchIter, Offset};
use mirrorlog::internals::io::{
    self, AlignedBuf, Completion, Done, Io, IoError, Op, OpKind, OpenOptions, UringIo,
    PAGE_SIZE_BYTES,
};
use mirrorlog::internals::log::{LogConfig, PartitionLog};
use mirrorlog::internals::recovery;
use std::path::Path;

const DIRECT: OpenOptions = OpenOptions {
    create: true,
    write: true,
    direct: true,
    directory: false,
};

/// `pages` pages, page `i` filled with `seed + i`.
fn pages(seed: u8, pages: usize) -> AlignedBuf {
    let mut b = AlignedBuf::new(pages * PAGE_SIZE_BYTES);
    for (i, page) in b.as_mut_slice().chunks_mut(PAGE_SIZE_BYTES).enumerate() {
        page.fill(seed.wrapping_add(i as u8));
    }
    b
}

/// Waits for `n` completions.
fn complete(io: &mut dyn Io, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    while out.len() < n {
        io.complete(1, &mut out).unwrap();
    }
    out
}

#[test]
fn capped_transfers_are_continued_and_a_linked_sync_waits_for_the_whole_write() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let mut io = UringIo::new(64).unwrap();
    io.cap_transfers(PAGE_SIZE_BYTES);
    let file = io::open(&mut io, &dir.path().join("capped"), DIRECT).unwrap();
    let (first, second) = (pages(1, 16), pages(100, 4));
    let expected: Vec<u8> = [first.as_slice(), second.as_slice()].concat();
    let ids = io
        .submit_chain(vec![
            Op::Write {
                file,
                offset: 0,
                buf: first,
                range: 0..16 * PAGE_SIZE_BYTES,
            },
            Op::Fdatasync { file },
            Op::Write {
                file,
                offset: 16 * PAGE_SIZE_BYTES as u64,
                buf: second,
                range: 0..4 * PAGE_SIZE_BYTES,
            },
            Op::Fdatasync { file },
        ])
        .unwrap();
    let done = complete(&mut io, 4);
    // Each member completes after the one before it, whole: the syncs came after every part
    // of the write they follow (linked to its first part, the first sync completed before the
    // write's continuations did).
    assert_eq!(done.iter().map(|c| c.id).collect::<Vec<_>>(), ids);
    assert!(matches!(
        done[0].result,
        Ok(Done::Transferred { bytes }) if bytes == 16 * PAGE_SIZE_BYTES
    ));
    assert!(done.iter().all(|c| c.result.is_ok()), "{done:?}");
    // A capped read is continued too.
    let read = io::run(
        &mut io,
        Op::Read {
            file,
            offset: 0,
            buf: AlignedBuf::new(20 * PAGE_SIZE_BYTES),
            len: 20 * PAGE_SIZE_BYTES,
        },
        &mut Vec::new(),
    )
    .unwrap();
    assert!(matches!(
        read.result,
        Ok(Done::Transferred { bytes }) if bytes == 20 * PAGE_SIZE_BYTES
    ));
    assert_eq!(read.buf.unwrap().as_slice(), &expected[..]);
}

const CONFIG: LogConfig = common::log_config(256 << 10, 4096, 64 << 10);

/// Appends `rounds` rounds of batches from one producer, committing each; returns the batches
/// as stored, in order.
fn fill(io: &mut dyn Io, log: &mut PartitionLog, rounds: usize, seq: &mut i32) -> Vec<Vec<u8>> {
    let mut stored = Vec::new();
    for round in 0..rounds {
        for i in 0..(1 + round % 5) {
            let records = 1 + (i % 3) as i32;
            let b = common::producer_batch(1, *seq, records, false, 3000 + 500 * i);
            let out = log.append(io, &b, Origin::Client).unwrap();
            stored.push(common::stored(b, out.first_offset, 0));
            *seq += records;
        }
        log.commit(io).unwrap();
    }
    stored
}

#[test]
fn the_commit_protocol_holds_when_every_transfer_is_continued() {
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let path = dir.path().join("capped-0");
    std::fs::create_dir(&path).unwrap();
    let mut io = UringIo::new(64).unwrap();
    io.cap_transfers(PAGE_SIZE_BYTES);
    let mut log = PartitionLog::create(&mut io, &path, CONFIG).unwrap();
    let mut seq = 0;
    let stored = fill(&mut io, &mut log, 60, &mut seq);
    assert!(log.segment_base_offsets().len() > 3, "rolled");
    assert_eq!(common::read_all(&mut io, &mut log), stored.concat());
    // Recovery (no close: the last segment is open, its tail in a commit record) on a fresh,
    // uncapped ring finds every acknowledged byte.
    drop(log);
    drop(io);
    let mut io = UringIo::new(64).unwrap();
    let mut log = recovery::recover(&mut io, &path, CONFIG).unwrap();
    assert_eq!(common::read_all(&mut io, &mut log), stored.concat());
    // A clean close and open, capped again.
    log.close(&mut io).unwrap();
    let mut io = UringIo::new(64).unwrap();
    io.cap_transfers(PAGE_SIZE_BYTES);
    let mut log = PartitionLog::open(&mut io, &path, CONFIG).unwrap();
    assert_eq!(common::read_all(&mut io, &mut log), stored.concat());
    log.close(&mut io).unwrap();
    common::assert_verifies(dir.path());
}

const CHILD: &str = "MIRRORLOG_SHORT_WRITE_CHILD";

#[test]
fn a_kernel_short_write_in_a_linked_chain_is_continued_and_its_sync_cancelled() {
    // The file size limit is per process: the scenario runs in a child (this test binary,
    // running only the ignored test below) so that no other test's writes meet it.
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "short_write_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, dir.path())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "child failed:\n{text}");
    assert!(
        text.contains("short-write child: done") && text.contains("1 passed"),
        "{text}"
    );
}

fn set_file_size_limit(bytes: u64) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: plain system calls on valid arguments.
    let rc = unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &limit) };
    assert_eq!(rc, 0, "setrlimit");
}

/// Run by the test above, in a child process; fails when run any other way.
#[test]
#[ignore = "runs in a child process of a_kernel_short_write_in_a_linked_chain_is_continued_and_its_sync_cancelled"]
fn short_write_child() {
    let dir = std::env::var(CHILD).expect("run as a child of the short-write test");
    let dir = Path::new(&dir);
    // Past the limit the kernel sends SIGXFSZ (which would kill us) and answers EFBIG.
    // SAFETY: setting a signal's disposition to "ignore".
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };

    // The Io level: a 16-page write and its sync, linked, with room for 8 pages.
    let mut io = UringIo::new(64).unwrap();
    let file = io::open(&mut io, &dir.join("short"), DIRECT).unwrap();
    set_file_size_limit(8 * PAGE_SIZE_BYTES as u64);
    let ids = io
        .submit_chain(vec![
            Op::Write {
                file,
                offset: 0,
                buf: pages(7, 16),
                range: 0..16 * PAGE_SIZE_BYTES,
            },
            Op::Fdatasync { file },
        ])
        .unwrap();
    let mut done = complete(&mut io, 2);
    done.sort_by_key(|c| c.id);
    assert_eq!(done.iter().map(|c| c.id).collect::<Vec<_>>(), ids);
    assert!(
        matches!(
            done[0].result,
            Err(IoError::Os {
                op: OpKind::Write,
                errno: libc::EFBIG
            })
        ),
        "the continuation past the limit fails: {:?}",
        done[0].result
    );
    assert!(
        matches!(
            done[1].result,
            Err(IoError::Canceled {
                op: OpKind::Fdatasync
            })
        ),
        "the sync of a failed write is cancelled, never done: {:?}",
        done[1].result
    );
    // The short part did reach the file.
    set_file_size_limit(libc::RLIM_INFINITY);
    let bytes = std::fs::read(dir.join("short")).unwrap();
    assert_eq!(bytes.len(), 8 * PAGE_SIZE_BYTES);
    assert_eq!(&bytes[..], pages(7, 8).as_slice());

    // The log level: acknowledged rounds, then a round that meets the limit.
    let path = dir.join("log-0");
    std::fs::create_dir(&path).unwrap();
    let mut log = PartitionLog::create(&mut io, &path, CONFIG).unwrap();
    let mut seq = 0;
    let acked = fill(&mut io, &mut log, 4, &mut seq);
    assert_eq!(log.segment_base_offsets(), [Offset(0)], "one segment");
    // Room up to the next page boundary past the acknowledged data: the next round's pages
    // write short, its commit record (past the data region) not at all.
    let data: u64 = acked.iter().map(|b| b.len() as u64).sum();
    set_file_size_limit((data / PAGE_SIZE_BYTES as u64 + 1) * PAGE_SIZE_BYTES as u64);
    for i in 0..6 {
        let b = common::producer_batch(1, seq, 1, false, 9000 + i);
        log.append(&mut io, &b, Origin::Client).unwrap();
        seq += 1;
    }
    let failed = log.commit(&mut io);
    assert!(
        failed.is_err(),
        "the round past the limit fails: {failed:?}"
    );
    assert!(
        log.commit(&mut io).is_err(),
        "and poisons the partition: nothing later is acknowledged"
    );
    drop(log);
    set_file_size_limit(libc::RLIM_INFINITY);
    let mut io = UringIo::new(64).unwrap();
    let mut log = recovery::recover(&mut io, &path, CONFIG).unwrap();
    let got = common::read_all(&mut io, &mut log);
    assert_eq!(
        BatchIter::new(&got, 0).count(),
        acked.len(),
        "exactly the acknowledged batches"
    );
    assert_eq!(got, acked.concat());
    assert_eq!(log.log_end(), Offset(i64::from(seq) - 6));
    println!("short-write child: done");
}
