//! The start-up check of file descriptors against the partition count, before the engine opens
//! anything: each partition holds a descriptor for its active segment and one per sealed
//! segment, and each roll takes one more; each connection holds one. A limit (`ulimit -n`, `RLIMIT_NOFILE`) too low for the
//! partitions the broker opened is refused at start with the figures, rather than met later
//! as failed rolls; one too low for `max.connections` as well is logged (new connections are
//! then refused by the kernel's `EMFILE` at accept, which the listener survives).

/// Descriptors kept free besides the partitions' rolls (files the broker writes, the admin
/// surface, the journal's rounds).
pub const RESERVE: u64 = 64;

/// Why descriptors could not be counted, or are too few.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FdBudgetError {
    /// `/proc/self/fd` or `/proc/self/limits` could not be read.
    #[error("reading {what}: {source}")]
    Proc {
        /// The file or directory.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// `/proc/self/limits` does not say the limit on open files.
    #[error("/proc/self/limits: {0}")]
    Limits(String),
    /// The limit is too low for the partitions the broker holds: the start is refused.
    #[error(
        "the open-file limit is {limit}, and {partitions} partitions need at least {needed} \
         ({open} open now, {segments} segment files, one more per partition for its next \
         roll, {RESERVE} in reserve): raise it (ulimit -n, LimitNOFILE=) to at least {advised}"
    )]
    TooLowToStart {
        /// The soft limit.
        limit: u64,
        /// Partitions held.
        partitions: u64,
        /// Descriptors they need.
        needed: u64,
        /// Descriptors open now.
        open: u64,
        /// Segment files.
        segments: u64,
        /// The limit advised (connections included).
        advised: u64,
    },
    /// No room for the partitions a creation would add.
    #[error(
        "the open-file limit is {limit}, {open} are open, and {new} more partitions need \
         {need}: raise it (ulimit -n, LimitNOFILE=) or create fewer partitions"
    )]
    NoRoom {
        /// The soft limit.
        limit: u64,
        /// Descriptors open now.
        open: u64,
        /// Partitions asked for.
        new: u64,
        /// Descriptors they need.
        need: u64,
    },
}

/// Descriptors this process has open now.
pub fn open_now() -> Result<u64, FdBudgetError> {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count() as u64)
        .map_err(|source| FdBudgetError::Proc {
            what: "/proc/self/fd",
            source,
        })
}

/// The soft limit on open descriptors (`None`: unlimited).
pub fn soft_limit() -> Result<Option<u64>, FdBudgetError> {
    let text =
        std::fs::read_to_string("/proc/self/limits").map_err(|source| FdBudgetError::Proc {
            what: "/proc/self/limits",
            source,
        })?;
    parse_limits(&text)
}

fn parse_limits(text: &str) -> Result<Option<u64>, FdBudgetError> {
    let line = text
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .ok_or_else(|| FdBudgetError::Limits("no \"Max open files\" line".into()))?;
    let soft = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()
        .ok_or_else(|| FdBudgetError::Limits("no soft limit for open files".into()))?;
    if soft == "unlimited" {
        return Ok(None);
    }
    soft.parse()
        .map(Some)
        .map_err(|_| FdBudgetError::Limits(format!("{soft:?} is not a number")))
}

/// Segment files (`*.log`) under the engine's directory `log_dir`: each is a descriptor the
/// open engine holds (a partition's active segment, and every sealed one's read handle).
pub fn segment_files(log_dir: &std::path::Path) -> u64 {
    let Ok(partitions) = std::fs::read_dir(log_dir) else {
        return 0; // a new data directory
    };
    let mut n = 0;
    for dir in partitions.flatten() {
        if let Ok(files) = std::fs::read_dir(dir.path()) {
            n += files
                .flatten()
                .filter(|f| f.file_name().to_string_lossy().ends_with(".log"))
                .count() as u64;
        }
    }
    n
}

/// What the check found for `partitions` with `segments` segment files, before the engine
/// opens them: `Err` refuses the start; `Ok(Some(warning))` is logged.
pub fn check(
    open: u64,
    limit: Option<u64>,
    (partitions, segments): (u64, u64),
    connections_max: u64,
) -> Result<Option<String>, FdBudgetError> {
    let Some(limit) = limit else {
        return Ok(None);
    };
    let needed = open + segments + partitions + RESERVE;
    if needed > limit {
        return Err(FdBudgetError::TooLowToStart {
            limit,
            partitions,
            needed,
            open,
            segments,
            advised: needed + connections_max,
        });
    }
    let with_connections = needed + connections_max;
    Ok((with_connections > limit).then(|| {
        format!(
            "the open-file limit is {limit}: {partitions} partitions and max.connections = \
             {connections_max} need {with_connections}; connections past {} will be refused",
            limit - needed
        )
    }))
}

/// Whether `new` more partitions fit in the open-file limit now: each holds a descriptor for its
/// active segment and needs one more for its next roll. A creation past it is refused before
/// anything is written, instead of failing half-way with `EMFILE` and leaving a half-made topic.
pub fn room_for(new: u64) -> Result<(), FdBudgetError> {
    let Some(limit) = soft_limit()? else {
        return Ok(());
    };
    let open = open_now()?;
    let need = 2 * new + RESERVE;
    if open + need > limit {
        return Err(FdBudgetError::NoRoom {
            limit,
            open,
            new,
            need,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_read_and_checked() {
        let text = "Limit                     Soft Limit           Hard Limit           Units\n\
                    Max open files            1024                 524288               files\n";
        assert_eq!(parse_limits(text).unwrap(), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_limits(unlimited).unwrap(), None);
        assert!(parse_limits("nothing\n").is_err());
        let refused = check(20, Some(1024), (1000, 1000), 10).unwrap_err();
        assert!(
            matches!(
                refused,
                FdBudgetError::TooLowToStart {
                    needed: 2084,
                    advised: 2094,
                    ..
                }
            ),
            "{refused}"
        );
        assert!(refused.to_string().contains("at least 2094"));
        assert!(check(20, Some(1024), (100, 100), 10).unwrap().is_none());
        assert!(check(20, Some(1024), (100, 100), 10_000)
            .unwrap()
            .unwrap()
            .contains("refused"));
        assert!(check(20, None, (1 << 30, 1 << 30), 10).unwrap().is_none());
    }
}
