//! The broker's own durable state under `DATA_DIR/broker/`: JSON documents replaced whole and
//! durably (`store.rs`), the topic registry (`topics.rs`, one file per topic), secrets sealed at
//! rest (`secrets.rs`), what did not load at start and its ways out (`damage.rs`), and the
//! open-file budget partitions are checked against (`fd_budget.rs`).

pub mod damage;
pub mod fd_budget;
pub mod secrets;
pub mod store;
pub mod topics;
