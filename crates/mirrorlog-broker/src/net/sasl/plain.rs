//! PLAIN (RFC 4616): one message, `authzid NUL authcid NUL password`, as Kafka's
//! `PlainSaslServer` reads it (an authorization id other than the user name is refused).

use super::SaslError;

/// The client's one message.
pub fn message(username: &str, password: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(username.len() + password.len() + 2);
    m.push(0);
    m.extend_from_slice(username.as_bytes());
    m.push(0);
    m.extend_from_slice(password.as_bytes());
    m
}

/// The user name and password of a client's message.
///
/// # Errors
/// Not three NUL-separated UTF-8 fields, an empty user name or password, or an authorization
/// id that is not the user name.
pub fn parse(message: &[u8]) -> Result<(String, String), SaslError> {
    let malformed = |why: &str| SaslError::Malformed(format!("PLAIN: {why}"));
    let text = std::str::from_utf8(message).map_err(|_| malformed("not UTF-8"))?;
    let mut fields = text.split('\0');
    let (Some(authzid), Some(user), Some(password), None) =
        (fields.next(), fields.next(), fields.next(), fields.next())
    else {
        return Err(malformed("not authzid NUL user NUL password"));
    };
    if user.is_empty() || password.is_empty() {
        return Err(malformed("an empty user name or password"));
    }
    if !authzid.is_empty() && authzid != user {
        return Err(SaslError::Refused(format!(
            "the authorization id {authzid:?} is not the user name {user:?}"
        )));
    }
    Ok((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        assert_eq!(
            parse(&message("alice", "pw")).unwrap(),
            ("alice".to_string(), "pw".to_string())
        );
        assert!(parse(b"alice\0alice\0pw").is_ok());
        assert!(parse(b"bob\0alice\0pw").is_err());
        assert!(parse(b"\0alice").is_err());
        assert!(parse(b"\0\0pw").is_err());
        assert!(parse(b"\0a\0b\0c").is_err());
        assert!(parse(&[0, b'a', 0, 0xff]).is_err());
    }
}
