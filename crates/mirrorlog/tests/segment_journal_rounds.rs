//! Journal rounds of the segment writer (the shard does not drive them yet), on the
//! simulated disk:
//! - many partitions' rounds share one journal block and one fdatasync, and no segment file is
//!   synced; after a power cut, the journal's entries of each partition rebuild exactly its
//!   acknowledged bytes (what open-time replay will do);
//! - a round of `DIRECT_ROUND_BYTES` or more is an ordinary round (its pages written once, its
//!   commit record, one fdatasync of its segment), not in the journal: write amplification
//!   ≤ 1.1;
//! - a checkpoint (an ordinary commit round) supersedes the segment's entries: its record
//!   carries the journal floor, and the segment no longer holds the journal's space;
//! - replaying the journal into the crashed segments (what open will do) makes each segment's
//!   newest commit record describe exactly its acknowledged bytes, twice in a row applying
//!   nothing the second time; an entry that does not continue the durable end is not applied;
//! - a commit in place during a journal round does not wait for the journal, and writes the
//!   pages the journal rounds deferred before its record;
//! - small rounds leave their full pages in the buffer until it holds
//!   `DEFERRED_PAGES_MAX_BYTES`, then write them as one large write, each page once; the
//!   durable bytes read back all along (deferred pages from the buffer, or from their copy
//!   while their write is in flight); an idle writer writes its deferred pages and can then
//!   hand its buffer back.
//!
//! Batch sizes come from a seed (`MIRRORLOG_SEED` replays).

mod common;

use common::Rng;
use mirrorlog::format::{self, BatchBuilder, BatchOptions, Offset, RecordSpec};
use mirrorlog::internals::io::{CrashModel, Io, Op, OpId, OpKind, SimConfig, SimIo};
use mirrorlog::internals::journal::{self, read_chain, Finished, Flush, JournalWriter};
use mirrorlog::internals::segment::{
    self, replay_journal, CommitRecord, JournalStart, ReplayEntry, ReplaySync, SegmentConfig,
    SegmentWriter, COMMIT_SLOT_SIZE_BYTES, DEFERRED_PAGES_MAX_BYTES, DIRECT_ROUND_BYTES,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const DATA: &str = "/sim/data";
const CONFIG: SegmentConfig = SegmentConfig {
    segment_bytes: 16 << 20,
    index_interval_bytes: 4096,
    commit_buffer_bytes: 2 << 20,
    preallocate_step_bytes: segment::PREALLOCATE_STEP_BYTES_DEFAULT,
};

fn batch(offset: i64, records: i64, value_bytes: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(BatchOptions::default());
    let value = vec![(offset % 251) as u8; value_bytes];
    for i in 0..records {
        b.push(RecordSpec {
            timestamp: 1_764_403_200_000 + offset + i,
            key: None,
            value: Some(&value),
            headers: &[],
        });
    }
    let mut bytes = b.build();
    format::stamp_base_offset(&mut bytes, Offset(offset)).unwrap();
    bytes
}

struct Partition {
    key: String,
    dir: PathBuf,
    w: SegmentWriter,
    all: Vec<u8>,
    acknowledged: usize,
}

impl Partition {
    fn new(io: &mut SimIo, i: usize) -> Self {
        let key = format!("t-{i}");
        let dir = Path::new(DATA).join(&key);
        io.create_dir(&dir).unwrap();
        let w = SegmentWriter::create(io, &dir, Offset(0), CONFIG, 0).unwrap();
        Partition {
            key,
            dir,
            w,
            all: Vec::new(),
            acknowledged: 0,
        }
    }

    fn append(&mut self, records: i64, value_bytes: usize) {
        let offset = self.w.next_offset().0;
        let b = batch(offset, records, value_bytes);
        self.w.append(&b, Offset(offset + records - 1), 0).unwrap();
        self.all.extend_from_slice(&b);
    }
}

/// A simulated disk drawn from `seed`, its data directory made, and a new journal on it.
fn seeded_sim(seed: u64) -> (SimIo, JournalWriter) {
    let mut io = SimIo::new(SimConfig {
        seed,
        ..SimConfig::default()
    });
    io.create_dir(Path::new(DATA)).unwrap();
    let j = new_journal(&mut io);
    (io, j)
}

fn new_journal(io: &mut SimIo) -> JournalWriter {
    let path = Path::new(DATA).join(journal::file_name(0));
    JournalWriter::create(io, &path, 0, 8 << 20, 1).unwrap()
}

/// One shard round: every partition's entry into one block, the block flushed, completions fed
/// back until every round finished.
fn round(io: &mut SimIo, j: &mut JournalWriter, parts: &mut [Partition]) {
    for p in parts.iter_mut() {
        start_round(io, j, p);
    }
    finish_rounds(io, j, parts);
}

/// Starts `p`'s round as the shard does: returns its own operations.
fn start_round(io: &mut SimIo, j: &mut JournalWriter, p: &mut Partition) -> Vec<OpId> {
    match p.w.start_journal_round(io, j, &p.key).unwrap() {
        JournalStart::Started { ops, .. } => ops,
        // A large round is an ordinary one, as the shard makes it.
        JournalStart::NoRoom => {
            assert!(p.w.start_commit(io).unwrap());
            p.w.round_ops().to_vec()
        }
        other => panic!("{}: {other:?}", p.key),
    }
}

/// The block flushed, completions fed back until every round finished.
fn finish_rounds(io: &mut SimIo, j: &mut JournalWriter, parts: &mut [Partition]) {
    assert!(matches!(
        j.start_flush(io, 64).unwrap(),
        Flush::Started { .. }
    ));
    let mut done = Vec::new();
    while parts.iter().any(|p| p.w.round_in_flight()) {
        io.complete(1, &mut done).unwrap();
        for c in done.drain(..) {
            if let Some(p) = parts.iter_mut().find(|p| p.w.owns(&c)) {
                if let Some(d) = p.w.on_completion(c).unwrap() {
                    p.acknowledged = d.data_len as usize;
                }
            } else if let Finished::Blocks { last: lsn } = j.on_completion(io, c).unwrap() {
                for p in parts.iter_mut() {
                    if let Some(d) = p.w.on_journal_durable(lsn) {
                        p.acknowledged = d.data_len as usize;
                    }
                }
            }
        }
    }
}

/// Bytes written to each file since `from` (an index into the write log).
fn written_since(io: &SimIo, from: usize) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    for w in &io.writes()[from..] {
        *out.entry(w.path.clone()).or_default() += w.range.end - w.range.start;
    }
    out
}

#[test]
fn many_partitions_share_one_flush_and_the_journal_rebuilds_them_after_a_power_cut() {
    let seed = common::seed("many_partitions_share_one_flush");
    let mut rng = Rng(seed | 1);
    let (mut io, mut j) = seeded_sim(seed);
    let mut parts: Vec<Partition> = (0..50).map(|i| Partition::new(&mut io, i)).collect();
    let syncs_before = io.ops_of(OpKind::Fdatasync);
    let rounds = 12;
    for _ in 0..rounds {
        for p in &mut parts {
            p.append(1 + rng.below(20) as i64, 1 + rng.below(300) as usize);
        }
        round(&mut io, &mut j, &mut parts);
        for p in &mut parts {
            assert_eq!(p.acknowledged, p.all.len(), "{}", p.key);
            let read = p.w.read_durable(&mut io, 0, p.all.len()).unwrap();
            assert_eq!(read, p.all, "{} reads back", p.key);
        }
    }
    assert_eq!(
        io.ops_of(OpKind::Fdatasync) - syncs_before,
        rounds,
        "one fdatasync per round for 50 partitions"
    );
    // A power cut: the segments hold only what their creation synced; the journal holds the
    // rest, entry after entry, from each segment's durable end.
    let after = io.crash(seed);
    let file = after
        .file_bytes(&Path::new(DATA).join(journal::file_name(0)))
        .unwrap();
    let chain = read_chain(file).unwrap();
    assert_eq!(chain.blocks.len() as u64, rounds);
    for p in &parts {
        let log = segment::log_path(&p.dir, Offset(0));
        let image = after.file_bytes(&log).unwrap();
        let at = |i: usize| {
            let start = p.w.slot_position(i) as usize;
            &image[start..start + COMMIT_SLOT_SIZE_BYTES]
        };
        let record = CommitRecord::newest([at(0), at(1)]).unwrap();
        assert_eq!(record.data_len, 0, "{}: no segment sync", p.key);
        let mut rebuilt = Vec::new();
        for e in chain
            .blocks
            .iter()
            .flat_map(|b| &b.entries)
            .filter(|e| e.key == p.key)
        {
            assert_eq!(e.start, rebuilt.len() as u64, "{}: entries follow", p.key);
            assert_eq!(e.inline_from, e.start, "small rounds travel whole");
            rebuilt.extend_from_slice(e.inline);
        }
        assert_eq!(
            rebuilt, p.all,
            "{}: the journal holds every acknowledged byte",
            p.key
        );
    }
}

#[test]
fn a_large_round_is_written_once() {
    let mut io = SimIo::new(SimConfig::default());
    io.create_dir(Path::new(DATA)).unwrap();
    let mut j = new_journal(&mut io);
    let mut parts = vec![Partition::new(&mut io, 0), Partition::new(&mut io, 1)];
    // A mirrored 1 MiB fetch for t-0, a small one for t-1, in one round.
    while (parts[0].all.len() as u64) < (1 << 20) {
        parts[0].append(16, 1000);
    }
    parts[1].append(3, 100);
    assert!(parts[0].all.len() as u64 >= DIRECT_ROUND_BYTES);
    let mark = io.writes().len();
    round(&mut io, &mut j, &mut parts);
    assert!(parts.iter().all(|p| p.acknowledged == p.all.len()));
    let written = written_since(&io, mark);
    let journal_bytes = written[&Path::new(DATA).join(journal::file_name(0))];
    let segment_bytes = written[&segment::log_path(&parts[0].dir, Offset(0))];
    let appended = parts[0].all.len() as u64;
    // The journal's one block holds t-1's bytes alone: one page.
    assert_eq!(journal_bytes, 4096, "journal wrote {journal_bytes}");
    // t-0's round was an ordinary one: its pages and one commit record.
    let amplification = segment_bytes as f64 / appended as f64;
    assert!(
        amplification <= 1.1,
        "write amplification {amplification:.3}"
    );
    let after = io.crash(7);
    let chain = read_chain(
        after
            .file_bytes(&Path::new(DATA).join(journal::file_name(0)))
            .unwrap(),
    )
    .unwrap();
    assert!(chain.blocks[0].entries.iter().all(|e| e.key != "t-0"));
    // After a power cut its newest commit record covers the whole round, synced.
    let image = after
        .file_bytes(&segment::log_path(&parts[0].dir, Offset(0)))
        .unwrap();
    let region = image.len() - 2 * COMMIT_SLOT_SIZE_BYTES;
    let record = CommitRecord::newest(image[region..].chunks(COMMIT_SLOT_SIZE_BYTES)).unwrap();
    assert_eq!(record.data_len, appended);
    let mut rebuilt = image[..(appended / 4096 * 4096) as usize].to_vec();
    rebuilt.extend_from_slice(&record.tail);
    assert_eq!(rebuilt, parts[0].all);
}

#[test]
fn a_checkpoint_supersedes_the_segments_entries() {
    let mut io = SimIo::new(SimConfig::default());
    io.create_dir(Path::new(DATA)).unwrap();
    let mut j = new_journal(&mut io);
    let mut parts = vec![Partition::new(&mut io, 0)];
    for _ in 0..3 {
        parts[0].append(5, 200);
        round(&mut io, &mut j, &mut parts);
    }
    assert_eq!(parts[0].w.journal_low(), Some(1));
    let sequence = parts[0].w.sequence();
    // Checkpoint: the ordinary round, pages + record + fdatasync.
    let d = parts[0].w.commit(&mut io).unwrap();
    assert_eq!(d.data_len as usize, parts[0].all.len());
    assert_eq!(parts[0].w.journal_low(), None);
    let after = io.crash(3);
    let image = after
        .file_bytes(&segment::log_path(&parts[0].dir, Offset(0)))
        .unwrap();
    let at = |i: usize| {
        let start = parts[0].w.slot_position(i) as usize;
        &image[start..start + COMMIT_SLOT_SIZE_BYTES]
    };
    let record = CommitRecord::newest([at(0), at(1)]).unwrap();
    assert_eq!(record.data_len as usize, parts[0].all.len());
    assert_eq!(record.segment_id, parts[0].w.segment_id());
    assert_eq!(
        record.sequence,
        sequence + 1,
        "entries 1..=3 followed the older record"
    );
    let mut durable =
        image[..segment::commit_record::page_floor(record.data_len) as usize].to_vec();
    durable.extend_from_slice(&record.tail);
    assert_eq!(durable, parts[0].all);
}

/// The journal's bytes on `io`.
fn journal_file(io: &SimIo) -> Vec<u8> {
    io.file_bytes(&Path::new(DATA).join(journal::file_name(0)))
        .unwrap()
        .to_vec()
}

/// Every entry of a journal's chain, with its block's lsn.
fn replay_entries(file: &[u8]) -> Vec<ReplayEntry<'_>> {
    read_chain(file)
        .unwrap()
        .blocks
        .into_iter()
        .flat_map(|b| {
            let lsn = b.lsn;
            b.entries
                .into_iter()
                .map(move |entry| ReplayEntry { lsn, entry })
        })
        .collect()
}

/// The segment's durable bytes as its newest commit record describes them.
fn durable_image(io: &SimIo, w: &SegmentWriter, dir: &Path) -> Vec<u8> {
    let image = io.file_bytes(&segment::log_path(dir, Offset(0))).unwrap();
    let at = |i: usize| {
        let start = w.slot_position(i) as usize;
        &image[start..start + COMMIT_SLOT_SIZE_BYTES]
    };
    let record = CommitRecord::newest([at(0), at(1)]).unwrap();
    let mut durable =
        image[..segment::commit_record::page_floor(record.data_len) as usize].to_vec();
    durable.extend_from_slice(&record.tail);
    durable
}

#[test]
fn replaying_the_journal_restores_every_acknowledged_byte_into_the_segments() {
    let seed = common::seed("replaying_the_journal_restores");
    let mut rng = Rng(seed | 1);
    let (mut io, mut j) = seeded_sim(seed);
    let mut parts: Vec<Partition> = (0..8).map(|i| Partition::new(&mut io, i)).collect();
    for r in 0..10 {
        for p in &mut parts {
            // Now and then a large round for t-0: pages synced in the segment, tail inline.
            let (records, value) = if p.key == "t-0" && r % 4 == 3 {
                (300, 1000)
            } else {
                (1 + rng.below(20) as i64, 1 + rng.below(400) as usize)
            };
            p.append(records, value);
        }
        round(&mut io, &mut j, &mut parts);
    }
    // t-1 checkpoints half-way through more rounds: only its later entries replay.
    parts[1].w.commit(&mut io).unwrap();
    for _ in 0..3 {
        for p in &mut parts {
            p.append(2, 50);
        }
        round(&mut io, &mut j, &mut parts);
    }
    for model in [CrashModel::DropUnsynced, CrashModel::Torn] {
        let mut after = io.crash_with(seed, model);
        let file = journal_file(&after);
        let entries = replay_entries(&file);
        for p in &parts {
            let mine: Vec<ReplayEntry<'_>> = entries
                .iter()
                .filter(|r| r.entry.key == p.key)
                .copied()
                .collect();
            let replay = |io: &mut dyn Io| {
                replay_journal(
                    io,
                    &p.dir,
                    Offset(0),
                    CONFIG.segment_bytes,
                    &mine,
                    ReplaySync::Fdatasync,
                )
                .unwrap()
            };
            let first = replay(&mut after);
            assert_eq!(first.stopped, None, "{model:?} {}", p.key);
            assert_eq!(
                first.data_len,
                Some(p.all.len() as u64),
                "{model:?} {}",
                p.key
            );
            assert_eq!(
                durable_image(&after, &p.w, &p.dir),
                p.all,
                "{model:?} {}",
                p.key
            );
            if p.key == "t-1" {
                assert_eq!(first.applied, 3, "only the entries after its checkpoint");
            }
            let again = replay(&mut after);
            assert_eq!(again.applied, 0, "{model:?} {}: replayed twice", p.key);
            // And it survives another power cut: the replay synced.
            let durable = after.crash(seed ^ 1);
            assert_eq!(
                durable_image(&durable, &p.w, &p.dir),
                p.all,
                "{model:?} {}",
                p.key
            );
        }
    }
    // An entry that does not start at the durable end is a gap: nothing after it applies.
    let mut after = io.crash(seed);
    let file = after
        .file_bytes(&Path::new(DATA).join(journal::file_name(0)))
        .unwrap()
        .to_vec();
    let chain = read_chain(&file).unwrap();
    let gapped: Vec<ReplayEntry<'_>> = chain
        .blocks
        .iter()
        .skip(1)
        .flat_map(|b| {
            b.entries.iter().map(|e| ReplayEntry {
                lsn: b.lsn,
                entry: *e,
            })
        })
        .filter(|r| r.entry.key == "t-2")
        .collect();
    let r = replay_journal(
        &mut after,
        &parts[2].dir,
        Offset(0),
        CONFIG.segment_bytes,
        &gapped,
        ReplaySync::Fdatasync,
    )
    .unwrap();
    assert_eq!(r.applied, 0);
    assert!(r.stopped.unwrap().contains("not from the durable end"));
}

/// A wait in place (a roll, a truncation, a close) during a journal round whose block the shard
/// has not flushed: the segment makes the round durable on its own, and the block's later
/// completion changes nothing.
#[test]
fn a_commit_in_place_does_not_wait_for_the_journal() {
    let mut io = SimIo::new(SimConfig::default());
    io.create_dir(Path::new(DATA)).unwrap();
    let mut j = new_journal(&mut io);
    let mut p = Partition::new(&mut io, 0);
    p.append(40, 300);
    let started = p.w.start_journal_round(&mut io, &mut j, &p.key).unwrap();
    let JournalStart::Started { lsn, ops } = started else {
        panic!("{started:?}");
    };
    assert!(ops.is_empty(), "the full pages stay deferred in the buffer");
    // The commit in place writes them before its record: the power cut below keeps them.
    let d = p.w.commit(&mut io).unwrap();
    assert!(!p.w.has_deferred_pages());
    assert_eq!(d.data_len as usize, p.all.len());
    assert!(!p.w.round_in_flight());
    assert_eq!(durable_image(&io.crash(1), &p.w, &p.dir), p.all);
    assert!(matches!(
        j.start_flush(&mut io, 64).unwrap(),
        Flush::Started { .. }
    ));
    let mut done = Vec::new();
    while j.flushing() {
        io.complete(1, &mut done).unwrap();
        for c in done.drain(..) {
            j.on_completion(&mut io, c).unwrap();
        }
    }
    assert_eq!(p.w.on_journal_durable(lsn), None);
    assert_eq!(p.w.durable().data_len as usize, p.all.len());
}

/// Entries never outlive what superseded them: after a truncation (a newer record from the same
/// writer) and after the partition is deleted and created again (a new writer), replaying the
/// old entries, whose positions continue the new durable end, applies none of them.
#[test]
fn truncated_or_recreated_segments_take_no_older_entry() {
    let mut io = SimIo::new(SimConfig::default());
    io.create_dir(Path::new(DATA)).unwrap();
    let mut j = new_journal(&mut io);
    let mut parts = vec![Partition::new(&mut io, 0)];
    let mut ends = Vec::new();
    for _ in 0..3 {
        parts[0].append(5, 200);
        round(&mut io, &mut j, &mut parts);
        ends.push((parts[0].all.len() as u64, parts[0].w.next_offset()));
    }
    // Cut at the first round's end: the later entries start exactly there.
    let (cut, next) = ends[0];
    parts[0].w.truncate(&mut io, cut, next).unwrap();
    let mut after = io.crash(5);
    let file = journal_file(&after);
    let entries = replay_entries(&file);
    assert!(
        entries.iter().any(|r| r.entry.start == cut),
        "an entry continues the cut"
    );
    let r = replay_journal(
        &mut after,
        &parts[0].dir,
        Offset(0),
        CONFIG.segment_bytes,
        &entries,
        ReplaySync::Fdatasync,
    )
    .unwrap();
    assert_eq!((r.applied, r.data_len), (0, Some(cut)));
    assert_eq!(
        durable_image(&after, &parts[0].w, &parts[0].dir),
        parts[0].all[..cut as usize]
    );
    // The partition deleted and created again at the same path: a new writer, a new id.
    let dir = parts[0].dir.clone();
    let log = segment::log_path(&dir, Offset(0));
    mirrorlog::internals::io::run(&mut after, Op::Unlink { path: log }, &mut Vec::new())
        .unwrap()
        .result
        .unwrap();
    let fresh = SegmentWriter::create(&mut after, &dir, Offset(0), CONFIG, 0).unwrap();
    assert_ne!(fresh.segment_id(), parts[0].w.segment_id());
    let r = replay_journal(
        &mut after,
        &dir,
        Offset(0),
        CONFIG.segment_bytes,
        &entries,
        ReplaySync::Fdatasync,
    )
    .unwrap();
    assert_eq!(
        (r.applied, r.data_len),
        (0, Some(0)),
        "the new partition stays empty"
    );
}

#[test]
fn deferred_pages_leave_in_large_writes_each_once_and_read_back_all_along() {
    let seed = common::seed("deferred_pages_leave_in_large_writes");
    let mut rng = Rng(seed | 1);
    let (mut io, mut j) = seeded_sim(seed);
    let mut parts = vec![Partition::new(&mut io, 0)];
    let log = segment::log_path(&parts[0].dir, Offset(0));
    let slots_at = parts[0].w.slot_position(0);
    let mark = io.writes().len();
    let (mut rounds, mut with_pages) = (0, 0);
    while parts[0].all.len() < 3 << 20 {
        let p = &mut parts[0];
        p.append(1 + rng.below(20) as i64, 100 + rng.below(1500) as usize);
        let ops = start_round(&mut io, &mut j, p);
        rounds += 1;
        if !ops.is_empty() {
            with_pages += 1;
            // Their write is in flight: the deferred pages among them read from their copy
            // (the simulator applies a write only when it runs).
            let read = p.w.read_durable(&mut io, 0, p.acknowledged).unwrap();
            assert!(read == p.all[..p.acknowledged], "round {rounds}, in flight");
        }
        finish_rounds(&mut io, &mut j, &mut parts);
        let p = &mut parts[0];
        assert_eq!(p.acknowledged, p.all.len());
        let read = p.w.read_durable(&mut io, 0, p.all.len()).unwrap();
        assert!(read == p.all, "round {rounds}");
    }
    // Pages left a few times, in large writes, each page once.
    assert!(
        with_pages >= 4 && with_pages * 8 < rounds,
        "{with_pages} of {rounds}"
    );
    let mut pages: Vec<_> = io.writes()[mark..]
        .iter()
        .filter(|w| w.path == log && w.range.start < slots_at)
        .map(|w| w.range.clone())
        .collect();
    pages.sort_by_key(|r| r.start);
    assert_eq!(pages.len(), with_pages);
    for (i, r) in pages.iter().enumerate() {
        assert!(r.end - r.start > DEFERRED_PAGES_MAX_BYTES, "{r:?}");
        if i > 0 {
            assert_eq!(
                pages[i - 1].end,
                r.start,
                "each page written once, in order"
            );
        }
    }
    // Idle: the deferred pages hold the buffer until their write; then it can go back.
    let p = &mut parts[0];
    if !p.w.has_deferred_pages() {
        p.append(30, 400);
        start_round(&mut io, &mut j, p);
        finish_rounds(&mut io, &mut j, &mut parts);
    }
    let p = &mut parts[0];
    assert!(p.w.has_deferred_pages());
    assert!(!p.w.release_buffers(&mut io));
    let ops = p.w.start_page_write(&mut io).unwrap().unwrap();
    assert_eq!(ops.len(), 1);
    let read = p.w.read_durable(&mut io, 0, p.all.len()).unwrap();
    assert!(read == p.all, "while the idle write is in flight");
    let mut done = Vec::new();
    while p.w.round_in_flight() {
        io.complete(1, &mut done).unwrap();
        for c in done.drain(..) {
            if p.w.owns(&c) {
                let d = p.w.on_completion(c).unwrap();
                assert!(d.is_none_or(|d| d.data_len as usize == p.all.len()));
            }
        }
    }
    assert!(!p.w.has_deferred_pages());
    assert!(p.w.release_buffers(&mut io));
    let read = p.w.read_durable(&mut io, 0, p.all.len()).unwrap();
    assert!(read == p.all, "from the file");
    let written: u64 = io.writes()[mark..]
        .iter()
        .filter(|w| w.path == log && w.range.start < slots_at)
        .map(|w| w.range.end - w.range.start)
        .sum();
    assert_eq!(
        written,
        segment::commit_record::page_floor(p.all.len() as u64),
        "every full page written once"
    );
    // A power cut: nothing was synced in the segment; the journal rebuilds all of it.
    let mut after = io.crash(seed);
    let file = journal_file(&after);
    let entries = replay_entries(&file);
    let r = replay_journal(
        &mut after,
        &p.dir,
        Offset(0),
        CONFIG.segment_bytes,
        &entries,
        ReplaySync::Fdatasync,
    )
    .unwrap();
    assert_eq!(r.data_len, Some(p.all.len() as u64));
    assert!(
        durable_image(&after, &p.w, &p.dir) == p.all,
        "rebuilt from the journal"
    );
}
