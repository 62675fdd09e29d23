//! The documents of MCP Apps views (see migration m0025): written when a server's snapshot is
//! taken, read when a view is shown. Each read names the owning account.

use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, Set};

use crate::entities::{mcp_servers, mcp_views};
use crate::{Store, StoreResult, now_ms};

/// A view's document as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpView {
    pub server_id: String,
    /// Hex SHA-256 of the document and its declarations (the MCP client's).
    pub hash: String,
    /// Its `ui://` address.
    pub uri: String,
    pub html: String,
    /// What it declares it may reach (the MCP client's `ViewDomains`, as JSON).
    pub domains_json: String,
    pub prefers_border: Option<bool>,
}

impl Store {
    /// Keeps a view's document; one already kept under its hash is left as it is.
    pub async fn put_mcp_view(&self, view: McpView) -> StoreResult<()> {
        mcp_views::Entity::insert(mcp_views::ActiveModel {
            server_id: Set(view.server_id),
            hash: Set(view.hash),
            uri: Set(view.uri),
            html: Set(view.html),
            domains_json: Set(view.domains_json),
            prefers_border: Set(view.prefers_border),
            created_at_ms: Set(now_ms()),
        })
        .on_conflict_do_nothing_on([mcp_views::Column::ServerId, mcp_views::Column::Hash])
        .exec_without_returning(&self.db)
        .await?;
        Ok(())
    }

    /// A view's document of one of the account's servers.
    pub async fn mcp_view(
        &self,
        account_id: &str,
        server_id: &str,
        hash: &str,
    ) -> StoreResult<Option<McpView>> {
        let owned = mcp_servers::Entity::find_by_id(server_id.to_owned())
            .filter(mcp_servers::Column::AccountId.eq(account_id));
        if self.find_one(owned).await?.is_none() {
            return Ok(None);
        }
        let query = mcp_views::Entity::find_by_id((server_id.to_owned(), hash.to_owned()));
        Ok(self.find_one(query).await?.map(|m| McpView {
            server_id: m.server_id,
            hash: m.hash,
            uri: m.uri,
            html: m.html,
            domains_json: m.domains_json,
            prefers_border: m.prefers_border,
        }))
    }
}
