use thiserror::Error;

/// A failure of the storage behind the broker, as the port reports it.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum PortError {
    #[error(
        "the database cannot be reached ({0}); check that it is running and DATABASE_URL is right"
    )]
    Unavailable(String),
    #[error("stored approval data is inconsistent: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Database(String),
}

/// What can go wrong in the broker. A refused, expired or interrupted call is not an error: it
/// is an [`Outcome`](crate::Outcome).
#[derive(Debug, Error)]
pub enum BrokerError {
    #[error("approval storage failed: {0}")]
    Storage(#[from] PortError),
    /// The call does not exist for this account (or at all: the two are not told apart).
    #[error("no such tool call")]
    NotFound,
    /// The arguments about to be sent differ from the ones the person was shown.
    #[error(
        "the arguments about to be sent (sha256 {sending}) are not the ones the person was \
         shown (sha256 {shown}); the call was not made"
    )]
    ArgumentsChanged { shown: String, sending: String },
    /// An answer of the wrong kind: allow/refuse on a server's question, or a form's answer on
    /// a call to allow.
    #[error("{0}")]
    WrongAnswer(&'static str),
    #[error("the stored arguments of a tool call are not valid JSON ({0})")]
    CorruptArguments(String),
}
