//! Usage and spend: Settings → Usage (a person's own, with the limits that apply to them) and
//! Admin → Usage (every account, prices, the currency, limits). A change is sent to the API and
//! the page is reloaded from the server.

use leptos::prelude::*;
use llooma_types::{
    AccountLimits, AccountView, LimitStanding, LimitsView, ModelPriceView, ProviderView,
    UsageByModel, UsageDay, UsageReport, UsageTotals,
};
use serde_json::json;

use crate::forms::{RemoveAfterAsking, change, input_value};
use crate::layout::{AdminNav, TopBar};
use crate::model::Me;

const ADMIN_HERE: &str = "/admin/usage";

/// The periods a report can cover, in days.
const PERIODS: [u32; 3] = [7, 30, 90];

/// `1234567` → `1,234,567`.
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// An amount: two decimals, or four under a cent so a small spend does not read as nothing.
pub(crate) fn money(amount: f64, currency: &str) -> String {
    if amount > 0.0 && amount < 0.01 {
        format!("{amount:.4} {currency}")
    } else {
        format!("{amount:.2} {currency}")
    }
}

fn estimate_note(totals: &UsageTotals) -> Option<String> {
    (totals.estimated_requests > 0).then(|| {
        format!(
            "{} of {} requests were estimated (the provider reported no usage).",
            grouped(totals.estimated_requests),
            grouped(totals.requests)
        )
    })
}

/// Links to the same page over another period.
#[component]
fn Periods(here: &'static str, days: usize) -> impl IntoView {
    view! {
        <nav class="row periods">
            {PERIODS
                .into_iter()
                .map(|p| {
                    let current = p as usize == days;
                    view! {
                        <a
                            href=format!("{here}?days={p}")
                            class=if current { "button primary" } else { "button" }
                            aria-current=current.then_some("page")
                        >
                            {format!("{p} days")}
                        </a>
                    }
                })
                .collect_view()}
        </nav>
    }
}

/// The totals of a period, as a row of figures.
#[component]
fn Totals(totals: UsageTotals, currency: String) -> impl IntoView {
    let note = estimate_note(&totals);
    view! {
        <dl class="usage-totals">
            <div><dt>"Requests"</dt><dd class="requests">{grouped(totals.requests)}</dd></div>
            <div><dt>"Tokens in"</dt><dd class="input">{grouped(totals.input_tokens)}</dd></div>
            <div><dt>"Tokens out"</dt><dd class="output">{grouped(totals.output_tokens)}</dd></div>
            <div><dt>"Spend"</dt><dd class="spend">{money(totals.spend, &currency)}</dd></div>
        </dl>
        {note.map(|n| view! { <p class="hint estimated">{n}</p> })}
    }
}

/// Tokens per day as bars; each bar names its day, tokens and spend.
#[component]
fn DayChart(days: Vec<UsageDay>, currency: String) -> impl IntoView {
    let most = days.iter().map(|d| d.totals.tokens()).max().unwrap_or(0).max(1);
    let width = days.len().max(1) * 10;
    let bars = days
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let tokens = d.totals.tokens();
            let height =
                if tokens == 0 { 0.0 } else { (tokens as f64 / most as f64 * 96.0).max(1.0) };
            let label = format!(
                "{}: {} tokens, {}",
                d.day,
                grouped(tokens),
                money(d.totals.spend, &currency)
            );
            view! {
                <rect
                    class="bar"
                    x=(i * 10 + 1).to_string()
                    y=format!("{:.1}", 100.0 - height)
                    width="8"
                    height=format!("{height:.1}")
                >
                    <title>{label}</title>
                </rect>
            }
        })
        .collect_view();
    let first = days.first().map(|d| d.day.clone()).unwrap_or_default();
    let last = days.last().map(|d| d.day.clone()).unwrap_or_default();
    view! {
        <figure class="usage-chart">
            <svg
                viewBox=format!("0 0 {width} 100")
                preserveAspectRatio="none"
                role="img"
                aria-label="Tokens per day"
            >
                {bars}
            </svg>
            <figcaption class="row">
                <span>{first}</span>
                <span class="hint">"Tokens per day (UTC)"</span>
                <span>{last}</span>
            </figcaption>
        </figure>
    }
}

/// One line per model, most used first.
#[component]
fn ModelTable(models: Vec<UsageByModel>, currency: String) -> impl IntoView {
    let empty = models.is_empty();
    view! {
        {empty.then(|| view! { <p class="hint no-usage">"No model was used in this period."</p> })}
        {(!empty)
            .then(|| {
                view! {
                    <table class="usage-models">
                        <thead>
                            <tr>
                                <th>"Model"</th>
                                <th>"Requests"</th>
                                <th>"Tokens in"</th>
                                <th>"Tokens out"</th>
                                <th>"Spend"</th>
                            </tr>
                        </thead>
                        <tbody>
                            {models
                                .into_iter()
                                .map(|m| {
                                    let provider = m
                                        .provider
                                        .clone()
                                        .unwrap_or_else(|| "a removed provider".to_owned());
                                    let spend = if m.priced || m.totals.spend > 0.0 {
                                        money(m.totals.spend, &currency)
                                    } else {
                                        "no price".to_owned()
                                    };
                                    view! {
                                        <tr>
                                            <td>
                                                <b>{m.model.clone()}</b>
                                                <span class="hint">{format!(" on {provider}")}</span>
                                            </td>
                                            <td>{grouped(m.totals.requests)}</td>
                                            <td>{grouped(m.totals.input_tokens)}</td>
                                            <td>{grouped(m.totals.output_tokens)}</td>
                                            <td>{spend}</td>
                                        </tr>
                                    }
                                })
                                .collect_view()}
                        </tbody>
                    </table>
                }
            })}
    }
}

/// Each limit that applies, with what is used of it.
#[component]
fn Standing(standing: LimitStanding, currency: String) -> impl IntoView {
    let limits = &standing.limits;
    let mut lines: Vec<(String, String, f64)> = Vec::new();
    let mut used = |what: &str, used: f64, limit: f64, shown: String| {
        lines.push((what.to_owned(), shown, (used / limit.max(f64::MIN_POSITIVE)).min(1.0)));
    };
    if let Some(limit) = limits.tokens_per_day {
        let shown = format!("{} of {} tokens", grouped(standing.tokens_today), grouped(limit));
        used("Today", standing.tokens_today as f64, limit as f64, shown);
    }
    if let Some(limit) = limits.tokens_per_month {
        let shown = format!("{} of {} tokens", grouped(standing.tokens_this_month), grouped(limit));
        used("This month", standing.tokens_this_month as f64, limit as f64, shown);
    }
    if let Some(limit) = limits.spend_per_day {
        let shown =
            format!("{} of {}", money(standing.spend_today, &currency), money(limit, &currency));
        used("Spent today", standing.spend_today, limit, shown);
    }
    if let Some(limit) = limits.spend_per_month {
        let shown = format!(
            "{} of {}",
            money(standing.spend_this_month, &currency),
            money(limit, &currency)
        );
        used("Spent this month", standing.spend_this_month, limit, shown);
    }
    let turns = limits.turns_per_minute.map(|n| format!("At most {n} replies a minute."));
    let none = lines.is_empty() && turns.is_none();
    view! {
        <section class="card stack limits-standing">
            <h2>"Your limits"</h2>
            {none.then(|| view! { <p class="hint no-limits">"None: an administrator has set no limits for you."</p> })}
            {lines
                .into_iter()
                .map(|(what, shown, share)| {
                    view! {
                        <div class="limit">
                            <span>{what}</span>
                            <meter min="0" max="1" high="0.9" value=format!("{share:.3}")></meter>
                            <span class="used">{shown}</span>
                        </div>
                    }
                })
                .collect_view()}
            {turns.map(|t| view! { <p class="turns">{t}</p> })}
            {(!none)
                .then(|| view! { <p class="hint">"Days and months are UTC. A reply that would pass a limit is refused before the model is asked, with the time the limit resets."</p> })}
        </section>
    }
}

/// Settings → Usage.
#[component]
pub fn SettingsUsage(me: Me, report: UsageReport) -> impl IntoView {
    let currency = report.currency.clone();
    let days = report.days.len();
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings usage">
                <h1>"Settings → Usage"</h1>
                <Periods here="/settings/usage" days />
                <p class="hint">{format!("From {} to {} (UTC).", report.from, report.to)}</p>
                <Totals totals=report.totals.clone() currency=currency.clone() />
                <DayChart days=report.days.clone() currency=currency.clone() />
                <h2>"By model"</h2>
                <ModelTable models=report.models.clone() currency=currency.clone() />
                {report.standing.clone().map(|standing| view! { <Standing standing currency=currency.clone() /> })}
            </main>
        </div>
    }
}

/// A number field's value: `None` when empty.
fn number_in(node: NodeRef<leptos::html::Input>) -> Option<f64> {
    let text = input_value(node);
    let text = text.trim();
    if text.is_empty() { None } else { text.parse().ok() }
}

/// The five limits as fields; empty is no limit.
#[component]
fn LimitsForm(
    limits: LimitsView,
    currency: String,
    /// The button's word.
    #[prop(into)]
    label: String,
    save: Callback<LimitsView>,
) -> impl IntoView {
    let fields: [NodeRef<leptos::html::Input>; 5] = std::array::from_fn(|_| NodeRef::new());
    let shown = |value: Option<String>| value.unwrap_or_default();
    let save_now = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let whole = |n: Option<f64>| n.map(|n| n.max(0.0).round() as u64);
        save.run(LimitsView {
            tokens_per_day: whole(number_in(fields[0])),
            tokens_per_month: whole(number_in(fields[1])),
            spend_per_day: number_in(fields[2]),
            spend_per_month: number_in(fields[3]),
            turns_per_minute: whole(number_in(fields[4])),
        });
    };
    view! {
        <form class="limits-form grid" on:submit=save_now>
            <label>
                "Tokens a day"
                <input node_ref=fields[0] name="tokens-per-day" type="number" min="0" step="1" placeholder="no limit" value=shown(limits.tokens_per_day.map(|n| n.to_string())) />
            </label>
            <label>
                "Tokens a month"
                <input node_ref=fields[1] name="tokens-per-month" type="number" min="0" step="1" placeholder="no limit" value=shown(limits.tokens_per_month.map(|n| n.to_string())) />
            </label>
            <label>
                {format!("Spend a day ({currency})")}
                <input node_ref=fields[2] name="spend-per-day" type="number" min="0" step="0.01" placeholder="no limit" value=shown(limits.spend_per_day.map(|n| n.to_string())) />
            </label>
            <label>
                {format!("Spend a month ({currency})")}
                <input node_ref=fields[3] name="spend-per-month" type="number" min="0" step="0.01" placeholder="no limit" value=shown(limits.spend_per_month.map(|n| n.to_string())) />
            </label>
            <label>
                "Replies a minute"
                <input node_ref=fields[4] name="turns-per-minute" type="number" min="0" step="1" placeholder="no limit" value=shown(limits.turns_per_minute.map(|n| n.to_string())) />
            </label>
            <div class="row">
                <button class="primary save-limits" type="submit">{label}</button>
            </div>
        </form>
    }
}

/// One line of a limit set, in words.
fn limits_words(limits: &LimitsView, currency: &str) -> String {
    let mut parts = Vec::new();
    if let Some(n) = limits.tokens_per_day {
        parts.push(format!("{} tokens a day", grouped(n)));
    }
    if let Some(n) = limits.tokens_per_month {
        parts.push(format!("{} tokens a month", grouped(n)));
    }
    if let Some(n) = limits.spend_per_day {
        parts.push(format!("{} a day", money(n, currency)));
    }
    if let Some(n) = limits.spend_per_month {
        parts.push(format!("{} a month", money(n, currency)));
    }
    if let Some(n) = limits.turns_per_minute {
        parts.push(format!("{n} replies a minute"));
    }
    if parts.is_empty() { "no limits".to_owned() } else { parts.join(", ") }
}

/// Admin → Usage.
#[component]
pub fn AdminUsage(
    me: Me,
    report: UsageReport,
    prices: Vec<ModelPriceView>,
    providers: Vec<ProviderView>,
    defaults: LimitsView,
    accounts: Vec<(AccountView, AccountLimits)>,
) -> impl IntoView {
    let csrf = me.csrf_token.clone();
    let error = RwSignal::new(None::<String>);
    let currency = report.currency.clone();
    let days = report.days.len();
    let reload = format!("{ADMIN_HERE}?days={days}");
    let currency_field = NodeRef::<leptos::html::Input>::new();
    let save_currency = {
        let (csrf, reload) = (csrf.clone(), reload.clone());
        move |_| {
            let body = json!({"currency": input_value(currency_field)});
            change(
                "PATCH",
                "/api/v1/admin/settings".into(),
                body,
                csrf.clone(),
                error,
                reload.clone(),
            );
        }
    };
    let save_defaults = {
        let (csrf, reload) = (csrf.clone(), reload.clone());
        Callback::new(move |limits: LimitsView| {
            let body = serde_json::to_value(limits).unwrap_or_default();
            change("PUT", "/api/v1/admin/limits".into(), body, csrf.clone(), error, reload.clone());
        })
    };
    let by_account: std::collections::HashMap<String, UsageTotals> =
        report.accounts.iter().map(|a| (a.account_id.clone(), a.totals.clone())).collect();
    let csv = format!("/api/v1/admin/usage.csv?days={days}");
    view! {
        <div class="page">
            <TopBar me=me.clone() />
            <main class="narrow settings usage">
                <h1>"Admin → Usage"</h1>
                <AdminNav />
                <p class="error" role="alert">{move || error.get()}</p>
                <Periods here=ADMIN_HERE days />
                <p class="hint">{format!("Every account, from {} to {} (UTC).", report.from, report.to)}</p>
                <Totals totals=report.totals.clone() currency=currency.clone() />
                <DayChart days=report.days.clone() currency=currency.clone() />
                <p><a class="button csv" href=csv download="">"Download as CSV"</a></p>
                <h2>"By account"</h2>
                <table class="usage-accounts">
                    <thead>
                        <tr>
                            <th>"Account"</th>
                            <th>"Requests"</th>
                            <th>"Tokens"</th>
                            <th>"Spend"</th>
                            <th>"Limits"</th>
                        </tr>
                    </thead>
                    <tbody>
                        {accounts
                            .into_iter()
                            .map(|(account, limits)| {
                                let totals = by_account.get(&account.id).cloned().unwrap_or_default();
                                view! {
                                    <AccountRow
                                        account
                                        limits
                                        totals
                                        currency=currency.clone()
                                        csrf=csrf.clone()
                                        error
                                        reload=reload.clone()
                                    />
                                }
                            })
                            .collect_view()}
                    </tbody>
                </table>
                <h2>"By model"</h2>
                <ModelTable models=report.models.clone() currency=currency.clone() />
                <h2>"Prices"</h2>
                <Prices prices providers currency=currency.clone() csrf=csrf.clone() error reload=reload.clone() />
                <h2>"Currency"</h2>
                <section class="card stack">
                    <label>
                        "Prices, spend and spend limits are in (three letters: USD, EUR, CHF…)"
                        <span class="row">
                            <input node_ref=currency_field name="currency" maxlength="3" value=currency.clone() />
                            <button class="save-currency" type="button" on:click=save_currency>"Save"</button>
                        </span>
                    </label>
                    <p class="hint">"Changing it converts nothing: amounts already counted keep their numbers."</p>
                </section>
                <h2>"Default limits"</h2>
                <section class="card stack default-limits">
                    <p class="hint">"For every account without limits of its own. Empty is no limit; days and months are UTC."</p>
                    <LimitsForm limits=defaults currency=currency.clone() label="Save the defaults" save=save_defaults />
                </section>
            </main>
        </div>
    }
}

/// An account's line: its usage, and its limits (the defaults, or its own to edit).
#[component]
fn AccountRow(
    account: AccountView,
    limits: AccountLimits,
    totals: UsageTotals,
    currency: String,
    csrf: String,
    error: RwSignal<Option<String>>,
    reload: String,
) -> impl IntoView {
    let path = format!("/api/v1/admin/accounts/{}/limits", account.id);
    let own = limits.own.is_some();
    let words = match &limits.own {
        Some(own) => format!("Its own: {}", limits_words(own, &currency)),
        None => format!("The defaults: {}", limits_words(&limits.defaults, &currency)),
    };
    let save = {
        let (csrf, path, reload) = (csrf.clone(), path.clone(), reload.clone());
        Callback::new(move |own: LimitsView| {
            let body = json!({"own": own});
            change("PUT", path.clone(), body, csrf.clone(), error, reload.clone());
        })
    };
    let to_defaults = {
        let (csrf, path, reload) = (csrf.clone(), path.clone(), reload.clone());
        move |_| {
            change("PUT", path.clone(), json!({"own": null}), csrf.clone(), error, reload.clone())
        }
    };
    let start_from = limits.own.clone().unwrap_or(limits.defaults.clone());
    view! {
        <tr class="account" data-username=account.username.clone()>
            <td><b>{account.username.clone()}</b></td>
            <td>{grouped(totals.requests)}</td>
            <td>{grouped(totals.tokens())}</td>
            <td>{money(totals.spend, &currency)}</td>
            <td>
                <details class="account-limits">
                    <summary>{words}</summary>
                    <LimitsForm limits=start_from currency=currency.clone() label="Give these limits" save />
                    {own.then(|| view! {
                        <button class="use-defaults" type="button" on:click=to_defaults>"Use the defaults"</button>
                    })}
                </details>
            </td>
        </tr>
    }
}

/// The prices per million tokens, and a form to set one.
#[component]
fn Prices(
    prices: Vec<ModelPriceView>,
    providers: Vec<ProviderView>,
    currency: String,
    csrf: String,
    error: RwSignal<Option<String>>,
    reload: String,
) -> impl IntoView {
    let provider_name = |id: &str| {
        providers.iter().find(|p| p.id == id).map(|p| p.name.clone()).unwrap_or_default()
    };
    let rows = prices
        .iter()
        .map(|p| {
            let (csrf, reload) = (csrf.clone(), reload.clone());
            let path = format!(
                "/api/v1/admin/prices?providerId={}&model={}",
                llooma_types::encode_query_value(&p.provider_id),
                llooma_types::encode_query_value(&p.model)
            );
            let remove = Callback::new(move |()| {
                change("DELETE", path.clone(), json!({}), csrf.clone(), error, reload.clone())
            });
            let cached = p.cached_input.map(|c| money(c, &currency)).unwrap_or_else(|| "as input".to_owned());
            view! {
                <tr class="price" data-model=p.model.clone()>
                    <td><b>{p.model.clone()}</b><span class="hint">{format!(" on {}", provider_name(&p.provider_id))}</span></td>
                    <td>{money(p.input, &currency)}</td>
                    <td>{cached}</td>
                    <td>{money(p.output, &currency)}</td>
                    <td><RemoveAfterAsking question="Remove this price? Its requests cost nothing from now on." remove /></td>
                </tr>
            }
        })
        .collect_view();
    let provider = RwSignal::new(providers.first().map(|p| p.id.clone()).unwrap_or_default());
    let model = NodeRef::<leptos::html::Input>::new();
    let input = NodeRef::<leptos::html::Input>::new();
    let cached = NodeRef::<leptos::html::Input>::new();
    let output = NodeRef::<leptos::html::Input>::new();
    let set = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let body = json!({
            "providerId": provider.get_untracked(),
            "model": input_value(model),
            "input": number_in(input).unwrap_or(0.0),
            "cachedInput": number_in(cached),
            "output": number_in(output).unwrap_or(0.0),
        });
        change("PUT", "/api/v1/admin/prices".into(), body, csrf.clone(), error, reload.clone());
    };
    let options = providers
        .iter()
        .map(|p| view! { <option value=p.id.clone()>{p.name.clone()}</option> })
        .collect_view();
    let none = prices.is_empty();
    view! {
        <section class="card stack prices">
            <p class="hint">{format!("Per million tokens, in {currency}. A price applies to requests from the moment it is set; a model without one costs nothing.")}</p>
            {none.then(|| view! { <p class="hint no-prices">"No model has a price yet."</p> })}
            {(!none).then(|| view! {
                <table class="price-list">
                    <thead><tr><th>"Model"</th><th>"Input"</th><th>"Cached input"</th><th>"Output"</th><th></th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            })}
            <form class="grid set-price" on:submit=set>
                <label>
                    "Provider"
                    <select name="price-provider" on:change=move |ev| provider.set(event_target_value(&ev))>{options}</select>
                </label>
                <label>"Model" <input node_ref=model name="price-model" required placeholder="gpt-4o-mini" /></label>
                <label>"Input" <input node_ref=input name="price-input" type="number" min="0" step="any" required /></label>
                <label>"Cached input (empty: as input)" <input node_ref=cached name="price-cached" type="number" min="0" step="any" /></label>
                <label>"Output" <input node_ref=output name="price-output" type="number" min="0" step="any" required /></label>
                <div class="row"><button class="primary set-price-button" type="submit">"Set the price"</button></div>
            </form>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(money(0.0, "EUR"), "0.00 EUR");
        assert_eq!(money(0.0032, "EUR"), "0.0032 EUR");
        assert_eq!(money(12.5, "USD"), "12.50 USD");
    }

    #[test]
    fn limits_read_as_one_line() {
        let limits = LimitsView {
            tokens_per_day: Some(100_000),
            spend_per_month: Some(20.0),
            turns_per_minute: Some(3),
            ..Default::default()
        };
        assert_eq!(
            limits_words(&limits, "CHF"),
            "100,000 tokens a day, 20.00 CHF a month, 3 replies a minute"
        );
        assert_eq!(limits_words(&LimitsView::default(), "CHF"), "no limits");
    }
}
