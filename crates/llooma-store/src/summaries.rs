//! Summaries of the oldest part of long conversations (m0028): written once by a turn that
//! would otherwise pass its model's context window, sent in place of the messages they cover.

use sea_orm::{ConnectionTrait, Statement};

use crate::{Store, StoreError, StoreResult, now_ms, numbered_placeholders};

/// A conversation's summary as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The last message it covers: it covers this one and every message before it.
    pub through_message_id: String,
    pub content: String,
    /// How many messages it covers (those of the summaries before it included).
    pub covered_messages: i64,
    pub created_at_ms: i64,
}

/// Written only while the message it ends at is still in the conversation (an edit may have
/// removed it meanwhile): an `INSERT … SELECT` that finds nothing writes nothing.
/// It counts the messages it covers as it is written.
const INSERT: &str = "INSERT INTO conversation_summaries \
    (id, conversation_id, through_message_id, content, covered_messages, created_at_ms) \
    SELECT ?, m.conversation_id, m.id, ?, \
    (SELECT COUNT(*) FROM messages o WHERE o.conversation_id = m.conversation_id \
    AND (o.created_at_ms < m.created_at_ms \
    OR (o.created_at_ms = m.created_at_ms AND o.id <= m.id))), ? \
    FROM messages m WHERE m.id = ? AND m.conversation_id = ?";

const NEWEST: &str = "SELECT through_message_id, content, covered_messages, created_at_ms \
    FROM conversation_summaries WHERE conversation_id = ? \
    ORDER BY created_at_ms DESC, id DESC LIMIT 1";

impl Store {
    /// Stores a summary of the conversation's messages through `through_message_id`; it is the
    /// one sent from now on. [`StoreError::NotFound`] when that message is no longer there.
    pub async fn add_summary(
        &self,
        conversation_id: &str,
        through_message_id: &str,
        content: &str,
    ) -> StoreResult<()> {
        let backend = self.backend();
        let id = uuid::Uuid::now_v7().to_string();
        let values: [sea_orm::Value; 5] = [
            id.into(),
            content.into(),
            now_ms().into(),
            through_message_id.into(),
            conversation_id.into(),
        ];
        let statement =
            Statement::from_sql_and_values(backend, numbered_placeholders(backend, INSERT), values);
        let written = self.db.execute_raw(statement).await?;
        if written.rows_affected() == 1 { Ok(()) } else { Err(StoreError::NotFound) }
    }

    /// The conversation's newest summary, the one sent; `None` while it has none.
    pub async fn newest_summary(&self, conversation_id: &str) -> StoreResult<Option<Summary>> {
        let backend = self.backend();
        let statement = Statement::from_sql_and_values(
            backend,
            numbered_placeholders(backend, NEWEST),
            [conversation_id.into()],
        );
        let Some(row) = self.db.query_one_raw(statement).await? else { return Ok(None) };
        Ok(Some(Summary {
            through_message_id: row.try_get("", "through_message_id")?,
            content: row.try_get("", "content")?,
            covered_messages: row.try_get("", "covered_messages")?,
            created_at_ms: row.try_get("", "created_at_ms")?,
        }))
    }
}
