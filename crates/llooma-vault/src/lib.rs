//! Secrets at rest for llooma: provider API keys, OAuth tokens and the like
//! are stored encrypted in TEXT columns.
//!
//! # Format
//!
//! A stored value is `v1.<keyid>.<base64url(nonce || ciphertext)>` (unpadded
//! base64url, so it contains no `.` and fits a TEXT column):
//!
//! - **XChaCha20-Poly1305** with a fresh random 24-byte nonce per value: the
//!   nonce is large enough to be drawn at random without ever repeating, so
//!   two encryptions of the same value differ and nothing about equality leaks.
//! - The key is derived with **HKDF-SHA256** from the instance secret (a random
//!   value of at least 32 bytes, see [`InstanceSecret`]); nothing else needs to
//!   be kept.
//! - **Associated data** binds each ciphertext to its place: the table, column
//!   and row (and the key id and format version), each length-prefixed so no
//!   two contexts encode alike. A ciphertext copied into another row, column
//!   or table therefore fails to decrypt instead of handing one account's key
//!   to another: see [`SecretContext`].
//! - The **key id** (8 hex digits, a second HKDF output with a different info
//!   string, so it reveals nothing about the key) says which instance secret a
//!   value was written with. A wrong instance secret is then reported as such
//!   ([`VaultError::KeyMismatch`]) rather than as corruption, and
//!   [`Vault::reencrypt`] can rotate row by row, skipping rows already done.
//!
//! At start-up, [`Vault::check_canary`] on a stored [`Vault::make_canary`]
//! value detects that the configured secret does not match the data before
//! any real secret is touched.
//!
//! # Instance secret
//!
//! Either a configuration value ([`InstanceSecret::from_env_value`]) or a file
//! created on first start with mode 0600 ([`load_or_create_secret_file`]). Both
//! hold the same kind of text, so the file's content can be moved into an
//! environment variable unchanged.
//!
//! This crate never logs: insecure file permissions come back as a
//! [`PermissionWarning`] for the caller to log.

mod error;
mod file;
mod secret;
mod vault;

pub use error::VaultError;
pub use file::{
    PermissionWarning, SecretFileStatus, load_or_create_secret_file, read_secret_file,
    write_secret_file,
};
pub use secret::{InstanceSecret, MIN_INSTANCE_SECRET_LEN, Secret};
pub use vault::{SecretContext, Vault};
