//! The encrypted payloads of MinIO's admin API.
//!
//! Requests that carry a secret (`add-user`, `add-service-account`) and
//! responses that list one (`list-users`...) are encrypted with the admin's
//! secret key. The format, implemented here from its published description
//! (MinIO's `madmin` and client libraries), is a 41-byte header followed by
//! an AEAD stream:
//!
//! ```text
//! salt (32) | algorithm id (1) | nonce prefix (8) | chunk 1 | ... | chunk n
//! ```
//!
//! - The key is derived from the secret key and the salt: Argon2id (version
//!   0x13, 1 pass, 64 MiB, 4 lanes, 32 bytes) for ids 0 and 1, PBKDF2-HMAC-
//!   SHA256 (8192 rounds, 32 bytes) for id 2 (FIPS builds).
//! - The cipher is AES-256-GCM for ids 0 and 2, ChaCha20-Poly1305 for id 1.
//! - Plaintext is cut into chunks of 16 KiB, each sealed with its own nonce,
//!   `prefix || seq` (`seq` a little-endian `u32` counting from 1), and
//!   followed by its 16-byte tag.
//! - Every chunk's associated data is one flag byte (`0x80` on the last
//!   chunk, `0x00` before) and the tag of an empty message sealed with nonce
//!   `prefix || 0`: truncating or reordering the stream fails authentication.

use aes_gcm::Aes256Gcm;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use argon2::{Algorithm as Argon2Algorithm, Argon2, Params, Version};
use chacha20poly1305::ChaCha20Poly1305;
use rand::RngCore;
use sha2::Sha256;

const SALT_LEN: usize = 32;
const NONCE_PREFIX_LEN: usize = 8;
const HEADER_LEN: usize = SALT_LEN + 1 + NONCE_PREFIX_LEN;
const CHUNK_LEN: usize = 16 * 1024;
const TAG_LEN: usize = 16;
const PBKDF2_ROUNDS: u32 = 8192;

/// Why a payload could not be encrypted or decrypted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PayloadError {
    /// Shorter than the header and one tag.
    #[error("encrypted admin payload is truncated ({0} bytes)")]
    Truncated(usize),
    /// An algorithm id this client does not know.
    #[error("encrypted admin payload uses unknown algorithm id {0}")]
    UnknownAlgorithm(u8),
    /// Authentication failed: wrong secret key, or a damaged payload.
    #[error(
        "encrypted admin payload does not authenticate: the admin secret key is wrong or the payload was damaged"
    )]
    Authentication,
    /// The key derivation rejected its parameters (cannot happen with the
    /// fixed ones used here).
    #[error("admin payload key derivation failed: {0}")]
    KeyDerivation(String),
}

/// The algorithm pair named by the header's id byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayloadAlgorithm {
    /// Argon2id and AES-256-GCM (id 0): what MinIO clients send.
    Argon2idAesGcm,
    /// Argon2id and ChaCha20-Poly1305 (id 1): hosts without AES instructions.
    Argon2idChaCha20Poly1305,
    /// PBKDF2-SHA256 and AES-256-GCM (id 2): FIPS builds.
    Pbkdf2AesGcm,
}

impl PayloadAlgorithm {
    fn id(self) -> u8 {
        match self {
            Self::Argon2idAesGcm => 0,
            Self::Argon2idChaCha20Poly1305 => 1,
            Self::Pbkdf2AesGcm => 2,
        }
    }

    fn from_id(id: u8) -> Result<Self, PayloadError> {
        match id {
            0 => Ok(Self::Argon2idAesGcm),
            1 => Ok(Self::Argon2idChaCha20Poly1305),
            2 => Ok(Self::Pbkdf2AesGcm),
            other => Err(PayloadError::UnknownAlgorithm(other)),
        }
    }

    fn derive_key(self, secret: &[u8], salt: &[u8]) -> Result<[u8; 32], PayloadError> {
        let mut key = [0u8; 32];
        match self {
            Self::Pbkdf2AesGcm => {
                pbkdf2::pbkdf2_hmac::<Sha256>(secret, salt, PBKDF2_ROUNDS, &mut key);
            }
            Self::Argon2idAesGcm | Self::Argon2idChaCha20Poly1305 => {
                let params = Params::new(64 * 1024, 1, 4, Some(32))
                    .map_err(|e| PayloadError::KeyDerivation(e.to_string()))?;
                Argon2::new(Argon2Algorithm::Argon2id, Version::V0x13, params)
                    .hash_password_into(secret, salt, &mut key)
                    .map_err(|e| PayloadError::KeyDerivation(e.to_string()))?;
            }
        }
        Ok(key)
    }
}

/// One AEAD, whichever the id chose.
enum Cipher {
    Aes(Box<Aes256Gcm>),
    ChaCha(Box<ChaCha20Poly1305>),
}

impl Cipher {
    fn new(algorithm: PayloadAlgorithm, key: &[u8; 32]) -> Self {
        match algorithm {
            PayloadAlgorithm::Argon2idChaCha20Poly1305 => {
                Self::ChaCha(Box::new(ChaCha20Poly1305::new(key.into())))
            }
            _ => Self::Aes(Box::new(Aes256Gcm::new(key.into()))),
        }
    }

    fn seal(&self, nonce: &[u8; 12], msg: &[u8], aad: &[u8]) -> Result<Vec<u8>, PayloadError> {
        let payload = Payload { msg, aad };
        match self {
            Self::Aes(c) => c.encrypt(nonce.into(), payload),
            Self::ChaCha(c) => c.encrypt(nonce.into(), payload),
        }
        .map_err(|_| PayloadError::Authentication)
    }

    fn open(&self, nonce: &[u8; 12], msg: &[u8], aad: &[u8]) -> Result<Vec<u8>, PayloadError> {
        let payload = Payload { msg, aad };
        match self {
            Self::Aes(c) => c.decrypt(nonce.into(), payload),
            Self::ChaCha(c) => c.decrypt(nonce.into(), payload),
        }
        .map_err(|_| PayloadError::Authentication)
    }
}

fn nonce(prefix: &[u8], seq: u32) -> [u8; 12] {
    let mut nonce = [0u8; 12];
    nonce[..NONCE_PREFIX_LEN].copy_from_slice(prefix);
    nonce[NONCE_PREFIX_LEN..].copy_from_slice(&seq.to_le_bytes());
    nonce
}

/// The associated data shared by all chunks (flag byte still clear).
fn associated_data(cipher: &Cipher, prefix: &[u8]) -> Result<Vec<u8>, PayloadError> {
    let tag = cipher.seal(&nonce(prefix, 0), &[], &[])?;
    let mut ad = Vec::with_capacity(1 + tag.len());
    ad.push(0);
    ad.extend_from_slice(&tag);
    Ok(ad)
}

/// Encrypts `plaintext` for an admin request signed with `secret_key`, with
/// a fresh random salt and nonce (Argon2id and AES-256-GCM, as MinIO's own
/// clients do).
pub fn encrypt(secret_key: &str, plaintext: &[u8]) -> Result<Vec<u8>, PayloadError> {
    let mut salt = [0u8; SALT_LEN];
    let mut prefix = [0u8; NONCE_PREFIX_LEN];
    rand::rng().fill_bytes(&mut salt);
    rand::rng().fill_bytes(&mut prefix);
    encrypt_with(
        PayloadAlgorithm::Argon2idAesGcm,
        secret_key.as_bytes(),
        &salt,
        &prefix,
        plaintext,
    )
}

/// [`encrypt`] with the algorithm, salt and nonce prefix given (for tests
/// with known vectors).
pub fn encrypt_with(
    algorithm: PayloadAlgorithm,
    secret: &[u8],
    salt: &[u8; SALT_LEN],
    prefix: &[u8; NONCE_PREFIX_LEN],
    plaintext: &[u8],
) -> Result<Vec<u8>, PayloadError> {
    let cipher = Cipher::new(algorithm, &algorithm.derive_key(secret, salt)?);
    let mut ad = associated_data(&cipher, prefix)?;
    let chunks = plaintext.len().div_ceil(CHUNK_LEN).max(1);
    let mut out = Vec::with_capacity(HEADER_LEN + plaintext.len() + chunks * TAG_LEN);
    out.extend_from_slice(salt);
    out.push(algorithm.id());
    out.extend_from_slice(prefix);
    // An empty plaintext is one empty, final chunk: the stream still ends
    // with an authenticated "last" marker.
    let mut pieces: Vec<&[u8]> = plaintext.chunks(CHUNK_LEN).collect();
    if pieces.is_empty() {
        pieces.push(&[]);
    }
    for (i, piece) in pieces.iter().enumerate() {
        if i + 1 == chunks {
            ad[0] = 0x80;
        }
        out.extend(cipher.seal(&nonce(prefix, seq(i)?), piece, &ad)?);
    }
    Ok(out)
}

/// The sequence number of chunk `i` (counting from 1).
fn seq(i: usize) -> Result<u32, PayloadError> {
    u32::try_from(i + 1).map_err(|_| PayloadError::Truncated(usize::MAX))
}

/// Decrypts an admin response encrypted with `secret_key` (any of the three
/// algorithm ids).
pub fn decrypt(secret_key: &str, data: &[u8]) -> Result<Vec<u8>, PayloadError> {
    if data.len() < HEADER_LEN + TAG_LEN {
        return Err(PayloadError::Truncated(data.len()));
    }
    let (salt, rest) = data.split_at(SALT_LEN);
    let algorithm = PayloadAlgorithm::from_id(rest[0])?;
    let (prefix, body) = rest[1..].split_at(NONCE_PREFIX_LEN);
    let cipher = Cipher::new(
        algorithm,
        &algorithm.derive_key(secret_key.as_bytes(), salt)?,
    );
    let mut ad = associated_data(&cipher, prefix)?;
    let fragments: Vec<&[u8]> = body.chunks(CHUNK_LEN + TAG_LEN).collect();
    let mut plain = Vec::with_capacity(body.len());
    for (i, fragment) in fragments.iter().enumerate() {
        if fragment.len() < TAG_LEN {
            return Err(PayloadError::Truncated(data.len()));
        }
        if i + 1 == fragments.len() {
            ad[0] = 0x80;
        }
        plain.extend(cipher.open(&nonce(prefix, seq(i)?), fragment, &ad)?);
    }
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SALT: [u8; 32] = [7; 32];
    const PREFIX: [u8; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

    /// Produced by MinIO's Python client (`minio.crypto`, an independent
    /// implementation) with salt `[7; 32]` and nonce prefix `01..08`: id 0
    /// is its own `encrypt`; ids 1 and 2 its chunking with the other cipher
    /// or key derivation.
    const SMALL: &[u8] = br#"{"secretKey":"s3cr3t-value","status":"enabled"}"#;
    const VECTORS: [(PayloadAlgorithm, &str, &str); 3] = [
        (
            PayloadAlgorithm::Argon2idAesGcm,
            "0707070707070707070707070707070707070707070707070707070707070707000102030405060708c6a2a28abddcc5739d60249f000e773c54523e55eddf33fd6228d8110e521f1f8522efd09ca941fc30509b7b557feae13fad44931d304666d5f7d838157789",
            "32b618ef2e58be3b148509aa1e37b840c88f67ef8357a3fd819ac11f9a561637",
        ),
        (
            PayloadAlgorithm::Argon2idChaCha20Poly1305,
            "070707070707070707070707070707070707070707070707070707070707070701010203040506070836fd682012b13f61e4bba9b18e280f054d8cc6b6504e006de8ef53d6344ac4a95b063268e94610dedb63be1c12a6758ed66084d3cb90028dbb89f861cec09a",
            "9187e68133cc3bd6abd3d7dbac1a3b8036dcb3f9c483094722623c1a2ea09863",
        ),
        (
            PayloadAlgorithm::Pbkdf2AesGcm,
            "07070707070707070707070707070707070707070707070707070707070707070201020304050607088093c5848857da71b9709bc9bb57556ab0e214e94fba67d8175c236c2027ae9797838c89a2c5da91643e31ccc5362e5f929e2cb216a349e43a45ff6a7da60b",
            "be1ad6c6157229de98dd80cc611e25b2b5cfcd67ebdd403c8e7ad1bb3ac57c38",
        ),
    ];

    #[test]
    fn matches_known_vectors() {
        use sha2::Digest;
        // 40000 bytes: two full chunks and a partial one.
        let big: Vec<u8> = (0..40000).map(|i| (i % 251) as u8).collect();
        for (algorithm, small_hex, big_sha256) in VECTORS {
            let small = hex::decode(small_hex).expect("hex");
            let sealed =
                encrypt_with(algorithm, b"admin-secret", &SALT, &PREFIX, SMALL).expect("encrypts");
            assert_eq!(sealed, small, "{algorithm:?}");
            assert_eq!(decrypt("admin-secret", &small).expect("decrypts"), SMALL);
            let sealed =
                encrypt_with(algorithm, b"admin-secret", &SALT, &PREFIX, &big).expect("encrypts");
            assert_eq!(sealed.len(), 40089);
            assert_eq!(hex::encode(sha2::Sha256::digest(&sealed)), big_sha256);
        }
    }

    #[test]
    fn round_trips_every_algorithm_and_size() {
        let algorithms = [
            PayloadAlgorithm::Argon2idAesGcm,
            PayloadAlgorithm::Argon2idChaCha20Poly1305,
            PayloadAlgorithm::Pbkdf2AesGcm,
        ];
        for algorithm in algorithms {
            for len in [0, 1, CHUNK_LEN - 1, CHUNK_LEN, CHUNK_LEN + 1, 3 * CHUNK_LEN] {
                let plain: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
                let sealed =
                    encrypt_with(algorithm, b"secret", &SALT, &PREFIX, &plain).expect("encrypts");
                let chunks = len.div_ceil(CHUNK_LEN).max(1);
                assert_eq!(sealed.len(), HEADER_LEN + len + chunks * TAG_LEN);
                assert_eq!(decrypt("secret", &sealed).expect("decrypts"), plain);
            }
        }
    }

    #[test]
    fn wrong_key_truncation_and_tampering_fail() {
        let plain = vec![42u8; 2 * CHUNK_LEN + 5];
        let sealed = encrypt("right", &plain).expect("encrypts");
        assert_eq!(decrypt("wrong", &sealed), Err(PayloadError::Authentication));
        // Dropping the final chunk leaves a stream whose last chunk is not
        // marked last.
        let cut = &sealed[..HEADER_LEN + 2 * (CHUNK_LEN + TAG_LEN)];
        assert_eq!(decrypt("right", cut), Err(PayloadError::Authentication));
        let mut flipped = sealed.clone();
        flipped[HEADER_LEN + 3] ^= 1;
        assert_eq!(
            decrypt("right", &flipped),
            Err(PayloadError::Authentication)
        );
        assert_eq!(
            decrypt("right", &sealed[..HEADER_LEN]),
            Err(PayloadError::Truncated(HEADER_LEN))
        );
        let mut unknown = sealed;
        unknown[SALT_LEN] = 9;
        assert_eq!(
            decrypt("right", &unknown),
            Err(PayloadError::UnknownAlgorithm(9))
        );
    }
}
