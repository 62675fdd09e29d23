//! Data shapes shared by the server and the browser: what the JSON API sends and receives.
//!
//! Serde only: this crate does no IO and builds for `wasm32-unknown-unknown`, so the web client
//! and the server agree on the wire format by construction. Nothing here ever carries a secret:
//! a token or key is described by whether it is set (`has_key`), never by its value.

use serde::{Deserialize, Serialize};

/// What an account may do on the instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Manages the instance: settings, providers, every account's MCP servers.
    Admin,
    /// Uses the instance within what administrators allow.
    User,
}

impl Role {
    /// The name stored in the database and shown in the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::User => "user",
        }
    }

    /// Reads a stored role name.
    pub fn parse(value: &str) -> Option<Role> {
        match value {
            "admin" => Some(Role::Admin),
            "user" => Some(Role::User),
            _ => None,
        }
    }
}

/// An account as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountView {
    pub id: String,
    pub username: String,
    pub display_name: String,
    pub role: Role,
    /// RFC 3339.
    pub created_at: String,
}

/// The answer to login, registration and `GET /api/v1/me`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    pub account: AccountView,
    /// Send back as the `X-CSRF-Token` header on every state-changing request.
    pub csrf_token: String,
}

/// What administrators decide for the whole instance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceSettingsView {
    /// Whether people may create accounts themselves after the first one.
    pub registration_open: bool,
    /// Whether accounts that are not administrators may add their own MCP servers.
    pub users_can_add_mcp_servers: bool,
}

/// A change to the instance settings; absent fields stay as they are.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstanceSettingsPatch {
    pub registration_open: Option<bool>,
    pub users_can_add_mcp_servers: Option<bool>,
}

/// What anyone, signed in or not, may know about the instance (the sign-in page needs it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceInfo {
    /// False until the first account exists; that account becomes the administrator.
    pub setup_complete: bool,
    pub registration_open: bool,
    pub version: String,
}

/// A model provider as administrators see it. The key itself never leaves the server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderView {
    pub id: String,
    pub name: String,
    pub base_url: String,
    pub has_key: bool,
    pub created_at: String,
}

/// The one error shape of the API.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// A stable, machine-readable code such as `invalid_json` or `csrf`.
    pub error: String,
    /// A sentence for a person: what happened and what to do.
    pub message: String,
}
