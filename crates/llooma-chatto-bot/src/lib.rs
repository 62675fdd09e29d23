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
//! - [`run_tick`]: one poll of one integration. The loop, the lease and storage are the
//!   runtime's.
//!
//! Invariants: this crate builds no HTTP client (it is given a [`llooma_net::NetClient`]), stores
//! nothing, and never puts the API key in a `Debug` string, a log line or an error.

pub mod chat;
mod client;
mod error;
pub mod logic;
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
pub use server::ChattoServer;
pub use split::{BODY_LIMIT_BYTES, MAX_PART_BYTES, split_answer};
pub use tick::{
    BotSettings, Handled, MemoryLedger, NeverFails, Outcome, PostInterrupted, Stopped, TickReport,
    post_all, run_tick,
};
