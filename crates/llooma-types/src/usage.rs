//! Usage, spend and limits as the API shows them (`/api/v1/usage`, `/api/v1/admin/usage`,
//! `/api/v1/admin/prices`, `/api/v1/admin/limits`). Amounts of money are in the instance's
//! currency, as decimal numbers; prices are per million tokens.

use serde::{Deserialize, Serialize};

/// What a set of model requests used.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageTotals {
    pub requests: u64,
    /// Of the requests, those whose provider reported no usage: their tokens are estimated
    /// (about four characters a token).
    pub estimated_requests: u64,
    /// Prompt tokens, those served from the provider's cache included.
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    /// Priced when each request was made; requests of an unpriced model cost nothing.
    pub spend: f64,
}

impl UsageTotals {
    /// Input and output tokens together: what token limits count.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    pub fn add(&mut self, other: &UsageTotals) {
        self.requests += other.requests;
        self.estimated_requests += other.estimated_requests;
        self.input_tokens += other.input_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.output_tokens += other.output_tokens;
        self.spend += other.spend;
    }
}

/// One UTC day.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageDay {
    /// `YYYY-MM-DD`.
    pub day: String,
    #[serde(flatten)]
    pub totals: UsageTotals,
}

/// One model of one provider.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageByModel {
    pub provider_id: String,
    /// The provider's name; `None` once it was removed.
    pub provider: Option<String>,
    pub model: String,
    /// Whether the model has a price now.
    pub priced: bool,
    #[serde(flatten)]
    pub totals: UsageTotals,
}

/// One account (the administrator's report).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageByAccount {
    pub account_id: String,
    pub username: String,
    #[serde(flatten)]
    pub totals: UsageTotals,
}

/// Usage over a range of days: totals, every day of the range (days without use at zero), per
/// model, and for an administrator per account.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    /// The instance's currency (ISO 4217).
    pub currency: String,
    /// First and last day, UTC.
    pub from: String,
    pub to: String,
    pub totals: UsageTotals,
    pub days: Vec<UsageDay>,
    pub models: Vec<UsageByModel>,
    /// Only in the administrator's report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accounts: Vec<UsageByAccount>,
    /// The limits that apply to the person and how much of each is used (their own report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standing: Option<LimitStanding>,
}

/// Limits; `None` is no limit. Tokens count input and output together; spend is in the
/// instance's currency; days and months are UTC.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsView {
    #[serde(default)]
    pub tokens_per_day: Option<u64>,
    #[serde(default)]
    pub tokens_per_month: Option<u64>,
    #[serde(default)]
    pub spend_per_day: Option<f64>,
    #[serde(default)]
    pub spend_per_month: Option<f64>,
    #[serde(default)]
    pub turns_per_minute: Option<u64>,
}

/// The limits that apply to an account, and what it used of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LimitStanding {
    pub limits: LimitsView,
    /// True when an administrator gave the account limits of its own.
    pub own: bool,
    pub tokens_today: u64,
    pub tokens_this_month: u64,
    pub spend_today: f64,
    pub spend_this_month: f64,
}

/// An account's limits (`/api/v1/admin/accounts/{id}/limits`): its own, if any, and the
/// instance's defaults that apply otherwise.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountLimits {
    pub own: Option<LimitsView>,
    pub defaults: LimitsView,
}

/// Gives an account limits of its own (replacing the defaults as a whole), or with `own: null`
/// returns it to the defaults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AccountLimitsPut {
    pub own: Option<LimitsView>,
}

/// A model's price per million tokens, in the instance's currency.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelPriceView {
    pub provider_id: String,
    pub model: String,
    pub input: f64,
    /// For prompt tokens served from the cache; `None`: the input price.
    #[serde(default)]
    pub cached_input: Option<f64>,
    pub output: f64,
}
