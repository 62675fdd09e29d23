//! Newtypes for secret material: [`Secret`] (a value to store) and
//! [`InstanceSecret`] (the key material of an instance).

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Deserialize;
use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::VaultError;

/// Minimum length in bytes of an instance secret.
pub const MIN_INSTANCE_SECRET_LEN: usize = 32;

/// A secret value (API key, token, password) in memory.
///
/// - `Debug` prints `Secret([REDACTED])`; there is no `Display`.
/// - Zeroized on drop.
/// - `Deserialize` (it arrives in request bodies) but deliberately **not**
///   `Serialize`, so it cannot end up in a response by accident.
/// - No `PartialEq`: compare [`Secret::expose`] explicitly where you must.
#[derive(Clone, Zeroize, ZeroizeOnDrop, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself. Keep the borrow short and never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([REDACTED])")
    }
}

/// The instance secret: the key material all stored secrets are derived from.
///
/// It is *text* (at least [`MIN_INSTANCE_SECRET_LEN`] bytes once surrounding
/// whitespace is trimmed) and its UTF-8 bytes are the HKDF input, so the same
/// text works as an environment variable or as the content of the secret file.
/// Base64, hex or any long random string are all fine.
///
/// `Debug` is redacted; the bytes are zeroized on drop.
#[derive(Zeroize, ZeroizeOnDrop)]
pub struct InstanceSecret(Vec<u8>);

impl InstanceSecret {
    /// Takes the instance secret from a configuration value (e.g. an
    /// environment variable). Surrounding whitespace is ignored; the rest must
    /// be at least [`MIN_INSTANCE_SECRET_LEN`] bytes.
    pub fn from_env_value(value: &str) -> Result<Self, VaultError> {
        let trimmed = value.trim();
        if trimmed.len() < MIN_INSTANCE_SECRET_LEN {
            return Err(VaultError::InstanceSecretTooShort { len: trimmed.len() });
        }
        Ok(Self(trimmed.as_bytes().to_vec()))
    }

    /// A fresh instance secret: 32 random bytes, as base64 text.
    pub fn generate() -> Result<Self, VaultError> {
        let mut raw = Zeroizing::new([0u8; 32]);
        getrandom::fill(raw.as_mut_slice()).map_err(VaultError::Random)?;
        Ok(Self(STANDARD.encode(raw.as_slice()).into_bytes()))
    }

    /// The key material, for key derivation and for writing the secret file.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for InstanceSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InstanceSecret([REDACTED])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_env_value_rejects_short_values_and_trims() {
        let err = InstanceSecret::from_env_value("  too short\n");
        assert!(matches!(err, Err(VaultError::InstanceSecretTooShort { len: 9 })));
        let ok = InstanceSecret::from_env_value(&format!(" {}\n", "a".repeat(32)));
        assert_eq!(ok.map(|s| s.as_bytes().to_vec()).ok(), Some(vec![b'a'; 32]));
    }

    #[test]
    fn too_short_message_says_what_to_do() {
        let msg =
            InstanceSecret::from_env_value("x").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("at least 32"), "{msg}");
        assert!(msg.contains("openssl rand"), "{msg}");
    }

    #[test]
    fn generated_secrets_are_long_text_and_differ() -> Result<(), VaultError> {
        let a = InstanceSecret::generate()?;
        let b = InstanceSecret::generate()?;
        assert!(a.as_bytes().len() >= MIN_INSTANCE_SECRET_LEN);
        assert!(std::str::from_utf8(a.as_bytes()).is_ok());
        assert_ne!(a.as_bytes(), b.as_bytes());
        // Round-trips through the env-value path unchanged.
        let text = String::from_utf8(a.as_bytes().to_vec()).unwrap_or_default();
        assert_eq!(InstanceSecret::from_env_value(&text)?.as_bytes(), a.as_bytes());
        Ok(())
    }

    #[test]
    fn secret_deserializes_from_a_json_string() {
        let s: Result<Secret, _> = serde_json::from_str("\"sk-123\"");
        assert_eq!(s.ok().as_ref().map(Secret::expose), Some("sk-123"));
    }
}
