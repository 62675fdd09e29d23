//! [`Vault`]: encryption and decryption of stored secrets.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hkdf::Hkdf;
use sha2::Sha256;
use zeroize::{Zeroize, Zeroizing};

use crate::{InstanceSecret, Secret, VaultError};

/// Format version; first field of every stored value and part of the AAD.
const VERSION: &str = "v1";
/// HKDF salt: fixed, for domain separation from any other use of the secret.
const HKDF_SALT: &[u8] = b"llooma-vault/v1";
/// HKDF info for the encryption key.
const INFO_KEY: &[u8] = b"llooma-vault/v1 xchacha20poly1305 key";
/// HKDF info for the key id. Different from [`INFO_KEY`], so the key id
/// reveals nothing about the key.
const INFO_KEY_ID: &[u8] = b"llooma-vault/v1 key id";
/// Key id length in bytes (printed as twice as many hex digits).
const KEY_ID_BYTES: usize = 4;
const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
/// Prefix of the associated data, before the length-prefixed fields.
const AAD_PREFIX: &[u8] = b"llooma-vault/v1 aad\0";

/// HKDF-SHA256 can expand at most 255 hash lengths.
const _: () = assert!(KEY_LEN <= 255 * 32 && KEY_ID_BYTES <= 255 * 32);

/// Fixed context of the canary value.
const CANARY_CONTEXT: SecretContext<'static> =
    SecretContext::new("llooma_vault", "canary", "canary");
/// Fixed plaintext of the canary value.
const CANARY_PLAINTEXT: &str = "llooma-vault canary v1";

/// Where a stored secret lives. It is bound into the ciphertext's associated
/// data, so a value only decrypts with the exact context it was written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SecretContext<'a> {
    /// Table name, e.g. `"provider_accounts"`.
    pub table: &'a str,
    /// Column name, e.g. `"api_key"`.
    pub column: &'a str,
    /// Primary key of the row, as text.
    pub row: &'a str,
}

impl<'a> SecretContext<'a> {
    /// Builds a context.
    pub const fn new(table: &'a str, column: &'a str, row: &'a str) -> Self {
        Self { table, column, row }
    }
}

/// Encrypts and decrypts secrets under a key derived from an [`InstanceSecret`].
///
/// Cheap to share (`&Vault`); the key is zeroized on drop. See the crate docs
/// for the format.
pub struct Vault {
    cipher: XChaCha20Poly1305,
    key_id: String,
}

impl fmt::Debug for Vault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vault").field("key_id", &self.key_id).finish_non_exhaustive()
    }
}

impl Vault {
    /// Derives the encryption key and the key id from the instance secret.
    pub fn new(instance_secret: &InstanceSecret) -> Self {
        let hk = Hkdf::<Sha256>::new(Some(HKDF_SALT), instance_secret.as_bytes());

        let mut key = Zeroizing::new([0u8; KEY_LEN]);
        hkdf_expand(&hk, INFO_KEY, key.as_mut_slice());
        let cipher = XChaCha20Poly1305::new(key.as_slice().into());

        let mut id = [0u8; KEY_ID_BYTES];
        hkdf_expand(&hk, INFO_KEY_ID, &mut id);
        Self { cipher, key_id: to_hex(&id) }
    }

    /// The key id of this vault's key: 8 lowercase hex digits, recorded in
    /// every value it encrypts. Not secret.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The key id recorded in a stored value, without decrypting it (e.g. to
    /// find the rows a rotation has not reached yet).
    pub fn key_id_of(stored: &str) -> Result<&str, VaultError> {
        parse(stored).map(|parsed| parsed.key_id)
    }

    /// Encrypts `plaintext` for the place `ctx`, with a fresh random nonce.
    /// Returns `v1.<keyid>.<base64url(nonce || ciphertext)>`.
    pub fn encrypt(
        &self,
        ctx: SecretContext<'_>,
        plaintext: &Secret,
    ) -> Result<String, VaultError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(VaultError::Random)?;
        let aad = aad(&self.key_id, ctx);
        let ciphertext = self
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload { msg: plaintext.expose().as_bytes(), aad: &aad },
            )
            .map_err(|_| VaultError::PlaintextTooLong)?;

        let mut payload = Vec::with_capacity(NONCE_LEN + ciphertext.len());
        payload.extend_from_slice(&nonce);
        payload.extend_from_slice(&ciphertext);
        Ok(format!("{VERSION}.{}.{}", self.key_id, URL_SAFE_NO_PAD.encode(&payload)))
    }

    /// Decrypts a value [`Vault::encrypt`] returned for the same `ctx`.
    ///
    /// Errors: [`VaultError::Malformed`] if `stored` is not in the format,
    /// [`VaultError::KeyMismatch`] if it was encrypted under another instance
    /// secret, [`VaultError::AuthenticationFailed`] if it was altered or
    /// belongs to another table, column or row.
    pub fn decrypt(&self, ctx: SecretContext<'_>, stored: &str) -> Result<Secret, VaultError> {
        let parsed = parse(stored)?;
        if parsed.key_id != self.key_id {
            return Err(VaultError::KeyMismatch {
                expected: self.key_id.clone(),
                found: parsed.key_id.to_owned(),
            });
        }
        let payload = URL_SAFE_NO_PAD.decode(parsed.payload).map_err(|_| {
            VaultError::Malformed { reason: "the payload is not valid unpadded base64url" }
        })?;
        if payload.len() < NONCE_LEN + TAG_LEN {
            return Err(VaultError::Malformed {
                reason: "the payload is too short to hold a nonce and a tag",
            });
        }
        let (nonce, ciphertext) = payload.split_at(NONCE_LEN);
        let aad = aad(&self.key_id, ctx);
        let plaintext = self
            .cipher
            .decrypt(XNonce::from_slice(nonce), Payload { msg: ciphertext, aad: &aad })
            .map_err(|_| VaultError::AuthenticationFailed {
                table: ctx.table.to_owned(),
                column: ctx.column.to_owned(),
                row: ctx.row.to_owned(),
            })?;
        match String::from_utf8(plaintext) {
            Ok(text) => Ok(Secret::from(text)),
            Err(err) => {
                // Authentic but not text: only someone holding the key could
                // have written it. Do not leave the bytes behind.
                err.into_bytes().zeroize();
                Err(VaultError::Malformed { reason: "the decrypted value is not UTF-8 text" })
            }
        }
    }

    /// Decrypts `stored` with this vault and encrypts it for `new`, for
    /// rotating the instance secret.
    ///
    /// A value already under `new`'s key is verified with `new` and returned
    /// unchanged, so an interrupted rotation can simply be run again.
    pub fn reencrypt(
        &self,
        new: &Vault,
        ctx: SecretContext<'_>,
        stored: &str,
    ) -> Result<String, VaultError> {
        if Self::key_id_of(stored)? == new.key_id() && new.key_id() != self.key_id() {
            new.decrypt(ctx, stored)?;
            return Ok(stored.to_owned());
        }
        let plaintext = self.decrypt(ctx, stored)?;
        new.encrypt(ctx, &plaintext)
    }

    /// A fixed, known plaintext encrypted under a fixed context. Store it once
    /// next to the data; [`Vault::check_canary`] at start-up then tells whether
    /// the configured instance secret is the one the data was written with.
    pub fn make_canary(&self) -> Result<String, VaultError> {
        self.encrypt(CANARY_CONTEXT, &Secret::new(CANARY_PLAINTEXT))
    }

    /// Checks a value [`Vault::make_canary`] produced.
    ///
    /// Errors: [`VaultError::KeyMismatch`] when the configured instance secret
    /// is not the one the canary was written with, [`VaultError::CanaryMismatch`]
    /// when the key id matches but the canary does not verify,
    /// [`VaultError::Malformed`] when it is not a stored value at all.
    pub fn check_canary(&self, stored: &str) -> Result<(), VaultError> {
        match self.decrypt(CANARY_CONTEXT, stored) {
            Ok(plaintext) if plaintext.expose() == CANARY_PLAINTEXT => Ok(()),
            Ok(_) | Err(VaultError::AuthenticationFailed { .. }) => Err(VaultError::CanaryMismatch),
            Err(err) => Err(err),
        }
    }
}

/// `okm.len()` is a compile-time constant far below HKDF-SHA256's limit of
/// 8160 bytes (see the `const` assertion above), so `expand` cannot fail.
fn hkdf_expand(hk: &Hkdf<Sha256>, info: &[u8], okm: &mut [u8]) {
    if hk.expand(info, okm).is_err() {
        unreachable!("HKDF-SHA256 output of {} bytes is within its limit", okm.len());
    }
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// The associated data: a fixed prefix, then key id, table, column and row,
/// each preceded by its length as a big-endian u64, so no two different
/// contexts encode to the same bytes (`("ab", "c")` vs `("a", "bc")`).
fn aad(key_id: &str, ctx: SecretContext<'_>) -> Vec<u8> {
    let fields = [key_id, ctx.table, ctx.column, ctx.row];
    let len = AAD_PREFIX.len() + fields.iter().map(|f| 8 + f.len()).sum::<usize>();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(AAD_PREFIX);
    for field in fields {
        out.extend_from_slice(&(field.len() as u64).to_be_bytes());
        out.extend_from_slice(field.as_bytes());
    }
    out
}

struct Parsed<'s> {
    key_id: &'s str,
    payload: &'s str,
}

fn parse(stored: &str) -> Result<Parsed<'_>, VaultError> {
    let mut parts = stored.split('.');
    let (Some(version), Some(key_id), Some(payload), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(VaultError::Malformed {
            reason: "expected three dot-separated fields `v1.<keyid>.<payload>`",
        });
    };
    if version != VERSION {
        return Err(VaultError::Malformed {
            reason: "unknown format version (this build reads `v1`)",
        });
    }
    if key_id.len() != 2 * KEY_ID_BYTES
        || !key_id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(VaultError::Malformed { reason: "the key id is not 8 lowercase hex digits" });
    }
    Ok(Parsed { key_id, payload })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vault() -> Vault {
        Vault::new(&InstanceSecret::from_env_value(&"k".repeat(32)).unwrap())
    }

    #[test]
    fn aad_is_unambiguous() {
        let a = aad("00000000", SecretContext::new("ab", "c", "1"));
        let b = aad("00000000", SecretContext::new("a", "bc", "1"));
        let c = aad("00000000", SecretContext::new("a", "b", "c1"));
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_ne!(b, c);
    }

    #[test]
    fn key_id_is_eight_lowercase_hex_and_deterministic() {
        let v = vault();
        assert_eq!(v.key_id().len(), 8);
        assert!(v.key_id().bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_eq!(v.key_id(), vault().key_id());
    }

    #[test]
    fn key_id_does_not_leak_the_key() {
        // The key id is a different HKDF output than the key.
        let secret = InstanceSecret::from_env_value(&"k".repeat(32)).unwrap();
        let hk = Hkdf::<Sha256>::new(Some(HKDF_SALT), secret.as_bytes());
        let mut key = [0u8; KEY_LEN];
        hkdf_expand(&hk, INFO_KEY, &mut key);
        assert_ne!(to_hex(&key[..KEY_ID_BYTES]), vault().key_id());
    }

    #[test]
    fn to_hex_matches_known_values() {
        assert_eq!(to_hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
    }

    #[test]
    fn parse_rejects_malformed_values() {
        let v = vault();
        let ctx = SecretContext::new("t", "c", "r");
        let good = v.encrypt(ctx, &Secret::new("x")).unwrap();
        let payload = good.rsplit('.').next().unwrap();
        let id = v.key_id();
        let cases = [
            String::new(),
            "plaintext-api-key".to_owned(),
            format!("v2.{id}.{payload}"),
            format!("v1.{id}"),
            format!("v1.{id}.{payload}.extra"),
            format!("v1.{}.{payload}", id.to_uppercase()),
            format!("v1.{}.{payload}", &id[..7]),
            format!("v1.{id}.{payload}="),
            format!("v1.{id}.not+base64url/"),
            format!("v1.{id}.{}", &payload[..20]),
        ];
        for case in cases {
            let err = v.decrypt(ctx, &case);
            assert!(matches!(err, Err(VaultError::Malformed { .. })), "{case:?} gave {err:?}");
        }
    }

    #[test]
    fn empty_secret_round_trips() {
        let v = vault();
        let ctx = SecretContext::new("t", "c", "r");
        let stored = v.encrypt(ctx, &Secret::new("")).unwrap();
        assert_eq!(v.decrypt(ctx, &stored).unwrap().expose(), "");
    }

    #[test]
    fn debug_of_vault_shows_only_the_key_id() {
        let v = vault();
        let debug = format!("{v:?}");
        assert!(debug.contains(v.key_id()));
        assert!(!debug.contains("kkkk"));
    }
}
