//! Usage, prices and limits (see migration m0026). Each model request adds to one row per
//! account, UTC day, provider and model, in one statement that also prices it; limits are read
//! from those rows, and turns per minute are counted in one conditional statement, so replicas
//! share every count.

use sea_orm::sea_query::OnConflict;
use sea_orm::{ConnectionTrait, EntityTrait, Set, Statement};

use crate::entities::{account_limits, model_prices};
use crate::{Store, StoreResult, now_ms, numbered_placeholders};

/// What one account may use; `None` is no limit. Spend is in millionths of the currency.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageLimits {
    pub tokens_per_day: Option<i64>,
    pub tokens_per_month: Option<i64>,
    pub spend_micros_per_day: Option<i64>,
    pub spend_micros_per_month: Option<i64>,
    pub turns_per_minute: Option<i64>,
}

impl UsageLimits {
    /// True when nothing is limited.
    pub fn is_empty(&self) -> bool {
        *self == UsageLimits::default()
    }
}

/// What requests of one account, on one day, to one model used.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsageRow {
    pub account_id: String,
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    pub provider_id: String,
    pub model: String,
    pub requests: i64,
    /// Of the requests, those whose provider reported nothing: their tokens are estimates.
    pub estimated_requests: i64,
    /// Prompt tokens, those from the cache included.
    pub input_tokens: i64,
    pub cached_input_tokens: i64,
    pub output_tokens: i64,
    /// Priced when each request was made, in billionths of the currency.
    pub spend_nanos: i64,
}

/// A model's price per million tokens, in millionths of the currency.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelPrice {
    pub provider_id: String,
    pub model: String,
    pub input_micros: i64,
    /// For prompt tokens from the cache; `None`: the input price.
    pub cached_input_micros: Option<i64>,
    pub output_micros: i64,
}

/// An account's use so far today and this month (UTC): tokens, and spend in nanounits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsedSoFar {
    pub tokens_today: i64,
    pub tokens_this_month: i64,
    pub spend_nanos_today: i64,
    pub spend_nanos_this_month: i64,
}

fn limits_of(row: &account_limits::Model) -> UsageLimits {
    UsageLimits {
        tokens_per_day: row.tokens_per_day,
        tokens_per_month: row.tokens_per_month,
        spend_micros_per_day: row.spend_micros_per_day,
        spend_micros_per_month: row.spend_micros_per_month,
        turns_per_minute: row.turns_per_minute,
    }
}

const ADD_USAGE: &str = "INSERT INTO usage_days (account_id, day, provider_id, model, requests, \
    estimated_requests, input_tokens, cached_input_tokens, output_tokens, spend_nanos) \
    SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, COALESCE((SELECT (? * p.input_micros \
    + ? * COALESCE(p.cached_input_micros, p.input_micros) + ? * p.output_micros) / 1000 \
    FROM model_prices p WHERE p.provider_id = ? AND p.model = ?), 0) WHERE TRUE \
    ON CONFLICT (account_id, day, provider_id, model) DO UPDATE SET \
    requests = usage_days.requests + excluded.requests, \
    estimated_requests = usage_days.estimated_requests + excluded.estimated_requests, \
    input_tokens = usage_days.input_tokens + excluded.input_tokens, \
    cached_input_tokens = usage_days.cached_input_tokens + excluded.cached_input_tokens, \
    output_tokens = usage_days.output_tokens + excluded.output_tokens, \
    spend_nanos = usage_days.spend_nanos + excluded.spend_nanos";

const USED_SO_FAR: &str = "SELECT \
    CAST(COALESCE(SUM(CASE WHEN day = ? THEN input_tokens + output_tokens ELSE 0 END), 0) AS BIGINT), \
    CAST(COALESCE(SUM(input_tokens + output_tokens), 0) AS BIGINT), \
    CAST(COALESCE(SUM(CASE WHEN day = ? THEN spend_nanos ELSE 0 END), 0) AS BIGINT), \
    CAST(COALESCE(SUM(spend_nanos), 0) AS BIGINT) \
    FROM usage_days WHERE account_id = ? AND day >= ?";

const USAGE_COLUMNS: &str = "account_id, day, provider_id, model, requests, estimated_requests, \
    input_tokens, cached_input_tokens, output_tokens, spend_nanos";

/// Counts a turn in its minute unless the minute is full; a full minute returns no row.
const COUNT_TURN: &str = "INSERT INTO turn_windows (account_id, window_start_ms, turns) \
    VALUES (?, ?, 1) ON CONFLICT (account_id, window_start_ms) DO UPDATE SET \
    turns = turn_windows.turns + 1 WHERE turn_windows.turns < ? RETURNING turns";

const UNCOUNT_TURN: &str = "UPDATE turn_windows SET turns = turns - 1 \
    WHERE account_id = ? AND window_start_ms = ? AND turns > 0";

const FORGET_WINDOWS: &str =
    "DELETE FROM turn_windows WHERE account_id = ? AND window_start_ms < ?";

/// The statement that adds `usage`, with SQLite's placeholders.
pub(crate) fn add_usage_statement(usage: &UsageRow) -> (&'static str, Vec<sea_orm::Value>) {
    let uncached = (usage.input_tokens - usage.cached_input_tokens).max(0);
    let values: Vec<sea_orm::Value> = vec![
        usage.account_id.as_str().into(),
        usage.day.as_str().into(),
        usage.provider_id.as_str().into(),
        usage.model.as_str().into(),
        usage.requests.into(),
        usage.estimated_requests.into(),
        usage.input_tokens.into(),
        usage.cached_input_tokens.into(),
        usage.output_tokens.into(),
        uncached.into(),
        usage.cached_input_tokens.into(),
        usage.output_tokens.into(),
        usage.provider_id.as_str().into(),
        usage.model.as_str().into(),
    ];
    (ADD_USAGE, values)
}

impl Store {
    /// Adds what requests used to the account's row for `usage.day` and the model, priced at
    /// the model's price now. `usage.spend_nanos` is ignored.
    pub async fn add_usage(&self, usage: &UsageRow) -> StoreResult<()> {
        let backend = self.backend();
        let (sql, values) = add_usage_statement(usage);
        let statement =
            Statement::from_sql_and_values(backend, numbered_placeholders(backend, sql), values);
        // On SQLite it runs on the hot path's own connection.
        if let Some(inline) = &self.inline {
            inline.run(|conn| crate::inline_orm::execute(conn, &statement)).await?;
            return Ok(());
        }
        self.db.execute_raw(statement).await?;
        Ok(())
    }

    /// The rows of days `from` to `to` (both included), of one account or of all.
    pub async fn usage(
        &self,
        account_id: Option<&str>,
        from: &str,
        to: &str,
    ) -> StoreResult<Vec<UsageRow>> {
        let mut values: Vec<sea_orm::Value> = vec![from.into(), to.into()];
        let mut sql = format!("SELECT {USAGE_COLUMNS} FROM usage_days WHERE day >= ? AND day <= ?");
        if let Some(account_id) = account_id {
            sql.push_str(" AND account_id = ?");
            values.push(account_id.into());
        }
        sql.push_str(" ORDER BY day, account_id, provider_id, model");
        let backend = self.backend();
        let sql = numbered_placeholders(backend, &sql);
        let rows =
            self.db.query_all_raw(Statement::from_sql_and_values(backend, sql, values)).await?;
        rows.iter()
            .map(|row| {
                Ok(UsageRow {
                    account_id: row.try_get_by_index(0)?,
                    day: row.try_get_by_index(1)?,
                    provider_id: row.try_get_by_index(2)?,
                    model: row.try_get_by_index(3)?,
                    requests: row.try_get_by_index(4)?,
                    estimated_requests: row.try_get_by_index(5)?,
                    input_tokens: row.try_get_by_index(6)?,
                    cached_input_tokens: row.try_get_by_index(7)?,
                    output_tokens: row.try_get_by_index(8)?,
                    spend_nanos: row.try_get_by_index(9)?,
                })
            })
            .collect()
    }

    /// The account's use on `today` and since `month_start` (both `YYYY-MM-DD`).
    pub async fn used_so_far(
        &self,
        account_id: &str,
        today: &str,
        month_start: &str,
    ) -> StoreResult<UsedSoFar> {
        let backend = self.backend();
        let sql = numbered_placeholders(backend, USED_SO_FAR);
        let values: Vec<sea_orm::Value> =
            vec![today.into(), today.into(), account_id.into(), month_start.into()];
        let row =
            self.db.query_one_raw(Statement::from_sql_and_values(backend, sql, values)).await?;
        let Some(row) = row else { return Ok(UsedSoFar::default()) };
        Ok(UsedSoFar {
            tokens_today: row.try_get_by_index(0)?,
            tokens_this_month: row.try_get_by_index(1)?,
            spend_nanos_today: row.try_get_by_index(2)?,
            spend_nanos_this_month: row.try_get_by_index(3)?,
        })
    }

    /// Counts a turn of the account in the minute that began at `window_start_ms`, unless
    /// `limit` turns were counted in it already: then returns false and counts nothing.
    pub async fn count_turn(
        &self,
        account_id: &str,
        window_start_ms: i64,
        limit: i64,
    ) -> StoreResult<bool> {
        if limit <= 0 {
            return Ok(false);
        }
        let backend = self.backend();
        let forget = numbered_placeholders(backend, FORGET_WINDOWS);
        let values: Vec<sea_orm::Value> = vec![account_id.into(), window_start_ms.into()];
        self.db.execute_raw(Statement::from_sql_and_values(backend, forget, values)).await?;
        let sql = numbered_placeholders(backend, COUNT_TURN);
        let values: Vec<sea_orm::Value> =
            vec![account_id.into(), window_start_ms.into(), limit.into()];
        let counted =
            self.db.query_one_raw(Statement::from_sql_and_values(backend, sql, values)).await?;
        Ok(counted.is_some())
    }

    /// Gives back a turn [`Store::count_turn`] counted in the window starting at
    /// `window_start_ms`: it did not start after all.
    pub async fn uncount_turn(&self, account_id: &str, window_start_ms: i64) -> StoreResult<()> {
        let backend = self.backend();
        let sql = numbered_placeholders(backend, UNCOUNT_TURN);
        let values: Vec<sea_orm::Value> = vec![account_id.into(), window_start_ms.into()];
        self.db.execute_raw(Statement::from_sql_and_values(backend, sql, values)).await?;
        Ok(())
    }

    pub async fn model_prices(&self) -> StoreResult<Vec<ModelPrice>> {
        let rows = self.find_all(model_prices::Entity::find()).await?;
        Ok(rows
            .into_iter()
            .map(|m| ModelPrice {
                provider_id: m.provider_id,
                model: m.model,
                input_micros: m.input_micros,
                cached_input_micros: m.cached_input_micros,
                output_micros: m.output_micros,
            })
            .collect())
    }

    /// Sets a model's price; it applies to requests from now on.
    pub async fn set_model_price(&self, price: &ModelPrice) -> StoreResult<()> {
        model_prices::Entity::insert(model_prices::ActiveModel {
            provider_id: Set(price.provider_id.clone()),
            model: Set(price.model.clone()),
            input_micros: Set(price.input_micros),
            cached_input_micros: Set(price.cached_input_micros),
            output_micros: Set(price.output_micros),
            updated_at_ms: Set(now_ms()),
        })
        .on_conflict(
            OnConflict::columns([model_prices::Column::ProviderId, model_prices::Column::Model])
                .update_columns([
                    model_prices::Column::InputMicros,
                    model_prices::Column::CachedInputMicros,
                    model_prices::Column::OutputMicros,
                    model_prices::Column::UpdatedAtMs,
                ])
                .to_owned(),
        )
        .exec_without_returning(&self.db)
        .await?;
        Ok(())
    }

    /// Removes a model's price: its requests from now on cost nothing.
    pub async fn delete_model_price(&self, provider_id: &str, model: &str) -> StoreResult<()> {
        model_prices::Entity::delete_by_id((provider_id.to_owned(), model.to_owned()))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// The account's own limits, if an administrator set them (they replace the instance's
    /// defaults as a whole).
    pub async fn account_limits(&self, account_id: &str) -> StoreResult<Option<UsageLimits>> {
        let row = self.find_one(account_limits::Entity::find_by_id(account_id.to_owned())).await?;
        Ok(row.as_ref().map(limits_of))
    }

    /// Every account that has limits of its own.
    pub async fn all_account_limits(&self) -> StoreResult<Vec<(String, UsageLimits)>> {
        let rows = self.find_all(account_limits::Entity::find()).await?;
        Ok(rows.into_iter().map(|m| (m.account_id.clone(), limits_of(&m))).collect())
    }

    /// Gives the account limits of its own, or (`None`) returns it to the instance's defaults.
    pub async fn set_account_limits(
        &self,
        account_id: &str,
        limits: Option<UsageLimits>,
    ) -> StoreResult<()> {
        let Some(limits) = limits else {
            account_limits::Entity::delete_by_id(account_id.to_owned()).exec(&self.db).await?;
            return Ok(());
        };
        account_limits::Entity::insert(account_limits::ActiveModel {
            account_id: Set(account_id.to_owned()),
            tokens_per_day: Set(limits.tokens_per_day),
            tokens_per_month: Set(limits.tokens_per_month),
            spend_micros_per_day: Set(limits.spend_micros_per_day),
            spend_micros_per_month: Set(limits.spend_micros_per_month),
            turns_per_minute: Set(limits.turns_per_minute),
            updated_at_ms: Set(now_ms()),
        })
        .on_conflict(
            OnConflict::column(account_limits::Column::AccountId)
                .update_columns([
                    account_limits::Column::TokensPerDay,
                    account_limits::Column::TokensPerMonth,
                    account_limits::Column::SpendMicrosPerDay,
                    account_limits::Column::SpendMicrosPerMonth,
                    account_limits::Column::TurnsPerMinute,
                    account_limits::Column::UpdatedAtMs,
                ])
                .to_owned(),
        )
        .exec_without_returning(&self.db)
        .await?;
        Ok(())
    }

    /// The limits that apply to the account: its own, or the instance's defaults.
    pub async fn limits_for(&self, account_id: &str) -> StoreResult<UsageLimits> {
        match self.account_limits(account_id).await? {
            Some(own) => Ok(own),
            None => Ok(self.instance_settings().await?.default_limits),
        }
    }
}
