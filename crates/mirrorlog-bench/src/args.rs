//! The benchmark's command line: the workloads, their sizes and the sides' I/O, and the sizes
//! every workload shares (a fetch, a mirrored batch).

use mirrorlog::internals::io::FileCaching;
use std::path::PathBuf;

/// The hidden flag that runs the process as the `partitions` workload's writer child.
pub(crate) const WRITER_CHILD_FLAG: &str = "--partitions-writer-child";

pub(crate) const WORKLOADS: [&str; 15] = [
    "mirror-ingest",
    "mirror-wide",
    "produce",
    "hot-partitions",
    "partitions",
    "restart",
    "recovery",
    "failover",
    "tail-read",
    "catch-up",
    "compaction",
    "producer-state",
    "broker",
    "broker-mirror",
    "groups",
];
pub(crate) const FETCH_BYTES: usize = 1 << 20;
pub(crate) const MIRROR_BATCH_BYTES: usize = 16 << 10;

pub(crate) struct Args {
    pub(crate) workloads: Vec<String>,
    pub(crate) dir: Option<PathBuf>,
    pub(crate) keep: bool,
    pub(crate) json: Option<PathBuf>,
    pub(crate) svg: Option<PathBuf>,
    pub(crate) seconds: f64,
    pub(crate) partitions: usize,
    pub(crate) callers: usize,
    pub(crate) recovery_mib: u64,
    pub(crate) producers: usize,
    pub(crate) caching: FileCaching,
    pub(crate) keep_going: bool,
    pub(crate) segment_mib: Option<u64>,
    pub(crate) wide_partitions: usize,
    pub(crate) restart_gib: u64,
    /// `--compaction-mib`: the compaction workload's log.
    pub(crate) compaction_mib: u64,
    /// `journal.bytes` of every engine the workloads open (`--journal-mib`; 0: none).
    pub(crate) journal_bytes: u64,
    /// Run as `partitions`' writer child (hidden): its directory and partition count.
    pub(crate) writer_child: Option<(PathBuf, usize)>,
}

pub(crate) fn usage() -> String {
    format!(
        "usage: mirrorlog-bench [WORKLOAD...] [--dir DIR] [--keep] [--json FILE] [--svg FILE]\n\
         \x20                      [--seconds S] [--partitions P] [--callers N] [--recovery-mib M]\n\
         \x20                      [--producers N] [--segment-mib M] [--journal-mib M] [--page-cache]\n\
         \x20                      [--compaction-mib M]\n\
         \x20                      [--keep-going]\n\
         --keep-going: report failed calls and go on (the run fails on any error otherwise)\n\
         --segment-mib: the segment size of the I/O workloads (every side's files alike)\n\
         --journal-mib: each shard's journal (default 128; 0: none, every round syncs its own file)\n\
         --page-cache: every side (ours and the baselines) without O_DIRECT, for filesystems\n\
         \x20             that refuse it; the figures are then not comparable with O_DIRECT runs\n\
         workloads: {} (default: all)",
        WORKLOADS.join(", ")
    )
}

pub(crate) fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        workloads: Vec::new(),
        dir: None,
        keep: false,
        json: None,
        svg: None,
        seconds: 3.0,
        partitions: 16,
        callers: 32,
        recovery_mib: 1024,
        producers: 100_000,
        caching: FileCaching::Direct,
        keep_going: false,
        segment_mib: None,
        wide_partitions: 10_000,
        restart_gib: 8,
        compaction_mib: 1024,
        writer_child: None,
        journal_bytes: mirrorlog::engine::JOURNAL_BYTES_DEFAULT,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        if arg == WRITER_CHILD_FLAG {
            let dir = it.next().ok_or("the writer child needs a directory")?;
            let n = it
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or("the writer child needs a partition count")?;
            for extra in it.by_ref() {
                match extra.as_str() {
                    "--page-cache" => a.caching = FileCaching::PageCache,
                    mib => {
                        a.journal_bytes = mib.parse::<u64>().map_err(|e| e.to_string())? << 20;
                    }
                }
            }
            a.writer_child = Some((dir.into(), n));
            return Ok(a);
        }
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--dir" => a.dir = Some(value("--dir")?.into()),
            "--keep" => a.keep = true,
            "--page-cache" => a.caching = FileCaching::PageCache,
            "--keep-going" => a.keep_going = true,
            "--segment-mib" => {
                a.segment_mib = Some(
                    value("--segment-mib")?
                        .parse()
                        .ok()
                        .filter(|&m: &u64| (1..=1024).contains(&m))
                        .ok_or("--segment-mib takes 1..=1024")?,
                );
            }
            "--wide-partitions" => {
                a.wide_partitions = value("--wide-partitions")?
                    .parse()
                    .ok()
                    .filter(|&p: &usize| (1..=100_000).contains(&p))
                    .ok_or("--wide-partitions takes 1..=100000")?;
            }
            "--journal-mib" => {
                let mib: u64 = value("--journal-mib")?
                    .parse()
                    .ok()
                    .filter(|&m: &u64| m == 0 || (1..=65_536).contains(&m))
                    .ok_or("--journal-mib takes 0 (no journal) or 1..=65536")?;
                a.journal_bytes = mib << 20;
            }
            "--restart-gib" => {
                a.restart_gib = value("--restart-gib")?
                    .parse()
                    .ok()
                    .filter(|&g: &u64| (1..=1024).contains(&g))
                    .ok_or("--restart-gib takes 1..=1024")?;
            }
            "--compaction-mib" => {
                a.compaction_mib = value("--compaction-mib")?
                    .parse()
                    .ok()
                    .filter(|&m: &u64| (16..=1 << 20).contains(&m))
                    .ok_or("--compaction-mib takes 16..=1048576")?;
            }
            "--json" => a.json = Some(value("--json")?.into()),
            "--svg" => a.svg = Some(value("--svg")?.into()),
            "--seconds" => {
                a.seconds = value("--seconds")?
                    .parse()
                    .ok()
                    .filter(|&s: &f64| s > 0.0 && s <= 3600.0)
                    .ok_or("--seconds takes a number in (0, 3600]")?;
            }
            "--partitions" => {
                a.partitions = value("--partitions")?
                    .parse()
                    .ok()
                    .filter(|&p: &usize| (1..=4096).contains(&p))
                    .ok_or("--partitions takes 1..=4096")?;
            }
            "--callers" => {
                a.callers = value("--callers")?
                    .parse()
                    .ok()
                    .filter(|&n: &usize| (1..=1024).contains(&n))
                    .ok_or("--callers takes 1..=1024")?;
            }
            "--recovery-mib" => {
                a.recovery_mib = value("--recovery-mib")?
                    .parse()
                    .ok()
                    .filter(|&m: &u64| (16..=1 << 20).contains(&m))
                    .ok_or("--recovery-mib takes 16..=1048576")?;
            }
            "--producers" => {
                a.producers = value("--producers")?
                    .parse()
                    .ok()
                    .filter(|&n: &usize| (1..=10_000_000).contains(&n))
                    .ok_or("--producers takes 1..=10000000")?;
            }
            "-h" | "--help" => return Err(usage()),
            w if WORKLOADS.contains(&w) => a.workloads.push(w.to_string()),
            other => return Err(format!("unknown argument {other:?}\n{}", usage())),
        }
    }
    if a.workloads.is_empty() {
        a.workloads = WORKLOADS.iter().map(|s| s.to_string()).collect();
    }
    Ok(a)
}
