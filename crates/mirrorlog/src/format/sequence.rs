//! Producer sequence arithmetic with Kafka's wrap-around.
//!
//! Sequences are non-negative `i32`s. After `i32::MAX` comes `0` (not `i32::MIN`), so a batch whose
//! `baseSequence` is near `i32::MAX` may end at a small last sequence. Every function here works in
//! that ring of size `2^31`.
//!
//! Worked example: `increment(i32::MAX - 1, 3)`: `MAX - 1 → MAX → 0 → 1`, so the result is `1`.

/// Number of distinct sequences: `0..=i32::MAX`.
const SEQUENCE_RING_SIZE: i64 = i32::MAX as i64 + 1;

/// `sequence + by` in the sequence ring. `sequence` must be non-negative; `by` may be any `i32`
/// (a `lastOffsetDelta` is at most `i32::MAX`).
#[must_use]
pub fn increment(sequence: i32, by: i32) -> i32 {
    debug_assert!(sequence >= 0, "sequence {sequence} is negative");
    let sum = (i64::from(sequence) + i64::from(by)).rem_euclid(SEQUENCE_RING_SIZE);
    // rem_euclid by 2^31 leaves a value in 0..2^31, which fits an i32.
    sum as i32
}

/// `sequence - by` in the sequence ring (`0 - 1` is `i32::MAX`).
#[must_use]
pub fn decrement(sequence: i32, by: i32) -> i32 {
    debug_assert!(sequence >= 0, "sequence {sequence} is negative");
    let difference = (i64::from(sequence) - i64::from(by)).rem_euclid(SEQUENCE_RING_SIZE);
    difference as i32
}

/// The last sequence of a batch that starts at `base_sequence` and spans `last_offset_delta`.
#[must_use]
pub fn last_sequence(base_sequence: i32, last_offset_delta: i32) -> i32 {
    increment(base_sequence, last_offset_delta)
}

/// Whether `next` directly follows `last` (Kafka's `inSequence`): `next == last + 1`, or `0`
/// after `i32::MAX`. With no last sequence (`last == -1`) only `0` follows.
#[must_use]
pub fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increment_wraps_after_max_to_zero() {
        assert_eq!(increment(i32::MAX, 1), 0);
        assert_eq!(increment(i32::MAX - 1, 3), 1);
        assert_eq!(increment(5, 0), 5);
        assert_eq!(increment(0, i32::MAX), i32::MAX);
    }

    #[test]
    fn decrement_wraps_below_zero_to_max() {
        assert_eq!(decrement(0, 1), i32::MAX);
        assert_eq!(decrement(1, 3), i32::MAX - 1);
        assert_eq!(decrement(10, 4), 6);
    }

    #[test]
    fn in_sequence_follows_the_ring() {
        assert!(in_sequence(i32::MAX, 0));
        assert!(in_sequence(4, 5));
        assert!(!in_sequence(4, 6));
        assert!(!in_sequence(4, 4));
        assert!(!in_sequence(i32::MAX, i32::MIN));
        assert!(
            in_sequence(-1, 0),
            "a producer with no last sequence starts at 0"
        );
        assert!(!in_sequence(-1, 1));
    }

    #[test]
    fn last_sequence_matches_kafka_examples() {
        // A 10-record batch starting two below MAX ends at 7: MAX-2, MAX-1, MAX, 0, ..., 6.
        assert_eq!(last_sequence(i32::MAX - 2, 9), 6);
        assert_eq!(last_sequence(0, 0), 0);
    }

    #[test]
    fn increment_and_decrement_are_inverse() {
        for &(s, by) in &[(0, 1), (i32::MAX, 7), (123, i32::MAX), (i32::MAX, i32::MAX)] {
            assert_eq!(decrement(increment(s, by), by), s);
        }
    }
}
