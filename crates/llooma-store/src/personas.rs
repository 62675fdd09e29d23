//! Personas (per account: a name, a prompt, memory on or off) and their memory; the
//! administrator's per-model prompt rewrites; each account's wording of the app's tools.

use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder,
    QuerySelect, Set,
};

use crate::entities::{model_prompts, persona_memories, personas, tool_wordings};
use crate::{Store, StoreError, StoreResult, is_unique_violation, now_ms};

/// A persona as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Persona {
    pub id: String,
    pub account_id: String,
    pub name: String,
    pub prompt: String,
    pub memory_enabled: bool,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// A change to a persona; absent fields stay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PersonaPatch {
    pub name: Option<String>,
    pub prompt: Option<String>,
    pub memory_enabled: Option<bool>,
}

/// One note of a persona's memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryNote {
    pub id: String,
    pub persona_id: String,
    pub content: String,
    pub created_at_ms: i64,
}

pub(crate) fn persona(m: personas::Model) -> Persona {
    Persona {
        id: m.id,
        account_id: m.account_id,
        name: m.name,
        prompt: m.prompt,
        memory_enabled: m.memory_enabled,
        created_at_ms: m.created_at_ms,
        updated_at_ms: m.updated_at_ms,
    }
}

fn note(m: persona_memories::Model) -> MemoryNote {
    MemoryNote {
        id: m.id,
        persona_id: m.persona_id,
        content: m.content,
        created_at_ms: m.created_at_ms,
    }
}

impl Store {
    pub async fn create_persona(
        &self,
        account_id: &str,
        name: &str,
        prompt: &str,
        memory_enabled: bool,
    ) -> StoreResult<Persona> {
        let now = now_ms();
        let model = personas::ActiveModel {
            id: Set(uuid::Uuid::new_v4().to_string()),
            account_id: Set(account_id.to_owned()),
            name: Set(name.to_owned()),
            prompt: Set(prompt.to_owned()),
            memory_enabled: Set(memory_enabled),
            created_at_ms: Set(now),
            updated_at_ms: Set(now),
        };
        match model.insert(&self.db).await {
            Ok(model) => Ok(persona(model)),
            Err(err) if is_unique_violation(&err) => Err(StoreError::NameTaken),
            Err(err) => Err(err.into()),
        }
    }

    /// The account's personas, by name.
    pub async fn personas(&self, account_id: &str) -> StoreResult<Vec<Persona>> {
        Ok(personas::Entity::find()
            .filter(personas::Column::AccountId.eq(account_id))
            .order_by_asc(personas::Column::Name)
            .all(&self.db)
            .await?
            .into_iter()
            .map(persona)
            .collect())
    }

    /// One of the account's personas; another account's id is not found.
    pub async fn persona(&self, account_id: &str, id: &str) -> StoreResult<Option<Persona>> {
        Ok(personas::Entity::find_by_id(id.to_owned())
            .filter(personas::Column::AccountId.eq(account_id))
            .one(&self.db)
            .await?
            .map(persona))
    }

    pub async fn update_persona(
        &self,
        account_id: &str,
        id: &str,
        patch: PersonaPatch,
    ) -> StoreResult<()> {
        let mut update = personas::Entity::update_many()
            .col_expr(personas::Column::UpdatedAtMs, Expr::value(now_ms()))
            .filter(personas::Column::Id.eq(id))
            .filter(personas::Column::AccountId.eq(account_id));
        if let Some(name) = patch.name {
            update = update.col_expr(personas::Column::Name, Expr::value(name));
        }
        if let Some(prompt) = patch.prompt {
            update = update.col_expr(personas::Column::Prompt, Expr::value(prompt));
        }
        if let Some(on) = patch.memory_enabled {
            update = update.col_expr(personas::Column::MemoryEnabled, Expr::value(on));
        }
        match update.exec(&self.db).await {
            Ok(result) if result.rows_affected == 1 => Ok(()),
            Ok(_) => Err(StoreError::NotFound),
            Err(err) if is_unique_violation(&err) => Err(StoreError::NameTaken),
            Err(err) => Err(err.into()),
        }
    }

    /// Deletes a persona and its memory; conversations that used it go back to none.
    pub async fn delete_persona(&self, account_id: &str, id: &str) -> StoreResult<()> {
        let result = personas::Entity::delete_many()
            .filter(personas::Column::Id.eq(id))
            .filter(personas::Column::AccountId.eq(account_id))
            .exec(&self.db)
            .await?;
        if result.rows_affected == 1 { Ok(()) } else { Err(StoreError::NotFound) }
    }

    /// A persona's notes, oldest first.
    pub async fn memory_notes(&self, persona_id: &str) -> StoreResult<Vec<MemoryNote>> {
        Ok(persona_memories::Entity::find()
            .filter(persona_memories::Column::PersonaId.eq(persona_id))
            .order_by_asc(persona_memories::Column::CreatedAtMs)
            .order_by_asc(persona_memories::Column::Id)
            .all(&self.db)
            .await?
            .into_iter()
            .map(note)
            .collect())
    }

    /// Saves a note unless the persona already holds `max_notes`; `None` when full,
    /// [`StoreError::NotFound`] when the persona is gone.
    ///
    /// One transaction that locks the persona's row first (Postgres; SQLite has one writer), so
    /// two turns of the same persona writing at once cannot pass the budget, and each note's time
    /// is later than the one before it: notes read back in the order they were written even
    /// within one millisecond.
    pub async fn add_memory_note(
        &self,
        persona_id: &str,
        content: &str,
        max_notes: usize,
    ) -> StoreResult<Option<MemoryNote>> {
        let (_held, txn) = self.begin().await?;
        let persona = personas::Entity::find_by_id(persona_id).lock_exclusive().one(&txn).await?;
        if persona.is_none() {
            return Err(StoreError::NotFound);
        }
        let held = persona_memories::Entity::find()
            .filter(persona_memories::Column::PersonaId.eq(persona_id))
            .count(&txn)
            .await?;
        if usize::try_from(held).unwrap_or(usize::MAX) >= max_notes {
            return Ok(None);
        }
        let latest: Option<i64> = persona_memories::Entity::find()
            .select_only()
            .column_as(persona_memories::Column::CreatedAtMs.max(), "latest")
            .filter(persona_memories::Column::PersonaId.eq(persona_id))
            .into_tuple::<Option<i64>>()
            .one(&txn)
            .await?
            .flatten();
        let created_at_ms = latest.map_or(now_ms(), |latest| now_ms().max(latest + 1));
        let id = uuid::Uuid::new_v4().simple().to_string();
        let model = persona_memories::ActiveModel {
            // Short: the model reads and repeats it.
            id: Set(format!("n{}", id.get(..10).unwrap_or(&id))),
            persona_id: Set(persona_id.to_owned()),
            content: Set(content.to_owned()),
            created_at_ms: Set(created_at_ms),
        };
        let saved = model.insert(&txn).await?;
        txn.commit().await?;
        Ok(Some(note(saved)))
    }

    /// Forgets one note of a persona; whether it was there.
    pub async fn forget_memory_note(&self, persona_id: &str, note_id: &str) -> StoreResult<bool> {
        let result = persona_memories::Entity::delete_many()
            .filter(persona_memories::Column::Id.eq(note_id))
            .filter(persona_memories::Column::PersonaId.eq(persona_id))
            .exec(&self.db)
            .await?;
        Ok(result.rows_affected == 1)
    }

    /// The administrator's rewrite of the system prompt for one model, if any.
    pub async fn model_prompt(
        &self,
        provider_id: &str,
        model: &str,
    ) -> StoreResult<Option<String>> {
        Ok(model_prompts::Entity::find_by_id((provider_id.to_owned(), model.to_owned()))
            .one(&self.db)
            .await?
            .map(|m| m.prompt))
    }

    /// Every per-model rewrite of a provider: (model, prompt), by model.
    pub async fn model_prompts(&self, provider_id: &str) -> StoreResult<Vec<(String, String)>> {
        Ok(model_prompts::Entity::find()
            .filter(model_prompts::Column::ProviderId.eq(provider_id))
            .order_by_asc(model_prompts::Column::Model)
            .all(&self.db)
            .await?
            .into_iter()
            .map(|m| (m.model, m.prompt))
            .collect())
    }

    /// Sets (or with `None`, removes) the rewrite for one model.
    pub async fn set_model_prompt(
        &self,
        provider_id: &str,
        model: &str,
        prompt: Option<&str>,
    ) -> StoreResult<()> {
        let Some(prompt) = prompt else {
            model_prompts::Entity::delete_by_id((provider_id.to_owned(), model.to_owned()))
                .exec(&self.db)
                .await?;
            return Ok(());
        };
        let row = model_prompts::ActiveModel {
            provider_id: Set(provider_id.to_owned()),
            model: Set(model.to_owned()),
            prompt: Set(prompt.to_owned()),
            updated_at_ms: Set(now_ms()),
        };
        model_prompts::Entity::insert(row)
            .on_conflict(
                OnConflict::columns([
                    model_prompts::Column::ProviderId,
                    model_prompts::Column::Model,
                ])
                .update_columns([model_prompts::Column::Prompt, model_prompts::Column::UpdatedAtMs])
                .to_owned(),
            )
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// The account's wording of app tools (Settings → Prompts): (tool, description), by tool.
    pub async fn tool_wordings(&self, account_id: &str) -> StoreResult<Vec<(String, String)>> {
        Ok(tool_wordings::Entity::find()
            .filter(tool_wordings::Column::AccountId.eq(account_id))
            .order_by_asc(tool_wordings::Column::Tool)
            .all(&self.db)
            .await?
            .into_iter()
            .map(|m| (m.tool, m.description))
            .collect())
    }

    /// Sets (or with `None`, goes back to the app's own) the wording of one tool.
    pub async fn set_tool_wording(
        &self,
        account_id: &str,
        tool: &str,
        description: Option<&str>,
    ) -> StoreResult<()> {
        let Some(description) = description else {
            tool_wordings::Entity::delete_by_id((account_id.to_owned(), tool.to_owned()))
                .exec(&self.db)
                .await?;
            return Ok(());
        };
        let row = tool_wordings::ActiveModel {
            account_id: Set(account_id.to_owned()),
            tool: Set(tool.to_owned()),
            description: Set(description.to_owned()),
            updated_at_ms: Set(now_ms()),
        };
        tool_wordings::Entity::insert(row)
            .on_conflict(
                OnConflict::columns([
                    tool_wordings::Column::AccountId,
                    tool_wordings::Column::Tool,
                ])
                .update_columns([
                    tool_wordings::Column::Description,
                    tool_wordings::Column::UpdatedAtMs,
                ])
                .to_owned(),
            )
            .exec(&self.db)
            .await?;
        Ok(())
    }
}
