//! Errors of this crate. Refusals are not errors: see [`crate::WriteVerdict`].

use crate::wrap::ContentKind;

/// What can go wrong configuring the guard.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// A length cap is too small to show anything useful.
    #[error(
        "the length cap for {kind} text is {value} bytes; it must be at least {min} bytes so a \
         server's text can be shown at all; raise it in the settings or leave it at its default"
    )]
    CapTooSmall {
        /// Which cap.
        kind: ContentKind,
        /// The configured value.
        value: usize,
        /// The smallest accepted value.
        min: usize,
    },
}
