//! The PSM's settings, with Kafka's names and defaults.

/// Kafka's default `producer.id.expiration.ms`: one day.
pub const PRODUCER_ID_EXPIRATION_MS_DEFAULT: i64 = 86_400_000;

/// Settings of the PSM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerStateConfig {
    /// `producer.id.expiration.ms`.
    pub producer_id_expiration_ms: i64,
}

impl Default for ProducerStateConfig {
    fn default() -> Self {
        ProducerStateConfig {
            producer_id_expiration_ms: PRODUCER_ID_EXPIRATION_MS_DEFAULT,
        }
    }
}
