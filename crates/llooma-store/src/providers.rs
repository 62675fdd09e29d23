//! Model providers, configured by administrators. The API key is stored as a vault ciphertext
//! made by the caller; this module never sees a plaintext key.

use std::collections::BTreeMap;

use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set};

use crate::entities::providers;
use crate::{Store, StoreError, StoreResult, is_unique_violation, now_ms};

/// A provider as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct Provider {
    pub id: String,
    pub name: String,
    pub base_url: String,
    pub api_key_ciphertext: Option<String>,
    /// Models the administrator declared (the provider may list more, or none).
    pub declared_models: Vec<String>,
    /// Marked by the administrator as running on this machine or the local network: its origin
    /// may reach loopback and private addresses (docs/network-policy.md).
    pub local_network: bool,
    /// Models the administrator marked as seeing images: only these are sent the images of a
    /// conversation.
    pub vision_models: Vec<String>,
    /// Context windows, in tokens, the administrator wrote for some of its models (m0028).
    pub context_windows: BTreeMap<String, u32>,
    pub created_at_ms: i64,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("has_key", &self.api_key_ciphertext.is_some())
            .field("local_network", &self.local_network)
            .finish()
    }
}

/// What is needed to add a provider. The id is chosen by the caller because the key's
/// ciphertext is bound to it.
#[derive(Clone)]
pub struct NewProvider {
    pub id: String,
    pub name: String,
    pub base_url: String,
    pub api_key_ciphertext: Option<String>,
    pub local_network: bool,
}

impl std::fmt::Debug for NewProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewProvider").field("name", &self.name).finish_non_exhaustive()
    }
}

pub(crate) fn from_model(model: providers::Model) -> Provider {
    Provider {
        id: model.id,
        name: model.name,
        base_url: model.base_url,
        api_key_ciphertext: model.api_key_ciphertext,
        declared_models: model
            .models_json
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default(),
        local_network: model.local_network,
        vision_models: model
            .vision_models_json
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default(),
        context_windows: model
            .context_windows_json
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default(),
        created_at_ms: model.created_at_ms,
    }
}

impl Store {
    pub async fn create_provider(&self, new: NewProvider) -> StoreResult<Provider> {
        let now = now_ms();
        let model = providers::ActiveModel {
            id: Set(new.id),
            name: Set(new.name),
            base_url: Set(new.base_url),
            api_key_ciphertext: Set(new.api_key_ciphertext),
            created_at_ms: Set(now),
            updated_at_ms: Set(now),
            models_json: Set(None),
            local_network: Set(new.local_network),
            vision_models_json: Set(None),
            context_windows_json: Set(None),
        };
        match model.insert(&self.db).await {
            Ok(model) => Ok(from_model(model)),
            Err(err) if is_unique_violation(&err) => Err(StoreError::NameTaken),
            Err(err) => Err(err.into()),
        }
    }

    pub async fn list_providers(&self) -> StoreResult<Vec<Provider>> {
        Ok(providers::Entity::find()
            .order_by_asc(providers::Column::Name)
            .all(&self.db)
            .await?
            .into_iter()
            .map(from_model)
            .collect())
    }

    pub async fn provider(&self, id: &str) -> StoreResult<Option<Provider>> {
        Ok(providers::Entity::find_by_id(id.to_owned()).one(&self.db).await?.map(from_model))
    }

    /// Replaces (or with `None`, removes) the key of a provider.
    pub async fn set_provider_key(&self, id: &str, ciphertext: Option<String>) -> StoreResult<()> {
        let result = providers::Entity::update_many()
            .col_expr(providers::Column::ApiKeyCiphertext, Expr::value(ciphertext))
            .col_expr(providers::Column::UpdatedAtMs, Expr::value(now_ms()))
            .filter(providers::Column::Id.eq(id))
            .exec(&self.db)
            .await?;
        if result.rows_affected == 1 { Ok(()) } else { Err(StoreError::NotFound) }
    }

    /// Replaces the models declared for a provider.
    pub async fn set_provider_models(&self, id: &str, models: &[String]) -> StoreResult<()> {
        let json = serde_json::to_string(models)
            .map_err(|e| StoreError::Corrupt(format!("model names as JSON: {e}")))?;
        let result = providers::Entity::update_many()
            .col_expr(providers::Column::ModelsJson, Expr::value(json))
            .col_expr(providers::Column::UpdatedAtMs, Expr::value(now_ms()))
            .filter(providers::Column::Id.eq(id))
            .exec(&self.db)
            .await?;
        if result.rows_affected == 1 { Ok(()) } else { Err(StoreError::NotFound) }
    }

    /// Replaces the models of a provider that see images.
    pub async fn set_provider_vision_models(&self, id: &str, models: &[String]) -> StoreResult<()> {
        let json = serde_json::to_string(models)
            .map_err(|e| StoreError::Corrupt(format!("model names as JSON: {e}")))?;
        let result = providers::Entity::update_many()
            .col_expr(providers::Column::VisionModelsJson, Expr::value(json))
            .col_expr(providers::Column::UpdatedAtMs, Expr::value(now_ms()))
            .filter(providers::Column::Id.eq(id))
            .exec(&self.db)
            .await?;
        if result.rows_affected == 1 { Ok(()) } else { Err(StoreError::NotFound) }
    }

    /// Replaces the context windows the administrator wrote for the provider's models.
    pub async fn set_provider_context_windows(
        &self,
        id: &str,
        windows: &BTreeMap<String, u32>,
    ) -> StoreResult<()> {
        let json = serde_json::to_string(windows)
            .map_err(|e| StoreError::Corrupt(format!("context windows as JSON: {e}")))?;
        let result = providers::Entity::update_many()
            .col_expr(providers::Column::ContextWindowsJson, Expr::value(json))
            .col_expr(providers::Column::UpdatedAtMs, Expr::value(now_ms()))
            .filter(providers::Column::Id.eq(id))
            .exec(&self.db)
            .await?;
        if result.rows_affected == 1 { Ok(()) } else { Err(StoreError::NotFound) }
    }

    pub async fn delete_provider(&self, id: &str) -> StoreResult<()> {
        let result = providers::Entity::delete_by_id(id.to_owned()).exec(&self.db).await?;
        if result.rows_affected == 1 { Ok(()) } else { Err(StoreError::NotFound) }
    }
}
