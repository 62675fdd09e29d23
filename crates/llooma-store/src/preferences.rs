//! An account's preferences for everyday chat; an account that never changed one has the
//! defaults (no row).

use sea_orm::sea_query::OnConflict;
use sea_orm::{EntityTrait, Set};

use crate::entities::account_preferences;
use crate::{Store, StoreResult, now_ms};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Preferences {
    /// After the first reply of a conversation named by its first message, ask the model for a
    /// short title and use it.
    pub titles_from_model: bool,
}

impl Store {
    pub async fn preferences(&self, account_id: &str) -> StoreResult<Preferences> {
        Ok(account_preferences::Entity::find_by_id(account_id.to_owned())
            .one(&self.db)
            .await?
            .map(|m| Preferences { titles_from_model: m.titles_from_model })
            .unwrap_or_default())
    }

    pub async fn set_preferences(
        &self,
        account_id: &str,
        preferences: Preferences,
    ) -> StoreResult<()> {
        account_preferences::Entity::insert(account_preferences::ActiveModel {
            account_id: Set(account_id.to_owned()),
            titles_from_model: Set(preferences.titles_from_model),
            updated_at_ms: Set(now_ms()),
        })
        .on_conflict(
            OnConflict::column(account_preferences::Column::AccountId)
                .update_columns([
                    account_preferences::Column::TitlesFromModel,
                    account_preferences::Column::UpdatedAtMs,
                ])
                .to_owned(),
        )
        .exec(&self.db)
        .await?;
        Ok(())
    }
}
