//! The consumer protocol's subscription, as the classic group coordinator reads it: a member's
//! JoinGroup metadata for protocol type `consumer` starts with a version (`i16`) and the topics
//! subscribed (`[string]`), the prefix every version shares (Kafka parses it with version 0's
//! schema for the same reason). Used to know which topics a group consumes (OffsetDelete's
//! `GROUP_SUBSCRIBED_TO_TOPIC`).

/// The topics of a subscription, or `None` when the bytes do not parse.
pub fn subscribed_topics(metadata: &[u8]) -> Option<Vec<String>> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if b.len() < n {
            return None;
        }
        let (head, rest) = b.split_at(n);
        *b = rest;
        Some(head)
    }
    let mut b = metadata;
    let version = i16::from_be_bytes(take(&mut b, 2)?.try_into().ok()?);
    if version < 0 {
        return None;
    }
    let count = i32::from_be_bytes(take(&mut b, 4)?.try_into().ok()?);
    let count = usize::try_from(count).ok()?;
    let mut topics = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let n = i16::from_be_bytes(take(&mut b, 2)?.try_into().ok()?);
        let n = usize::try_from(n).ok()?;
        topics.push(String::from_utf8(take(&mut b, n)?.to_vec()).ok()?);
    }
    Some(topics)
}

/// A subscription's bytes (version 0: topics, no user data).
#[cfg(test)]
pub fn subscription(topics: &[&str]) -> Vec<u8> {
    let mut out = vec![0, 0];
    out.extend_from_slice(&i32::try_from(topics.len()).unwrap_or(0).to_be_bytes());
    for t in topics {
        out.extend_from_slice(&i16::try_from(t.len()).unwrap_or(0).to_be_bytes());
        out.extend_from_slice(t.as_bytes());
    }
    // user_data: null.
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_parses_and_garbage_does_not() {
        let b = subscription(&["a", "bc"]);
        assert_eq!(subscribed_topics(&b), Some(vec!["a".into(), "bc".into()]));
        // A newer version's extra fields follow the shared prefix and are ignored.
        let mut v3 = b.clone();
        v3[1] = 3;
        v3.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(subscribed_topics(&v3), Some(vec!["a".into(), "bc".into()]));
        for cut in 0..8 {
            assert_eq!(subscribed_topics(&b[..cut]), None, "cut at {cut}");
        }
        assert_eq!(subscribed_topics(&[0, 0, 0x7f, 0xff, 0xff, 0xff]), None);
    }
}
