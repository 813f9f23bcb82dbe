//! `mirrorlog dump`'s entry point on arbitrary bytes, under every file name it knows; the
//! first byte picks the name and the options.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mirrorlog::inspect::{dump_file, DumpOptions};

const NAMES: [&str; 10] = [
    "00000000000000000000.log",
    "00000000000000000007.index",
    "00000000000000000007.timeindex",
    "00000000000000000000.txnindex",
    "00000000000000000003.snapshot",
    "leader-epoch-checkpoint",
    "mirror-checkpoint",
    "mirror-mode",
    "log-start-offset",
    "partition.config",
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let options = DumpOptions {
        records: pick & 0x80 != 0,
        json: pick & 0x40 != 0,
        value_bytes_max: 16,
    };
    let _ = dump_file(NAMES[usize::from(pick) % NAMES.len()], bytes, &options);
});
