//! The instance's catalogue of MCP servers kept by administrators, the accounts' ratings of
//! catalogue entries, and usage counted from what is already stored.
//!
//! Usage is only ever returned as counts per address: which account uses what stays private.

use std::collections::HashMap;

use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
    Statement,
};

use crate::entities::{mcp_catalogue_entries as entries, mcp_catalogue_ratings as ratings};
use crate::{Store, StoreError, StoreResult, now_ms, placeholder};

/// An entry as an administrator wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCatalogueEntry {
    pub label: String,
    pub address: String,
    pub description: String,
    pub token_needed: bool,
    /// Where to get a token, in the administrator's words.
    pub token_help: String,
    /// A short text or emoji shown beside the label.
    pub icon: String,
    pub tags: Vec<String>,
}

/// A stored entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogueEntry {
    pub id: String,
    pub entry: NewCatalogueEntry,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// How much one address is used on the instance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CatalogueUsage {
    /// Accounts that added a server at this address.
    pub accounts: u64,
    /// Calls that went out to it (allowed by a person or run unasked) since the given time.
    pub calls: u64,
}

/// The ratings of one entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CatalogueRatings {
    pub count: u64,
    pub total_stars: u64,
}

fn from_model(m: entries::Model) -> StoreResult<CatalogueEntry> {
    let tags = serde_json::from_str(&m.tags_json).map_err(|e| {
        StoreError::Corrupt(format!("tags of catalogue entry {} unreadable: {e}", m.id))
    })?;
    Ok(CatalogueEntry {
        id: m.id,
        entry: NewCatalogueEntry {
            label: m.label,
            address: m.address,
            description: m.description,
            token_needed: m.token_needed,
            token_help: m.token_help,
            icon: m.icon,
            tags,
        },
        created_at_ms: m.created_at_ms,
        updated_at_ms: m.updated_at_ms,
    })
}

fn tags_json(tags: &[String]) -> String {
    serde_json::to_string(tags).unwrap_or_else(|_| "[]".to_owned())
}

impl Store {
    /// Every entry kept by administrators, by label.
    pub async fn catalogue_entries(&self) -> StoreResult<Vec<CatalogueEntry>> {
        entries::Entity::find()
            .order_by_asc(entries::Column::Label)
            .order_by_asc(entries::Column::Id)
            .all(&self.db)
            .await?
            .into_iter()
            .map(from_model)
            .collect()
    }

    pub async fn catalogue_entry(&self, id: &str) -> StoreResult<Option<CatalogueEntry>> {
        entries::Entity::find_by_id(id.to_owned()).one(&self.db).await?.map(from_model).transpose()
    }

    pub async fn create_catalogue_entry(
        &self,
        entry: NewCatalogueEntry,
    ) -> StoreResult<CatalogueEntry> {
        let now = now_ms();
        let model = entries::ActiveModel {
            id: Set(uuid::Uuid::new_v4().to_string()),
            label: Set(entry.label),
            address: Set(entry.address),
            description: Set(entry.description),
            token_needed: Set(entry.token_needed),
            token_help: Set(entry.token_help),
            icon: Set(entry.icon),
            tags_json: Set(tags_json(&entry.tags)),
            created_at_ms: Set(now),
            updated_at_ms: Set(now),
        }
        .insert(&self.db)
        .await?;
        from_model(model)
    }

    /// Replaces an entry's fields; `NotFound` when it is gone. An entry pointed at another
    /// address is about another server: its ratings go.
    pub async fn update_catalogue_entry(
        &self,
        id: &str,
        entry: NewCatalogueEntry,
    ) -> StoreResult<CatalogueEntry> {
        let (_held, txn) = self.begin().await?;
        let found = entries::Entity::find_by_id(id.to_owned())
            .one(&txn)
            .await?
            .ok_or(StoreError::NotFound)?;
        if found.address != entry.address {
            ratings::Entity::delete_many()
                .filter(ratings::Column::EntryId.eq(id))
                .exec(&txn)
                .await?;
        }
        let mut model: entries::ActiveModel = found.into();
        model.label = Set(entry.label);
        model.address = Set(entry.address);
        model.description = Set(entry.description);
        model.token_needed = Set(entry.token_needed);
        model.token_help = Set(entry.token_help);
        model.icon = Set(entry.icon);
        model.tags_json = Set(tags_json(&entry.tags));
        model.updated_at_ms = Set(now_ms());
        let updated = model.update(&txn).await?;
        txn.commit().await?;
        from_model(updated)
    }

    /// Removes an entry and its ratings together. Returns whether it existed.
    pub async fn delete_catalogue_entry(&self, id: &str) -> StoreResult<bool> {
        let (_held, txn) = self.begin().await?;
        ratings::Entity::delete_many().filter(ratings::Column::EntryId.eq(id)).exec(&txn).await?;
        let gone = entries::Entity::delete_by_id(id.to_owned()).exec(&txn).await?.rows_affected;
        txn.commit().await?;
        Ok(gone > 0)
    }

    /// Sets (or changes) one account's rating of an entry.
    pub async fn rate_catalogue_entry(
        &self,
        entry_id: &str,
        account_id: &str,
        stars: u8,
    ) -> StoreResult<()> {
        let model = ratings::ActiveModel {
            entry_id: Set(entry_id.to_owned()),
            account_id: Set(account_id.to_owned()),
            stars: Set(i32::from(stars)),
            updated_at_ms: Set(now_ms()),
        };
        ratings::Entity::insert(model)
            .on_conflict(
                OnConflict::columns([ratings::Column::EntryId, ratings::Column::AccountId])
                    .update_columns([ratings::Column::Stars, ratings::Column::UpdatedAtMs])
                    .to_owned(),
            )
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Withdraws one account's rating. Returns whether there was one.
    pub async fn unrate_catalogue_entry(
        &self,
        entry_id: &str,
        account_id: &str,
    ) -> StoreResult<bool> {
        let gone = ratings::Entity::delete_many()
            .filter(ratings::Column::EntryId.eq(entry_id))
            .filter(ratings::Column::AccountId.eq(account_id))
            .exec(&self.db)
            .await?
            .rows_affected;
        Ok(gone > 0)
    }

    /// Every entry's ratings, by entry id.
    pub async fn catalogue_ratings(&self) -> StoreResult<HashMap<String, CatalogueRatings>> {
        let rows = self
            .db
            .query_all_raw(Statement::from_string(
                self.backend(),
                "SELECT entry_id, COUNT(*), CAST(SUM(stars) AS BIGINT) \
                 FROM mcp_catalogue_ratings GROUP BY entry_id",
            ))
            .await?;
        let mut out = HashMap::new();
        for row in rows {
            let id: String = row.try_get_by_index(0)?;
            let count: i64 = row.try_get_by_index(1)?;
            let total: i64 = row.try_get_by_index(2)?;
            out.insert(
                id,
                CatalogueRatings {
                    count: u64::try_from(count).unwrap_or_default(),
                    total_stars: u64::try_from(total).unwrap_or_default(),
                },
            );
        }
        Ok(out)
    }

    /// One account's own ratings, by entry id.
    pub async fn my_catalogue_ratings(&self, account_id: &str) -> StoreResult<HashMap<String, u8>> {
        Ok(ratings::Entity::find()
            .filter(ratings::Column::AccountId.eq(account_id))
            .all(&self.db)
            .await?
            .into_iter()
            .map(|r| (r.entry_id, u8::try_from(r.stars).unwrap_or_default()))
            .collect())
    }

    /// Usage of each of `addresses` that has any: accounts that added a server there, and calls
    /// that went out to it since `since_ms`. Counts only; no account is named.
    pub async fn usage_by_address(
        &self,
        addresses: &[String],
        since_ms: i64,
    ) -> StoreResult<HashMap<String, CatalogueUsage>> {
        let mut out: HashMap<String, CatalogueUsage> = HashMap::new();
        if addresses.is_empty() {
            return Ok(out);
        }
        let backend = self.backend();
        let list = |first: usize| {
            (0..addresses.len())
                .map(|i| placeholder(backend, first + i))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let values = || addresses.iter().map(|a| a.clone().into()).collect::<Vec<sea_orm::Value>>();
        let added = self
            .db
            .query_all_raw(Statement::from_sql_and_values(
                backend,
                format!(
                    "SELECT address, COUNT(DISTINCT account_id) FROM mcp_servers \
                     WHERE address IN ({}) GROUP BY address",
                    list(1)
                ),
                values(),
            ))
            .await?;
        for row in added {
            let address: String = row.try_get_by_index(0)?;
            let accounts: i64 = row.try_get_by_index(1)?;
            out.entry(address).or_default().accounts = u64::try_from(accounts).unwrap_or_default();
        }
        let mut bound = values();
        bound.push(since_ms.into());
        let calls = self
            .db
            .query_all_raw(Statement::from_sql_and_values(
                backend,
                format!(
                    "SELECT server_address, COUNT(*) FROM approval_calls \
                     WHERE server_address IN ({}) AND created_at_ms >= {} AND state = 'allowed' \
                     GROUP BY server_address",
                    list(1),
                    placeholder(backend, addresses.len() + 1)
                ),
                bound,
            ))
            .await?;
        for row in calls {
            let address: String = row.try_get_by_index(0)?;
            let count: i64 = row.try_get_by_index(1)?;
            out.entry(address).or_default().calls = u64::try_from(count).unwrap_or_default();
        }
        Ok(out)
    }
}
