//! Usage and spend: a person's own (`/usage`), every account's for administrators
//! (`/admin/usage`, and as CSV), model prices and limits.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use llooma_core::store::InstanceSettingsChange;
use llooma_core::usage::{limits_from_view, limits_view};
use llooma_types::{AccountLimits, AccountLimitsPut, LimitsView, ModelPriceView, UsageReport};
use serde::Deserialize;

use crate::AppState;
use crate::download::{Disposition, content_disposition};
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};
use crate::session::{Admin, SignedIn};

/// How many days a report covers unless the request says.
const DEFAULT_DAYS: u32 = 30;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DaysQuery {
    days: Option<u32>,
}

/// `GET /api/v1/usage?days=30`: the signed-in account's usage, spend and limits.
pub async fn mine(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiQuery(query): ApiQuery<DaysQuery>,
) -> Result<Json<UsageReport>, ApiError> {
    let days = query.days.unwrap_or(DEFAULT_DAYS);
    Ok(Json(state.app.my_usage(&signed_in.account.id, days).await?))
}

/// `GET /api/v1/admin/usage?days=30`: every account's.
pub async fn all(
    State(state): State<AppState>,
    _admin: Admin,
    ApiQuery(query): ApiQuery<DaysQuery>,
) -> Result<Json<UsageReport>, ApiError> {
    Ok(Json(state.app.all_usage(query.days.unwrap_or(DEFAULT_DAYS)).await?))
}

/// A CSV field: quoted when it holds a separator, a quote or a line break; and a text a
/// spreadsheet would run as a formula (`=`, `+`, `-`, `@`, a tab or a carriage return first)
/// is prefixed with `'`, so a model or account name cannot become one.
fn csv_field(text: &str) -> String {
    let text = if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}")
    } else {
        text.to_owned()
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

/// `GET /api/v1/admin/usage.csv?days=30`: one line per account, day and model.
pub async fn all_csv(
    State(state): State<AppState>,
    _admin: Admin,
    ApiQuery(query): ApiQuery<DaysQuery>,
) -> Result<Response, ApiError> {
    let days = query.days.unwrap_or(DEFAULT_DAYS);
    let (currency, rows) = state.app.usage_rows(days).await?;
    let mut csv = format!(
        "day,account,provider,model,requests,estimated_requests,input_tokens,\
         cached_input_tokens,output_tokens,spend_{}\n",
        currency.to_ascii_lowercase()
    );
    for (row, account, provider) in rows {
        let provider = provider.unwrap_or_else(|| format!("(removed) {}", row.provider_id));
        csv.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{:.6}\n",
            row.day,
            csv_field(&account),
            csv_field(&provider),
            csv_field(&row.model),
            row.requests,
            row.estimated_requests,
            row.input_tokens,
            row.cached_input_tokens,
            row.output_tokens,
            row.spend_nanos as f64 / 1e9,
        ));
    }
    let mut response = csv.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8"));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert(
        header::CONTENT_DISPOSITION,
        content_disposition(Disposition::Attachment, &format!("llooma-usage-{days}-days.csv")),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    Ok(response)
}

/// `GET /api/v1/admin/prices`.
pub async fn prices(
    State(state): State<AppState>,
    _admin: Admin,
) -> Result<Json<Vec<ModelPriceView>>, ApiError> {
    Ok(Json(state.app.model_prices().await?))
}

/// `PUT /api/v1/admin/prices`: sets one model's price; answers every price.
pub async fn set_price(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ApiJson(price): ApiJson<ModelPriceView>,
) -> Result<Json<Vec<ModelPriceView>>, ApiError> {
    state.app.set_model_price(&price).await?;
    tracing::info!(admin = %admin.account.id, provider = %price.provider_id, model = %price.model, "model price set");
    Ok(Json(state.app.model_prices().await?))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriceKey {
    provider_id: String,
    model: String,
}

/// `DELETE /api/v1/admin/prices?providerId=…&model=…`: the model costs nothing from now on.
pub async fn delete_price(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ApiQuery(key): ApiQuery<PriceKey>,
) -> Result<StatusCode, ApiError> {
    state.app.store.delete_model_price(&key.provider_id, &key.model).await?;
    tracing::info!(admin = %admin.account.id, provider = %key.provider_id, model = %key.model, "model price removed");
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/v1/admin/limits`: the instance's default limits.
pub async fn default_limits(
    State(state): State<AppState>,
    _admin: Admin,
) -> Result<Json<LimitsView>, ApiError> {
    Ok(Json(limits_view(&state.app.store.instance_settings().await?.default_limits)))
}

/// `PUT /api/v1/admin/limits`: replaces the defaults (an absent or `null` field is no limit).
pub async fn set_default_limits(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ApiJson(limits): ApiJson<LimitsView>,
) -> Result<Json<LimitsView>, ApiError> {
    let change = InstanceSettingsChange {
        default_limits: Some(limits_from_view(&limits)?),
        ..Default::default()
    };
    let settings = state.app.store.change_instance_settings(change).await?;
    tracing::info!(admin = %admin.account.id, ?limits, "default limits changed");
    Ok(Json(limits_view(&settings.default_limits)))
}

/// `GET /api/v1/admin/accounts/{id}/limits`.
pub async fn account_limits(
    State(state): State<AppState>,
    _admin: Admin,
    Path(id): Path<String>,
) -> Result<Json<AccountLimits>, ApiError> {
    Ok(Json(state.app.account_limits(&id).await?))
}

/// `PUT /api/v1/admin/accounts/{id}/limits`: limits of its own, or `own: null` for the
/// defaults.
pub async fn set_account_limits(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<AccountLimitsPut>,
) -> Result<Json<AccountLimits>, ApiError> {
    let limits = state.app.set_account_limits(&id, body.own.as_ref()).await?;
    tracing::info!(admin = %admin.account.id, account = %id, own = ?body.own, "account limits changed");
    Ok(Json(limits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_cannot_become_a_formula_or_break_a_line() {
        assert_eq!(csv_field("gpt-4o"), "gpt-4o");
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("-2+3"), "'-2+3");
        assert_eq!(csv_field("a,b\nc"), "\"a,b\nc\"");
    }
}
