//! MCP servers an account added, their stored catalogue snapshot, group switches, and the
//! account's tool settings.
//!
//! Every read and write of a server names the owning account, so one account's id never reaches
//! another's server; only the `admin_*` methods work across accounts.

use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};

use crate::entities::{account_tool_settings, accounts, mcp_group_switches, mcp_servers};
use crate::{Store, StoreError, StoreResult, is_unique_violation, now_ms};

/// An administrator's suspension of a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suspension {
    pub reason: String,
    pub at_ms: i64,
    /// The administrator's account id.
    pub by: String,
}

/// A server as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct McpServer {
    pub id: String,
    pub account_id: String,
    pub label: String,
    /// The server half of model-facing names; chosen once, never changed.
    pub slug: String,
    pub address: String,
    pub token_ciphertext: Option<String>,
    /// The owner's own switch.
    pub enabled: bool,
    pub suspension: Option<Suspension>,
    /// The catalogue as JSON (the MCP client's snapshot type).
    pub snapshot_json: String,
    pub snapshot_taken_at_ms: i64,
    /// The server said its tools changed since the snapshot.
    pub snapshot_stale: bool,
    pub position: i64,
    pub created_at_ms: i64,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("id", &self.id)
            .field("label", &self.label)
            .field("address", &self.address)
            .field("has_token", &self.token_ciphertext.is_some())
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Whether its tools may be offered: the owner's switch is on and no administrator suspended it.
    pub fn is_active(&self) -> bool {
        self.enabled && self.suspension.is_none()
    }
}

/// What is needed to add a server. The id is chosen by the caller (the token is bound to it).
#[derive(Clone)]
pub struct NewMcpServer {
    pub id: String,
    pub account_id: String,
    pub label: String,
    pub address: String,
    pub token_ciphertext: Option<String>,
    pub snapshot_json: String,
}

impl std::fmt::Debug for NewMcpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewMcpServer").field("label", &self.label).finish_non_exhaustive()
    }
}

/// An account's tool settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSettings {
    /// How many tools may reach the model, across every server and group switched on.
    pub tool_budget: u32,
    /// MCP tools on in every conversation (otherwise per conversation, off by default).
    pub mcp_everywhere: bool,
    /// Experimental: announce servers instead of sending their tools.
    pub announce_mode: bool,
}

impl Default for ToolSettings {
    fn default() -> Self {
        ToolSettings { tool_budget: 200, mcp_everywhere: false, announce_mode: false }
    }
}

fn from_model(m: mcp_servers::Model) -> McpServer {
    let suspension = match (m.suspended_reason, m.suspended_at_ms, m.suspended_by) {
        (Some(reason), Some(at_ms), Some(by)) => Some(Suspension { reason, at_ms, by }),
        _ => None,
    };
    McpServer {
        id: m.id,
        account_id: m.account_id,
        label: m.label,
        slug: m.slug,
        address: m.address,
        token_ciphertext: m.token_ciphertext,
        enabled: m.enabled,
        suspension,
        snapshot_json: m.snapshot_json,
        snapshot_taken_at_ms: m.snapshot_taken_at_ms,
        snapshot_stale: m.snapshot_stale,
        position: m.position,
        created_at_ms: m.created_at_ms,
    }
}

const SLUG_ATTEMPTS: usize = 5;

impl Store {
    /// Adds a server. `choose_slug` gets the account's slugs in use and returns the new one;
    /// two adds racing for the same slug are retried, so slugs stay unique and stable.
    pub async fn create_mcp_server(
        &self,
        new: NewMcpServer,
        choose_slug: impl Fn(&[String]) -> String,
    ) -> StoreResult<McpServer> {
        for _ in 0..SLUG_ATTEMPTS {
            let (_held, txn) = self.begin().await?;
            let existing: Vec<(String, i64)> = mcp_servers::Entity::find()
                .select_only()
                .column(mcp_servers::Column::Slug)
                .column(mcp_servers::Column::Position)
                .filter(mcp_servers::Column::AccountId.eq(&new.account_id))
                .into_tuple()
                .all(&txn)
                .await?;
            let slugs: Vec<String> = existing.iter().map(|(s, _)| s.clone()).collect();
            let position = existing.iter().map(|(_, p)| *p).max().unwrap_or(0) + 1;
            let now = now_ms();
            let model = mcp_servers::ActiveModel {
                id: Set(new.id.clone()),
                account_id: Set(new.account_id.clone()),
                label: Set(new.label.clone()),
                slug: Set(choose_slug(&slugs)),
                address: Set(new.address.clone()),
                token_ciphertext: Set(new.token_ciphertext.clone()),
                enabled: Set(true),
                suspended_reason: Set(None),
                suspended_at_ms: Set(None),
                suspended_by: Set(None),
                snapshot_json: Set(new.snapshot_json.clone()),
                snapshot_taken_at_ms: Set(now),
                snapshot_stale: Set(false),
                position: Set(position),
                created_at_ms: Set(now),
                updated_at_ms: Set(now),
            };
            match model.insert(&txn).await {
                Ok(model) => {
                    txn.commit().await?;
                    return Ok(from_model(model));
                }
                Err(err) if is_unique_violation(&err) => {
                    txn.rollback().await?;
                    continue;
                }
                Err(err) => return Err(err.into()),
            }
        }
        Err(StoreError::Database("could not choose a unique server name; try again".into()))
    }

    /// The account's servers, in the order they were added.
    pub async fn list_mcp_servers(&self, account_id: &str) -> StoreResult<Vec<McpServer>> {
        let query = mcp_servers::Entity::find()
            .filter(mcp_servers::Column::AccountId.eq(account_id))
            .order_by_asc(mcp_servers::Column::Position);
        Ok(self.find_all(query).await?.into_iter().map(from_model).collect())
    }

    /// One of the account's servers; another account's id is simply not found.
    pub async fn mcp_server(&self, account_id: &str, id: &str) -> StoreResult<Option<McpServer>> {
        let query = mcp_servers::Entity::find_by_id(id.to_owned())
            .filter(mcp_servers::Column::AccountId.eq(account_id));
        Ok(self.find_one(query).await?.map(from_model))
    }

    async fn update_owned(
        &self,
        account_id: &str,
        id: &str,
        changes: Vec<(mcp_servers::Column, sea_orm::sea_query::SimpleExpr)>,
    ) -> StoreResult<()> {
        let mut update = mcp_servers::Entity::update_many()
            .col_expr(mcp_servers::Column::UpdatedAtMs, Expr::value(now_ms()))
            .filter(mcp_servers::Column::Id.eq(id))
            .filter(mcp_servers::Column::AccountId.eq(account_id));
        for (column, value) in changes {
            update = update.col_expr(column, value);
        }
        let result = update.exec(&self.db).await?;
        if result.rows_affected == 1 { Ok(()) } else { Err(StoreError::NotFound) }
    }

    /// Renames a server (its slug, and so its tools' names, stay as they are).
    pub async fn rename_mcp_server(
        &self,
        account_id: &str,
        id: &str,
        label: &str,
    ) -> StoreResult<()> {
        self.update_owned(account_id, id, vec![(mcp_servers::Column::Label, Expr::value(label))])
            .await
    }

    /// The owner's own on/off switch.
    pub async fn set_mcp_server_enabled(
        &self,
        account_id: &str,
        id: &str,
        enabled: bool,
    ) -> StoreResult<()> {
        self.update_owned(
            account_id,
            id,
            vec![(mcp_servers::Column::Enabled, Expr::value(enabled))],
        )
        .await
    }

    pub async fn set_mcp_server_token(
        &self,
        account_id: &str,
        id: &str,
        ciphertext: Option<String>,
    ) -> StoreResult<()> {
        self.update_owned(
            account_id,
            id,
            vec![(mcp_servers::Column::TokenCiphertext, Expr::value(ciphertext))],
        )
        .await
    }

    /// Replaces the catalogue snapshot and sets the "stale" mark (true: newer tools wait for review).
    pub async fn replace_mcp_snapshot(
        &self,
        account_id: &str,
        id: &str,
        snapshot_json: &str,
        stale: bool,
    ) -> StoreResult<()> {
        self.update_owned(
            account_id,
            id,
            vec![
                (mcp_servers::Column::SnapshotJson, Expr::value(snapshot_json)),
                (mcp_servers::Column::SnapshotTakenAtMs, Expr::value(now_ms())),
                (mcp_servers::Column::SnapshotStale, Expr::value(stale)),
            ],
        )
        .await
    }

    /// Records that a server reported new tools since its snapshot.
    pub async fn mark_mcp_snapshot_stale(&self, id: &str) -> StoreResult<()> {
        mcp_servers::Entity::update_many()
            .col_expr(mcp_servers::Column::SnapshotStale, Expr::value(true))
            .filter(mcp_servers::Column::Id.eq(id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    pub async fn delete_mcp_server(&self, account_id: &str, id: &str) -> StoreResult<()> {
        match self.mcp_server(account_id, id).await? {
            Some(server) => self.delete_with_consent(&server).await,
            None => Err(StoreError::NotFound),
        }
    }

    /// Deletes a server and, unless another server of the same account has the same address,
    /// the "Always allow" grants and allow rules given for that address: consent given to a
    /// server that was removed must not come back with whatever is added at its address later.
    async fn delete_with_consent(&self, server: &McpServer) -> StoreResult<()> {
        use crate::consent::{grants_entity as grants, rules_entity as rules};
        let (_held, txn) = self.begin().await?;
        let result = mcp_servers::Entity::delete_by_id(server.id.clone()).exec(&txn).await?;
        if result.rows_affected != 1 {
            return Err(StoreError::NotFound);
        }
        let others = mcp_servers::Entity::find()
            .filter(mcp_servers::Column::AccountId.eq(&server.account_id))
            .filter(mcp_servers::Column::Address.eq(&server.address))
            .one(&txn)
            .await?;
        if others.is_none() {
            grants::Entity::delete_many()
                .filter(grants::Column::AccountId.eq(&server.account_id))
                .filter(grants::Column::ServerAddress.eq(&server.address))
                .exec(&txn)
                .await?;
            rules::Entity::delete_many()
                .filter(rules::Column::AccountId.eq(&server.account_id))
                .filter(rules::Column::ServerAddress.eq(&server.address))
                .exec(&txn)
                .await?;
        }
        txn.commit().await?;
        Ok(())
    }

    /// Every server of the instance with its owner's username, for administrators.
    pub async fn admin_list_mcp_servers(&self) -> StoreResult<Vec<(McpServer, String)>> {
        let servers = mcp_servers::Entity::find()
            .order_by_asc(mcp_servers::Column::CreatedAtMs)
            .all(&self.db)
            .await?;
        let owners: std::collections::HashMap<String, String> = accounts::Entity::find()
            .select_only()
            .column(accounts::Column::Id)
            .column(accounts::Column::Username)
            .into_tuple::<(String, String)>()
            .all(&self.db)
            .await?
            .into_iter()
            .collect();
        Ok(servers
            .into_iter()
            .map(|m| {
                let owner = owners.get(&m.account_id).cloned().unwrap_or_default();
                (from_model(m), owner)
            })
            .collect())
    }

    pub async fn admin_mcp_server(&self, id: &str) -> StoreResult<Option<McpServer>> {
        Ok(mcp_servers::Entity::find_by_id(id.to_owned()).one(&self.db).await?.map(from_model))
    }

    /// Suspends (with a reason the owner sees) or, with `None`, lifts the suspension.
    pub async fn admin_suspend_mcp_server(
        &self,
        id: &str,
        suspension: Option<Suspension>,
    ) -> StoreResult<()> {
        let (reason, at, by) = match suspension {
            Some(s) => (Some(s.reason), Some(s.at_ms), Some(s.by)),
            None => (None, None, None),
        };
        let result = mcp_servers::Entity::update_many()
            .col_expr(mcp_servers::Column::SuspendedReason, Expr::value(reason))
            .col_expr(mcp_servers::Column::SuspendedAtMs, Expr::value(at))
            .col_expr(mcp_servers::Column::SuspendedBy, Expr::value(by))
            .col_expr(mcp_servers::Column::UpdatedAtMs, Expr::value(now_ms()))
            .filter(mcp_servers::Column::Id.eq(id))
            .exec(&self.db)
            .await?;
        if result.rows_affected == 1 { Ok(()) } else { Err(StoreError::NotFound) }
    }

    pub async fn admin_delete_mcp_server(&self, id: &str) -> StoreResult<()> {
        match self.admin_mcp_server(id).await? {
            Some(server) => self.delete_with_consent(&server).await,
            None => Err(StoreError::NotFound),
        }
    }

    /// Stored group switches of a server: (group key, on). Absent groups are on.
    pub async fn mcp_group_switches(&self, server_id: &str) -> StoreResult<Vec<(String, bool)>> {
        let query = mcp_group_switches::Entity::find()
            .filter(mcp_group_switches::Column::ServerId.eq(server_id));
        Ok(self.find_all(query).await?.into_iter().map(|m| (m.group_key, m.enabled)).collect())
    }

    pub async fn set_mcp_group_switch(
        &self,
        server_id: &str,
        group_key: &str,
        enabled: bool,
    ) -> StoreResult<()> {
        mcp_group_switches::Entity::insert(mcp_group_switches::ActiveModel {
            server_id: Set(server_id.to_owned()),
            group_key: Set(group_key.to_owned()),
            enabled: Set(enabled),
        })
        .on_conflict(
            OnConflict::columns([
                mcp_group_switches::Column::ServerId,
                mcp_group_switches::Column::GroupKey,
            ])
            .update_column(mcp_group_switches::Column::Enabled)
            .to_owned(),
        )
        .exec(&self.db)
        .await?;
        Ok(())
    }

    pub async fn tool_settings(&self, account_id: &str) -> StoreResult<ToolSettings> {
        Ok(self
            .find_one(account_tool_settings::Entity::find_by_id(account_id.to_owned()))
            .await?
            .map(|m| ToolSettings {
                tool_budget: u32::try_from(m.tool_budget).unwrap_or(u32::MAX),
                mcp_everywhere: m.mcp_everywhere,
                announce_mode: m.announce_mode,
            })
            .unwrap_or_default())
    }

    pub async fn set_tool_settings(
        &self,
        account_id: &str,
        settings: &ToolSettings,
    ) -> StoreResult<()> {
        account_tool_settings::Entity::insert(account_tool_settings::ActiveModel {
            account_id: Set(account_id.to_owned()),
            tool_budget: Set(i64::from(settings.tool_budget)),
            mcp_everywhere: Set(settings.mcp_everywhere),
            announce_mode: Set(settings.announce_mode),
            updated_at_ms: Set(now_ms()),
        })
        .on_conflict(
            OnConflict::column(account_tool_settings::Column::AccountId)
                .update_columns([
                    account_tool_settings::Column::ToolBudget,
                    account_tool_settings::Column::McpEverywhere,
                    account_tool_settings::Column::AnnounceMode,
                    account_tool_settings::Column::UpdatedAtMs,
                ])
                .to_owned(),
        )
        .exec(&self.db)
        .await?;
        Ok(())
    }
}
