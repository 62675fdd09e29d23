//! Files attached to messages: images and documents, with their bytes in the database (every
//! replica serves them; a backup holds them). A file belongs to an account and a conversation
//! and goes with either; until its message is sent it has no turn, and an unsent file older
//! than a day is removed by the server's upkeep.
//!
//! Sizes are counted per account against a quota given by the caller; the count and the insert
//! happen in one transaction holding the account's row (Postgres), so two uploads at once
//! cannot both pass a quota that fits one.

use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
    Statement,
};

use crate::entities::{file_contents, files};
use crate::{Store, StoreError, StoreResult, now_ms};

/// What a file is to a model: an image it may look at, or a document whose text it reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    Image,
    Document,
}

impl FileKind {
    fn word(self) -> &'static str {
        match self {
            FileKind::Image => "image",
            FileKind::Document => "document",
        }
    }

    fn from_word(word: &str) -> StoreResult<FileKind> {
        match word {
            "image" => Ok(FileKind::Image),
            "document" => Ok(FileKind::Document),
            other => Err(StoreError::Corrupt(format!("a file of kind {other:?}"))),
        }
    }
}

/// A file's record, without its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredFile {
    pub id: String,
    pub account_id: String,
    pub conversation_id: String,
    /// The turn whose message carries it; `None` while it is only uploaded.
    pub turn_id: Option<String>,
    /// The name the person's browser gave (shown, never trusted for its type).
    pub name: String,
    pub kind: FileKind,
    /// Decided from the bytes when it was received.
    pub content_type: String,
    /// Bytes stored (an image after scaling).
    pub size_bytes: i64,
    pub width: Option<i64>,
    pub height: Option<i64>,
    /// A document's extracted text, in characters, and whether it was cut at the cap.
    pub text_chars: Option<i64>,
    pub text_cut: bool,
    pub created_at_ms: i64,
}

/// A file to store.
#[derive(Clone)]
pub struct NewFile {
    pub id: String,
    pub account_id: String,
    pub conversation_id: String,
    pub name: String,
    pub kind: FileKind,
    pub content_type: String,
    pub bytes: Vec<u8>,
    pub thumbnail: Option<Vec<u8>>,
    pub text: Option<String>,
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub text_cut: bool,
}

impl std::fmt::Debug for NewFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewFile")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("bytes", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

/// A sent file with what a model is given of it: an image's bytes, a document's text.
#[derive(Clone, Debug)]
pub struct SentFile {
    pub file: StoredFile,
    /// The image's bytes (empty for a document).
    pub bytes: Vec<u8>,
    /// The document's text (empty for an image).
    pub text: String,
}

/// Why a file was not stored.
#[derive(Debug, thiserror::Error)]
pub enum AddFileError {
    /// The account's files would pass its quota.
    #[error("the account's files take {used} of {quota} bytes")]
    Quota { used: i64, quota: i64 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn from_model(model: files::Model) -> StoreResult<StoredFile> {
    Ok(StoredFile {
        kind: FileKind::from_word(&model.kind)?,
        id: model.id,
        account_id: model.account_id,
        conversation_id: model.conversation_id,
        turn_id: model.turn_id,
        name: model.name,
        content_type: model.content_type,
        size_bytes: model.size_bytes,
        width: model.width,
        height: model.height,
        text_chars: model.text_chars,
        text_cut: model.text_cut,
        created_at_ms: model.created_at_ms,
    })
}

/// Unsent files are kept this long, then removed.
pub const UNSENT_FILES_KEPT_MS: i64 = 24 * 3600 * 1000;

impl Store {
    /// Stores a file if the account's files and it stay within `quota` bytes.
    pub async fn add_file(&self, new: NewFile, quota: i64) -> Result<StoredFile, AddFileError> {
        let size = i64::try_from(new.bytes.len()).unwrap_or(i64::MAX);
        let (held, txn) = self.begin().await?;
        if txn.get_database_backend() == sea_orm::DbBackend::Postgres {
            // Two uploads of the account at once count one after the other (SQLite's writers
            // already take turns).
            txn.execute_raw(Statement::from_sql_and_values(
                sea_orm::DbBackend::Postgres,
                "SELECT id FROM accounts WHERE id = $1 FOR UPDATE",
                [new.account_id.clone().into()],
            ))
            .await
            .map_err(StoreError::from)?;
        }
        let used = self.file_bytes_used_in(&txn, &new.account_id).await?;
        if used.saturating_add(size) > quota {
            return Err(AddFileError::Quota { used, quota });
        }
        let now = now_ms();
        let text_chars = new.text.as_ref().map(|t| i64::try_from(t.chars().count()).unwrap_or(0));
        let model = files::ActiveModel {
            id: Set(new.id.clone()),
            account_id: Set(new.account_id),
            conversation_id: Set(new.conversation_id),
            turn_id: Set(None),
            name: Set(new.name),
            kind: Set(new.kind.word().to_owned()),
            content_type: Set(new.content_type),
            size_bytes: Set(size),
            width: Set(new.width.map(i64::from)),
            height: Set(new.height.map(i64::from)),
            text_chars: Set(text_chars),
            text_cut: Set(new.text_cut),
            created_at_ms: Set(now),
        }
        .insert(&txn)
        .await
        .map_err(StoreError::from)?;
        file_contents::ActiveModel {
            file_id: Set(new.id),
            bytes: Set(new.bytes),
            thumbnail: Set(new.thumbnail),
            text: Set(new.text),
        }
        .insert(&txn)
        .await
        .map_err(StoreError::from)?;
        txn.commit().await.map_err(StoreError::from)?;
        drop(held);
        Ok(from_model(model)?)
    }

    async fn file_bytes_used_in(
        &self,
        conn: &impl ConnectionTrait,
        account_id: &str,
    ) -> StoreResult<i64> {
        let backend = conn.get_database_backend();
        let sql = match backend {
            sea_orm::DbBackend::Postgres => {
                "SELECT CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) AS used FROM files \
                 WHERE account_id = $1"
            }
            _ => "SELECT COALESCE(SUM(size_bytes), 0) AS used FROM files WHERE account_id = ?",
        };
        let row = conn
            .query_one_raw(Statement::from_sql_and_values(backend, sql, [account_id.into()]))
            .await?;
        Ok(match row {
            Some(row) => row.try_get::<i64>("", "used")?,
            None => 0,
        })
    }

    /// The account's files: how many, and how many bytes.
    pub async fn file_usage(&self, account_id: &str) -> StoreResult<(i64, i64)> {
        let rows = self.file_usage_by_account().await?;
        Ok(rows.into_iter().find(|(id, ..)| id == account_id).map_or((0, 0), |r| (r.1, r.2)))
    }

    /// Every account's files, as (account, how many, bytes).
    pub async fn file_usage_by_account(&self) -> StoreResult<Vec<(String, i64, i64)>> {
        let backend = self.db.get_database_backend();
        let sql = "SELECT account_id, COUNT(*) AS files, \
            CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) AS bytes FROM files GROUP BY account_id";
        let rows = self.db.query_all_raw(Statement::from_string(backend, sql)).await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get::<String>("", "account_id")?,
                    row.try_get::<i64>("", "files")?,
                    row.try_get::<i64>("", "bytes")?,
                ))
            })
            .collect()
    }

    /// The account's file, if it is theirs.
    pub async fn file(&self, account_id: &str, id: &str) -> StoreResult<Option<StoredFile>> {
        files::Entity::find_by_id(id.to_owned())
            .filter(files::Column::AccountId.eq(account_id))
            .one(&self.db)
            .await?
            .map(from_model)
            .transpose()
    }

    /// The account's file with its bytes (`thumbnail`: the small image instead; `None` when it
    /// has none).
    pub async fn file_with_bytes(
        &self,
        account_id: &str,
        id: &str,
        thumbnail: bool,
    ) -> StoreResult<Option<(StoredFile, Vec<u8>)>> {
        let Some(file) = self.file(account_id, id).await? else {
            return Ok(None);
        };
        let contents = file_contents::Entity::find_by_id(id.to_owned()).one(&self.db).await?;
        let Some(contents) = contents else {
            return Err(StoreError::Corrupt(format!("file {id} has no contents")));
        };
        let bytes = if thumbnail { contents.thumbnail } else { Some(contents.bytes) };
        Ok(bytes.map(|bytes| (file, bytes)))
    }

    /// Removes the account's file if it was not sent yet; whether it did.
    pub async fn delete_unsent_file(&self, account_id: &str, id: &str) -> StoreResult<bool> {
        let result = files::Entity::delete_many()
            .filter(files::Column::Id.eq(id))
            .filter(files::Column::AccountId.eq(account_id))
            .filter(files::Column::TurnId.is_null())
            .exec(&self.db)
            .await?;
        Ok(result.rows_affected == 1)
    }

    /// The files of a conversation, sent and not, oldest first.
    pub async fn conversation_files(&self, conversation_id: &str) -> StoreResult<Vec<StoredFile>> {
        files::Entity::find()
            .filter(files::Column::ConversationId.eq(conversation_id))
            .order_by_asc(files::Column::CreatedAtMs)
            .order_by_asc(files::Column::Id)
            .all(&self.db)
            .await?
            .into_iter()
            .map(from_model)
            .collect()
    }

    /// Attaches the account's unsent files `ids` of a conversation to the turn `turn_id`; fails
    /// (attaching none) unless every one of them could be.
    pub async fn attach_files(
        &self,
        account_id: &str,
        conversation_id: &str,
        turn_id: &str,
        ids: &[String],
    ) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let (held, txn) = self.begin().await?;
        let result = files::Entity::update_many()
            .col_expr(files::Column::TurnId, Expr::value(turn_id))
            .filter(files::Column::Id.is_in(ids.iter().cloned()))
            .filter(files::Column::AccountId.eq(account_id))
            .filter(files::Column::ConversationId.eq(conversation_id))
            .filter(files::Column::TurnId.is_null())
            .exec(&txn)
            .await?;
        if result.rows_affected != ids.len() as u64 {
            txn.rollback().await?;
            return Err(StoreError::NotFound);
        }
        txn.commit().await?;
        drop(held);
        Ok(())
    }

    /// Moves the files of the turn `from` to the turn `to` (a message replaced by an edit keeps
    /// its attachments).
    pub async fn move_turn_files(
        &self,
        conversation_id: &str,
        from: &str,
        to: &str,
    ) -> StoreResult<()> {
        files::Entity::update_many()
            .col_expr(files::Column::TurnId, Expr::value(to))
            .filter(files::Column::ConversationId.eq(conversation_id))
            .filter(files::Column::TurnId.eq(from))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// The sent files of a conversation with what a model is given of each, oldest first.
    pub async fn sent_files(&self, conversation_id: &str) -> StoreResult<Vec<SentFile>> {
        let files = files::Entity::find()
            .filter(files::Column::ConversationId.eq(conversation_id))
            .filter(files::Column::TurnId.is_not_null())
            .order_by_asc(files::Column::CreatedAtMs)
            .order_by_asc(files::Column::Id)
            .all(&self.db)
            .await?;
        self.with_contents(files).await
    }

    /// The files of one sent message (the person's message of `turn_id`), with what a model is
    /// given of each, oldest first.
    pub async fn turn_files(
        &self,
        conversation_id: &str,
        turn_id: &str,
    ) -> StoreResult<Vec<SentFile>> {
        let files = files::Entity::find()
            .filter(files::Column::ConversationId.eq(conversation_id))
            .filter(files::Column::TurnId.eq(turn_id))
            .order_by_asc(files::Column::CreatedAtMs)
            .order_by_asc(files::Column::Id)
            .all(&self.db)
            .await?;
        self.with_contents(files).await
    }

    /// The account's files `ids` of a conversation, with what a model is given of each, in the
    /// order given; `NotFound` unless all are there.
    pub async fn files_to_send(
        &self,
        account_id: &str,
        conversation_id: &str,
        ids: &[String],
    ) -> StoreResult<Vec<SentFile>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let found = files::Entity::find()
            .filter(files::Column::Id.is_in(ids.iter().cloned()))
            .filter(files::Column::AccountId.eq(account_id))
            .filter(files::Column::ConversationId.eq(conversation_id))
            .all(&self.db)
            .await?;
        let mut ordered = Vec::with_capacity(ids.len());
        for id in ids {
            let file = found.iter().find(|f| &f.id == id).ok_or(StoreError::NotFound)?;
            ordered.push(file.clone());
        }
        self.with_contents(ordered).await
    }

    async fn with_contents(&self, files: Vec<files::Model>) -> StoreResult<Vec<SentFile>> {
        if files.is_empty() {
            return Ok(Vec::new());
        }
        let mut contents: std::collections::HashMap<String, file_contents::Model> =
            file_contents::Entity::find()
                .filter(file_contents::Column::FileId.is_in(files.iter().map(|f| f.id.clone())))
                .all(&self.db)
                .await?
                .into_iter()
                .map(|c| (c.file_id.clone(), c))
                .collect();
        let mut sent = Vec::with_capacity(files.len());
        for model in files {
            let content = contents
                .remove(&model.id)
                .ok_or_else(|| StoreError::Corrupt(format!("file {} has no contents", model.id)))?;
            let file = from_model(model)?;
            let (bytes, text) = match file.kind {
                FileKind::Image => (content.bytes, String::new()),
                FileKind::Document => (Vec::new(), content.text.unwrap_or_default()),
            };
            sent.push(SentFile { file, bytes, text });
        }
        Ok(sent)
    }

    /// Removes files uploaded but never sent before `before_ms`; how many.
    pub async fn purge_unsent_files(&self, before_ms: i64) -> StoreResult<u64> {
        let result = files::Entity::delete_many()
            .filter(files::Column::TurnId.is_null())
            .filter(files::Column::CreatedAtMs.lt(before_ms))
            .exec(&self.db)
            .await?;
        Ok(result.rows_affected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_stored_as_words() {
        for kind in [FileKind::Image, FileKind::Document] {
            assert_eq!(FileKind::from_word(kind.word()).unwrap(), kind);
        }
        assert!(FileKind::from_word("video").is_err());
    }
}
