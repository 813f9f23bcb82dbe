//! Secrets at rest: the values of PASSWORD-type dynamic configs (`ssl.key.password`,
//! `sasl.jaas.config`, ...) are sealed before they reach the broker's files, as Kafka seals them
//! with `password.encoder.secret`, and never returned (DescribeConfigs answers them null).
//!
//! The key: with `password.encoder.secret` set, derived from it (PBKDF2-HMAC-SHA256, 4096
//! rounds, over a salt stored beside the key's check); otherwise 32 random bytes made at the
//! first start in `broker/password.key`, readable by the broker's user alone (0600). A sealed
//! value is `sealed:v1:` and base64 of a random 96-bit nonce and the AES-256-GCM ciphertext
//! with its tag, so a file copied elsewhere tells nothing, and one altered does not open.
//! The files that hold sealed values are written 0600 too.

use base64::Engine as _;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use std::path::Path;

/// What a sealed value starts with.
pub const SEALED_PREFIX: &str = "sealed:v1:";
/// The key file under the broker's directory.
pub const KEY_FILE: &str = "password.key";
/// PBKDF2 rounds for a key from `password.encoder.secret` (Kafka's default
/// `password.encoder.iterations`).
const PBKDF2_ROUNDS: u32 = 4096;
/// The salt of the key derived from `password.encoder.secret`: fixed per broker directory
/// (its file), so the same secret opens the same values.
const SALT_FILE: &str = "password.salt";
/// Key bytes (AES-256).
const KEY_BYTES: usize = 32;

/// The broker's key for sealing secrets.
pub struct SecretBox {
    key: LessSafeKey,
    random: SystemRandom,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(..)")
    }
}

/// Why a key could not be had, or a value not sealed or opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The key, salt or their directory could not be read or made.
    #[error("{}: {source}", path.display())]
    File {
        /// The file or directory.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A key or salt file of the wrong length.
    #[error("{}: not {bytes} bytes", path.display())]
    Length {
        /// The file.
        path: std::path::PathBuf,
        /// The length it must have.
        bytes: usize,
    },
    /// The system's random source or the cipher failed.
    #[error("{0} failed")]
    Crypto(&'static str),
    /// A sealed value that does not open: not sealed, altered, or sealed with another key.
    #[error("{0}")]
    Unopenable(&'static str),
}

fn file(path: &Path) -> impl FnOnce(std::io::Error) -> SecretError {
    let path = path.to_path_buf();
    move |source| SecretError::File { path, source }
}

/// Writes `bytes` to `path` readable by its owner alone (0600), durably.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Random bytes from the system's source.
fn random<const N: usize>(random: &SystemRandom) -> Result<[u8; N], SecretError> {
    let mut b = [0u8; N];
    random
        .fill(&mut b)
        .map_err(|_| SecretError::Crypto("the system's random source"))?;
    Ok(b)
}

/// Reads `path`, or makes it with `N` random bytes (0600) when it does not exist.
fn read_or_make<const N: usize>(path: &Path, rng: &SystemRandom) -> Result<[u8; N], SecretError> {
    match std::fs::read(path) {
        Ok(b) => b.try_into().map_err(|_| SecretError::Length {
            path: path.to_path_buf(),
            bytes: N,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let b = random::<N>(rng)?;
            write_private(path, &b).map_err(file(path))?;
            Ok(b)
        }
        Err(e) => Err(file(path)(e)),
    }
}

impl SecretBox {
    /// The key of the broker whose files are in `dir` (see the module docs).
    ///
    /// # Errors
    /// The key or salt file cannot be read or made.
    pub fn open(dir: &Path, encoder_secret: Option<&str>) -> Result<Self, SecretError> {
        let rng = SystemRandom::new();
        std::fs::create_dir_all(dir).map_err(file(dir))?;
        let key: [u8; KEY_BYTES] = match encoder_secret {
            Some(secret) => {
                let salt: [u8; 16] = read_or_make(&dir.join(SALT_FILE), &rng)?;
                let mut key = [0u8; KEY_BYTES];
                ring::pbkdf2::derive(
                    ring::pbkdf2::PBKDF2_HMAC_SHA256,
                    std::num::NonZeroU32::new(PBKDF2_ROUNDS).unwrap_or(std::num::NonZeroU32::MIN),
                    &salt,
                    secret.as_bytes(),
                    &mut key,
                );
                key
            }
            None => read_or_make(&dir.join(KEY_FILE), &rng)?,
        };
        let key = UnboundKey::new(&AES_256_GCM, &key)
            .map_err(|_| SecretError::Crypto("making the AES-256-GCM key"))?;
        Ok(SecretBox {
            key: LessSafeKey::new(key),
            random: rng,
        })
    }

    /// Whether `value` is already sealed.
    pub fn is_sealed(value: &str) -> bool {
        value.starts_with(SEALED_PREFIX)
    }

    /// `plain` sealed.
    ///
    /// # Errors
    /// The random source or the cipher failed.
    pub fn seal(&self, plain: &str) -> Result<String, SecretError> {
        let nonce: [u8; NONCE_LEN] = random(&self.random)?;
        let mut data = plain.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut data)
            .map_err(|_| SecretError::Crypto("sealing"))?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&data);
        Ok(format!(
            "{SEALED_PREFIX}{}",
            base64::engine::general_purpose::STANDARD.encode(out)
        ))
    }

    /// The plain value of a sealed one.
    ///
    /// # Errors
    /// Not sealed, altered, or sealed with another key.
    pub fn open_value(&self, sealed: &str) -> Result<String, SecretError> {
        use SecretError::Unopenable;
        let b64 = sealed
            .strip_prefix(SEALED_PREFIX)
            .ok_or(Unopenable("not a sealed value"))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| Unopenable("a sealed value that is not base64"))?;
        if bytes.len() < NONCE_LEN {
            return Err(Unopenable("a sealed value too short"));
        }
        let (nonce, rest) = bytes.split_at(NONCE_LEN);
        let nonce =
            Nonce::try_assume_unique_for_key(nonce).map_err(|_| Unopenable("a bad nonce"))?;
        let mut data = rest.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::empty(), &mut data)
            .map_err(|_| Unopenable("a sealed value that does not open with this broker's key"))?;
        String::from_utf8(plain.to_vec())
            .map_err(|_| Unopenable("a sealed value that is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_value_seals_opens_with_the_same_key_only_and_the_key_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let b = SecretBox::open(dir.path(), None).unwrap();
        let sealed = b.seal("hunter2").unwrap();
        assert!(SecretBox::is_sealed(&sealed));
        assert!(!sealed.contains("hunter2"));
        assert_ne!(sealed, b.seal("hunter2").unwrap(), "a nonce per value");
        assert_eq!(b.open_value(&sealed).unwrap(), "hunter2");
        // The same directory's key opens it after a restart; another's does not.
        let again = SecretBox::open(dir.path(), None).unwrap();
        assert_eq!(again.open_value(&sealed).unwrap(), "hunter2");
        let other = tempfile::tempdir().unwrap();
        assert!(SecretBox::open(other.path(), None)
            .unwrap()
            .open_value(&sealed)
            .is_err());
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // An altered value does not open.
        let mut altered = sealed.into_bytes();
        let last = altered.len() - 2;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        assert!(b.open_value(&String::from_utf8(altered).unwrap()).is_err());
    }

    #[test]
    fn a_key_from_the_encoder_secret_opens_only_with_that_secret() {
        let dir = tempfile::tempdir().unwrap();
        let b = SecretBox::open(dir.path(), Some("s3cret")).unwrap();
        let sealed = b.seal("pw").unwrap();
        let same = SecretBox::open(dir.path(), Some("s3cret")).unwrap();
        assert_eq!(same.open_value(&sealed).unwrap(), "pw");
        let wrong = SecretBox::open(dir.path(), Some("other")).unwrap();
        assert!(wrong.open_value(&sealed).is_err());
    }
}
