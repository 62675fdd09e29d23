//! Errors of this crate.

/// What can go wrong building a [`crate::NameTable`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NamingError {
    /// The same server id was given twice.
    #[error(
        "server at position {position} repeats an id already in the catalogue; \
         list each server once with all of its tools"
    )]
    DuplicateServer {
        /// Zero-based position of the repeated server in the input.
        position: usize,
    },
}
