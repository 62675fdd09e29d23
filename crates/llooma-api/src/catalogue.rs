//! The instance's catalogue of MCP servers (Settings → Tools → Discover): entries kept by
//! administrators in the database and entries from the operator's catalogue file, each with how
//! much the instance uses it and how accounts rate it.
//!
//! Usage is counted per address over the whole instance and only ever leaves as counts; the one
//! thing said about the caller is whether they added that address themselves. An entry is only
//! a suggestion: registering goes through the add form (the same policy, permission and review as
//! an address typed by hand), and nothing here contacts a server.

use std::collections::{BTreeSet, HashSet};

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use llooma_core::store::{CatalogueEntry, NewCatalogueEntry};
use llooma_types::{
    CatalogueEntryRequest, CatalogueEntryView, CatalogueRatingView, CatalogueUsageView,
    register_link,
};
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};
use crate::session::{Admin, SignedIn};
use llooma_core::mcp_servers::{clean_address, clean_label};

/// Calls are counted over this many days.
const USAGE_DAYS: i64 = 30;
const FILE_PREFIX: &str = "file:";
const MAX_DESCRIPTION_CHARS: usize = 2_000;
const MAX_TOKEN_HELP_CHARS: usize = 500;
const MAX_ICON_CHARS: usize = 8;
const MAX_TAGS: usize = 12;
const MAX_TAG_CHARS: usize = 30;

/// An entry of the operator's catalogue file, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogueFileEntry {
    /// The file's own key for the entry; ratings are kept under `file:<key>`.
    pub key: String,
    pub entry: NewCatalogueEntry,
}

/// Why a catalogue file was not accepted: the line and what to change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct CatalogueFileError {
    pub line: usize,
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDocument {
    #[serde(default)]
    server: Vec<toml::Spanned<FileServer>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileServer {
    id: String,
    label: String,
    address: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    token_needed: bool,
    #[serde(default)]
    token_help: String,
    #[serde(default)]
    icon: String,
    #[serde(default)]
    tags: Vec<String>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).unwrap_or(text).matches('\n').count() + 1
}

/// Reads a catalogue file: `[[server]]` tables with `id`, `label`, `address` and optionally
/// `description`, `token_needed`, `token_help`, `icon`, `tags`. Anything else is refused, with
/// the line it is on.
pub fn parse_catalogue_file(text: &str) -> Result<Vec<CatalogueFileEntry>, CatalogueFileError> {
    let document: FileDocument = toml::from_str(text).map_err(|e| CatalogueFileError {
        line: e.span().map_or(1, |span| line_of(text, span.start)),
        message: e.message().trim().to_owned(),
    })?;
    let mut keys = HashSet::new();
    let mut addresses = HashSet::new();
    let mut entries = Vec::new();
    for spanned in document.server {
        let line = line_of(text, spanned.span().start);
        let server = spanned.into_inner();
        let fail = |message: String| CatalogueFileError { line, message };
        let key = server.id.trim().to_owned();
        if key.is_empty()
            || key.len() > 40
            || !key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(fail(format!(
                "the id {:?} must be 1 to 40 lowercase letters, digits or hyphens (ratings are \
                 kept under it, so keep it when you edit the entry)",
                server.id
            )));
        }
        if !keys.insert(key.clone()) {
            return Err(fail(format!(
                "the id {key:?} is used by an earlier entry; ids are unique"
            )));
        }
        let request = CatalogueEntryRequest {
            label: server.label,
            address: server.address,
            description: server.description,
            token_needed: server.token_needed,
            token_help: server.token_help,
            icon: server.icon,
            tags: server.tags,
        };
        let entry = validate(request).map_err(|e| fail(e.to_string()))?;
        if !addresses.insert(entry.address.clone()) {
            return Err(fail(format!(
                "the address {} is already listed by an earlier entry; one entry per server",
                entry.address
            )));
        }
        entries.push(CatalogueFileEntry { key, entry });
    }
    Ok(entries)
}

/// Addresses listed both by the catalogue file and by an administrator's entry: (address,
/// administrator's label). Start-up warns about them (two cards for one server, ratings split);
/// the administrator's entry can then be removed.
pub async fn catalogue_overlaps(
    store: &llooma_core::store::Store,
    file: &[CatalogueFileEntry],
) -> Result<Vec<(String, String)>, llooma_core::store::StoreError> {
    let in_file: HashSet<&str> = file.iter().map(|f| f.entry.address.as_str()).collect();
    Ok(store
        .catalogue_entries()
        .await?
        .into_iter()
        .filter(|e| in_file.contains(e.entry.address.as_str()))
        .map(|e| (e.entry.address, e.entry.label))
        .collect())
}

fn too_long(field: &str, max: usize) -> ApiError {
    ApiError::bad_request(
        "invalid_catalogue_entry",
        format!("The {field} has at most {max} characters."),
    )
}

/// The one set of rules for an entry, whether an administrator or the file wrote it.
fn validate(request: CatalogueEntryRequest) -> Result<NewCatalogueEntry, ApiError> {
    if request.label.trim().is_empty() {
        return Err(ApiError::bad_request(
            "invalid_catalogue_entry",
            "Give the entry a label: it is what people pick from.",
        ));
    }
    let address = clean_address(&request.address)?;
    let label = clean_label(Some(&request.label), &address)?;
    let description = request.description.trim().to_owned();
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(too_long("description", MAX_DESCRIPTION_CHARS));
    }
    let token_help = request.token_help.trim().to_owned();
    if token_help.chars().count() > MAX_TOKEN_HELP_CHARS {
        return Err(too_long("note on where to get a token", MAX_TOKEN_HELP_CHARS));
    }
    let icon = request.icon.trim().to_owned();
    if icon.chars().count() > MAX_ICON_CHARS || icon.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "invalid_catalogue_entry",
            format!("The icon is a short text or an emoji: at most {MAX_ICON_CHARS} characters."),
        ));
    }
    let mut tags = BTreeSet::new();
    for tag in &request.tags {
        let tag = tag.trim().to_lowercase();
        if tag.is_empty()
            || tag.chars().count() > MAX_TAG_CHARS
            || tag.chars().any(|c| c.is_control() || c == ',')
        {
            return Err(ApiError::bad_request(
                "invalid_catalogue_entry",
                format!(
                    "The tag {tag:?} is not usable: a tag has 1 to {MAX_TAG_CHARS} characters and \
                     no comma."
                ),
            ));
        }
        tags.insert(tag);
    }
    if tags.len() > MAX_TAGS {
        return Err(ApiError::bad_request(
            "invalid_catalogue_entry",
            format!("An entry has at most {MAX_TAGS} tags."),
        ));
    }
    Ok(NewCatalogueEntry {
        label,
        address,
        description,
        token_needed: request.token_needed,
        token_help,
        icon,
        tags: tags.into_iter().collect(),
    })
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CatalogueQuery {
    /// Words to find in the label, description, address or tags.
    #[serde(default)]
    q: String,
    /// Only entries with this tag.
    #[serde(default)]
    tag: String,
    /// Only the entry for this server address (compared as the address is stored: `HTTPS://Host`
    /// and `https://host/` are the same), as the registration page asks.
    #[serde(default)]
    address: String,
}

fn matches(entry: &CatalogueEntryView, query: &CatalogueQuery) -> bool {
    if !query.address.trim().is_empty()
        && clean_address(&query.address).ok().as_deref() != Some(entry.address.as_str())
    {
        return false;
    }
    let tag = query.tag.trim().to_lowercase();
    if !tag.is_empty() && !entry.tags.contains(&tag) {
        return false;
    }
    let haystack =
        format!("{} {} {} {}", entry.label, entry.description, entry.address, entry.tags.join(" "))
            .to_lowercase();
    query.q.split_whitespace().all(|word| haystack.contains(&word.to_lowercase()))
}

/// Every entry, the file's first, as the caller sees them.
async fn all_views(
    state: &AppState,
    account_id: &str,
) -> Result<Vec<CatalogueEntryView>, ApiError> {
    let since = llooma_core::store::now_ms() - USAGE_DAYS * 24 * 3600 * 1000;
    let ratings = state.app.store.catalogue_ratings().await?;
    let mine = state.app.store.my_catalogue_ratings(account_id).await?;
    let added: HashSet<String> = state
        .app
        .store
        .list_mcp_servers(account_id)
        .await?
        .into_iter()
        .map(|s| s.address)
        .collect();
    let file = state
        .config
        .catalogue_file
        .iter()
        .map(|f| (format!("{FILE_PREFIX}{}", f.key), f.entry.clone(), true));
    let stored = state
        .app
        .store
        .catalogue_entries()
        .await?
        .into_iter()
        .map(|CatalogueEntry { id, entry, .. }| (id, entry, false));
    let entries: Vec<(String, NewCatalogueEntry, bool)> = file.chain(stored).collect();
    let addresses: Vec<String> = entries.iter().map(|(_, e, _)| e.address.clone()).collect();
    let usage = state.app.store.usage_by_address(&addresses, since).await?;
    let view = |(id, entry, from_file): (String, NewCatalogueEntry, bool)| {
        let used = usage.get(&entry.address).copied().unwrap_or_default();
        let rated = ratings.get(&id).copied().unwrap_or_default();
        let average = (rated.count > 0).then(|| {
            // Counts are small; the precision lost converting is far below one decimal.
            #[allow(clippy::cast_precision_loss)]
            let average = rated.total_stars as f64 / rated.count as f64;
            (average * 10.0).round() / 10.0
        });
        let mut view = fresh_view(id, entry, from_file);
        view.added = added.contains(&view.address);
        view.usage = CatalogueUsageView { accounts: used.accounts, calls_last_30_days: used.calls };
        view.rating =
            CatalogueRatingView { average, count: rated.count, mine: mine.get(&view.id).copied() };
        view
    };
    Ok(entries.into_iter().map(view).collect())
}

/// `GET /api/v1/mcp/catalogue?q=&tag=`: the catalogue with usage and ratings.
pub async fn list(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiQuery(query): ApiQuery<CatalogueQuery>,
) -> Result<Json<Vec<CatalogueEntryView>>, ApiError> {
    let views = all_views(&state, &signed_in.account.id).await?;
    Ok(Json(views.into_iter().filter(|v| matches(v, &query)).collect()))
}

/// Whether `id` names an entry that exists (in the file or the database).
async fn exists(state: &AppState, id: &str) -> Result<bool, ApiError> {
    Ok(match id.strip_prefix(FILE_PREFIX) {
        Some(key) => state.config.catalogue_file.iter().any(|f| f.key == key),
        None => state.app.store.catalogue_entry(id).await?.is_some(),
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RatingRequest {
    stars: u8,
}

/// `PUT /api/v1/mcp/catalogue/{id}/rating`: the caller's 1–5 stars, replacing any earlier ones.
pub async fn rate(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<RatingRequest>,
) -> Result<StatusCode, ApiError> {
    if !(1..=5).contains(&body.stars) {
        return Err(ApiError::bad_request("invalid_rating", "A rating is 1 to 5 stars."));
    }
    if !exists(&state, &id).await? {
        return Err(ApiError::NotFound);
    }
    state.app.store.rate_catalogue_entry(&id, &signed_in.account.id, body.stars).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /api/v1/mcp/catalogue/{id}/rating`: withdraws the caller's rating.
pub async fn unrate(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.app.store.unrate_catalogue_entry(&id, &signed_in.account.id).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn refuse_file_entry(id: &str) -> Result<(), ApiError> {
    if id.starts_with(FILE_PREFIX) {
        return Err(ApiError::Conflict {
            code: "catalogue_file_entry",
            message: "This entry comes from the operator's catalogue file: change it there and \
                      restart Llooma."
                .into(),
        });
    }
    Ok(())
}

/// An entry as stored, before anyone used or rated it.
fn fresh_view(id: String, entry: NewCatalogueEntry, from_file: bool) -> CatalogueEntryView {
    CatalogueEntryView {
        register_link: register_link(&entry.address, &entry.label),
        added: false,
        usage: CatalogueUsageView::default(),
        rating: CatalogueRatingView::default(),
        id,
        label: entry.label,
        address: entry.address,
        description: entry.description,
        token_needed: entry.token_needed,
        token_help: entry.token_help,
        icon: entry.icon,
        tags: entry.tags,
        from_file,
    }
}

fn admin_view(entry: CatalogueEntry) -> CatalogueEntryView {
    fresh_view(entry.id, entry.entry, false)
}

/// One entry per server: another entry (of the file or the database, `except` aside) at the
/// same address is refused, so ratings and usage are not split between two cards.
async fn refuse_second_entry(
    state: &AppState,
    entry: &NewCatalogueEntry,
    except: Option<&str>,
) -> Result<(), ApiError> {
    let stored = state.app.store.catalogue_entries().await?;
    let taken = state
        .config
        .catalogue_file
        .iter()
        .map(|f| &f.entry)
        .chain(stored.iter().filter(|e| Some(e.id.as_str()) != except).map(|e| &e.entry))
        .find(|other| other.address == entry.address);
    match taken {
        Some(other) => Err(ApiError::Conflict {
            code: "catalogue_address_taken",
            message: format!(
                "The catalogue already has an entry for this address (“{}”): change that one \
                 instead.",
                other.label
            ),
        }),
        None => Ok(()),
    }
}

/// `POST /api/v1/admin/mcp/catalogue`: a new entry (nothing is contacted).
pub async fn admin_create(
    State(state): State<AppState>,
    Admin(admin): Admin,
    ApiJson(body): ApiJson<CatalogueEntryRequest>,
) -> Result<(StatusCode, Json<CatalogueEntryView>), ApiError> {
    let entry = validate(body)?;
    refuse_second_entry(&state, &entry, None).await?;
    let entry = state.app.store.create_catalogue_entry(entry).await?;
    tracing::info!(admin = %admin.account.id, entry = %entry.id, "catalogue entry added");
    Ok((StatusCode::CREATED, Json(admin_view(entry))))
}

/// `PUT /api/v1/admin/mcp/catalogue/{id}`: replaces an entry; its ratings stay unless it now
/// points at another server.
pub async fn admin_update(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<CatalogueEntryRequest>,
) -> Result<Json<CatalogueEntryView>, ApiError> {
    refuse_file_entry(&id)?;
    let entry = validate(body)?;
    refuse_second_entry(&state, &entry, Some(&id)).await?;
    let entry = state.app.store.update_catalogue_entry(&id, entry).await?;
    tracing::info!(admin = %admin.account.id, entry = %entry.id, "catalogue entry changed");
    Ok(Json(admin_view(entry)))
}

/// `DELETE /api/v1/admin/mcp/catalogue/{id}`: removes an entry and its ratings; servers people
/// added from it stay theirs.
pub async fn admin_delete(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    refuse_file_entry(&id)?;
    if !state.app.store.delete_catalogue_entry(&id).await? {
        return Err(ApiError::NotFound);
    }
    tracing::info!(admin = %admin.account.id, entry = %id, "catalogue entry removed");
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_with_two_entries_reads_back_normalised() {
        let text = r#"
[[server]]
id = "everything"
label = "Everything"
address = "https://tools.example.org/mcp"
description = "Every kind of tool, for trying things."
tags = ["Demo", "testing"]
icon = "🧰"

[[server]]
id = "mail"
label = "Mail"
address = "https://mail.example.org/mcp"
token_needed = true
token_help = "Create one under Settings → Tokens in the mail app."
"#;
        let entries = parse_catalogue_file(text).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[0].key, "everything");
        assert_eq!(entries[0].entry.tags, ["demo", "testing"]);
        assert!(entries[1].entry.token_needed);
        assert_eq!(entries[1].entry.address, "https://mail.example.org/mcp");
    }

    #[test]
    fn malformed_toml_names_its_line() {
        let text = "[[server]]\nid = \"a\"\nlabel = \"A\"\naddress = \"https://a.example/mcp\n";
        let err = parse_catalogue_file(text).unwrap_err();
        assert_eq!(err.line, 4, "{err}");
    }

    #[test]
    fn an_unknown_field_is_refused_with_its_line_and_name() {
        let text = "[[server]]\nid = \"a\"\nlabel = \"A\"\naddress = \"https://a.example/mcp\"\ntoken = \"secret\"\n";
        let err = parse_catalogue_file(text).unwrap_err();
        assert_eq!(err.line, 5, "{err}");
        assert!(err.message.contains("token"), "{err}");
        let top = parse_catalogue_file("servers = []\n").unwrap_err();
        assert!(top.message.contains("servers"), "{top}");
    }

    #[test]
    fn a_bad_entry_names_the_line_of_its_table() {
        let text = "[[server]]\nid = \"a\"\nlabel = \"A\"\naddress = \"https://a.example/mcp\"\n\n[[server]]\nid = \"b\"\nlabel = \"B\"\naddress = \"ftp://b.example/\"\n";
        let err = parse_catalogue_file(text).unwrap_err();
        assert_eq!(err.line, 6, "{err}");
        assert!(err.message.contains("http"), "{err}");
        let twice = text.replace("id = \"b\"", "id = \"a\"").replace("ftp", "https");
        let err = parse_catalogue_file(&twice).unwrap_err();
        assert!(err.message.contains("earlier entry"), "{err}");
        let same_server = text.replace("ftp://b.example/", "https://A.example:443/mcp");
        let err = parse_catalogue_file(&same_server).unwrap_err();
        assert_eq!(err.line, 6, "{err}");
        assert!(err.message.contains("already listed"), "{err}");
        let bad_id = text.replace("id = \"b\"", "id = \"B b\"").replace("ftp", "https");
        assert!(parse_catalogue_file(&bad_id).unwrap_err().message.contains("lowercase"));
    }

    #[test]
    fn search_and_tag_filter_together() {
        let entry = fresh_view(
            "e".into(),
            NewCatalogueEntry {
                label: "House".into(),
                address: "https://home.example/mcp".into(),
                description: "Lights and heating".into(),
                token_needed: false,
                token_help: String::new(),
                icon: String::new(),
                tags: vec!["home".into()],
            },
            false,
        );
        let query = |q: &str, tag: &str| CatalogueQuery {
            q: q.into(),
            tag: tag.into(),
            address: String::new(),
        };
        assert!(matches(&entry, &query("heat", "")));
        assert!(matches(&entry, &query("LIGHTS house", "home")));
        assert!(!matches(&entry, &query("mail", "")));
        assert!(!matches(&entry, &query("", "office")));
        let at = |address: &str| CatalogueQuery { address: address.into(), ..Default::default() };
        assert!(matches(&entry, &at("HTTPS://Home.Example:443/mcp")));
        assert!(!matches(&entry, &at("https://home.example/other")));
        assert!(!matches(&entry, &at("not an address")));
    }
}
