//! The producer state manager (PSM) of one partition, with Kafka 3.x semantics (design.md §Producer state).
//!
//! Contract:
//! - An append is first *staged*: [`ProducerStateManager::stage`] validates every batch against
//!   the rules of its [`Origin`] and computes the resulting producer entries, open and completed
//!   transactions in a scratch overlay. Observable state does not change. A rejected append returns
//!   the first broken rule and leaves nothing behind. [`ProducerStateManager::apply`] then makes
//!   the staged result the state in one step.
//! - A barrier batch clears every producer entry and all open-transaction tracking iff the
//!   caller's rule says its offset lies in a Local range (the mode history lives in the log); the
//!   table clear is constant time. Later batches of the same append see the cleared state.
//! - Duplicates (Client origin, single-batch appends, as Kafka clients send): a batch whose epoch
//!   and sequence range equal one of the producer's last five batches is reported with the
//!   original offsets and changes nothing.
//! - Completed transactions carry Kafka's `lastStableOffset`, computed once the whole append is
//!   applied; aborted ones become `.txnindex` entries ([`AbortedTxn`]).
//!
//! Storage: producer entries live in [`table::Table`], an open-addressing table with 4-byte
//! buckets over two dense columns, a 64-byte hot slot (one cache line, all an append reads) and
//! 48 bytes of older history (see its docs for the memory arithmetic); open transactions live
//! in a second table plus an offset-ordered vector.
//!
//! Files: `origin.rs` (origins, `BatchInfo`), `config.rs`, `stage.rs` (validation into reusable
//! scratch), `rules.rs` (Kafka's `ProducerAppendInfo` rules), `apply.rs`, `manager.rs` (lookups,
//! clear, expiration, snapshot, invariants), `view.rs`, `table.rs`, `entry.rs`, `txn.rs`,
//! `snapshot.rs` (Kafka's `.snapshot` codec), `error.rs`.

mod apply;
mod config;
mod entry;
mod error;
mod manager;
mod origin;
mod rules;
mod snapshot;
mod stage;
pub mod table;
mod txn;
mod view;

pub use config::{ProducerStateConfig, PRODUCER_ID_EXPIRATION_MS_DEFAULT};
pub use entry::{BatchHistory, BatchMetadata, ProducerEntry, BATCH_HISTORY_LEN};
pub use error::ProducerStateError;
pub use manager::ProducerStateManager;
pub use origin::{BatchInfo, Origin};
use rules::{check_data, stage_data, stage_marker, Current};
pub use snapshot::{
    decode_snapshot, encode_snapshot, snapshot_file_name, SnapshotError, SNAPSHOT_ENTRY_SIZE_BYTES,
    SNAPSHOT_HEADER_SIZE_BYTES, SNAPSHOT_VERSION,
};
pub use stage::Staged;
use stage::{Pending, PendingIndex, StagedOne, Staging};
pub use txn::{
    decode_txn_index, AbortedTxn, AbortedTxnError, CompletedTxn, ABORTED_TXN_SIZE_BYTES,
    ABORTED_TXN_VERSION,
};
pub use view::ProducerView;

use entry::{ColdHistory, HotEntry, PackedEntry};
use table::{Table, ENTRIES_MAX};
use txn::OpenTxns;
