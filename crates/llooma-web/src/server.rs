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
    InstanceSettingsView, McpServerDetail, McpToolSettingsView, MemoryNoteView, PersonaView, Role,
    SessionView,
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

/// The browser part, read once at start-up.
#[derive(Clone, Debug)]
pub struct ClientFiles {
    js: Arc<[u8]>,
    wasm: Arc<[u8]>,
    /// Gzipped copies (`<name>.gz`, written by build-web), sent to browsers that accept them.
    js_gz: Option<Arc<[u8]>>,
    wasm_gz: Option<Arc<[u8]>>,
}

impl ClientFiles {
    /// Reads the browser part from `dir`, or says what is missing and how to build it.
    pub fn load(dir: &Path) -> Result<ClientFiles, String> {
        let read = |name: &str| {
            std::fs::read(dir.join(name)).map_err(|err| {
                format!(
                    "the web interface's browser part is missing ({}: {err}); build it with \
                     `cargo xtask build-web`, or point LLOOMA_WEB_DIR at the folder holding \
                     {JS_FILE} and {WASM_FILE}",
                    dir.join(name).display()
                )
            })
        };
        let gz = |name: &str| std::fs::read(dir.join(format!("{name}.gz"))).ok().map(Arc::from);
        Ok(ClientFiles {
            js: read(JS_FILE)?.into(),
            wasm: read(WASM_FILE)?.into(),
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
}

/// The pages and files of the web interface, to merge beside the API's router.
pub fn router(api: Router, client: Option<ClientFiles>) -> Router {
    let web = Web { api, client };
    Router::new()
        .route("/", get(home))
        .route("/c/{id}", get(conversation))
        .route("/settings/tools", get(settings_tools))
        .route("/settings/tools/discover", get(discover))
        .route("/settings/tools/mcp/new", get(add_server))
        .route("/admin/catalogue", get(admin_catalogue))
        .route("/settings/bots", get(settings_bots))
        .route("/settings/personas", get(settings_personas))
        .route("/admin/mcp", get(admin_mcp))
        .route("/admin/instance", get(admin_instance))
        .route("/pkg/{file}", get(client_file))
        .route("/assets/style.css", get(style))
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
        serde_json::from_slice(&bytes).map_err(|e| {
            Fail::Api(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("unexpected answer from {path}: {e}"),
            )
        })
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
        let nonce = hex::encode(rand::random::<[u8; 16]>());
        let html = render(page, &nonce, self.client.is_some());
        let csp = format!(
            "default-src 'none'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
             connect-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; \
             form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
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

/// The whole document: the page's data for the browser, the rendered body, the loader.
pub fn render(page: &Page, nonce: &str, client_built: bool) -> String {
    // `<` escaped: the data cannot close its script element, whatever a title says.
    let data = serde_json::to_string(page).unwrap_or_default().replace('<', "\\u003c");
    let title = escape(&page.title());
    let owned = page.clone();
    let body = Owner::new().with(move || view! { <App page=owned /> }.to_html());
    let (loader, notice) = if client_built {
        (
            format!(
                "<script type=\"module\" nonce=\"{nonce}\">import init, {{ hydrate }} from \
                 '/pkg/{JS_FILE}'; await init({{ module_or_path: '/pkg/{WASM_FILE}' }}); \
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
         <title>{title}</title><link rel=\"stylesheet\" href=\"/assets/style.css\">\
         <script type=\"application/json\" id=\"llooma-data\">{data}</script>{loader}</head>\
         <body>{notice}{body}</body></html>"
    )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

async fn home(State(web): State<Web>, request: Request) -> Response {
    let caller = Caller::of(&request);
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
        let conversations: Vec<ConversationView> =
            web.get(&caller, "/api/v1/conversations").await?;
        let cards: Vec<ApprovalCardView> = web.get(&caller, "/api/v1/approvals").await?;
        Ok::<_, Fail>((conversations, cards))
    };
    match loaded.await {
        Ok((conversations, cards)) => {
            web.page(StatusCode::OK, &Page::Home { me, conversations, cards, now_ms: now_ms() })
        }
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
        Ok(Page::Conversation {
            me,
            detail: web.get(&caller, &format!("/api/v1/conversations/{id}")).await?,
            cards: web.get(&caller, "/api/v1/approvals").await?,
            providers: web.get(&caller, "/api/v1/providers").await?,
            personas: web.get(&caller, "/api/v1/personas").await?,
            attachables: crate::attach::offer(&servers),
            always_allow: consent.mode == "rules",
            now_ms: now_ms(),
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
/// form; a token in the link is dropped, and the address meets the same checks as a typed one
/// when the person tests it.
async fn add_server(State(web): State<Web>, query: PageQuery, request: Request) -> Response {
    let label = query_value(&query, "label");
    let (address, mut dropped) = without_credentials(&query_value(&query, "address"));
    dropped.extend(query.keys().filter(|k| looks_like_credential(k)).cloned());
    dropped.sort();
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

/// The address with any credential-like parameter of its query removed, and their names: a
/// link cannot hand someone a key, in a parameter of its own or inside the address. The other
/// parameters are kept exactly as written.
fn without_credentials(address: &str) -> (String, Vec<String>) {
    let Ok(mut url) = url::Url::parse(address) else {
        return (address.to_owned(), Vec::new());
    };
    let Some(query) = url.query().map(str::to_owned) else {
        return (address.to_owned(), Vec::new());
    };
    let mut dropped = Vec::new();
    let kept: Vec<&str> = query
        .split('&')
        .filter(|segment| {
            let name = url::form_urlencoded::parse(segment.as_bytes())
                .next()
                .map(|(name, _)| name.into_owned())
                .unwrap_or_default();
            let credential = looks_like_credential(&name);
            if credential {
                dropped.push(name);
            }
            !credential
        })
        .collect();
    if dropped.is_empty() {
        return (address.to_owned(), Vec::new());
    }
    url.set_query((!kept.is_empty()).then(|| kept.join("&")).as_deref());
    (url.to_string(), dropped)
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
        Ok(Page::SettingsPersonas {
            me,
            personas,
            wordings: web.get(&caller, "/api/v1/prompts/tools").await?,
        })
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

async fn admin_instance(State(web): State<Web>, request: Request) -> Response {
    web.signed_in_page(Caller::of(&request), Who::Administrators, |web, caller, me| async move {
        Ok(Page::AdminInstance {
            me,
            providers: web.get(&caller, "/api/v1/admin/providers").await?,
            settings: web.get(&caller, "/api/v1/admin/settings").await?,
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
    let (plain, gzipped, kind) = match file.as_str() {
        JS_FILE => (&client.js, &client.js_gz, "text/javascript; charset=utf-8"),
        WASM_FILE => (&client.wasm, &client.wasm_gz, "application/wasm"),
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
    // Same name after every build: the browser checks before reusing its copy.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    security_headers(headers);
    response
}

async fn style() -> Response {
    let mut response = STYLE.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/css; charset=utf-8"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
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
}
