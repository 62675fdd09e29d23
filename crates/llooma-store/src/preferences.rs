//! An account's preferences for everyday chat; an account that never changed one has the
//! defaults (no row).

use sea_orm::sea_query::OnConflict;
use sea_orm::{EntityTrait, NotSet, Set};

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
            speech_voice: NotSet,
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

    /// The voice the account chose for replies read aloud; `None`: the administrator's.
    pub async fn speech_voice(&self, account_id: &str) -> StoreResult<Option<String>> {
        Ok(account_preferences::Entity::find_by_id(account_id.to_owned())
            .one(&self.db)
            .await?
            .and_then(|m| m.speech_voice))
    }

    /// Sets (or with `None` clears) the account's voice; its other preferences stay.
    pub async fn set_speech_voice(
        &self,
        account_id: &str,
        voice: Option<String>,
    ) -> StoreResult<()> {
        account_preferences::Entity::insert(account_preferences::ActiveModel {
            account_id: Set(account_id.to_owned()),
            titles_from_model: Set(false),
            updated_at_ms: Set(now_ms()),
            speech_voice: Set(voice),
        })
        .on_conflict(
            OnConflict::column(account_preferences::Column::AccountId)
                .update_columns([
                    account_preferences::Column::SpeechVoice,
                    account_preferences::Column::UpdatedAtMs,
                ])
                .to_owned(),
        )
        .exec(&self.db)
        .await?;
        Ok(())
    }
}
