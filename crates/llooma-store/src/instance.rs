//! The instance's single rows: its state (first-run claim, vault canary) and its settings.

use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};

use crate::entities::{instance_settings, instance_state};
use crate::{Store, StoreError, StoreResult, UsageLimits, now_ms};

pub(crate) const ROW: i32 = 1;

/// Facts about the instance that no person edits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceState {
    /// True once the first account (the administrator) exists.
    pub setup_complete: bool,
    /// A known value encrypted with the instance secret, to detect a secret that does not match.
    pub vault_canary: Option<String>,
}

/// What administrators decide for the whole instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceSettings {
    pub registration_open: bool,
    pub users_can_add_mcp_servers: bool,
    /// The search service `web_search` asks; `None`: the tool is not offered.
    pub web_search_url: Option<String>,
    /// The default system prompt; `None`: the built-in one.
    pub system_prompt: Option<String>,
    /// The model a new conversation starts with when its account never chose one: (provider
    /// id, model name).
    pub default_model: Option<(String, String)>,
    /// The currency prices and spend are in (an ISO 4217 code).
    pub currency: String,
    /// The limits of every account that has none of its own.
    pub default_limits: UsageLimits,
    /// The context window, in tokens, of a model nobody gave one for (m0028).
    pub context_tokens: u32,
}

/// A change to the instance settings; absent fields stay. `Some(None)` clears a text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceSettingsChange {
    pub registration_open: Option<bool>,
    pub users_can_add_mcp_servers: Option<bool>,
    pub web_search_url: Option<Option<String>>,
    pub system_prompt: Option<Option<String>>,
    pub default_model: Option<Option<(String, String)>>,
    pub currency: Option<String>,
    pub default_limits: Option<UsageLimits>,
    pub context_tokens: Option<u32>,
}

/// What an administrator chose for speech; each `None` is left to detection (the first provider
/// listing a speech model).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpeechSettings {
    /// Speech to text: the provider, and the model (`None`: detected on that provider).
    pub stt_provider_id: Option<String>,
    pub stt_model: Option<String>,
    /// Text to speech: the provider, and the model (`None`: detected on that provider).
    pub tts_provider_id: Option<String>,
    pub tts_model: Option<String>,
    /// The voice replies are read with, unless a person chose their own.
    pub tts_voice: Option<String>,
}

impl Store {
    pub async fn speech_settings(&self) -> StoreResult<SpeechSettings> {
        let row = instance_settings::Entity::find_by_id(ROW)
            .one(&self.db)
            .await?
            .ok_or_else(|| StoreError::Corrupt("the instance_settings row is missing".into()))?;
        Ok(SpeechSettings {
            stt_provider_id: row.stt_provider_id,
            stt_model: row.stt_model,
            tts_provider_id: row.tts_provider_id,
            tts_model: row.tts_model,
            tts_voice: row.tts_voice,
        })
    }

    /// Replaces the speech settings and returns them.
    pub async fn set_speech_settings(
        &self,
        settings: SpeechSettings,
    ) -> StoreResult<SpeechSettings> {
        instance_settings::ActiveModel {
            id: Set(ROW),
            updated_at_ms: Set(now_ms()),
            stt_provider_id: Set(settings.stt_provider_id),
            stt_model: Set(settings.stt_model),
            tts_provider_id: Set(settings.tts_provider_id),
            tts_model: Set(settings.tts_model),
            tts_voice: Set(settings.tts_voice),
            ..Default::default()
        }
        .update(&self.db)
        .await?;
        self.speech_settings().await
    }

    pub async fn instance_state(&self) -> StoreResult<InstanceState> {
        let row = instance_state::Entity::find_by_id(ROW)
            .one(&self.db)
            .await?
            .ok_or_else(|| StoreError::Corrupt("the instance_state row is missing".into()))?;
        Ok(InstanceState { setup_complete: row.setup_complete, vault_canary: row.vault_canary })
    }

    /// Stores the canary unless one is already there; returns whether this call stored it.
    pub async fn set_vault_canary_if_absent(&self, canary: &str) -> StoreResult<bool> {
        let result = instance_state::Entity::update_many()
            .col_expr(instance_state::Column::VaultCanary, Expr::value(canary))
            .col_expr(instance_state::Column::UpdatedAtMs, Expr::value(now_ms()))
            .filter(instance_state::Column::Id.eq(ROW))
            .filter(instance_state::Column::VaultCanary.is_null())
            .exec(&self.db)
            .await?;
        Ok(result.rows_affected == 1)
    }

    pub async fn instance_settings(&self) -> StoreResult<InstanceSettings> {
        let row = instance_settings::Entity::find_by_id(ROW)
            .one(&self.db)
            .await?
            .ok_or_else(|| StoreError::Corrupt("the instance_settings row is missing".into()))?;
        Ok(InstanceSettings {
            registration_open: row.registration_open,
            users_can_add_mcp_servers: row.users_can_add_mcp_servers,
            web_search_url: row.web_search_url,
            system_prompt: row.system_prompt,
            default_model: row.default_provider_id.zip(row.default_model),
            currency: row.currency,
            default_limits: UsageLimits {
                tokens_per_day: row.limit_tokens_per_day,
                tokens_per_month: row.limit_tokens_per_month,
                spend_micros_per_day: row.limit_spend_micros_per_day,
                spend_micros_per_month: row.limit_spend_micros_per_month,
                turns_per_minute: row.limit_turns_per_minute,
            },
            context_tokens: u32::try_from(row.context_tokens).unwrap_or(u32::MAX),
        })
    }

    /// Changes the given settings and returns the result.
    pub async fn update_instance_settings(
        &self,
        registration_open: Option<bool>,
        users_can_add_mcp_servers: Option<bool>,
    ) -> StoreResult<InstanceSettings> {
        self.change_instance_settings(InstanceSettingsChange {
            registration_open,
            users_can_add_mcp_servers,
            ..Default::default()
        })
        .await
    }

    /// Changes the given settings and returns the result.
    pub async fn change_instance_settings(
        &self,
        change: InstanceSettingsChange,
    ) -> StoreResult<InstanceSettings> {
        let InstanceSettingsChange {
            registration_open,
            users_can_add_mcp_servers,
            web_search_url,
            system_prompt,
            default_model,
            currency,
            default_limits,
            context_tokens,
        } = change;
        let mut row = instance_settings::ActiveModel {
            id: Set(ROW),
            updated_at_ms: Set(now_ms()),
            ..Default::default()
        };
        if let Some(value) = registration_open {
            row.registration_open = Set(value);
        }
        if let Some(value) = users_can_add_mcp_servers {
            row.users_can_add_mcp_servers = Set(value);
        }
        if let Some(value) = web_search_url {
            row.web_search_url = Set(value);
        }
        if let Some(value) = system_prompt {
            row.system_prompt = Set(value);
        }
        if let Some(value) = default_model {
            let (provider_id, model) = value.unzip();
            row.default_provider_id = Set(provider_id);
            row.default_model = Set(model);
        }
        if let Some(value) = currency {
            row.currency = Set(value);
        }
        if let Some(limits) = default_limits {
            row.limit_tokens_per_day = Set(limits.tokens_per_day);
            row.limit_tokens_per_month = Set(limits.tokens_per_month);
            row.limit_spend_micros_per_day = Set(limits.spend_micros_per_day);
            row.limit_spend_micros_per_month = Set(limits.spend_micros_per_month);
            row.limit_turns_per_minute = Set(limits.turns_per_minute);
        }
        if let Some(tokens) = context_tokens {
            row.context_tokens = Set(i64::from(tokens));
        }
        row.update(&self.db).await?;
        self.instance_settings().await
    }
}
