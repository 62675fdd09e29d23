//! Chatto bot integrations: a bot account on a Chatto server, answered by a Llooma model.
//!
//! Everything Chatto-specific in Llooma lives in this crate. Its parts:
//! - [`wire`]: Chatto's Connect-JSON types (proto3 JSON mapping, lenient on unknown and absent
//!   fields).
//! - [`ChattoClient`]: the calls a bot makes, over [`llooma_net::NetClient`] (purpose `bot`), the
//!   API key sent as `Authorization: Bearer` and never printed.
//! - [`chat`]: the server-neutral side: [`ChatServer`] (what the logic needs from any chat
//!   server), and the ports the rest of Llooma implements: [`ActivationLedger`] (storage) and
//!   [`Responder`] (the model).
//! - [`logic`] and [`split`]: pure decisions: which notices wake the bot, guard rails, context,
//!   placement, splitting. No IO.
//! - [`ChattoServer`]: Chatto behind [`ChatServer`].
//! - [`run_tick`]: one poll of one integration.
//! - [`runtime`]: the polling loop (leases, intervals, back-off, pauses) over the
//!   [`RuntimePort`] the server implements (storage, the lease, the model).
//!
//! Invariants: this crate builds no HTTP client (it is given a [`llooma_net::NetClient`]), stores
//! nothing, and never puts the API key in a `Debug` string, a log line or an error.

pub mod chat;
mod client;
mod error;
pub mod logic;
pub mod runtime;
mod server;
pub mod split;
mod tick;
pub mod wire;

pub use chat::{
    ActivationKey, ActivationLedger, ChatMessage, ChatServer, ErrorAction, ModelMessage, Notice,
    OutgoingPost, Responder, Role, Room, RoomKind, ServerError, Speaker, Trigger,
};
pub use client::{ChattoClient, MAX_EVENTS_PAGE, MAX_NOTIFICATION_PAGE};
pub use error::{ChattoError, Rpc};
pub use logic::{
    Activation, ContextMode, Dropped, MAX_ACTIVATION_AGE, MAX_REPLIES_PER_HOUR, Placement,
    PlacementMode, Selection,
};
pub use runtime::{IntegrationSpec, RunReport, RunState, RuntimeConfig, RuntimePort};
pub use server::ChattoServer;
pub use split::{BODY_LIMIT_BYTES, MAX_PART_BYTES, split_answer};
pub use tick::{
    BotSettings, Follow, Handled, MemoryLedger, NeverFails, Outcome, PostInterrupted, Stopped,
    TickReport, post_all, run_tick,
};

/// Checks an address and key before an integration is saved: the key must be accepted, and
/// belong to a bot account. Returns who the bot is.
pub async fn check_connection(
    net: llooma_net::NetClient,
    address: &str,
    key: llooma_vault::Secret,
) -> Result<Speaker, ChattoError> {
    let client = ChattoClient::new(net, address, key)?;
    let user = client.check_connection().await?;
    Ok(Speaker {
        id: user.id.clone(),
        login: user.login.clone(),
        display_name: user.display_name.clone(),
        is_bot: true,
    })
}
