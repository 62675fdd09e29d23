//! What model requests use, counted to their account; prices; and the limits a turn is
//! admitted under.
//!
//! Every request a turn makes (each round, a server's sampling request), a title and a bot's
//! turn add to a [`Meter`]; what it holds is written once, when the work is over, to the
//! account's row for the day and model (`Store::add_usage`, priced there and then). A turn is
//! admitted only while its account is under each limit that applies ([`App::admit_turn`]):
//! counted by the database, so replicas share the counts.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};
use llooma_providers::Metered;
use llooma_store::{ModelPrice, UsageLimits, UsageRow};
use llooma_types::{
    AccountLimits, LimitStanding, LimitsView, ModelPriceView, UsageByAccount, UsageByModel,
    UsageDay, UsageReport, UsageTotals,
};

use crate::{App, AppError};

/// The most days a report covers.
pub const MAX_REPORT_DAYS: u32 = 366;

/// The longest model name a price is given for (providers' own names are far shorter).
const MAX_MODEL_NAME_BYTES: usize = 256;

/// The highest price per million tokens, or spend limit, an administrator may write.
const MAX_AMOUNT: f64 = 1_000_000.0;

/// What [`App::admit_turn`] counted for a turn it let through.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Admitted {
    /// The minute window (its start, in ms) a reply was counted in.
    counted_in: Option<i64>,
}

/// What the requests of one piece of work used so far.
#[derive(Debug, Default)]
pub struct Meter(Mutex<Tally>);

/// Sums of [`Metered`] requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub requests: u64,
    pub estimated_requests: u64,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    /// The last request's input and output: what the conversation fills of the model's
    /// context window now.
    pub last_input_tokens: u64,
    pub last_output_tokens: u64,
    pub last_estimated: bool,
}

impl Tally {
    pub fn add(&mut self, metered: Metered) {
        let usage = metered.usage;
        self.last_input_tokens = usage.prompt_tokens;
        self.last_output_tokens = usage.completion_tokens;
        self.last_estimated = metered.estimated;
        self.requests += 1;
        self.estimated_requests += u64::from(metered.estimated);
        self.input_tokens += usage.prompt_tokens;
        self.cached_input_tokens +=
            usage.cached_prompt_tokens.unwrap_or(0).min(usage.prompt_tokens);
        self.output_tokens += usage.completion_tokens;
    }
}

impl Meter {
    pub fn add(&self, metered: Metered) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).add(metered);
    }

    pub fn take(&self) -> Tally {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

/// What `tally` adds to the account's row for today and the model; none when no request was
/// made.
pub(crate) fn usage_row(
    account_id: &str,
    provider_id: &str,
    model: &str,
    tally: Tally,
) -> Option<UsageRow> {
    (tally.requests > 0).then(|| UsageRow {
        account_id: account_id.to_owned(),
        day: day_of(Utc::now()),
        provider_id: provider_id.to_owned(),
        model: model.to_owned(),
        requests: as_i64(tally.requests),
        estimated_requests: as_i64(tally.estimated_requests),
        input_tokens: as_i64(tally.input_tokens),
        cached_input_tokens: as_i64(tally.cached_input_tokens),
        output_tokens: as_i64(tally.output_tokens),
        spend_nanos: 0,
    })
}

/// A UTC day as stored.
pub(crate) fn day_of(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d").to_string()
}

fn month_start(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-01").to_string()
}

fn as_count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn money_from_nanos(nanos: i64) -> f64 {
    nanos as f64 / 1e9
}

fn money_from_micros(micros: i64) -> f64 {
    micros as f64 / 1e6
}

/// An amount an administrator wrote, in millionths of the currency: finite, not negative, at
/// most [`MAX_AMOUNT`].
fn micros_of(what: &str, amount: f64) -> Result<i64, AppError> {
    if !(0.0..=MAX_AMOUNT).contains(&amount) {
        return Err(AppError::invalid(
            "invalid_amount",
            format!(
                "{what} is a number from 0 to {MAX_AMOUNT}; write it in the instance's currency."
            ),
        ));
    }
    Ok((amount * 1e6).round() as i64)
}

/// Limits as stored, from what an administrator wrote.
pub fn limits_from_view(view: &LimitsView) -> Result<UsageLimits, AppError> {
    let spend = |what: &str, amount: Option<f64>| amount.map(|a| micros_of(what, a)).transpose();
    Ok(UsageLimits {
        tokens_per_day: view.tokens_per_day.map(as_i64),
        tokens_per_month: view.tokens_per_month.map(as_i64),
        spend_micros_per_day: spend("A daily spend limit", view.spend_per_day)?,
        spend_micros_per_month: spend("A monthly spend limit", view.spend_per_month)?,
        turns_per_minute: view.turns_per_minute.map(as_i64),
    })
}

pub fn limits_view(limits: &UsageLimits) -> LimitsView {
    LimitsView {
        tokens_per_day: limits.tokens_per_day.map(as_count),
        tokens_per_month: limits.tokens_per_month.map(as_count),
        spend_per_day: limits.spend_micros_per_day.map(money_from_micros),
        spend_per_month: limits.spend_micros_per_month.map(money_from_micros),
        turns_per_minute: limits.turns_per_minute.map(as_count),
    }
}

/// "in 3 h 12 min", "in 40 s".
fn wait_words(from: DateTime<Utc>, until: DateTime<Utc>) -> String {
    let secs = u64::try_from((until - from).num_seconds()).unwrap_or(0).max(1);
    match secs {
        0..60 => format!("in {secs} s"),
        60..3600 => format!("in {} min", secs.div_ceil(60)),
        3600..86_400 => format!("in {} h {} min", secs / 3600, (secs % 3600) / 60),
        _ => format!("in {} days", secs.div_ceil(86_400)),
    }
}

fn next_day(now: DateTime<Utc>) -> DateTime<Utc> {
    let date = now.date_naive().succ_opt().unwrap_or(now.date_naive());
    date.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc()
}

fn next_month(now: DateTime<Utc>) -> DateTime<Utc> {
    let (year, month) =
        if now.month() == 12 { (now.year() + 1, 1) } else { (now.year(), now.month() + 1) };
    NaiveDate::from_ymd_opt(year, month, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc())
        .unwrap_or(now)
}

fn limit_reached(what: String, now: DateTime<Utc>, resets: DateTime<Utc>) -> AppError {
    AppError::LimitReached {
        message: format!(
            "{what} It resets at {} UTC ({}). An administrator sets the limits.",
            resets.format("%Y-%m-%d %H:%M"),
            wait_words(now, resets)
        ),
        retry_after_secs: u64::try_from((resets - now).num_seconds().max(1)).unwrap_or(1),
    }
}

impl App {
    /// Writes what a piece of work used to its account. A failure is logged, never the
    /// work's: the reply stands.
    pub(crate) async fn record_usage(
        &self,
        account_id: &str,
        provider_id: &str,
        model: &str,
        tally: Tally,
    ) {
        let Some(row) = usage_row(account_id, provider_id, model, tally) else { return };
        if let Err(err) = self.store.add_usage(&row).await {
            tracing::error!(account = %account_id, model = %model, error = %err, "usage could not be recorded");
        }
    }

    /// Admits a turn of the account under `limits`, before any provider call: refused with
    /// [`AppError::LimitReached`] (which limit, and when it resets) when the account used up a
    /// token or spend limit, or when `asking` more tokens (the request's estimated prompt)
    /// would pass a token limit, or when its minute is full. An admitted turn is counted in
    /// its minute. `currency` is the instance's, for the words.
    pub(crate) async fn admit_turn(
        &self,
        account_id: &str,
        limits: &UsageLimits,
        currency: &str,
        asking: u64,
    ) -> Result<Admitted, AppError> {
        if limits.is_empty() {
            return Ok(Admitted::default());
        }
        self.within_use(account_id, limits, currency, asking).await?;
        let now = Utc::now();
        let mut admitted = Admitted::default();
        if let Some(limit) = limits.turns_per_minute {
            let minute = now.timestamp() / 60 * 60;
            if !self.store.count_turn(account_id, minute * 1000, limit).await? {
                let what = format!("You reached your limit of {limit} replies a minute.");
                let resets = DateTime::from_timestamp(minute + 60, 0).unwrap_or(now);
                return Err(limit_reached(what, now, resets));
            }
            admitted.counted_in = Some(minute * 1000);
        }
        Ok(admitted)
    }

    /// Whether the account may still make a request of about `asking` tokens under its token
    /// and spend limits (replies a minute aside: a title, or a summary, is not a reply).
    pub(crate) async fn within_use(
        &self,
        account_id: &str,
        limits: &UsageLimits,
        currency: &str,
        asking: u64,
    ) -> Result<(), AppError> {
        let now = Utc::now();
        let asking = as_i64(asking);
        let limited_use = limits.tokens_per_day.is_some()
            || limits.tokens_per_month.is_some()
            || limits.spend_micros_per_day.is_some()
            || limits.spend_micros_per_month.is_some();
        if limited_use {
            let used = self.store.used_so_far(account_id, &day_of(now), &month_start(now)).await?;
            let tokens = |used: i64, limit: Option<i64>| {
                limit.filter(|limit| used >= *limit || used.saturating_add(asking) > *limit)
            };
            if let Some(limit) = tokens(used.tokens_today, limits.tokens_per_day) {
                let what = format!(
                    "This reply would pass your limit of {limit} tokens a day ({} used today).",
                    used.tokens_today
                );
                return Err(limit_reached(what, now, next_day(now)));
            }
            if let Some(limit) = tokens(used.tokens_this_month, limits.tokens_per_month) {
                let what = format!(
                    "This reply would pass your limit of {limit} tokens a month ({} used this \
                     month).",
                    used.tokens_this_month
                );
                return Err(limit_reached(what, now, next_month(now)));
            }
            let spent = |used: i64, limit: Option<i64>| {
                limit.filter(|limit| used >= limit.saturating_mul(1000))
            };
            if let Some(limit) = spent(used.spend_nanos_today, limits.spend_micros_per_day) {
                let what = format!(
                    "You reached your spending limit of {:.2} {currency} a day.",
                    money_from_micros(limit)
                );
                return Err(limit_reached(what, now, next_day(now)));
            }
            if let Some(limit) = spent(used.spend_nanos_this_month, limits.spend_micros_per_month) {
                let what = format!(
                    "You reached your spending limit of {:.2} {currency} a month.",
                    money_from_micros(limit)
                );
                return Err(limit_reached(what, now, next_month(now)));
            }
        }
        Ok(())
    }

    /// Gives back the reply a minute `admitted` counted: its turn did not start (another was
    /// running, or opening it failed).
    pub(crate) async fn unadmit_turn(&self, account_id: &str, admitted: Admitted) {
        if let Some(window) = admitted.counted_in
            && let Err(error) = self.store.uncount_turn(account_id, window).await
        {
            tracing::warn!(account = %account_id, %error, "giving back a counted reply failed");
        }
    }

    /// The account's usage over the last `days` days (today included), with the limits that
    /// apply to it and what it used of them.
    pub async fn my_usage(&self, account_id: &str, days: u32) -> Result<UsageReport, AppError> {
        let mut report = self.usage_report(Some(account_id), days).await?;
        let now = Utc::now();
        let limits = self.store.account_limits(account_id).await?;
        let own = limits.is_some();
        let limits = match limits {
            Some(own) => own,
            None => self.store.instance_settings().await?.default_limits,
        };
        let used = self.store.used_so_far(account_id, &day_of(now), &month_start(now)).await?;
        report.standing = Some(LimitStanding {
            limits: limits_view(&limits),
            own,
            tokens_today: as_count(used.tokens_today),
            tokens_this_month: as_count(used.tokens_this_month),
            spend_today: money_from_nanos(used.spend_nanos_today),
            spend_this_month: money_from_nanos(used.spend_nanos_this_month),
        });
        Ok(report)
    }

    /// Every account's usage over the last `days` days (an administrator's report).
    pub async fn all_usage(&self, days: u32) -> Result<UsageReport, AppError> {
        self.usage_report(None, days).await
    }

    /// The rows behind [`App::all_usage`], with each account's name and each provider's, for
    /// a download.
    pub async fn usage_rows(
        &self,
        days: u32,
    ) -> Result<(String, Vec<(UsageRow, String, Option<String>)>), AppError> {
        let (from, to) = range(days)?;
        let rows = self.store.usage(None, &from, &to).await?;
        let names = self.account_names().await?;
        let providers = self.provider_names().await?;
        let currency = self.store.instance_settings().await?.currency;
        Ok((
            currency,
            rows.into_iter()
                .map(|row| {
                    let name = names.get(&row.account_id).cloned().unwrap_or_default();
                    let provider = providers.get(&row.provider_id).cloned();
                    (row, name, provider)
                })
                .collect(),
        ))
    }

    async fn account_names(&self) -> Result<HashMap<String, String>, AppError> {
        Ok(self.store.list_accounts().await?.into_iter().map(|a| (a.id, a.username)).collect())
    }

    async fn provider_names(&self) -> Result<HashMap<String, String>, AppError> {
        Ok(self.store.list_providers().await?.into_iter().map(|p| (p.id, p.name)).collect())
    }

    async fn usage_report(
        &self,
        account_id: Option<&str>,
        days: u32,
    ) -> Result<UsageReport, AppError> {
        let (from, to) = range(days)?;
        let rows = self.store.usage(account_id, &from, &to).await?;
        let providers = self.provider_names().await?;
        let priced: std::collections::HashSet<(String, String)> = self
            .store
            .model_prices()
            .await?
            .into_iter()
            .map(|p| (p.provider_id, p.model))
            .collect();
        let names = match account_id {
            None => self.account_names().await?,
            Some(_) => HashMap::new(),
        };
        let mut by_day: BTreeMap<String, UsageTotals> = BTreeMap::new();
        let mut day = NaiveDate::parse_from_str(&from, "%Y-%m-%d")
            .map_err(|e| AppError::Internal(e.to_string()))?;
        for _ in 0..days {
            by_day.insert(day.format("%Y-%m-%d").to_string(), UsageTotals::default());
            day = day.succ_opt().unwrap_or(day);
        }
        let mut by_model: BTreeMap<(String, String), UsageTotals> = BTreeMap::new();
        let mut by_account: BTreeMap<String, UsageTotals> = BTreeMap::new();
        let mut totals = UsageTotals::default();
        for row in &rows {
            let counted = UsageTotals {
                requests: as_count(row.requests),
                estimated_requests: as_count(row.estimated_requests),
                input_tokens: as_count(row.input_tokens),
                cached_input_tokens: as_count(row.cached_input_tokens),
                output_tokens: as_count(row.output_tokens),
                spend: money_from_nanos(row.spend_nanos),
            };
            totals.add(&counted);
            by_day.entry(row.day.clone()).or_default().add(&counted);
            by_model.entry((row.provider_id.clone(), row.model.clone())).or_default().add(&counted);
            if account_id.is_none() {
                by_account.entry(row.account_id.clone()).or_default().add(&counted);
            }
        }
        let mut models: Vec<UsageByModel> = by_model
            .into_iter()
            .map(|((provider_id, model), totals)| UsageByModel {
                provider: providers.get(&provider_id).cloned(),
                priced: priced.contains(&(provider_id.clone(), model.clone())),
                provider_id,
                model,
                totals,
            })
            .collect();
        models.sort_by_key(|m| std::cmp::Reverse(m.totals.tokens()));
        let mut accounts: Vec<UsageByAccount> = by_account
            .into_iter()
            .map(|(account_id, totals)| UsageByAccount {
                username: names.get(&account_id).cloned().unwrap_or_default(),
                account_id,
                totals,
            })
            .collect();
        accounts.sort_by_key(|a| std::cmp::Reverse(a.totals.tokens()));
        Ok(UsageReport {
            currency: self.store.instance_settings().await?.currency,
            from,
            to,
            totals,
            days: by_day.into_iter().map(|(day, totals)| UsageDay { day, totals }).collect(),
            models,
            accounts,
            standing: None,
        })
    }

    /// Every model's price.
    pub async fn model_prices(&self) -> Result<Vec<ModelPriceView>, AppError> {
        Ok(self
            .store
            .model_prices()
            .await?
            .into_iter()
            .map(|p| ModelPriceView {
                provider_id: p.provider_id,
                model: p.model,
                input: money_from_micros(p.input_micros),
                cached_input: p.cached_input_micros.map(money_from_micros),
                output: money_from_micros(p.output_micros),
            })
            .collect())
    }

    /// Sets a model's price (per million tokens); requests from now on are priced with it.
    pub async fn set_model_price(&self, price: &ModelPriceView) -> Result<(), AppError> {
        let model = price.model.trim();
        if model.is_empty() || model.len() > MAX_MODEL_NAME_BYTES {
            return Err(AppError::invalid(
                "invalid_model",
                format!(
                    "Name the model the price is for, in at most {MAX_MODEL_NAME_BYTES} bytes."
                ),
            ));
        }
        if self.store.provider(&price.provider_id).await?.is_none() {
            return Err(AppError::invalid(
                "unknown_provider",
                "There is no such model provider; choose one of Admin → Providers.",
            ));
        }
        self.store
            .set_model_price(&ModelPrice {
                provider_id: price.provider_id.clone(),
                model: model.to_owned(),
                input_micros: micros_of("An input price", price.input)?,
                cached_input_micros: price
                    .cached_input
                    .map(|p| micros_of("A cached input price", p))
                    .transpose()?,
                output_micros: micros_of("An output price", price.output)?,
            })
            .await?;
        Ok(())
    }

    /// An account's own limits and the instance's defaults.
    pub async fn account_limits(&self, account_id: &str) -> Result<AccountLimits, AppError> {
        if self.store.account(account_id).await?.is_none() {
            return Err(AppError::NotFound);
        }
        let own = self.store.account_limits(account_id).await?;
        let defaults = self.store.instance_settings().await?.default_limits;
        Ok(AccountLimits { own: own.as_ref().map(limits_view), defaults: limits_view(&defaults) })
    }

    pub async fn set_account_limits(
        &self,
        account_id: &str,
        own: Option<&LimitsView>,
    ) -> Result<AccountLimits, AppError> {
        if self.store.account(account_id).await?.is_none() {
            return Err(AppError::NotFound);
        }
        let own = own.map(limits_from_view).transpose()?;
        self.store.set_account_limits(account_id, own).await?;
        self.account_limits(account_id).await
    }
}

/// The last `days` days, today included: first and last day.
fn range(days: u32) -> Result<(String, String), AppError> {
    if days == 0 || days > MAX_REPORT_DAYS {
        return Err(AppError::invalid(
            "invalid_days",
            format!("A report covers 1 to {MAX_REPORT_DAYS} days."),
        ));
    }
    let today = Utc::now();
    let first = today - Duration::days(i64::from(days) - 1);
    Ok((day_of(first), day_of(today)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_adds_reported_and_estimated_requests() {
        let mut tally = Tally::default();
        let usage = |prompt, cached, completion| llooma_providers::Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            reasoning_tokens: None,
            cached_prompt_tokens: cached,
        };
        tally.add(Metered { usage: usage(100, Some(60), 10), estimated: false });
        tally.add(Metered { usage: usage(5, None, 2), estimated: true });
        // A cache report larger than the prompt counts as the whole prompt.
        tally.add(Metered { usage: usage(3, Some(9), 0), estimated: false });
        assert_eq!(
            tally,
            Tally {
                requests: 3,
                estimated_requests: 1,
                input_tokens: 108,
                cached_input_tokens: 63,
                output_tokens: 12,
                last_input_tokens: 3,
                last_output_tokens: 0,
                last_estimated: false,
            }
        );
    }

    #[test]
    fn limits_reset_at_the_next_utc_day_minute_and_month() {
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        let now = at("2026-12-31T21:47:10Z");
        assert_eq!(next_day(now), at("2027-01-01T00:00:00Z"));
        assert_eq!(next_month(now), at("2027-01-01T00:00:00Z"));
        assert_eq!(next_month(at("2026-02-14T00:00:00Z")), at("2026-03-01T00:00:00Z"));
        assert_eq!(wait_words(now, next_day(now)), "in 2 h 12 min");
        assert_eq!(wait_words(now, at("2026-12-31T21:48:00Z")), "in 50 s");
    }

    #[test]
    fn amounts_are_whole_millionths_and_nothing_unreasonable() {
        assert_eq!(micros_of("x", 2.5).unwrap(), 2_500_000);
        assert_eq!(micros_of("x", 0.000_000_4).unwrap(), 0);
        for bad in [-1.0, f64::NAN, f64::INFINITY, 2e6] {
            assert!(micros_of("x", bad).is_err(), "{bad}");
        }
    }
}
