//! Why a turn failed ([`TurnError`]) and why an application operation could not be done
//! ([`AppError`]). Messages are written for the person or the operator and never hold a key,
//! a token or an upstream body beyond the short excerpts the lower crates keep.

use llooma_approval_broker::BrokerError;
use llooma_mcp_client::McpError;
use llooma_providers::ProviderError;
use llooma_store::StoreError;

/// The sink could not record an event (the database went away): the turn stops.
#[derive(Debug, thiserror::Error)]
#[error("the turn's events could not be recorded: {0}")]
pub struct SinkError(pub String);

/// Why a turn ended failed. The message is what the person reads under the reply.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The model provider failed (unreachable, refused the key, stopped answering, ...).
    #[error(transparent)]
    Model(#[from] ProviderError),
    /// What the turn produced could not be written down.
    #[error(transparent)]
    Record(#[from] SinkError),
    /// The approval of an MCP call could not be stored or checked.
    #[error(transparent)]
    Approval(#[from] BrokerError),
    /// The conversation's (or bot's) model provider no longer exists.
    #[error("the conversation's model provider was removed; choose another model")]
    ProviderRemoved,
    /// The provider's stored key cannot be decrypted with the instance secret.
    #[error("the provider's key cannot be read: {0}")]
    ProviderKey(String),
    /// The database failed while the turn was being prepared.
    #[error(transparent)]
    Storage(#[from] StoreError),
    /// Something the turn was built from is unusable (a stored snapshot, a token that cannot
    /// be decrypted, the outbound client).
    #[error("{0}")]
    Setup(String),
    /// The person's message and the instructions alone leave no room in the model's context
    /// window (no summary of earlier messages can make room).
    #[error(
        "this message and the instructions fill about {used} tokens of the model's \
         {window}-token context window: shorten the message, or choose a model with a larger \
         window (an administrator sets each model's window under Admin → Providers)"
    )]
    TooLong { used: u64, window: u32 },
}

/// Why an application operation was not done. The API maps each to one status code; the
/// message says what happened and what to do.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// What was asked is malformed or out of range (`code` names the problem).
    #[error("{message}")]
    Invalid { code: &'static str, message: String },
    /// The account may not do this.
    #[error("{0}")]
    Forbidden(String),
    /// Nothing of this account's is there (another account's id looks the same).
    #[error("not found")]
    NotFound,
    /// Understood, but what it points at cannot be used (an MCP server that does not answer,
    /// refuses the token, or is not allowed by the network policy).
    #[error("{message}")]
    Unprocessable { code: &'static str, message: String },
    /// The current state does not allow it (a reply still running, a name taken, ...).
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// Too much of this work is under way on the instance; the same request works in a moment.
    #[error("{0}")]
    Busy(String),
    /// A usage limit of the account does not allow it now: which limit, and when it resets.
    #[error("{message}")]
    LimitReached { message: String, retry_after_secs: u64 },
    /// The database cannot be reached; nothing was changed.
    #[error("{0}")]
    Unavailable(String),
    /// A bug or broken stored data: logged, answered with a generic sentence.
    #[error("internal error: {0}")]
    Internal(String),
}

impl AppError {
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        AppError::Invalid { code, message: message.into() }
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        AppError::Conflict { code, message: message.into() }
    }

    pub fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        AppError::Unprocessable { code, message: message.into() }
    }
}

impl From<StoreError> for AppError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Unavailable(detail) => {
                tracing::error!(%detail, "database unavailable");
                AppError::Unavailable(
                    "The database cannot be reached right now. Nothing was changed; try again in \
                     a moment."
                        .into(),
                )
            }
            StoreError::UsernameTaken => AppError::conflict(
                "username_taken",
                "That username is already taken; choose another.",
            ),
            StoreError::NameTaken => {
                AppError::conflict("name_taken", "That name is already used; choose another.")
            }
            StoreError::NotFound => AppError::NotFound,
            StoreError::TurnRunning => AppError::conflict(
                "turn_running",
                "A reply is still being written in this conversation; wait for it or stop it.",
            ),
            other => AppError::Internal(other.to_string()),
        }
    }
}

/// How an MCP client error reaches a person: what happened and what to do, never the token.
impl From<McpError> for AppError {
    fn from(err: McpError) -> Self {
        let code = match &err {
            McpError::Busy { .. } => return AppError::Busy(err.to_string()),
            McpError::InvalidUrl { .. } => {
                return AppError::invalid("invalid_url", err.to_string());
            }
            McpError::Refused { .. } => "address_refused",
            McpError::Unreachable { .. } => "mcp_unreachable",
            McpError::TokenRefused { .. } => "mcp_token_refused",
            McpError::Timeout { .. } => "mcp_timeout",
            McpError::HttpStatus { .. } => "mcp_http_status",
            McpError::Protocol { .. } => "mcp_protocol",
            McpError::TooLarge { .. } => "mcp_too_large",
            _ => "mcp_error",
        };
        AppError::Unprocessable { code, message: err.to_string() }
    }
}

impl From<BrokerError> for AppError {
    fn from(err: BrokerError) -> Self {
        match err {
            BrokerError::NotFound => AppError::NotFound,
            BrokerError::Storage(llooma_approval_broker::PortError::Unavailable(detail)) => {
                AppError::from(StoreError::Unavailable(detail))
            }
            other => AppError::Internal(format!("approvals: {other}")),
        }
    }
}
