//! `/api/v1/mcp/...`: the signed-in account's MCP servers (Settings → Tools → MCP servers) and,
//! under `/admin`, every server of the instance. What each does is `llooma_core::mcp_servers`;
//! tokens arrive here as write-only [`Secret`]s and never leave.

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use llooma_core::mcp_servers::ServerRequest;
use llooma_types::{
    AdminMcpServerView, AnnounceCostView, McpRefreshReport, McpServerDetail, McpServerView,
    McpTestReport, McpToolSettingsPatch, McpToolSettingsView,
};
use llooma_vault::Secret;
use serde::Deserialize;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery};
use crate::session::{Admin, SignedIn};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerBody {
    label: Option<String>,
    address: String,
    token: Option<Secret>,
    /// The `toolsDigest` of the test the person reviewed: adding then stores nothing unless the
    /// server still lists exactly those tools. The web interface always sends it.
    reviewed_tools: Option<String>,
}

impl ServerBody {
    fn split(self) -> (ServerRequest, Option<String>) {
        let request = ServerRequest { label: self.label, address: self.address, token: self.token };
        (request, self.reviewed_tools)
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RefreshBody {
    /// The `toolsDigest` of the new list the person reviewed and consents to.
    reviewed_tools: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchBody {
    label: Option<String>,
    enabled: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenBody {
    /// The new token, or null to remove it.
    token: Option<Secret>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupBody {
    group: String,
    enabled: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SuspendBody {
    reason: String,
}

/// `POST /api/v1/mcp/servers/test`: what adding would find, storing nothing.
pub async fn test_server(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<ServerBody>,
) -> Result<Json<McpTestReport>, ApiError> {
    let (request, _) = body.split();
    Ok(Json(state.app.test_mcp_server(&signed_in.account, request).await?))
}

/// `POST /api/v1/mcp/servers`: tests the connection, then stores the server and its snapshot.
pub async fn add_server(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<ServerBody>,
) -> Result<(StatusCode, Json<McpServerDetail>), ApiError> {
    let (request, reviewed) = body.split();
    let detail = state.app.add_mcp_server(&signed_in.account, request, reviewed.as_deref()).await?;
    Ok((StatusCode::CREATED, Json(detail)))
}

/// `GET /api/v1/mcp/servers/details`: every server of the account with its whole catalogue.
pub async fn list_details(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<Vec<McpServerDetail>>, ApiError> {
    Ok(Json(state.app.mcp_server_details(&signed_in.account.id).await?))
}

/// `GET /api/v1/mcp/servers`: the cards, from stored snapshots only.
pub async fn list_servers(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<Vec<McpServerView>>, ApiError> {
    Ok(Json(state.app.mcp_servers(&signed_in.account.id).await?))
}

/// `GET /api/v1/mcp/servers/{id}`: one server with its whole catalogue.
pub async fn get_server(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<Json<McpServerDetail>, ApiError> {
    Ok(Json(state.app.mcp_server_detail(&signed_in.account.id, &id).await?))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IconQuery {
    /// A tool of the server (its own name); none for the server's icon.
    tool: Option<String>,
}

/// `GET /api/v1/mcp/servers/{id}/icon[?tool=name]`: the icon of an account's server or of one of
/// its tools, fetched by the instance and encoded anew (see `llooma_core::icons`).
pub async fn icon(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<IconQuery>,
) -> Result<Response, ApiError> {
    let icon = state.app.mcp_icon(&signed_in.account.id, &id, query.tool.as_deref()).await?;
    let mut response = Body::from(icon.bytes.clone()).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(icon.content_type));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox"));
    // Kept by the browser for an hour: a server that changes its icon is seen within it.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, max-age=3600"));
    Ok(response)
}

/// `GET /api/v1/mcp/servers/{id}/views/{hash}`: the document of one version of a server's view
/// (MCP Apps), for the page to frame: sandboxed by its own policy (see `llooma_core::views`).
pub async fn view(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path((id, hash)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let served = state.app.mcp_view(&signed_in.account.id, &id, &hash).await?;
    let mut response = Body::from(served.html).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    let policy = HeaderValue::from_str(&served.policy)
        .map_err(|_| ApiError::Internal("a view's policy is not a header value".to_owned()))?;
    headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    // Asked for again each time it is shown: a server suspended or removed since has its view
    // refused at once.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-cache"));
    Ok(response)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ViewCallBody {
    /// The id of the call whose view asks (its step's `callId`).
    call_id: String,
    /// A tool of that call's server (its own name).
    name: String,
    #[serde(default)]
    arguments: serde_json::Value,
}

/// `POST /api/v1/mcp/view-calls`: a call a tool's view (MCP Apps) asks for, put to the person
/// like the model's; answers with the result as the view receives it once it was made.
pub async fn view_call(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<ViewCallBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let result = state
        .app
        .view_tool_call(&signed_in.account.id, &body.call_id, &body.name, body.arguments)
        .await?;
    Ok(Json(result))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ViewReadBody {
    /// The id of the call whose view asks (its step's `callId`).
    call_id: String,
    /// A resource of that call's server.
    uri: String,
}

/// `POST /api/v1/mcp/view-reads`: a resource of its own server a tool's view (MCP Apps) reads.
pub async fn view_read(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(body): ApiJson<ViewReadBody>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let read =
        state.app.view_resource_read(&signed_in.account.id, &body.call_id, &body.uri).await?;
    Ok(Json(read))
}

/// `PATCH /api/v1/mcp/servers/{id}`: label and the owner's switch.
pub async fn patch_server(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<PatchBody>,
) -> Result<Json<McpServerView>, ApiError> {
    let account = &signed_in.account.id;
    let view = state.app.change_mcp_server(account, &id, body.label.as_deref(), body.enabled);
    Ok(Json(view.await?))
}

/// `PUT /api/v1/mcp/servers/{id}/token`: replaces or removes the token (write-only).
pub async fn set_token(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<TokenBody>,
) -> Result<Json<McpServerView>, ApiError> {
    Ok(Json(state.app.set_mcp_token(&signed_in.account.id, &id, body.token).await?))
}

/// `DELETE /api/v1/mcp/servers/{id}`.
pub async fn delete_server(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.app.delete_mcp_server(&signed_in.account.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /api/v1/mcp/servers/{id}/groups`: one group's switch.
pub async fn set_group(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<GroupBody>,
) -> Result<Json<McpServerDetail>, ApiError> {
    let account = &signed_in.account.id;
    Ok(Json(state.app.switch_mcp_group(account, &id, &body.group, body.enabled).await?))
}

/// `POST /api/v1/mcp/servers/{id}/refresh` ("Update tools"). The body is optional: without it,
/// removals apply and anything new waits for a review.
pub async fn refresh_server(
    State(state): State<AppState>,
    signed_in: SignedIn,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<McpRefreshReport>, ApiError> {
    let body: RefreshBody = if body.iter().all(u8::is_ascii_whitespace) {
        RefreshBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            ApiError::bad_request(
                "invalid_fields",
                format!("Send {{}} or {{\"reviewedTools\": \"<toolsDigest>\"}}: {e}"),
            )
        })?
    };
    let account = &signed_in.account.id;
    Ok(Json(state.app.update_mcp_tools(account, &id, body.reviewed_tools.as_deref()).await?))
}

/// `GET /api/v1/mcp/settings`: budget, switches, and what they leave out.
pub async fn get_settings(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<McpToolSettingsView>, ApiError> {
    Ok(Json(state.app.mcp_tool_settings(&signed_in.account).await?))
}

/// `PATCH /api/v1/mcp/settings`.
pub async fn patch_settings(
    State(state): State<AppState>,
    signed_in: SignedIn,
    ApiJson(patch): ApiJson<McpToolSettingsPatch>,
) -> Result<Json<McpToolSettingsView>, ApiError> {
    Ok(Json(state.app.change_mcp_tool_settings(&signed_in.account, patch).await?))
}

/// `GET /api/v1/mcp/announce-cost`: what the account's catalogue costs each request with
/// announce mode off and on.
pub async fn announce_cost(
    State(state): State<AppState>,
    signed_in: SignedIn,
) -> Result<Json<AnnounceCostView>, ApiError> {
    Ok(Json(state.app.announce_cost(&signed_in.account.id).await?))
}

/// `GET /api/v1/admin/mcp/servers`: every server of the instance with its owner.
pub async fn admin_list(
    State(state): State<AppState>,
    _admin: Admin,
) -> Result<Json<Vec<AdminMcpServerView>>, ApiError> {
    Ok(Json(state.app.all_mcp_servers().await?))
}

/// `POST /api/v1/admin/mcp/servers/{id}/suspend`.
pub async fn admin_suspend(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<SuspendBody>,
) -> Result<StatusCode, ApiError> {
    state.app.suspend_mcp_server(&admin.account.id, &id, &body.reason).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /api/v1/admin/mcp/servers/{id}/suspend`: lifts a suspension.
pub async fn admin_unsuspend(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.app.lift_mcp_suspension(&admin.account.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /api/v1/admin/mcp/servers/{id}`: removes any account's server.
pub async fn admin_delete(
    State(state): State<AppState>,
    Admin(admin): Admin,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.app.remove_any_mcp_server(&admin.account.id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
