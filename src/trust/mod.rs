//! Producer signatures: who wrote a snapshot or an L0 archive (docs/snapshots.md "Security
//! and trust model").
//!
//! Content digests prove that bytes are the ones a producer described; a signature proves
//! which producer described them. A producer holds an Ed25519 secret key
//! ([`SigningKey`], a file made by `strata key generate`); consumers hold the public keys
//! they trust ([`PublicKey`], one line each, `strata-ed25519:<key id>:<base64>`).
//!
//! # Formats
//! * Secret key file: one line `strata-ed25519-secret-v1:<base64 of the PKCS#8 v2
//!   document>` (RFC 5958, as `ring` makes it), mode 0600, never overwritten.
//! * Public key: `strata-ed25519:<key id>:<base64 of the 32-byte key>`, where the key id is
//!   the first 16 lowercase hex digits of SHA-256 of the 32 key bytes. The id is a name for
//!   messages and lookups; verification always uses the full key.
//! * Signature ([`Signature`], a JSON object inside the record it signs):
//!   `{"algorithm":"ed25519","key_id":"<16 hex>","value":"<base64 of 64 bytes>"}`.
//!
//! # What is signed
//! `strata-signature-v1\n<domain>\n` followed by the canonical bytes of the statement
//! ([`crate::record::to_canonical_bytes`]). The domain names the kind of statement (for
//! example `snapshot-sidecar`), so a signature made for one kind of record can never be
//! replayed as another.
//!
//! Keys are generated with the operating system's random source (`ring::rand`). A secret
//! key never appears in output, logs, events, errors or records: [`SigningKey`]'s `Debug`
//! shows only the key id.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};
use serde::{Deserialize, Serialize};

use crate::digest::Sha256Digest;
use crate::fs;

/// The prefix of a public key line.
pub const PUBLIC_KEY_PREFIX: &str = "strata-ed25519:";
/// The prefix of a secret key file's line.
pub const SECRET_KEY_PREFIX: &str = "strata-ed25519-secret-v1:";
/// The first line of every signed message.
pub const SIGNATURE_CONTEXT: &str = "strata-signature-v1";
/// Largest secret key file read, in bytes.
const MAX_SECRET_FILE_BYTES: u64 = 4096;

/// A signing or verification failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A public key line that is not `strata-ed25519:<16 hex>:<base64 of 32 bytes>` with a
    /// matching id.
    #[error(
        "{text:?} is not a strata public key: {reason} (expected strata-ed25519:<key id>:<base64>, as `strata key generate` prints)"
    )]
    BadPublicKey {
        /// The text given (a public key is not a secret).
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// A secret key (file or variable) that cannot be used.
    #[error("{origin} is not a usable strata signing key: {reason}")]
    BadSecretKey {
        /// Where it came from: the file's path, or the variable's name.
        origin: String,
        /// What is wrong (never the key material).
        reason: String,
    },
    /// Key generation failed (the system random source).
    #[error("cannot generate a key: the system random source failed")]
    Random,
    /// A filesystem failure.
    #[error(transparent)]
    Fs(#[from] fs::Error),
}

/// The short name of a public key: 16 lowercase hex digits of SHA-256 of its 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId([u8; 8]);

impl KeyId {
    fn of(public: &[u8; 32]) -> Self {
        let digest = Sha256Digest::of_bytes(public);
        let mut id = [0u8; 8];
        id.copy_from_slice(digest.as_bytes().get(..8).unwrap_or(&[0u8; 8]));
        Self(id)
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl FromStr for KeyId {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let valid =
            text.len() == 16 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !valid {
            return Err(format!("key id {text:?} is not 16 lowercase hex digits"));
        }
        let mut id = [0u8; 8];
        for (i, slot) in id.iter_mut().enumerate() {
            let pair = text.get(2 * i..2 * i + 2).unwrap_or("00");
            *slot = u8::from_str_radix(pair, 16).map_err(|e| e.to_string())?;
        }
        Ok(Self(id))
    }
}

impl Serialize for KeyId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for KeyId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// A public key a consumer trusts.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PublicKey {
    bytes: [u8; 32],
    id: KeyId,
}

impl PublicKey {
    /// The key's id.
    pub fn id(&self) -> KeyId {
        self.id
    }

    /// True if `signature` is this key's signature of `statement` in `domain` (the id in
    /// the signature must be this key's too).
    pub fn verifies(&self, domain: &str, statement: &[u8], signature: &Signature) -> bool {
        signature.key_id == self.id
            && UnparsedPublicKey::new(&ED25519, &self.bytes)
                .verify(&message(domain, statement), &signature.value)
                .is_ok()
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PUBLIC_KEY_PREFIX}{}:{}", self.id, BASE64.encode(self.bytes))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

impl FromStr for PublicKey {
    type Err = Error;

    /// Parses `strata-ed25519:<key id>:<base64>` (surrounding whitespace ignored); the id
    /// must be the one the key bytes give.
    fn from_str(text: &str) -> Result<Self, Error> {
        let bad =
            |reason: &str| Error::BadPublicKey { text: text.to_owned(), reason: reason.to_owned() };
        let rest = text
            .trim()
            .strip_prefix(PUBLIC_KEY_PREFIX)
            .ok_or_else(|| bad("no strata-ed25519: prefix"))?;
        let (id, b64) = rest.split_once(':').ok_or_else(|| bad("no key id"))?;
        let id: KeyId = id.parse().map_err(|e: String| bad(&e))?;
        let raw = BASE64.decode(b64).map_err(|e| bad(&format!("the key is not base64: {e}")))?;
        let bytes: [u8; 32] = raw.try_into().map_err(|_| bad("the key is not 32 bytes"))?;
        if KeyId::of(&bytes) != id {
            return Err(bad("the key id does not match the key"));
        }
        Ok(Self { bytes, id })
    }
}

/// An Ed25519 signature with the id of the key that made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    /// Always `ed25519`.
    pub algorithm: SignatureAlgorithm,
    /// The signing key's id.
    pub key_id: KeyId,
    /// The 64 signature bytes (base64 in JSON).
    #[serde(with = "base64_bytes")]
    pub value: Vec<u8>,
}

/// The signature algorithm (one today).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignatureAlgorithm {
    /// Ed25519 (RFC 8032).
    Ed25519,
}

mod base64_bytes {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as BASE64;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&BASE64.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = BASE64.decode(text).map_err(serde::de::Error::custom)?;
        if bytes.len() != 64 {
            return Err(serde::de::Error::custom("an Ed25519 signature is 64 bytes"));
        }
        Ok(bytes)
    }
}

fn message(domain: &str, statement: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(SIGNATURE_CONTEXT.len() + domain.len() + 2 + statement.len());
    m.extend_from_slice(SIGNATURE_CONTEXT.as_bytes());
    m.push(b'\n');
    m.extend_from_slice(domain.as_bytes());
    m.push(b'\n');
    m.extend_from_slice(statement);
    m
}

/// Who made a snapshot or an L0 archive: the CI context (`GITHUB_*` variables), each `null` when unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Producer {
    /// `GITHUB_REPOSITORY` (`owner/name`).
    pub repository: Option<String>,
    /// `GITHUB_SHA`: the commit the workflow ran for.
    pub sha: Option<String>,
    /// `GITHUB_WORKFLOW`.
    pub workflow: Option<String>,
    /// `GITHUB_JOB`.
    pub job: Option<String>,
    /// `GITHUB_RUN_ID`.
    pub run_id: Option<String>,
    /// `GITHUB_RUN_ATTEMPT`.
    pub run_attempt: Option<String>,
}

impl Producer {
    /// Reads the `GITHUB_*` variables through `env` (empty values are `None`).
    pub fn from_env_with(env: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        Self {
            repository: get("GITHUB_REPOSITORY"),
            sha: get("GITHUB_SHA"),
            workflow: get("GITHUB_WORKFLOW"),
            job: get("GITHUB_JOB"),
            run_id: get("GITHUB_RUN_ID"),
            run_attempt: get("GITHUB_RUN_ATTEMPT"),
        }
    }
}

/// A producer's secret key, loaded from its file.
pub struct SigningKey {
    pair: Ed25519KeyPair,
    public: PublicKey,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey(id {})", self.public.id)
    }
}

impl SigningKey {
    /// Generates a key pair and writes the secret key to the new file `out` (mode 0600;
    /// an existing file is never overwritten). Returns the signing key.
    ///
    /// # Errors
    /// [`Error::Fs`] (`AlreadyExists` if `out` exists); [`Error::Random`].
    pub fn generate(out: &Path) -> Result<Self, Error> {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| Error::Random)?;
        let line = format!("{SECRET_KEY_PREFIX}{}\n", BASE64.encode(pkcs8.as_ref()));
        fs::write_new(out, line.as_bytes(), 0o600)?;
        Self::from_pkcs8(pkcs8.as_ref(), &out.display().to_string())
    }

    /// Loads the secret key file at `path` (at most 4 KiB, not a symlink).
    ///
    /// # Errors
    /// [`Error::BadSecretKey`] naming the file and what is wrong (never its content);
    /// [`Error::Fs`].
    pub fn load(path: &Path) -> Result<Self, Error> {
        let origin = path.display().to_string();
        let bad =
            |reason: &str| Error::BadSecretKey { origin: origin.clone(), reason: reason.into() };
        let bytes = fs::read_capped_nofollow(path, MAX_SECRET_FILE_BYTES)?
            .ok_or_else(|| bad("larger than a key file"))?;
        let text = std::str::from_utf8(&bytes).map_err(|_| bad("not text"))?;
        Self::parse(text, &origin)
    }

    /// Parses the content of a secret key file (`strata-ed25519-secret-v1:<base64>`,
    /// surrounding whitespace ignored), e.g. from a CI secret in `STRATA_SIGNING_KEY`.
    /// `origin` names where it came from in errors.
    ///
    /// # Errors
    /// [`Error::BadSecretKey`] naming `origin` and what is wrong (never the content).
    pub fn parse(text: &str, origin: &str) -> Result<Self, Error> {
        let bad =
            |reason: &str| Error::BadSecretKey { origin: origin.to_owned(), reason: reason.into() };
        let b64 = text.trim().strip_prefix(SECRET_KEY_PREFIX).ok_or_else(|| {
            bad("it does not start with strata-ed25519-secret-v1: (make one with `strata key generate`)")
        })?;
        let pkcs8 = BASE64.decode(b64).map_err(|_| bad("the key is not base64"))?;
        Self::from_pkcs8(&pkcs8, origin)
    }

    fn from_pkcs8(pkcs8: &[u8], origin: &str) -> Result<Self, Error> {
        let bad =
            |reason: &str| Error::BadSecretKey { origin: origin.to_owned(), reason: reason.into() };
        let pair =
            Ed25519KeyPair::from_pkcs8(pkcs8).map_err(|_| bad("not an Ed25519 PKCS#8 key"))?;
        let bytes: [u8; 32] = pair
            .public_key()
            .as_ref()
            .try_into()
            .map_err(|_| bad("unexpected public key length"))?;
        let public = PublicKey { bytes, id: KeyId::of(&bytes) };
        Ok(Self { pair, public })
    }

    /// The public key to give to consumers.
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }

    /// Signs `statement` (canonical bytes of a record payload) in `domain`.
    pub fn sign(&self, domain: &str, statement: &[u8]) -> Signature {
        let value = self.pair.sign(&message(domain, statement)).as_ref().to_vec();
        Signature { algorithm: SignatureAlgorithm::Ed25519, key_id: self.public.id, value }
    }
}

/// The keys a consumer accepts (`--trusted-key`, `STRATA_TRUSTED_KEYS`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustPolicy {
    keys: Vec<PublicKey>,
}

/// Why a signed statement was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// No signature at all.
    Unsigned,
    /// Signed by a key not in the policy.
    UnknownKey(KeyId),
    /// The signature does not verify with the trusted key of that id.
    BadSignature(KeyId),
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::Unsigned => f.write_str("it is not signed, and trusted keys are configured"),
            Rejection::UnknownKey(id) => {
                write!(f, "it is signed by key {id}, which is not a trusted key")
            }
            Rejection::BadSignature(id) => write!(
                f,
                "its signature by key {id} does not verify (the record was changed after signing, or the signature was copied from another record)"
            ),
        }
    }
}

impl TrustPolicy {
    /// A policy trusting `keys` (duplicates are kept once).
    pub fn new(keys: impl IntoIterator<Item = PublicKey>) -> Self {
        let mut out: Vec<PublicKey> = Vec::new();
        for k in keys {
            if !out.contains(&k) {
                out.push(k);
            }
        }
        Self { keys: out }
    }

    /// Parses public keys separated by newlines, commas or whitespace (the
    /// `STRATA_TRUSTED_KEYS` form); blank items are skipped.
    ///
    /// # Errors
    /// [`Error::BadPublicKey`] for the first item that is not a public key.
    pub fn parse_list(text: &str) -> Result<Vec<PublicKey>, Error> {
        text.split(|c: char| c == ',' || c.is_whitespace())
            .filter(|item| !item.is_empty())
            .map(str::parse)
            .collect()
    }

    /// True if no key is trusted (producers are not checked).
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The trusted keys.
    pub fn keys(&self) -> &[PublicKey] {
        &self.keys
    }

    /// Accepts `statement` in `domain` if `signature` is present and made by one of the
    /// trusted keys; returns that key's id.
    ///
    /// # Errors
    /// The [`Rejection`].
    pub fn check(
        &self,
        domain: &str,
        statement: &[u8],
        signature: Option<&Signature>,
    ) -> Result<KeyId, Rejection> {
        let Some(signature) = signature else { return Err(Rejection::Unsigned) };
        let Some(key) = self.keys.iter().find(|k| k.id == signature.key_id) else {
            return Err(Rejection::UnknownKey(signature.key_id));
        };
        if key.verifies(domain, statement, signature) {
            Ok(key.id)
        } else {
            Err(Rejection::BadSignature(signature.key_id))
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn key(dir: &Path, name: &str) -> SigningKey {
        SigningKey::generate(&dir.join(name)).unwrap()
    }

    #[test]
    fn generated_keys_load_sign_and_verify_and_the_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let made = SigningKey::generate(&path).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        assert!(SigningKey::generate(&path).is_err(), "an existing key file is never overwritten");
        let loaded = SigningKey::load(&path).unwrap();
        assert_eq!(loaded.public_key(), made.public_key());
        let line = made.public_key().to_string();
        assert!(line.starts_with("strata-ed25519:"), "{line}");
        assert_eq!(line.parse::<PublicKey>().unwrap(), *made.public_key());
        let sig = loaded.sign("snapshot-sidecar", b"{\"a\":1}");
        let policy = TrustPolicy::new([made.public_key().clone()]);
        assert_eq!(
            policy.check("snapshot-sidecar", b"{\"a\":1}", Some(&sig)),
            Ok(made.public_key().id())
        );
        // Another statement, another domain, no signature: all rejected.
        assert_eq!(
            policy.check("snapshot-sidecar", b"{\"a\":2}", Some(&sig)),
            Err(Rejection::BadSignature(made.public_key().id()))
        );
        assert!(policy.check("l0-archive", b"{\"a\":1}", Some(&sig)).is_err());
        assert_eq!(policy.check("snapshot-sidecar", b"{\"a\":1}", None), Err(Rejection::Unsigned));
        // The secret never shows in Debug output.
        let shown = format!("{loaded:?}");
        let secret = std::fs::read_to_string(&path).unwrap();
        let b64 = secret.trim().strip_prefix(SECRET_KEY_PREFIX).unwrap();
        assert!(!shown.contains(b64) && shown.contains(&made.public_key().id().to_string()));
    }

    #[test]
    fn untrusted_keys_and_forged_ids_are_rejected_and_rotation_works() {
        let dir = tempfile::tempdir().unwrap();
        let (old, new, other) =
            (key(dir.path(), "old"), key(dir.path(), "new"), key(dir.path(), "x"));
        let both = TrustPolicy::new([old.public_key().clone(), new.public_key().clone()]);
        for k in [&old, &new] {
            assert!(both.check("d", b"s", Some(&k.sign("d", b"s"))).is_ok());
        }
        let sig = other.sign("d", b"s");
        assert_eq!(
            both.check("d", b"s", Some(&sig)),
            Err(Rejection::UnknownKey(other.public_key().id()))
        );
        // A signature by an untrusted key relabelled with a trusted key's id.
        let forged = Signature { key_id: old.public_key().id(), ..sig };
        assert_eq!(
            both.check("d", b"s", Some(&forged)),
            Err(Rejection::BadSignature(old.public_key().id()))
        );
        // Revocation: the old key removed.
        let rotated = TrustPolicy::new([new.public_key().clone()]);
        assert!(rotated.check("d", b"s", Some(&old.sign("d", b"s"))).is_err());
    }

    #[test]
    fn malformed_public_keys_and_secret_files_are_refused_without_showing_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let k = key(dir.path(), "k");
        let good = k.public_key().to_string();
        let (_, rest) = good.split_at(PUBLIC_KEY_PREFIX.len());
        let (id, b64) = rest.split_once(':').unwrap();
        for bad in [
            String::new(),
            format!("ssh-ed25519:{id}:{b64}"),
            format!("{PUBLIC_KEY_PREFIX}{b64}"),
            format!("{PUBLIC_KEY_PREFIX}{}:{b64}", "0".repeat(16)),
            format!("{PUBLIC_KEY_PREFIX}{}:{b64}", id.to_uppercase()),
            format!("{PUBLIC_KEY_PREFIX}{id}:{}", &b64[..20]),
            format!("{PUBLIC_KEY_PREFIX}{id}:not base64!"),
        ] {
            assert!(bad.parse::<PublicKey>().is_err(), "{bad}");
        }
        let list = format!("{good}, {good}\n\n{good}");
        assert_eq!(TrustPolicy::new(TrustPolicy::parse_list(&list).unwrap()).keys().len(), 1);
        for (name, content) in
            [("empty", ""), ("pub", good.as_str()), ("junk", "strata-ed25519-secret-v1:AAAA")]
        {
            let path = dir.path().join(name);
            std::fs::write(&path, content).unwrap();
            let err = SigningKey::load(&path).unwrap_err().to_string();
            assert!(err.contains(&path.display().to_string()), "{err}");
        }
        let secret = std::fs::read_to_string(dir.path().join("k")).unwrap();
        let mut damaged = secret.clone();
        damaged.insert(40, 'x');
        std::fs::write(dir.path().join("damaged"), &damaged).unwrap();
        let err = SigningKey::load(&dir.path().join("damaged")).unwrap_err().to_string();
        assert!(!err.contains(secret.trim().strip_prefix(SECRET_KEY_PREFIX).unwrap()), "{err}");
    }
}
