//! The one error type of this crate.

use std::io;
use std::path::PathBuf;

use crate::secret::MIN_INSTANCE_SECRET_LEN;

/// Everything that can go wrong when storing, reading or loading secrets.
///
/// Messages never contain secret material; key ids, table/column/row names and
/// file paths are not secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VaultError {
    /// The stored text is not a `v1.<keyid>.<base64url>` value this crate wrote.
    #[error(
        "stored secret is malformed ({reason}); it was not written by llooma or was truncated \
         or edited by hand: set the secret again"
    )]
    Malformed {
        /// What exactly is wrong with the text (never contains the text itself).
        reason: &'static str,
    },

    /// The value was encrypted under a different instance secret.
    #[error(
        "stored secret was encrypted under key id {found}, but the configured instance secret \
         has key id {expected}: the instance secret does not match the data; configure the \
         instance secret this data was written with (or rotate from it to the new one)"
    )]
    KeyMismatch {
        /// Key id of the configured instance secret.
        expected: String,
        /// Key id recorded in the stored value.
        found: String,
    },

    /// The right key, but the ciphertext or its context does not verify.
    #[error(
        "stored secret in {table}.{column} for row {row} failed authentication: it was tampered \
         with, or copied from another row, column or table; set the secret again"
    )]
    AuthenticationFailed {
        /// Table of the context the value was read with.
        table: String,
        /// Column of the context the value was read with.
        column: String,
        /// Row of the context the value was read with.
        row: String,
    },

    /// The canary has the right key id but does not verify.
    #[error(
        "the vault canary does not verify with the configured instance secret: the instance \
         secret does not match the data (or the canary was altered); configure the instance \
         secret this data was written with"
    )]
    CanaryMismatch,

    /// The AEAD refused to encrypt (only possible for absurdly long values).
    #[error("the secret is too long to encrypt; store a shorter value")]
    PlaintextTooLong,

    /// The operating system's random number generator failed.
    #[error(
        "the operating system's random number generator failed ({0}); secrets cannot be \
         encrypted or generated until it works again"
    )]
    Random(getrandom::Error),

    /// An instance secret shorter than [`MIN_INSTANCE_SECRET_LEN`] bytes.
    #[error(
        "the instance secret is {len} bytes long but must be at least {MIN_INSTANCE_SECRET_LEN} \
         bytes; generate one with `openssl rand -base64 32`"
    )]
    InstanceSecretTooShort {
        /// Length in bytes of the value given (after trimming whitespace).
        len: usize,
    },

    /// Reading or writing the instance secret file failed.
    #[error("could not {action} the instance secret file {}: {error}", path.display())]
    SecretFileIo {
        /// What was being done: "read", "create", "replace", ...
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        error: io::Error,
    },

    /// The instance secret file exists but its content is unusable.
    #[error("the instance secret file {} is invalid: {reason}", path.display())]
    InvalidSecretFile {
        /// The file.
        path: PathBuf,
        /// What is wrong and what to do (never contains the content).
        reason: String,
    },
}
