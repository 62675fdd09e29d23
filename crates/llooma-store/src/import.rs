//! Conversations brought in from a file (see `llooma_core::import`), each stored whole or not
//! at all, with the times their messages had.

use sea_orm::{ActiveModelTrait, EntityTrait, Set, TransactionTrait};

use crate::entities::{conversations, messages};
use crate::turn_writes::message_id;
use crate::{Store, StoreResult};

/// A conversation to store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportedConversation {
    pub title: String,
    pub created_at_ms: i64,
    /// Oldest first, their times increasing.
    pub messages: Vec<ImportedMessage>,
}

/// One of its messages: `user` or `assistant`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportedMessage {
    pub role: &'static str,
    pub content: String,
    pub created_at_ms: i64,
}

/// Messages written per statement.
const MESSAGES_PER_INSERT: usize = 200;

impl Store {
    /// Stores an imported conversation of the account, with its messages, in one transaction;
    /// gives its id. It lists by its last message's time (the messages' trigger sets it).
    pub async fn import_conversation(
        &self,
        account_id: &str,
        provider_id: Option<String>,
        model: Option<String>,
        imported: &ImportedConversation,
    ) -> StoreResult<String> {
        let id = uuid::Uuid::now_v7().to_string();
        let txn = self.db.begin().await?;
        conversations::ActiveModel {
            id: Set(id.clone()),
            account_id: Set(account_id.to_owned()),
            title: Set(imported.title.clone()),
            provider_id: Set(provider_id),
            model: Set(model),
            mcp_enabled: Set(false),
            created_at_ms: Set(imported.created_at_ms),
            updated_at_ms: Set(imported.created_at_ms),
            persona_id: Set(None),
        }
        .insert(&txn)
        .await?;
        for chunk in imported.messages.chunks(MESSAGES_PER_INSERT) {
            let rows = chunk.iter().map(|m| messages::ActiveModel {
                id: Set(message_id(m.created_at_ms)),
                conversation_id: Set(id.clone()),
                role: Set(m.role.to_owned()),
                content: Set(m.content.clone()),
                turn_id: Set(None),
                created_at_ms: Set(m.created_at_ms),
            });
            messages::Entity::insert_many(rows).exec_without_returning(&txn).await?;
        }
        txn.commit().await?;
        Ok(id)
    }
}
