//! Bytes on the network: Kafka's framing and envelopes (`wire.rs`), every field of every served
//! request (`fields.rs`), TLS (`tls.rs`) and SASL (`sasl/`) for both ends, the connection
//! limits (`connection_limits.rs`), the accept loops' backoff (`accept_backoff.rs`), the bound
//! on requests served at once (`request_queue.rs`), and the client the mirrors fetch with
//! (`client.rs`).

pub mod accept_backoff;
pub mod client;
pub mod connection_limits;
pub mod fields;
pub mod request_queue;
pub mod sasl;
pub mod tls;
pub mod wire;
