//! SCRAM (RFC 5802, with SHA-256 and SHA-512 as RFC 7677 and Kafka's KIP-84 use it): the stored
//! credential, the client's two messages and its check of the server, and the server's side.
//!
//! Messages are parsed strictly (attribute order and names as the RFC's grammar has them); a
//! message that does not parse is a failed exchange with the reason, never a panic. The server
//! never says whether a user exists: an unknown user is given a salt derived from the name, as a
//! real one is, and fails at the proof, as a wrong password does.

use super::{Mechanism, SaslError};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ring::{digest, hmac, pbkdf2};
use std::num::NonZeroU32;

/// Iterations a SCRAM credential has at least (Kafka's `ScramMechanism` minimum); a server
/// asking fewer is refused by the client.
pub const ITERATIONS_MIN: u32 = 4096;
/// Iterations at most (Kafka's bound on a stored credential); a server asking more is refused
/// (each costs the client time, so an unbounded count is a way to stall it).
pub const ITERATIONS_MAX: u32 = 16384;
/// Bytes of random nonce each side adds.
const NONCE_BYTES: usize = 24;
/// Bytes of a salt made here.
pub const SALT_BYTES: usize = 32;

fn hmac_alg(m: Mechanism) -> hmac::Algorithm {
    match m {
        Mechanism::ScramSha512 => hmac::HMAC_SHA512,
        Mechanism::ScramSha256 | Mechanism::Plain => hmac::HMAC_SHA256,
    }
}

fn hmac(m: Mechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac_alg(m), key), data)
        .as_ref()
        .to_vec()
}

fn hash(m: Mechanism, data: &[u8]) -> Vec<u8> {
    let alg = match m {
        Mechanism::ScramSha512 => &digest::SHA512,
        Mechanism::ScramSha256 | Mechanism::Plain => &digest::SHA256,
    };
    digest::digest(alg, data).as_ref().to_vec()
}

fn salted_password(m: Mechanism, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    let alg = match m {
        Mechanism::ScramSha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        Mechanism::ScramSha256 | Mechanism::Plain => pbkdf2::PBKDF2_HMAC_SHA256,
    };
    let mut out = vec![0u8; hmac_alg(m).digest_algorithm().output_len()];
    let n = NonZeroU32::new(iterations.max(1)).unwrap_or(NonZeroU32::MIN);
    pbkdf2::derive(alg, n, salt, password.as_bytes(), &mut out);
    out
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

/// Equal, in time that does not depend on where they differ.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Random bytes from the system.
pub fn random<const N: usize>() -> [u8; N] {
    use ring::rand::SecureRandom;
    let mut b = [0u8; N];
    // The system generator fails only when the kernel cannot give randomness at all; the
    // nonces then still differ per exchange by the clock, and a salt made so is still unique.
    if ring::rand::SystemRandom::new().fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        for (i, x) in b.iter_mut().enumerate() {
            *x = (t >> ((i % 16) * 8)) as u8;
        }
    }
    b
}

fn nonce() -> String {
    B64.encode(random::<NONCE_BYTES>())
}

/// What a server keeps of a password for one mechanism (RFC 5802's StoredKey and ServerKey):
/// enough to check a proof, not enough to make one.
#[derive(Clone)]
pub struct Credential {
    /// The salt.
    pub salt: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: u32,
    /// H(ClientKey).
    pub stored_key: Vec<u8>,
    /// HMAC(SaltedPassword, "Server Key").
    pub server_key: Vec<u8>,
}

impl Credential {
    /// The credential of `password` with `salt`.
    pub fn derive(m: Mechanism, password: &str, salt: &[u8], iterations: u32) -> Self {
        let salted = salted_password(m, password, salt, iterations);
        let client_key = hmac(m, &salted, b"Client Key");
        Credential {
            salt: salt.to_vec(),
            iterations,
            stored_key: hash(m, &client_key),
            server_key: hmac(m, &salted, b"Server Key"),
        }
    }

    /// Whether `password` is the one this credential was made from.
    pub fn matches(&self, m: Mechanism, password: &str) -> bool {
        let salted = salted_password(m, password, &self.salt, self.iterations);
        same(&hash(m, &hmac(m, &salted, b"Client Key")), &self.stored_key)
    }
}

/// A user name as SCRAM writes it (`,` and `=` escaped).
fn escape(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

fn unescape(name: &str) -> Result<String, SaslError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(malformed("a user name with a bad '=' escape")),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The value of attribute `name` (`name=value`), which must be `part`.
fn attr(part: Option<&str>, name: char) -> Result<&str, SaslError> {
    let p = part.ok_or_else(|| malformed(&format!("the message lacks its '{name}=' attribute")))?;
    let mut chars = p.chars();
    if chars.next() != Some(name) || chars.next() != Some('=') {
        return Err(malformed(&format!(
            "expected '{name}=', found {:?}",
            clip(p)
        )));
    }
    Ok(&p[2..])
}

fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}

fn malformed(why: &str) -> SaslError {
    SaslError::Malformed(format!("SCRAM: {why}"))
}

fn text(bytes: &[u8]) -> Result<&str, SaslError> {
    std::str::from_utf8(bytes).map_err(|_| malformed("not UTF-8"))
}

fn decode64(what: &str, v: &str) -> Result<Vec<u8>, SaslError> {
    B64.decode(v)
        .map_err(|_| malformed(&format!("{what} is not base64")))
}

/// The client's side of one exchange.
pub struct Client {
    mechanism: Mechanism,
    password: String,
    first_bare: String,
    nonce: String,
    expected_server_signature: Option<Vec<u8>>,
}

impl Client {
    /// Starts an exchange for `username`; `first` is the message to send.
    pub fn new(mechanism: Mechanism, username: &str, password: &str) -> (Self, Vec<u8>) {
        Self::with_nonce(mechanism, username, password, nonce())
    }

    fn with_nonce(
        mechanism: Mechanism,
        username: &str,
        password: &str,
        nonce: String,
    ) -> (Self, Vec<u8>) {
        let first_bare = format!("n={},r={nonce}", escape(username));
        let first = format!("n,,{first_bare}").into_bytes();
        let c = Client {
            mechanism,
            password: password.to_string(),
            first_bare,
            nonce,
            expected_server_signature: None,
        };
        (c, first)
    }

    /// The client-final message for the server-first one.
    ///
    /// # Errors
    /// The server's message does not parse, does not extend our nonce, or asks an iteration
    /// count outside [`ITERATIONS_MIN`]..=[`ITERATIONS_MAX`].
    pub fn final_message(&mut self, server_first: &[u8]) -> Result<Vec<u8>, SaslError> {
        let server_first = text(server_first)?;
        let mut parts = server_first.split(',');
        let first = parts.next();
        if first.is_some_and(|p| p.starts_with("m=")) {
            return Err(SaslError::FeatureNotServed("a mandatory SCRAM extension"));
        }
        let nonce = attr(first, 'r')?;
        let salt = decode64("the salt", attr(parts.next(), 's')?)?;
        let iterations: u32 = attr(parts.next(), 'i')?
            .parse()
            .map_err(|_| malformed("the iteration count is not a number"))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(SaslError::Server("its nonce does not extend ours".into()));
        }
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&iterations) {
            return Err(SaslError::Server(format!(
                "it asks {iterations} iterations (accepted: {ITERATIONS_MIN}..={ITERATIONS_MAX})"
            )));
        }
        let m = self.mechanism;
        let salted = salted_password(m, &self.password, &salt, iterations);
        let client_key = hmac(m, &salted, b"Client Key");
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.first_bare);
        let signature = hmac(m, &hash(m, &client_key), auth_message.as_bytes());
        let proof = xor(&client_key, &signature);
        let server_key = hmac(m, &salted, b"Server Key");
        self.expected_server_signature = Some(hmac(m, &server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message: the server proved it holds our credential.
    ///
    /// # Errors
    /// The server reports an error (`e=`), or its signature is not the one expected.
    pub fn check_final(&self, server_final: &[u8]) -> Result<(), SaslError> {
        let server_final = text(server_final)?;
        if let Some(e) = server_final.strip_prefix("e=") {
            return Err(SaslError::Server(format!("refused: {}", clip(e))));
        }
        let v = attr(server_final.split(',').next(), 'v')?;
        let expected = self
            .expected_server_signature
            .as_deref()
            .ok_or(SaslError::OutOfTurn(
                "a server-final message before the server-first one",
            ))?;
        if same(&decode64("the server signature", v)?, expected) {
            Ok(())
        } else {
            Err(SaslError::Server(
                "its signature is wrong: it does not hold this user's credential".into(),
            ))
        }
    }
}

/// Where the server's side of one exchange stands.
pub enum Server {
    /// Waiting for the client-first message.
    First,
    /// Waiting for the client-final message.
    Final {
        /// The user named.
        user: String,
        /// Its credential (`None`: unknown, bound to fail at the proof).
        credential: Option<Credential>,
        /// The nonce agreed (the client's and ours).
        nonce: String,
        /// The client-first message's GS2 header, which the final one repeats.
        gs2_header: String,
        /// The client-first message without its header.
        first_bare: String,
        /// Our first message.
        server_first: String,
    },
    /// Over.
    Done,
}

/// What the listener does after a client's message.
pub enum ServerStep {
    /// Send this and wait for the next message.
    Continue(Vec<u8>),
    /// Logged in as `user`; send `last`.
    Done {
        /// The user name (Kafka's principal `User:NAME`).
        user: String,
        /// The last message.
        last: Vec<u8>,
    },
}

impl Server {
    /// Takes the next client message. `lookup` finds a user's credential; `decoy` gives the
    /// salt and iterations shown for an unknown user.
    ///
    /// # Errors
    /// Why the exchange failed (the client is told only that authentication failed).
    pub fn step(
        &mut self,
        m: Mechanism,
        message: &[u8],
        lookup: &dyn Fn(&str) -> Option<Credential>,
        decoy: &dyn Fn(&str) -> (Vec<u8>, u32),
    ) -> Result<ServerStep, SaslError> {
        let message = text(message)?;
        match std::mem::replace(self, Server::Done) {
            Server::First => {
                let (gs2_header, first_bare) = split_gs2(message)?;
                let mut parts = first_bare.split(',');
                let user = unescape(attr(parts.next(), 'n')?)?;
                let client_nonce = attr(parts.next(), 'r')?;
                if client_nonce.is_empty() || client_nonce.contains(',') {
                    return Err(malformed("an empty client nonce"));
                }
                // Extensions (KIP-84's `tokenauth` for delegation tokens among them).
                for ext in parts {
                    if ext.starts_with("tokenauth=") {
                        return Err(SaslError::FeatureNotServed("delegation tokens"));
                    }
                }
                if let Some(authzid) = gs2_header
                    .strip_prefix("n,a=")
                    .or(gs2_header.strip_prefix("y,a="))
                {
                    let authzid = unescape(authzid.trim_end_matches(','))?;
                    if authzid != user {
                        return Err(SaslError::Refused(format!(
                            "the authorization id {authzid:?} is not the user name {user:?}"
                        )));
                    }
                }
                let credential = lookup(&user);
                let (salt, iterations) = match &credential {
                    Some(c) => (c.salt.clone(), c.iterations),
                    None => decoy(&user),
                };
                let nonce = format!("{client_nonce}{}", self::nonce());
                let server_first = format!("r={nonce},s={},i={iterations}", B64.encode(salt));
                let out = server_first.clone().into_bytes();
                *self = Server::Final {
                    user,
                    credential,
                    nonce,
                    gs2_header: gs2_header.to_string(),
                    first_bare: first_bare.to_string(),
                    server_first,
                };
                Ok(ServerStep::Continue(out))
            }
            Server::Final {
                user,
                credential,
                nonce,
                gs2_header,
                first_bare,
                server_first,
            } => {
                let (without_proof, proof) = message
                    .rsplit_once(",p=")
                    .ok_or_else(|| malformed("the client-final message lacks its proof"))?;
                let mut parts = without_proof.split(',');
                let binding = decode64("the channel binding", attr(parts.next(), 'c')?)?;
                if binding != gs2_header.as_bytes() {
                    return Err(malformed(
                        "the channel binding does not repeat the first message's header",
                    ));
                }
                if attr(parts.next(), 'r')? != nonce {
                    return Err(malformed("the nonce is not the one agreed"));
                }
                let proof = decode64("the proof", proof)?;
                let auth_message = format!("{first_bare},{server_first},{without_proof}");
                let Some(credential) = credential else {
                    return Err(SaslError::Refused(format!("unknown user {user:?}")));
                };
                let signature = hmac(m, &credential.stored_key, auth_message.as_bytes());
                if proof.len() != signature.len()
                    || !same(&hash(m, &xor(&proof, &signature)), &credential.stored_key)
                {
                    return Err(SaslError::Refused(format!(
                        "wrong password for user {user:?}"
                    )));
                }
                let server_signature = hmac(m, &credential.server_key, auth_message.as_bytes());
                Ok(ServerStep::Done {
                    user,
                    last: format!("v={}", B64.encode(server_signature)).into_bytes(),
                })
            }
            Server::Done => Err(SaslError::OutOfTurn(
                "a SCRAM message after the exchange ended",
            )),
        }
    }
}

/// The GS2 header (`n,,` / `y,,` / `n,a=NAME,`) and the rest of a client-first message.
fn split_gs2(message: &str) -> Result<(&str, &str), SaslError> {
    if message.starts_with("p=") {
        return Err(SaslError::FeatureNotServed("channel binding"));
    }
    if !(message.starts_with("n,") || message.starts_with("y,")) {
        return Err(malformed(&format!(
            "a bad GS2 header in {:?}",
            clip(message)
        )));
    }
    let second_comma = message[2..]
        .find(',')
        .map(|i| i + 2)
        .ok_or_else(|| malformed("a client-first message without its GS2 header"))?;
    Ok((&message[..=second_comma], &message[second_comma + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3's example, byte for byte: both of our sides against the published
    /// exchange (user "user", password "pencil").
    #[test]
    fn rfc_7677_example() {
        let m = Mechanism::ScramSha256;
        let (mut c, first) = Client::with_nonce(m, "user", "pencil", "rOprNGfwEbeRWgbNEkqO".into());
        assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let fin = c.final_message(server_first).unwrap();
        assert_eq!(
            std::str::from_utf8(&fin).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        let server_final = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
        c.check_final(server_final).unwrap();
        assert!(c
            .check_final(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .is_err());

        // The server's side: given the same salt and the published nonce, it accepts the
        // published proof and answers the published signature.
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let cred = Credential::derive(m, "pencil", &salt, 4096);
        let mut s = Server::Final {
            user: "user".into(),
            credential: Some(cred),
            nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into(),
            gs2_header: "n,,".into(),
            first_bare: "n=user,r=rOprNGfwEbeRWgbNEkqO".into(),
            server_first: std::str::from_utf8(server_first).unwrap().into(),
        };
        let none = |_: &str| None;
        let decoy = |_: &str| (vec![0u8; 4], 4096);
        match s.step(m, &fin, &none, &decoy).unwrap() {
            ServerStep::Done { user, last } => {
                assert_eq!(user, "user");
                assert_eq!(last, server_final);
            }
            ServerStep::Continue(_) => panic!("the exchange should be over"),
        }
    }

    fn exchange(
        m: Mechanism,
        user: &str,
        stored_pw: &str,
        given_pw: &str,
    ) -> Result<String, SaslError> {
        let cred = Credential::derive(m, stored_pw, b"salt-salt-salt", 4096);
        let lookup = move |u: &str| (u == "alice,=x").then(|| cred.clone());
        let decoy = |u: &str| (hash(m, u.as_bytes()), 4096);
        let (mut c, first) = Client::new(m, user, given_pw);
        let mut s = Server::First;
        let ServerStep::Continue(server_first) = s.step(m, &first, &lookup, &decoy)? else {
            return Err(SaslError::OutOfTurn("over too soon"));
        };
        let fin = c.final_message(&server_first)?;
        match s.step(m, &fin, &lookup, &decoy)? {
            ServerStep::Done { user, last } => {
                c.check_final(&last)?;
                Ok(user)
            }
            ServerStep::Continue(_) => Err(SaslError::OutOfTurn("not over")),
        }
    }

    #[test]
    fn both_sides_agree_and_a_wrong_password_or_unknown_user_fails_the_same_way() {
        for m in [Mechanism::ScramSha256, Mechanism::ScramSha512] {
            assert_eq!(exchange(m, "alice,=x", "pw", "pw").unwrap(), "alice,=x");
            let wrong = exchange(m, "alice,=x", "pw", "pW").unwrap_err();
            assert!(
                matches!(&wrong, SaslError::Refused(r) if r.contains("wrong password")),
                "{wrong}"
            );
            let unknown = exchange(m, "bob", "pw", "pw").unwrap_err();
            assert!(
                matches!(&unknown, SaslError::Refused(r) if r.contains("unknown user")),
                "{unknown}"
            );
        }
    }

    #[test]
    fn a_client_refuses_a_server_that_does_not_extend_its_nonce_or_asks_too_many_iterations() {
        let m = Mechanism::ScramSha256;
        let (mut c, _) = Client::with_nonce(m, "u", "p", "abc".into());
        for refused in [
            &b"r=abc,s=AAAA,i=4096"[..],
            b"r=xyzabc,s=AAAA,i=4096",
            b"r=abcd,s=AAAA,i=1000000",
            b"r=abcd,s=AAAA,i=100",
        ] {
            assert!(matches!(
                c.final_message(refused),
                Err(SaslError::Server(_))
            ));
        }
        assert!(matches!(
            c.final_message(b"m=x,r=abcd,s=AAAA,i=4096"),
            Err(SaslError::FeatureNotServed(_))
        ));
        assert!(c.final_message(b"r=abcd,s=AAAA,i=4096").is_ok());
        assert!(matches!(
            c.check_final(b"e=invalid-proof"),
            Err(SaslError::Server(r)) if r.contains("invalid-proof")
        ));
    }

    proptest::proptest! {
        /// Any bytes, at either step: an answer or an error, never a panic.
        #[test]
        fn the_server_takes_any_bytes(a in proptest::collection::vec(proptest::num::u8::ANY, 0..80),
                                      b in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            let m = Mechanism::ScramSha256;
            let cred = Credential::derive(m, "pw", b"s", 4096);
            let lookup = move |_: &str| Some(cred.clone());
            let decoy = |_: &str| (vec![1], 4096);
            let mut s = Server::First;
            let _ = s.step(m, &a, &lookup, &decoy);
            let _ = s.step(m, &b, &lookup, &decoy);
            let mut s = Server::First;
            let _ = s.step(m, b"n,,n=u,r=abc", &lookup, &decoy);
            let _ = s.step(m, &b, &lookup, &decoy);
        }
    }
}
