//! Chatto bot integrations of an account, the activation ledger the guard rails need, and the
//! lease that lets exactly one replica poll an integration.
//!
//! Every read and write of an integration by its owner names the account, so another account's
//! id is simply not found; the `*_any` methods and the runtime ones work across accounts for the
//! polling runtime. Races are settled by single statements: an activation is a unique insert, a
//! lease is claimed by one conditional update.

use sea_orm::sea_query::{Expr, SimpleExpr};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, Set,
};

use crate::entities::{bot_activations, bot_integrations, bot_leases};
use crate::{Store, StoreError, StoreResult, is_unique_violation, now_ms};

/// An integration as stored. The key is a vault ciphertext; this crate never sees it in clear.
#[derive(Clone, PartialEq, Eq)]
pub struct BotIntegration {
    pub id: String,
    pub account_id: String,
    pub label: String,
    /// The chat server's base address.
    pub address: String,
    pub api_key_ciphertext: String,
    /// Who the key belongs to (read when the connection was checked).
    pub bot_user_id: String,
    pub bot_login: String,
    pub bot_display_name: String,
    pub provider_id: Option<String>,
    pub model: Option<String>,
    /// `calling_message`, `messages_before` or `whole_thread`.
    pub context_mode: String,
    /// How many messages `messages_before` shows.
    pub context_count: i64,
    /// `where_asked`, `always_thread` or `always_room`.
    pub placement: String,
    /// `system_prompt`, `persona` or `instructions`.
    pub identity_source: String,
    pub persona_id: Option<String>,
    pub instructions: Option<String>,
    /// The built-in tools ticked, by name.
    pub tools: Vec<String>,
    /// MCP tools ticked: their calls then run unasked.
    pub mcp_ticked: bool,
    /// The owner's switch.
    pub enabled: bool,
    /// What the polling replica last reported: `idle`, `running`, `backing_off`, `slowed_down`
    /// or `paused`.
    pub run_state: String,
    /// Set while paused: what a person must fix.
    pub paused_reason: Option<String>,
    pub last_error: Option<String>,
    pub missing_permission: Option<String>,
    pub state_at_ms: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

impl std::fmt::Debug for BotIntegration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotIntegration")
            .field("id", &self.id)
            .field("label", &self.label)
            .field("address", &self.address)
            .field("run_state", &self.run_state)
            .finish_non_exhaustive()
    }
}

impl BotIntegration {
    /// Whether a replica should poll it: switched on, not paused, and a model chosen.
    pub fn is_runnable(&self) -> bool {
        self.enabled
            && self.run_state != "paused"
            && self.provider_id.is_some()
            && self.model.as_deref().is_some_and(|m| !m.is_empty())
    }
}

/// The settings of an integration (everything a person chooses but the key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotSettingsRow {
    pub label: String,
    pub provider_id: Option<String>,
    pub model: Option<String>,
    pub context_mode: String,
    pub context_count: i64,
    pub placement: String,
    pub identity_source: String,
    pub persona_id: Option<String>,
    pub instructions: Option<String>,
    pub tools: Vec<String>,
    pub mcp_ticked: bool,
    pub enabled: bool,
}

/// A checked connection: the address, the key's ciphertext and who the key belongs to.
#[derive(Clone, PartialEq, Eq)]
pub struct BotConnection {
    pub address: String,
    pub api_key_ciphertext: String,
    pub bot_user_id: String,
    pub bot_login: String,
    pub bot_display_name: String,
}

impl std::fmt::Debug for BotConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BotConnection")
            .field("address", &self.address)
            .field("bot_login", &self.bot_login)
            .finish_non_exhaustive()
    }
}

/// What the polling replica reports about an integration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BotRunReport {
    /// `running`, `backing_off`, `slowed_down` or `paused`.
    pub run_state: String,
    /// The latest failure, in words a person can act on (`None` clears it).
    pub error: Option<String>,
    pub missing_permission: Option<String>,
}

fn tools_from_json(json: &str) -> Vec<String> {
    serde_json::from_str(json).unwrap_or_default()
}

fn tools_to_json(tools: &[String]) -> String {
    serde_json::to_string(tools).unwrap_or_else(|_| "[]".to_owned())
}

fn from_model(m: bot_integrations::Model) -> BotIntegration {
    BotIntegration {
        id: m.id,
        account_id: m.account_id,
        label: m.label,
        address: m.address,
        api_key_ciphertext: m.api_key_ciphertext,
        bot_user_id: m.bot_user_id,
        bot_login: m.bot_login,
        bot_display_name: m.bot_display_name,
        provider_id: m.provider_id,
        model: m.model,
        context_mode: m.context_mode,
        context_count: m.context_count,
        placement: m.placement,
        identity_source: m.identity_source,
        persona_id: m.persona_id,
        instructions: m.instructions,
        tools: tools_from_json(&m.tools_json),
        mcp_ticked: m.mcp_ticked,
        enabled: m.enabled,
        run_state: m.run_state,
        paused_reason: m.paused_reason,
        last_error: m.last_error,
        missing_permission: m.missing_permission,
        state_at_ms: m.state_at_ms,
        created_at_ms: m.created_at_ms,
        updated_at_ms: m.updated_at_ms,
    }
}

fn settings_exprs(s: &BotSettingsRow) -> Vec<(bot_integrations::Column, SimpleExpr)> {
    use bot_integrations::Column as C;
    vec![
        (C::Label, Expr::value(s.label.clone())),
        (C::ProviderId, Expr::value(s.provider_id.clone())),
        (C::Model, Expr::value(s.model.clone())),
        (C::ContextMode, Expr::value(s.context_mode.clone())),
        (C::ContextCount, Expr::value(s.context_count)),
        (C::Placement, Expr::value(s.placement.clone())),
        (C::IdentitySource, Expr::value(s.identity_source.clone())),
        (C::PersonaId, Expr::value(s.persona_id.clone())),
        (C::Instructions, Expr::value(s.instructions.clone())),
        (C::ToolsJson, Expr::value(tools_to_json(&s.tools))),
        (C::McpTicked, Expr::value(s.mcp_ticked)),
        (C::Enabled, Expr::value(s.enabled)),
    ]
}

/// Clears the run state: a changed integration starts afresh (a pause is lifted by any change,
/// which is how a person says "I fixed it").
fn fresh_state(now: i64) -> Vec<(bot_integrations::Column, SimpleExpr)> {
    use bot_integrations::Column as C;
    vec![
        (C::RunState, Expr::value("idle")),
        (C::PausedReason, Expr::value(Option::<String>::None)),
        (C::LastError, Expr::value(Option::<String>::None)),
        (C::MissingPermission, Expr::value(Option::<String>::None)),
        (C::StateAtMs, Expr::value(now)),
    ]
}

impl Store {
    /// Adds an integration (enabled, idle) and its lease row, in one transaction. The id is
    /// chosen by the caller because the key's ciphertext is bound to it.
    pub async fn create_bot_integration(
        &self,
        id: &str,
        account_id: &str,
        connection: BotConnection,
        settings: BotSettingsRow,
    ) -> StoreResult<BotIntegration> {
        let now = now_ms();
        let model = bot_integrations::ActiveModel {
            id: Set(id.to_owned()),
            account_id: Set(account_id.to_owned()),
            label: Set(settings.label),
            address: Set(connection.address),
            api_key_ciphertext: Set(connection.api_key_ciphertext),
            bot_user_id: Set(connection.bot_user_id),
            bot_login: Set(connection.bot_login),
            bot_display_name: Set(connection.bot_display_name),
            provider_id: Set(settings.provider_id),
            model: Set(settings.model),
            context_mode: Set(settings.context_mode),
            context_count: Set(settings.context_count),
            placement: Set(settings.placement),
            identity_source: Set(settings.identity_source),
            persona_id: Set(settings.persona_id),
            instructions: Set(settings.instructions),
            tools_json: Set(tools_to_json(&settings.tools)),
            mcp_ticked: Set(settings.mcp_ticked),
            enabled: Set(settings.enabled),
            run_state: Set("idle".to_owned()),
            paused_reason: Set(None),
            last_error: Set(None),
            missing_permission: Set(None),
            state_at_ms: Set(now),
            created_at_ms: Set(now),
            updated_at_ms: Set(now),
        };
        let (_held, txn) = self.begin().await?;
        let inserted = model.insert(&txn).await?;
        bot_leases::ActiveModel {
            integration_id: Set(id.to_owned()),
            holder: Set(None),
            expires_at_ms: Set(0),
        }
        .insert(&txn)
        .await?;
        txn.commit().await?;
        Ok(from_model(inserted))
    }

    /// The account's integrations, oldest first.
    pub async fn list_bot_integrations(
        &self,
        account_id: &str,
    ) -> StoreResult<Vec<BotIntegration>> {
        Ok(bot_integrations::Entity::find()
            .filter(bot_integrations::Column::AccountId.eq(account_id))
            .order_by_asc(bot_integrations::Column::CreatedAtMs)
            .order_by_asc(bot_integrations::Column::Id)
            .all(&self.db)
            .await?
            .into_iter()
            .map(from_model)
            .collect())
    }

    /// One of the account's integrations; another account's id is not found.
    pub async fn bot_integration(
        &self,
        account_id: &str,
        id: &str,
    ) -> StoreResult<Option<BotIntegration>> {
        Ok(bot_integrations::Entity::find_by_id(id.to_owned())
            .filter(bot_integrations::Column::AccountId.eq(account_id))
            .one(&self.db)
            .await?
            .map(from_model))
    }

    /// Any integration by id (the polling runtime).
    pub async fn bot_integration_any(&self, id: &str) -> StoreResult<Option<BotIntegration>> {
        Ok(bot_integrations::Entity::find_by_id(id.to_owned()).one(&self.db).await?.map(from_model))
    }

    async fn update_bot_owned(
        &self,
        account_id: &str,
        id: &str,
        changes: Vec<(bot_integrations::Column, SimpleExpr)>,
    ) -> StoreResult<()> {
        let now = now_ms();
        let mut update = bot_integrations::Entity::update_many()
            .col_expr(bot_integrations::Column::UpdatedAtMs, Expr::value(now))
            .filter(bot_integrations::Column::Id.eq(id))
            .filter(bot_integrations::Column::AccountId.eq(account_id));
        for (column, value) in changes.into_iter().chain(fresh_state(now)) {
            update = update.col_expr(column, value);
        }
        let result = update.exec(&self.db).await?;
        if result.rows_affected == 1 { Ok(()) } else { Err(StoreError::NotFound) }
    }

    /// Replaces the settings (and lifts a pause: the integration starts afresh).
    pub async fn update_bot_settings(
        &self,
        account_id: &str,
        id: &str,
        settings: &BotSettingsRow,
    ) -> StoreResult<()> {
        self.update_bot_owned(account_id, id, settings_exprs(settings)).await
    }

    /// Replaces the address and key with a newly checked connection (and lifts a pause).
    pub async fn update_bot_connection(
        &self,
        account_id: &str,
        id: &str,
        connection: BotConnection,
    ) -> StoreResult<()> {
        use bot_integrations::Column as C;
        self.update_bot_owned(
            account_id,
            id,
            vec![
                (C::Address, Expr::value(connection.address)),
                (C::ApiKeyCiphertext, Expr::value(connection.api_key_ciphertext)),
                (C::BotUserId, Expr::value(connection.bot_user_id)),
                (C::BotLogin, Expr::value(connection.bot_login)),
                (C::BotDisplayName, Expr::value(connection.bot_display_name)),
            ],
        )
        .await
    }

    /// Deletes an integration with its ledger and lease.
    pub async fn delete_bot_integration(&self, account_id: &str, id: &str) -> StoreResult<()> {
        let result = bot_integrations::Entity::delete_many()
            .filter(bot_integrations::Column::Id.eq(id))
            .filter(bot_integrations::Column::AccountId.eq(account_id))
            .exec(&self.db)
            .await?;
        if result.rows_affected == 1 { Ok(()) } else { Err(StoreError::NotFound) }
    }

    /// Every integration a replica should poll (all accounts).
    pub async fn runnable_bot_integrations(&self) -> StoreResult<Vec<BotIntegration>> {
        Ok(bot_integrations::Entity::find()
            .filter(bot_integrations::Column::Enabled.eq(true))
            .filter(bot_integrations::Column::RunState.ne("paused"))
            .filter(bot_integrations::Column::ProviderId.is_not_null())
            .filter(bot_integrations::Column::Model.is_not_null())
            .order_by_asc(bot_integrations::Column::Id)
            .all(&self.db)
            .await?
            .into_iter()
            .map(from_model)
            .filter(BotIntegration::is_runnable)
            .collect())
    }

    /// Records what the polling replica saw. A pause keeps the error as its reason. Written only
    /// while the integration is not paused, so a late report never overwrites a pause, and only
    /// when `updated_at_ms` is still `seen_updated_at_ms`, so a report about old settings never
    /// lands on new ones.
    pub async fn report_bot_run(
        &self,
        id: &str,
        seen_updated_at_ms: i64,
        report: &BotRunReport,
    ) -> StoreResult<bool> {
        use bot_integrations::Column as C;
        let paused = report.run_state == "paused";
        let result = bot_integrations::Entity::update_many()
            .col_expr(C::RunState, Expr::value(report.run_state.clone()))
            .col_expr(C::LastError, Expr::value(report.error.clone()))
            .col_expr(C::MissingPermission, Expr::value(report.missing_permission.clone()))
            .col_expr(C::PausedReason, Expr::value(paused.then(|| report.error.clone()).flatten()))
            .col_expr(C::StateAtMs, Expr::value(now_ms()))
            .filter(C::Id.eq(id))
            .filter(C::UpdatedAtMs.eq(seen_updated_at_ms))
            .filter(C::RunState.ne("paused"))
            .exec(&self.db)
            .await?;
        Ok(result.rows_affected == 1)
    }

    /// Claims (or renews) the lease of an integration for `holder` until `now_ms + ttl_ms`: one
    /// conditional update that succeeds only when the lease is free, expired, or already
    /// `holder`'s. `true` when `holder` holds it now.
    pub async fn claim_bot_lease(
        &self,
        integration_id: &str,
        holder: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> StoreResult<bool> {
        use bot_leases::Column as C;
        let result = bot_leases::Entity::update_many()
            .col_expr(C::Holder, Expr::value(holder))
            .col_expr(C::ExpiresAtMs, Expr::value(now_ms.saturating_add(ttl_ms)))
            .filter(C::IntegrationId.eq(integration_id))
            .filter(
                Condition::any()
                    .add(C::Holder.is_null())
                    .add(C::Holder.eq(holder))
                    .add(C::ExpiresAtMs.lt(now_ms)),
            )
            .exec(&self.db)
            .await?;
        Ok(result.rows_affected == 1)
    }

    /// Gives a lease back (stopping, or the integration is no longer this replica's to run).
    pub async fn release_bot_lease(&self, integration_id: &str, holder: &str) -> StoreResult<()> {
        use bot_leases::Column as C;
        bot_leases::Entity::update_many()
            .col_expr(C::Holder, Expr::value(Option::<String>::None))
            .col_expr(C::ExpiresAtMs, Expr::value(0_i64))
            .filter(C::IntegrationId.eq(integration_id))
            .filter(C::Holder.eq(holder))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Who holds an integration's lease, and until when (a free lease has no holder).
    pub async fn bot_lease(
        &self,
        integration_id: &str,
    ) -> StoreResult<Option<(Option<String>, i64)>> {
        Ok(bot_leases::Entity::find_by_id(integration_id.to_owned())
            .one(&self.db)
            .await?
            .map(|m| (m.holder, m.expires_at_ms)))
    }

    /// Records an activation unless it is already there: `true` when this call recorded it.
    pub async fn record_bot_activation(
        &self,
        integration_id: &str,
        room_id: &str,
        event_id: &str,
        at_ms: i64,
    ) -> StoreResult<bool> {
        let row = bot_activations::ActiveModel {
            integration_id: Set(integration_id.to_owned()),
            room_id: Set(room_id.to_owned()),
            event_id: Set(event_id.to_owned()),
            recorded_at_ms: Set(at_ms),
        };
        match bot_activations::Entity::insert(row).exec_without_returning(&self.db).await {
            Ok(_) => Ok(true),
            Err(err) if is_unique_violation(&err) => Ok(false),
            Err(err) => Err(err.into()),
        }
    }

    /// When this integration's activations of the window `(since_ms, until_ms]` were recorded.
    pub async fn bot_activation_times(
        &self,
        integration_id: &str,
        since_ms: i64,
        until_ms: i64,
    ) -> StoreResult<Vec<i64>> {
        use bot_activations::Column as C;
        Ok(bot_activations::Entity::find()
            .filter(C::IntegrationId.eq(integration_id))
            .filter(C::RecordedAtMs.gt(since_ms))
            .filter(C::RecordedAtMs.lte(until_ms))
            .order_by_asc(C::RecordedAtMs)
            .all(&self.db)
            .await?
            .into_iter()
            .map(|m| m.recorded_at_ms)
            .collect())
    }

    /// Forgets activations recorded before `before_ms` (the rails need the last hour; an
    /// activation older than ten minutes is never answered anyway). Returns how many went.
    pub async fn purge_bot_activations(&self, before_ms: i64) -> StoreResult<u64> {
        let result = bot_activations::Entity::delete_many()
            .filter(bot_activations::Column::RecordedAtMs.lt(before_ms))
            .exec(&self.db)
            .await?;
        Ok(result.rows_affected)
    }
}
