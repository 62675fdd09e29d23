//! Serving the web interface: pages rendered from the API's answers, the browser part's files,
//! the stylesheet, and the security headers that go with them.
//!
//! Pages read their data by calling the API router in-process with the request's own cookie, so
//! a page shows exactly what the API would show that session, and nothing more.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path as UrlPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use leptos::prelude::*;
use llooma_types::{
    ApprovalCardView, CatalogueEntryView, ConsentView, ConversationView, InstanceInfo,
    InstanceSettingsView, McpServerDetail, McpToolSettingsView, MemoryNoteView, PersonaView,
    ProviderChoice, Role, SessionView,
};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tower::ServiceExt;

use crate::App;
use crate::model::{Me, Page};

/// The stylesheet, part of the binary.
const STYLE: &str = include_str!("../assets/style.css");

/// The two files `cargo xtask build-web` writes.
pub const JS_FILE: &str = "llooma_web.js";
pub const WASM_FILE: &str = "llooma_web_bg.wasm";
const STYLE_FILE: &str = "style.css";

/// A file whose name holds a hash of its content is the same file forever.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// The browser part's names as pages ask for them (under `/pkg/`).
#[derive(Clone, Debug)]
struct AssetNames {
    js: String,
    wasm: String,
}

/// `name.ext` → `name.<first 16 hex digits of its SHA-256>.ext`.
fn hashed_name(name: &str, content: &[u8]) -> String {
    use sha2::Digest as _;
    let hash = hex::encode(&sha2::Sha256::digest(content)[..8]);
    match name.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}.{hash}.{ext}"),
        None => format!("{name}.{hash}"),
    }
}

/// The browser part, read once at start-up.
#[derive(Clone, Debug)]
pub struct ClientFiles {
    js: Arc<[u8]>,
    wasm: Arc<[u8]>,
    /// Where pages load them from: names that carry a hash of the content, so a browser keeps
    /// its copy for good and a new build is a new name.
    names: AssetNames,
    /// Gzipped copies (`<name>.gz`, written by build-web), sent to browsers that accept them.
    js_gz: Option<Arc<[u8]>>,
    wasm_gz: Option<Arc<[u8]>>,
}

/// The browser part is not where the server looks for it.
#[derive(Debug, thiserror::Error)]
#[error(
    "the web interface's browser part is missing ({path}: {source}); build it with `cargo xtask \
     build-web`, or point LLOOMA_WEB_DIR at the folder holding {JS_FILE} and {WASM_FILE}"
)]
pub struct MissingClientFiles {
    path: String,
    source: std::io::Error,
}

impl ClientFiles {
    /// Reads the browser part from `dir`, or says what is missing and how to build it.
    pub fn load(dir: &Path) -> Result<ClientFiles, MissingClientFiles> {
        let read = |name: &str| {
            std::fs::read(dir.join(name)).map_err(|source| MissingClientFiles {
                path: dir.join(name).display().to_string(),
                source,
            })
        };
        let gz = |name: &str| std::fs::read(dir.join(format!("{name}.gz"))).ok().map(Arc::from);
        let (js, wasm): (Arc<[u8]>, Arc<[u8]>) = (read(JS_FILE)?.into(), read(WASM_FILE)?.into());
        Ok(ClientFiles {
            names: AssetNames {
                js: hashed_name(JS_FILE, &js),
                wasm: hashed_name(WASM_FILE, &wasm),
            },
            js,
            wasm,
            js_gz: gz(JS_FILE),
            wasm_gz: gz(WASM_FILE),
        })
    }

    /// Where `cargo xtask build-web` puts the files for a binary built in the same target
    /// directory: `<target>/web/pkg`, beside `<target>/debug` and `<target>/release`.
    pub fn default_dir() -> Option<PathBuf> {
        let exe = std::env::current_exe().ok()?;
        Some(exe.parent()?.parent()?.join("web").join("pkg"))
    }
}

/// What the pages need.
#[derive(Clone, Debug)]
struct Web {
    /// The API router, called in-process for the page's data.
    api: Router,
    /// None when the browser part was not built: pages still render, with a notice.
    client: Option<ClientFiles>,
    /// The stylesheet's hashed name (under `/assets/`).
    style: Arc<str>,
}

/// The pages and files of the web interface, to merge beside the API's router.
pub fn router(api: Router, client: Option<ClientFiles>) -> Router {
    let web = Web { api, client, style: hashed_name(STYLE_FILE, STYLE.as_bytes()).into() };
    Router::new()
        .route("/", get(home))
        .route("/c/{id}", get(conversation))
        .route("/settings/tools", get(settings_tools))
        .route("/settings/tools/discover", get(discover))
        .route("/settings/tools/mcp/new", get(add_server))
        .route("/admin/catalogue", get(admin_catalogue))
        .route("/settings/bots", get(settings_bots))
        .route("/settings/personas", get(settings_personas))
        .route("/settings/prompts", get(settings_prompts))
        .route("/admin", get(admin_home))
        .route("/admin/mcp", get(admin_mcp))
        .route("/admin/instance", get(admin_instance))
        .route("/settings/usage", get(settings_usage))
        .route("/settings/account", get(settings_account))
        .route("/admin/usage", get(admin_usage))
        .route("/pkg/{file}", get(client_file))
        .route("/assets/{file}", get(style))
        .fallback(not_found)
        .with_state(web)
}

/// Who may see a page.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Who {
    Anyone,
    Administrators,
}

/// What a page handler has of its request: the cookie and the peer, for the API calls.
#[derive(Clone)]
struct Caller {
    cookie: Option<HeaderValue>,
    peer: Option<ConnectInfo<SocketAddr>>,
}

impl Caller {
    fn of(request: &Request) -> Caller {
        Caller {
            cookie: request.headers().get(header::COOKIE).cloned(),
            peer: request.extensions().get::<ConnectInfo<SocketAddr>>().copied(),
        }
    }
}

/// Why a page could not be rendered from the API's answers.
enum Fail {
    SignedOut,
    NotFound,
    /// Status and the API's sentence.
    Api(StatusCode, String),
}

impl Web {
    async fn get<T: DeserializeOwned>(&self, caller: &Caller, path: &str) -> Result<T, Fail> {
        Ok(self.get_with_next(caller, path).await?.0)
    }

    /// [`Web::get`] of a paged list, with where the next page starts (the `before` of its
    /// `Link: rel="next"`), if one follows.
    async fn get_with_next<T: DeserializeOwned>(
        &self,
        caller: &Caller,
        path: &str,
    ) -> Result<(T, Option<String>), Fail> {
        let mut request = Request::get(path);
        if let Some(cookie) = &caller.cookie {
            request = request.header(header::COOKIE, cookie);
        }
        let mut request = request
            .body(Body::empty())
            .map_err(|e| Fail::Api(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        if let Some(peer) = caller.peer {
            request.extensions_mut().insert(peer);
        }
        let response = match self.api.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = response.status();
        let next = response
            .headers()
            .get(header::LINK)
            .and_then(|v| v.to_str().ok())
            .and_then(|link| link.split_once("before=")?.1.split_once('>').map(|(c, _)| c))
            .map(str::to_owned);
        let bytes = axum::body::to_bytes(response.into_body(), 16 * 1024 * 1024)
            .await
            .map_err(|e| Fail::Api(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        match status {
            StatusCode::UNAUTHORIZED => return Err(Fail::SignedOut),
            StatusCode::NOT_FOUND => return Err(Fail::NotFound),
            s if !s.is_success() => {
                let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let message = body["message"].as_str().unwrap_or("The server failed.").to_owned();
                return Err(Fail::Api(s, message));
            }
            _ => {}
        }
        let value = serde_json::from_slice(&bytes).map_err(|e| {
            Fail::Api(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("unexpected answer from {path}: {e}"),
            )
        })?;
        Ok((value, next))
    }

    /// A page for a signed-in person: `load` builds it from the API's answers, called with the
    /// request's own session. Signed out goes to sign-in; a page for administrators is "not
    /// found" to anyone else, as is anything the API does not find.
    async fn signed_in_page<F, Fut>(&self, caller: Caller, who: Who, load: F) -> Response
    where
        F: FnOnce(Web, Caller, Me) -> Fut,
        Fut: Future<Output = Result<Page, Fail>>,
    {
        let me = match self.me(&caller).await {
            Ok(me) => me,
            Err(fail) => return self.failed(fail, None),
        };
        if who == Who::Administrators && !me.admin {
            return self.failed(Fail::NotFound, Some(me));
        }
        match load(self.clone(), caller, me.clone()).await {
            Ok(page) => self.page(StatusCode::OK, &page),
            Err(fail) => self.failed(fail, Some(me)),
        }
    }

    /// The account's MCP servers, each with its whole catalogue.
    async fn mcp_servers(&self, caller: &Caller) -> Result<Vec<McpServerDetail>, Fail> {
        self.get(caller, "/api/v1/mcp/servers/details").await
    }

    async fn me(&self, caller: &Caller) -> Result<Me, Fail> {
        let session: SessionView = self.get(caller, "/api/v1/me").await?;
        Ok(Me {
            username: session.account.username,
            display_name: session.account.display_name,
            admin: session.account.role == Role::Admin,
            csrf_token: session.csrf_token,
        })
    }

    fn page(&self, status: StatusCode, page: &Page) -> Response {
        let mut random = [0u8; 16];
        // Without a random source the page would carry a guessable nonce: better none at all,
        // which the policy then refuses (the page still renders, without its script).
        let nonce = match getrandom::fill(&mut random) {
            Ok(()) => hex::encode(random),
            Err(err) => {
                tracing::error!(error = %err, "no random source for the page's script nonce");
                String::new()
            }
        };
        let assets = Assets {
            style: &self.style,
            client: self.client.as_ref().map(|c| (c.names.js.as_str(), c.names.wasm.as_str())),
        };
        let html = render(page, &nonce, &assets);
        // `frame-src 'self'`: an MCP server's view (MCP Apps), a document the instance serves
        // under a policy of its own that sandboxes it into an origin of its own.
        // `media-src blob:`: a reply read aloud is played from the audio the page fetched
        // (a blob only the page's own script can make); `data:`: a sound an MCP call returned,
        // played from the step (its bytes checked to be audio before it was kept).
        let csp = format!(
            "default-src 'none'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
             connect-src 'self'; style-src 'self'; img-src 'self' data:; \
             media-src 'self' blob: data:; \
             font-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'; \
             frame-src 'self'"
        );
        let mut response = (status, html).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        if let Ok(csp) = HeaderValue::from_str(&csp) {
            headers.insert(header::CONTENT_SECURITY_POLICY, csp);
        }
        security_headers(headers);
        response
    }

    fn failed(&self, fail: Fail, me: Option<Me>) -> Response {
        match fail {
            Fail::SignedOut => Redirect::to("/").into_response(),
            Fail::NotFound => self.page(StatusCode::NOT_FOUND, &Page::NotFound { me }),
            Fail::Api(status, message) => {
                if status.is_server_error() {
                    tracing::warn!(%status, %message, "a page could not be rendered");
                }
                let mut response = (status, format!("{message}\n")).into_response();
                security_headers(response.headers_mut());
                response
            }
        }
    }
}

fn security_headers(headers: &mut HeaderMap) {
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

/// The names a page loads its stylesheet and browser part by.
#[derive(Clone, Copy, Debug)]
pub struct Assets<'a> {
    /// The stylesheet's name under `/assets/`.
    pub style: &'a str,
    /// The browser part's (JS, wasm) names under `/pkg/`, when it was built.
    pub client: Option<(&'a str, &'a str)>,
}

/// The whole document: the page's data for the browser, the rendered body, the loader.
pub fn render(page: &Page, nonce: &str, assets: &Assets<'_>) -> String {
    // `<` escaped: the data cannot close its script element, whatever a title says.
    let data = serde_json::to_string(page).unwrap_or_default().replace('<', "\\u003c");
    let title = escape(&page.title());
    let owned = page.clone();
    let body = Owner::new().with(move || view! { <App page=owned /> }.to_html());
    let (loader, notice) = if let Some((js, wasm)) = assets.client {
        (
            format!(
                "<script type=\"module\" nonce=\"{nonce}\">import init, {{ hydrate }} from \
                 '/pkg/{js}'; await init({{ module_or_path: '/pkg/{wasm}' }}); \
                 hydrate();</script>"
            ),
            String::new(),
        )
    } else {
        (
            String::new(),
            "<div class=\"banner\" role=\"alert\">The interactive part of this page was not \
             built, so buttons do nothing. Run <code>cargo xtask build-web</code> (or set \
             LLOOMA_WEB_DIR to the folder it wrote) and restart the server.</div>"
                .to_owned(),
        )
    };
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><link rel=\"stylesheet\" href=\"/assets/{}\">\
         <script type=\"application/json\" id=\"llooma-data\">{data}</script>{loader}</head>\
         <body>{notice}{body}</body></html>",
        assets.style
    )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// `/` and `/?before=CURSOR` (older conversations; the cursor is the API's).
async fn home(State(web): State<Web>, query: PageQuery, request: Request) -> Response {
    let caller = Caller::of(&request);
    let before = query.get("before").filter(|b| !b.is_empty());
    let me = match web.me(&caller).await {
        Ok(me) => me,
        Err(Fail::SignedOut) => {
            return match web.get::<InstanceInfo>(&caller, "/api/v1/instance").await {
                Ok(info) => web.page(
                    StatusCode::OK,
                    &Page::SignIn {
                        first_run: !info.setup_complete,
                        registration_open: info.registration_open,
                    },
                ),
                Err(fail) => web.failed(fail, None),
            };
        }
        Err(fail) => return web.failed(fail, None),
    };
    let loaded = async {
        let path = match before {
            // The cursor is the API's own, passed back as it gave it (digits, '.', an id).
            Some(before)
                if before.chars().all(|c| c.is_ascii_alphanumeric() || ".-".contains(c)) =>
            {
                format!("/api/v1/conversations?before={before}")
            }
            _ => "/api/v1/conversations".to_owned(),
        };
        let (conversations, older): (Vec<ConversationView>, _) =
            web.get_with_next(&caller, &path).await?;
        let cards: Vec<ApprovalCardView> = web.get(&caller, "/api/v1/approvals").await?;
        let providers: Vec<ProviderChoice> = web.get(&caller, "/api/v1/providers").await?;
        Ok::<_, Fail>((conversations, older, cards, providers.is_empty()))
    };
    match loaded.await {
        Ok((conversations, older, cards, no_provider)) => web.page(
            StatusCode::OK,
            &Page::Home {
                me,
                conversations,
                older,
                newest: before.is_none(),
                cards,
                now_ms: now_ms(),
                no_provider,
            },
        ),
        Err(fail) => web.failed(fail, Some(me)),
    }
}

async fn conversation(
    State(web): State<Web>,
    UrlPath(id): UrlPath<String>,
    request: Request,
) -> Response {
    web.signed_in_page(Caller::of(&request), Who::Anyone, move |web, caller, me| async move {
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(Fail::NotFound);
        }
        let consent: ConsentView = web.get(&caller, "/api/v1/consent").await?;
        let servers = web.mcp_servers(&caller).await?;
        let (conversations, older) = web.get_with_next(&caller, "/api/v1/conversations").await?;
        Ok(Page::Conversation {
            me,
            detail: web
                .get(&caller, &format!("/api/v1/conversations/{id}?limit={}", crate::app::PAGE))
                .await?,
            cards: web.get(&caller, "/api/v1/approvals").await?,
            providers: web.get(&caller, "/api/v1/providers").await?,
            personas: web.get(&caller, "/api/v1/personas").await?,
            attachables: crate::attach::offer(&servers),
            always_allow: consent.mode == "rules",
            now_ms: now_ms(),
            conversations,
            older,
        })
    })
    .await
}

async fn settings_tools(State(web): State<Web>, request: Request) -> Response {
    web.signed_in_page(Caller::of(&request), Who::Anyone, |web, caller, me| async move {
        Ok(Page::SettingsTools {
            me,
            servers: web.mcp_servers(&caller).await?,
            settings: web.get(&caller, "/api/v1/mcp/settings").await?,
            cost: web.get(&caller, "/api/v1/mcp/announce-cost").await?,
            consent: web.get(&caller, "/api/v1/consent").await?,
            preferences: web.get(&caller, "/api/v1/me/preferences").await?,
        })
    })
    .await
}

/// A page's query, read leniently: an unknown or repeated field is not worth an error page.
type PageQuery = axum::extract::Query<std::collections::HashMap<String, String>>;

fn query_value(query: &PageQuery, name: &str) -> String {
    query.get(name).map(|v| v.trim().to_owned()).unwrap_or_default()
}

/// `path?name=value&...` with the values percent-encoded.
fn with_query(path: &str, pairs: &[(&str, &str)]) -> String {
    let query: Vec<String> = pairs
        .iter()
        .map(|(name, value)| format!("{name}={}", llooma_types::encode_query_value(value)))
        .collect();
    format!("{path}?{}", query.join("&"))
}

async fn discover(State(web): State<Web>, query: PageQuery, request: Request) -> Response {
    let (q, tag) = (query_value(&query, "q"), query_value(&query, "tag"));
    web.signed_in_page(Caller::of(&request), Who::Anyone, |web, caller, me| async move {
        let every: Vec<CatalogueEntryView> = web.get(&caller, "/api/v1/mcp/catalogue").await?;
        let tags: std::collections::BTreeSet<String> =
            every.iter().flat_map(|e| e.tags.iter().cloned()).collect();
        // Unfiltered, the list that gave the tags is the answer; only a search asks again.
        let entries = if q.is_empty() && tag.is_empty() {
            every
        } else {
            web.get(&caller, &with_query("/api/v1/mcp/catalogue", &[("q", &q), ("tag", &tag)]))
                .await?
        };
        let settings: McpToolSettingsView = web.get(&caller, "/api/v1/mcp/settings").await?;
        Ok(Page::Discover {
            me,
            entries,
            tags: tags.into_iter().collect(),
            query: q,
            tag,
            can_add: settings.can_add_servers,
        })
    })
    .await
}

/// The registration deeplink: `/settings/tools/mcp/new?address=…&label=…`. It only fills the
/// form; a token in the link, and a user name, password, credential-like parameter or `#fragment`
/// in its address, is dropped (and named on the page), and the address meets the same checks as
/// a typed one when the person tests it.
async fn add_server(State(web): State<Web>, query: PageQuery, request: Request) -> Response {
    let label = query_value(&query, "label");
    // The link's own parameters first (in order of name), then what the address carried.
    let mut dropped: Vec<String> =
        query.keys().filter(|k| looks_like_credential(k)).cloned().collect();
    dropped.sort();
    let (address, in_address) = without_credentials(&query_value(&query, "address"));
    dropped.extend(in_address);
    web.signed_in_page(Caller::of(&request), Who::Anyone, |web, caller, me| async move {
        let settings: McpToolSettingsView = web.get(&caller, "/api/v1/mcp/settings").await?;
        let entry = if address.is_empty() {
            None
        } else {
            let path = with_query("/api/v1/mcp/catalogue", &[("address", &address)]);
            let found: Vec<CatalogueEntryView> = web.get(&caller, &path).await?;
            found.into_iter().next()
        };
        Ok(Page::AddServer {
            me,
            label,
            address,
            dropped,
            can_add: settings.can_add_servers,
            entry,
        })
    })
    .await
}

/// Words that name a secret in a query parameter (`access_token`, `API_KEY`, `apiKey`, `sig`...).
const CREDENTIAL_WORDS: &[&str] = &[
    "token",
    "key",
    "apikey",
    "secret",
    "password",
    "passwd",
    "pwd",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "bearer",
    "jwt",
    "sig",
    "signature",
    "session",
];

/// Whether a query parameter's name suggests a secret: one of its words (split on anything but
/// letters and digits, and where a lowercase letter meets an uppercase one) is a credential word.
/// `author` or `keyword` are not.
fn looks_like_credential(name: &str) -> bool {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() || (c.is_ascii_uppercase() && previous_lower) {
            words.push(std::mem::take(&mut word));
        }
        if c.is_ascii_alphanumeric() {
            word.push(c.to_ascii_lowercase());
        }
        previous_lower = c.is_ascii_lowercase();
    }
    words.push(word);
    words.iter().any(|w| CREDENTIAL_WORDS.contains(&w.as_str()))
}

/// What the registration page names when a link's address carried a user name (and password).
const USERINFO_DROPPED: &str = "a user name or password in the address";
/// What the registration page names when a link's address carried a `#fragment`.
const FRAGMENT_DROPPED: &str = "the part of the address after #";

/// The address without what could hand someone a credential, and what was dropped: its
/// `user:password@`, any credential-like parameter of its query (by name), and its `#fragment`,
/// whatever that holds (an MCP client never sends a fragment to the server, so it cannot be
/// needed to connect, and it is where `#access_token=` or a bare token travels). A link cannot
/// hand someone a key, in a parameter of its own or inside the address. The other parameters are
/// kept exactly as written; an address with nothing to drop is returned as written.
fn without_credentials(address: &str) -> (String, Vec<String>) {
    let Ok(mut url) = url::Url::parse(address) else {
        return (address.to_owned(), Vec::new());
    };
    let mut dropped = Vec::new();
    if !url.username().is_empty() || url.password().is_some() {
        // Both only fail for addresses that cannot have a user (`mailto:`), which have none.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        dropped.push(USERINFO_DROPPED.to_owned());
    }
    if let Some(query) = url.query().map(str::to_owned) {
        let mut names = Vec::new();
        let kept: Vec<&str> = query
            .split('&')
            .filter(|segment| {
                let name = parameter_name(segment);
                let credential = looks_like_credential(&name);
                if credential {
                    names.push(name);
                }
                !credential
            })
            .collect();
        if !names.is_empty() {
            url.set_query((!kept.is_empty()).then(|| kept.join("&")).as_deref());
            dropped.extend(names);
        }
    }
    if let Some(fragment) = url.fragment() {
        if !fragment.is_empty() {
            dropped.push(FRAGMENT_DROPPED.to_owned());
        }
        url.set_fragment(None);
        if dropped.is_empty() {
            // A bare `#`: nothing to name, but nothing worth keeping either.
            return (url.to_string(), dropped);
        }
    }
    if dropped.is_empty() {
        return (address.to_owned(), Vec::new());
    }
    (url.to_string(), dropped)
}

/// The decoded name of one `name=value` segment of a query.
fn parameter_name(segment: &str) -> String {
    url::form_urlencoded::parse(segment.as_bytes())
        .next()
        .map(|(name, _)| name.into_owned())
        .unwrap_or_default()
}

/// A request's target as a log may show it: the path, and the query with the value of every
/// parameter that could be a credential replaced by `[redacted]`: one whose name looks like a
/// credential (the registration link's word list, [`looks_like_credential`]), and one whose value
/// is an address carrying one (what [`without_credentials`] would drop, such as the
/// registration link's `address=https://u:p@…` or `…?api_key=…`). Everything else is kept as
/// written, so a log still says which page, search or link was asked for.
pub fn loggable_target(path: &str, query: Option<&str>) -> String {
    let Some(query) = query else {
        return path.to_owned();
    };
    let segments: Vec<String> = query
        .split('&')
        .map(|segment| {
            let Some((raw_name, _)) = segment.split_once('=') else {
                return segment.to_owned();
            };
            let value = url::form_urlencoded::parse(segment.as_bytes())
                .next()
                .map(|(_, value)| value.into_owned())
                .unwrap_or_default();
            let secret = looks_like_credential(&parameter_name(segment))
                || !without_credentials(&value).1.is_empty();
            if secret { format!("{raw_name}=[redacted]") } else { segment.to_owned() }
        })
        .collect();
    format!("{path}?{}", segments.join("&"))
}

async fn admin_catalogue(State(web): State<Web>, request: Request) -> Response {
    web.signed_in_page(Caller::of(&request), Who::Administrators, |web, caller, me| async move {
        Ok(Page::AdminCatalogue { me, entries: web.get(&caller, "/api/v1/mcp/catalogue").await? })
    })
    .await
}

async fn settings_bots(State(web): State<Web>, request: Request) -> Response {
    web.signed_in_page(Caller::of(&request), Who::Anyone, |web, caller, me| async move {
        Ok(Page::SettingsBots {
            me,
            bots: web.get(&caller, "/api/v1/bots").await?,
            providers: web.get(&caller, "/api/v1/providers").await?,
            personas: web.get(&caller, "/api/v1/personas").await?,
        })
    })
    .await
}

async fn settings_personas(State(web): State<Web>, request: Request) -> Response {
    web.signed_in_page(Caller::of(&request), Who::Anyone, |web, caller, me| async move {
        let listed: Vec<PersonaView> = web.get(&caller, "/api/v1/personas").await?;
        let mut personas = Vec::with_capacity(listed.len());
        for persona in listed {
            let path = format!("/api/v1/personas/{}/memory", persona.id);
            let notes: Vec<MemoryNoteView> = web.get(&caller, &path).await?;
            personas.push((persona, notes));
        }
        Ok(Page::SettingsPersonas { me, personas })
    })
    .await
}

async fn settings_prompts(State(web): State<Web>, request: Request) -> Response {
    web.signed_in_page(Caller::of(&request), Who::Anyone, |web, caller, me| async move {
        Ok(Page::SettingsPrompts { me, wordings: web.get(&caller, "/api/v1/prompts/tools").await? })
    })
    .await
}

async fn admin_mcp(State(web): State<Web>, request: Request) -> Response {
    web.signed_in_page(Caller::of(&request), Who::Administrators, |web, caller, me| async move {
        let settings: InstanceSettingsView = web.get(&caller, "/api/v1/admin/settings").await?;
        Ok(Page::AdminMcp {
            me,
            users_can_add: settings.users_can_add_mcp_servers,
            servers: web.get(&caller, "/api/v1/admin/mcp/servers").await?,
        })
    })
    .await
}

async fn admin_home(State(web): State<Web>, request: Request) -> Response {
    web.signed_in_page(Caller::of(&request), Who::Administrators, |web, caller, me| async move {
        Ok(Page::AdminHome {
            me,
            providers: web.get(&caller, "/api/v1/admin/providers").await?,
            settings: web.get(&caller, "/api/v1/admin/settings").await?,
            servers: web.get(&caller, "/api/v1/admin/mcp/servers").await?,
        })
    })
    .await
}

async fn admin_instance(State(web): State<Web>, request: Request) -> Response {
    web.signed_in_page(Caller::of(&request), Who::Administrators, |web, caller, me| async move {
        Ok(Page::AdminInstance {
            me,
            providers: web.get(&caller, "/api/v1/admin/providers").await?,
            settings: web.get(&caller, "/api/v1/admin/settings").await?,
            files: web.get(&caller, "/api/v1/admin/files").await?,
            speech: web.get(&caller, "/api/v1/admin/speech").await?,
        })
    })
    .await
}

/// The period a usage page covers: `?days=`, 30 unless it is one of the offered periods.
fn report_days(query: &PageQuery) -> u32 {
    let days = query_value(query, "days").parse().unwrap_or(30);
    if [7, 30, 90].contains(&days) { days } else { 30 }
}

async fn settings_account(State(web): State<Web>, request: Request) -> Response {
    web.signed_in_page(Caller::of(&request), Who::Anyone, |_, _, me| async move {
        Ok(Page::SettingsAccount { me })
    })
    .await
}

async fn settings_usage(State(web): State<Web>, query: PageQuery, request: Request) -> Response {
    let days = report_days(&query);
    web.signed_in_page(Caller::of(&request), Who::Anyone, |web, caller, me| async move {
        let report = web.get(&caller, &format!("/api/v1/usage?days={days}")).await?;
        Ok(Page::SettingsUsage { me, report })
    })
    .await
}

async fn admin_usage(State(web): State<Web>, query: PageQuery, request: Request) -> Response {
    let days = report_days(&query);
    web.signed_in_page(Caller::of(&request), Who::Administrators, |web, caller, me| async move {
        let listed: Vec<llooma_types::AccountView> =
            web.get(&caller, "/api/v1/admin/accounts").await?;
        let mut accounts = Vec::with_capacity(listed.len());
        for account in listed {
            let path = format!("/api/v1/admin/accounts/{}/limits", account.id);
            let limits = web.get(&caller, &path).await?;
            accounts.push((account, limits));
        }
        Ok(Page::AdminUsage {
            me,
            report: web.get(&caller, &format!("/api/v1/admin/usage?days={days}")).await?,
            prices: web.get(&caller, "/api/v1/admin/prices").await?,
            providers: web.get(&caller, "/api/v1/admin/providers").await?,
            defaults: web.get(&caller, "/api/v1/admin/limits").await?,
            accounts,
        })
    })
    .await
}

async fn not_found(State(web): State<Web>, request: Request) -> Response {
    let caller = Caller::of(&request);
    let me = web.me(&caller).await.ok();
    web.page(StatusCode::NOT_FOUND, &Page::NotFound { me })
}

async fn client_file(
    State(web): State<Web>,
    UrlPath(file): UrlPath<String>,
    headers: HeaderMap,
) -> Response {
    let Some(client) = &web.client else {
        return (
            StatusCode::NOT_FOUND,
            "The browser part was not built: run `cargo xtask build-web` and restart.\n",
        )
            .into_response();
    };
    let gzip_ok = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|e| e.trim().starts_with("gzip")));
    // The hashed names are what pages use; the plain ones stay for anything that kept them.
    let (plain, gzipped, kind, cache) = match file.as_str() {
        name if name == client.names.js => {
            (&client.js, &client.js_gz, "text/javascript; charset=utf-8", IMMUTABLE)
        }
        name if name == client.names.wasm => {
            (&client.wasm, &client.wasm_gz, "application/wasm", IMMUTABLE)
        }
        JS_FILE => (&client.js, &client.js_gz, "text/javascript; charset=utf-8", "no-cache"),
        WASM_FILE => (&client.wasm, &client.wasm_gz, "application/wasm", "no-cache"),
        _ => return (StatusCode::NOT_FOUND, "No such file.\n").into_response(),
    };
    let (bytes, encoded) = match gzipped {
        Some(gz) if gzip_ok => (gz.clone(), true),
        _ => (plain.clone(), false),
    };
    let mut response = Body::from(bytes.to_vec()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    if encoded {
        headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    security_headers(headers);
    response
}

async fn style(State(web): State<Web>, UrlPath(file): UrlPath<String>) -> Response {
    let cache = if file == *web.style {
        IMMUTABLE
    } else if file == STYLE_FILE {
        "no-cache"
    } else {
        return (StatusCode::NOT_FOUND, "No such file.\n").into_response();
    };
    let mut response = STYLE.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/css; charset=utf-8"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    security_headers(headers);
    response
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deeplink_address_loses_its_credentials_and_keeps_the_rest() {
        let (address, dropped) =
            without_credentials("https://mcp.example.org/mcp?team=a&API_KEY=sk-1&access_token=t");
        assert_eq!(address, "https://mcp.example.org/mcp?team=a");
        assert_eq!(dropped, ["API_KEY", "access_token"]);
        let (address, dropped) = without_credentials("https://mcp.example.org/mcp?Token=t");
        assert_eq!(address, "https://mcp.example.org/mcp");
        assert_eq!(dropped, ["Token"]);
        let plain = "https://mcp.example.org/mcp?team=a&author=b&keyword=c";
        assert_eq!(without_credentials(plain), (plain.to_owned(), Vec::new()));
        // What stays is kept as written, not re-encoded.
        let (address, dropped) =
            without_credentials("https://x.example/mcp?q=a%20b&flag&path=%2Fx&apiKey=k");
        assert_eq!(address, "https://x.example/mcp?q=a%20b&flag&path=%2Fx");
        assert_eq!(dropped, ["apiKey"]);
        assert_eq!(without_credentials("not a url"), ("not a url".to_owned(), Vec::new()));
        for name in ["Bearer_Token", "access-token", "X-Api-Key", "apikey", "sessionId", "sig"] {
            assert!(looks_like_credential(name), "{name}");
        }
        for name in ["label", "author", "keyword", "passage", "monkey", "team"] {
            assert!(!looks_like_credential(name), "{name}");
        }
    }

    #[test]
    fn a_deeplink_address_loses_its_user_password_and_fragment() {
        let (address, dropped) = without_credentials("https://alice:s3cret@mcp.example.org/mcp");
        assert_eq!(address, "https://mcp.example.org/mcp");
        assert_eq!(dropped, [USERINFO_DROPPED]);
        let (address, dropped) = without_credentials("https://alice@mcp.example.org/mcp?team=a");
        assert_eq!(address, "https://mcp.example.org/mcp?team=a");
        assert_eq!(dropped, [USERINFO_DROPPED]);
        let (address, dropped) =
            without_credentials("https://mcp.example.org/mcp?team=a#access_token=eyJ0");
        assert_eq!(address, "https://mcp.example.org/mcp?team=a");
        assert_eq!(dropped, [FRAGMENT_DROPPED]);
        // A fragment is never sent to the server, so it goes whatever it holds.
        let (address, dropped) = without_credentials("https://mcp.example.org/mcp#eyJhbGciOi");
        assert_eq!(address, "https://mcp.example.org/mcp");
        assert_eq!(dropped, [FRAGMENT_DROPPED]);
        let (address, dropped) =
            without_credentials("https://u:p@mcp.example.org/mcp?q=a%20b&api_key=k#token=t");
        assert_eq!(address, "https://mcp.example.org/mcp?q=a%20b");
        assert_eq!(dropped, [USERINFO_DROPPED, "api_key", FRAGMENT_DROPPED]);
        let plain = "https://mcp.example.org:8443/mcp?team=a";
        assert_eq!(without_credentials(plain), (plain.to_owned(), Vec::new()));
    }

    #[test]
    fn a_logged_request_target_keeps_its_path_and_loses_credential_values() {
        let table = [
            ("/settings", None, "/settings"),
            ("/api/v1/x", Some("q=docs&tag=a%20b"), "/api/v1/x?q=docs&tag=a%20b"),
            (
                "/settings/tools/mcp/new",
                Some("address=http://x.example/mcp&token=SEKRET"),
                "/settings/tools/mcp/new?address=http://x.example/mcp&token=[redacted]",
            ),
            ("/api/v1/x", Some("q=a&api_key=SEKRET&flag"), "/api/v1/x?q=a&api_key=[redacted]&flag"),
            ("/api/v1/x", Some("accessToken=SEKRET"), "/api/v1/x?accessToken=[redacted]"),
            ("/api/v1/x", Some("api%5Fkey=SEKRET"), "/api/v1/x?api%5Fkey=[redacted]"),
            ("/api/v1/x", Some("X-Api-Key"), "/api/v1/x?X-Api-Key"),
            ("/api/v1/x", Some("author=a&keyword=b"), "/api/v1/x?author=a&keyword=b"),
            // An address in the query that carries a credential of its own.
            (
                "/settings/tools/mcp/new",
                Some("label=D&address=https%3A%2F%2Fx.example%2Fmcp%3Fapi_key%3DSEKRET"),
                "/settings/tools/mcp/new?label=D&address=[redacted]",
            ),
            (
                "/settings/tools/mcp/new",
                Some("address=https://u:SEKRET@x.example/mcp"),
                "/settings/tools/mcp/new?address=[redacted]",
            ),
            (
                "/settings/tools/mcp/new",
                Some("address=https%3A%2F%2Fx.example%2Fmcp%3Fteam%3Da"),
                "/settings/tools/mcp/new?address=https%3A%2F%2Fx.example%2Fmcp%3Fteam%3Da",
            ),
        ];
        for (path, query, want) in table {
            assert_eq!(loggable_target(path, query), want, "{path} {query:?}");
        }
    }
}
