//! Conversations, messages, turns and the per-conversation event log.
//!
//! Every read and write names the owning account or goes through a conversation the caller
//! already loaded for that account. One turn runs per conversation at a time (a partial unique
//! index decides when two tabs send at once). Events are numbered per conversation; the number is
//! the SSE event id a reloaded page resumes from.

use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DbBackend, DbErr, EntityTrait,
    QueryFilter, QueryOrder, QuerySelect, Set, Statement,
};

use llooma_types::{EncodedEvent, EndState, Step, StepState, TurnEvent};

use crate::entities::{conversations, messages, turn_events, turns};
use crate::turn_writes::{
    APPEND_ATTEMPTS, EVENT_POSTGRES, TURN_ERROR_SQLITE, insert_event, message_id,
};
use crate::{Store, StoreError, StoreResult, is_unique_violation, now_ms};

/// A conversation as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conversation {
    pub id: String,
    pub account_id: String,
    pub title: String,
    pub provider_id: Option<String>,
    pub model: Option<String>,
    pub mcp_enabled: bool,
    /// The persona whose prompt (and memory, if on) the turns use.
    pub persona_id: Option<String>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// One message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub id: String,
    pub role: String,
    pub content: String,
    pub turn_id: Option<String>,
    pub created_at_ms: i64,
}

impl From<messages::Model> for Message {
    fn from(m: messages::Model) -> Self {
        Message {
            id: m.id,
            role: m.role,
            content: m.content,
            turn_id: m.turn_id,
            created_at_ms: m.created_at_ms,
        }
    }
}

/// One entry of a conversation's event log: a [`llooma_types::TurnEvent`] as it was encoded
/// when it was written, with its number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEvent {
    pub seq: i64,
    pub turn_id: String,
    pub kind: String,
    pub data_json: String,
    pub at_ms: i64,
}

/// A change to a conversation; absent fields stay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConversationPatch {
    pub title: Option<String>,
    pub provider_id: Option<Option<String>>,
    pub model: Option<Option<String>>,
    pub mcp_enabled: Option<bool>,
    pub persona_id: Option<Option<String>>,
}

pub(crate) fn conversation(m: conversations::Model) -> Conversation {
    Conversation {
        id: m.id,
        account_id: m.account_id,
        title: m.title,
        provider_id: m.provider_id,
        model: m.model,
        mcp_enabled: m.mcp_enabled,
        persona_id: m.persona_id,
        created_at_ms: m.created_at_ms,
        updated_at_ms: m.updated_at_ms,
    }
}

/// Sent files whose turn has no message left (but the one named second).
const FILES_OF_REMOVED_TURNS_SQLITE: &str = "DELETE FROM files WHERE conversation_id = ?1 \
    AND turn_id IS NOT NULL AND turn_id <> ?2 AND NOT EXISTS (SELECT 1 FROM messages m \
    WHERE m.conversation_id = files.conversation_id AND m.turn_id = files.turn_id)";
const FILES_OF_REMOVED_TURNS_POSTGRES: &str = "DELETE FROM files WHERE conversation_id = $1 \
    AND turn_id IS NOT NULL AND turn_id <> $2 AND NOT EXISTS (SELECT 1 FROM messages m \
    WHERE m.conversation_id = files.conversation_id AND m.turn_id = files.turn_id)";

/// Whether messages wait for the full-text index: any above the mark (SQLite, migration m0018).
const ANY_PENDING_SQLITE: &str = "SELECT EXISTS (SELECT 1 FROM messages \
    WHERE rowid > (SELECT indexed_through FROM messages_search_mark))";
/// Indexes the waiting messages; [`MOVE_MARK_SQLITE`] follows in the same transaction.
const INDEX_PENDING_SQLITE: &str = "INSERT INTO messages_search (rowid, content) \
    SELECT rowid, content FROM messages \
    WHERE rowid > (SELECT indexed_through FROM messages_search_mark)";
/// Every message is indexed now.
const MOVE_MARK_SQLITE: &str = "UPDATE messages_search_mark \
    SET indexed_through = (SELECT MAX(rowid) FROM messages) WHERE id = 1";

impl Store {
    pub async fn create_conversation(
        &self,
        account_id: &str,
        title: &str,
        provider_id: Option<String>,
        model: Option<String>,
    ) -> StoreResult<Conversation> {
        let now = now_ms();
        let model = conversations::ActiveModel {
            // Increasing in this process: conversations made within the same millisecond list
            // newest first all the same (the list breaks ties on the time by id).
            id: Set(uuid::Uuid::now_v7().to_string()),
            account_id: Set(account_id.to_owned()),
            title: Set(title.to_owned()),
            provider_id: Set(provider_id),
            model: Set(model),
            mcp_enabled: Set(false),
            created_at_ms: Set(now),
            updated_at_ms: Set(now),
            persona_id: Set(None),
        };
        Ok(conversation(model.insert(&self.db).await?))
    }

    /// A page of the account's conversations, most recently active first: at most `limit`,
    /// those after `before` (the last of the previous page, as `(updated_at_ms, id)`) when
    /// given. Ties on the time are ordered by id, so pages neither repeat nor skip.
    pub async fn list_conversations(
        &self,
        account_id: &str,
        before: Option<(i64, &str)>,
        limit: u64,
    ) -> StoreResult<Vec<Conversation>> {
        let mut query =
            conversations::Entity::find().filter(conversations::Column::AccountId.eq(account_id));
        if let Some((updated_at_ms, id)) = before {
            query = query.filter(
                sea_orm::Condition::any()
                    .add(conversations::Column::UpdatedAtMs.lt(updated_at_ms))
                    .add(
                        sea_orm::Condition::all()
                            .add(conversations::Column::UpdatedAtMs.eq(updated_at_ms))
                            .add(conversations::Column::Id.lt(id)),
                    ),
            );
        }
        Ok(query
            .order_by_desc(conversations::Column::UpdatedAtMs)
            .order_by_desc(conversations::Column::Id)
            .limit(limit)
            .all(&self.db)
            .await?
            .into_iter()
            .map(conversation)
            .collect())
    }

    /// SQLite: moves the messages written since the last call into the full-text index, in one
    /// transaction (migrations m0017, m0018); returns how many. Run before every search and
    /// every few seconds besides; Postgres indexes as it writes (nothing to do, 0).
    pub async fn index_pending_messages(&self) -> StoreResult<u64> {
        let Some(inline) = &self.inline else { return Ok(0) };
        let pending: bool = inline
            .run(|conn| Ok(conn.prepare_cached(ANY_PENDING_SQLITE)?.query_row([], |r| r.get(0))?))
            .await?;
        if !pending {
            return Ok(0);
        }
        Ok(inline
            .write(|txn| {
                let indexed = txn.prepare_cached(INDEX_PENDING_SQLITE)?.execute([])?;
                txn.prepare_cached(MOVE_MARK_SQLITE)?.execute([])?;
                Ok(indexed as u64)
            })
            .await?)
    }

    /// The account's conversations whose title, or one of whose messages, holds all the words of
    /// `query` (each as the start of a word, so a search typed half-way finds), most recently
    /// active first, at most `limit`. Uses the engine's full-text indexes (SQLite FTS5, Postgres
    /// `tsvector`; migrations m0011 and m0027). A query without a letter or digit finds nothing.
    pub async fn search_conversations(
        &self,
        account_id: &str,
        query: &str,
        limit: u64,
    ) -> StoreResult<Vec<Conversation>> {
        let words: Vec<&str> =
            query.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let backend = self.backend();
        // Titles and messages each through their own index (m0011, m0027); the conversations
        // either found are then read by key, so no title of the account is read unmatched.
        let statement = match backend {
            DbBackend::Postgres => {
                // Words are letters and digits only, so nothing typed is `tsquery` syntax.
                let words: String =
                    words.iter().map(|w| format!("{w}:*")).collect::<Vec<_>>().join(" & ");
                Statement::from_sql_and_values(
                    backend,
                    "SELECT * FROM conversations WHERE account_id = $1 AND id IN (\
                     SELECT id FROM conversations \
                     WHERE to_tsvector('simple', title) @@ to_tsquery('simple', $2) \
                     UNION SELECT conversation_id FROM messages \
                     WHERE to_tsvector('simple', content) @@ to_tsquery('simple', $2)) \
                     ORDER BY updated_at_ms DESC, id DESC LIMIT $3",
                    [account_id.into(), words.into(), limit.into()],
                )
            }
            _ => {
                // Messages written since the last batch are indexed first: a search finds a
                // message the moment it is written.
                self.index_pending_messages().await?;
                // Each word quoted, so nothing typed is FTS5 syntax; `*`: a prefix.
                let words: String =
                    words.iter().map(|w| format!("\"{w}\"*")).collect::<Vec<_>>().join(" ");
                Statement::from_sql_and_values(
                    backend,
                    "SELECT * FROM conversations WHERE account_id = ? AND rowid IN (\
                     SELECT rowid FROM conversations_search WHERE conversations_search MATCH ? \
                     UNION SELECT c.rowid FROM conversations c WHERE c.id IN (\
                     SELECT m.conversation_id FROM messages_search s \
                     JOIN messages m ON m.rowid = s.rowid WHERE messages_search MATCH ?)) \
                     ORDER BY updated_at_ms DESC, id DESC LIMIT ?",
                    [account_id.into(), words.clone().into(), words.into(), limit.into()],
                )
            }
        };
        Ok(conversations::Entity::find()
            .from_raw_sql(statement)
            .all(&self.db)
            .await?
            .into_iter()
            .map(conversation)
            .collect())
    }

    /// The model of the account's most recently active conversation that has one, as
    /// (provider id, model name): what its next new conversation starts with.
    pub async fn last_model_used(&self, account_id: &str) -> StoreResult<Option<(String, String)>> {
        let last = conversations::Entity::find()
            .filter(conversations::Column::AccountId.eq(account_id))
            .filter(conversations::Column::ProviderId.is_not_null())
            .filter(conversations::Column::Model.is_not_null())
            .order_by_desc(conversations::Column::UpdatedAtMs)
            .order_by_desc(conversations::Column::Id)
            .one(&self.db)
            .await?;
        Ok(last.and_then(|c| c.provider_id.zip(c.model)))
    }

    /// One of the account's conversations; another account's id is simply not found.
    pub async fn conversation(
        &self,
        account_id: &str,
        id: &str,
    ) -> StoreResult<Option<Conversation>> {
        Ok(conversations::Entity::find_by_id(id.to_owned())
            .filter(conversations::Column::AccountId.eq(account_id))
            .one(&self.db)
            .await?
            .map(conversation))
    }

    pub async fn update_conversation(
        &self,
        account_id: &str,
        id: &str,
        patch: ConversationPatch,
    ) -> StoreResult<()> {
        let mut update = conversations::Entity::update_many()
            .col_expr(conversations::Column::UpdatedAtMs, Expr::value(now_ms()))
            .filter(conversations::Column::Id.eq(id))
            .filter(conversations::Column::AccountId.eq(account_id));
        if let Some(title) = patch.title {
            update = update.col_expr(conversations::Column::Title, Expr::value(title));
        }
        if let Some(provider) = patch.provider_id {
            update = update.col_expr(conversations::Column::ProviderId, Expr::value(provider));
        }
        if let Some(model) = patch.model {
            update = update.col_expr(conversations::Column::Model, Expr::value(model));
        }
        if let Some(on) = patch.mcp_enabled {
            update = update.col_expr(conversations::Column::McpEnabled, Expr::value(on));
        }
        if let Some(persona) = patch.persona_id {
            update = update.col_expr(conversations::Column::PersonaId, Expr::value(persona));
        }
        let result = update.exec(&self.db).await?;
        if result.rows_affected == 1 { Ok(()) } else { Err(StoreError::NotFound) }
    }

    pub async fn delete_conversation(&self, account_id: &str, id: &str) -> StoreResult<()> {
        let result = conversations::Entity::delete_many()
            .filter(conversations::Column::Id.eq(id))
            .filter(conversations::Column::AccountId.eq(account_id))
            .exec(&self.db)
            .await?;
        if result.rows_affected == 1 { Ok(()) } else { Err(StoreError::NotFound) }
    }

    /// A page of a conversation's messages, oldest first: at most `limit` of the newest before
    /// the message `before` (from the newest when `None`), widened by one so that it does not
    /// begin with a reply whose person's message is on the page before; and whether older
    /// messages remain. [`StoreError::NotFound`] when `before` is not a message of the
    /// conversation.
    pub async fn messages_page(
        &self,
        conversation_id: &str,
        limit: u64,
        before: Option<&str>,
    ) -> StoreResult<(Vec<Message>, bool)> {
        let mut query =
            messages::Entity::find().filter(messages::Column::ConversationId.eq(conversation_id));
        if let Some(before) = before {
            let cursor = messages::Entity::find_by_id(before.to_owned())
                .filter(messages::Column::ConversationId.eq(conversation_id))
                .one(&self.db)
                .await?
                .ok_or(StoreError::NotFound)?;
            query = query.filter(
                Condition::any().add(messages::Column::CreatedAtMs.lt(cursor.created_at_ms)).add(
                    Condition::all()
                        .add(messages::Column::CreatedAtMs.eq(cursor.created_at_ms))
                        .add(messages::Column::Id.lt(cursor.id)),
                ),
            );
        }
        // One more to know whether older ones remain, one more to widen the page by.
        let mut newest_first = query
            .order_by_desc(messages::Column::CreatedAtMs)
            .order_by_desc(messages::Column::Id)
            .limit(limit.max(1) + 2)
            .all(&self.db)
            .await?;
        let mut size = newest_first.len().min(usize::try_from(limit.max(1)).unwrap_or(usize::MAX));
        if size > 0 && newest_first[size - 1].role == "assistant" && newest_first.len() > size {
            size += 1;
        }
        let older = newest_first.len() > size;
        newest_first.truncate(size);
        let page = newest_first.into_iter().rev().map(Message::from).collect();
        Ok((page, older))
    }

    /// The events a page needs to draw the finished replies of `turn_ids`, as
    /// [`Store::timeline_events`] gives them for all.
    pub async fn timeline_events_of(
        &self,
        conversation_id: &str,
        last_seq: i64,
        turn_ids: Vec<String>,
    ) -> StoreResult<Vec<StoredEvent>> {
        Ok(turn_events::Entity::find()
            .filter(turn_events::Column::ConversationId.eq(conversation_id))
            .filter(turn_events::Column::Seq.lte(last_seq))
            .filter(turn_events::Column::Kind.ne("request"))
            .filter(turn_events::Column::TurnId.is_in(turn_ids))
            .order_by_asc(turn_events::Column::Seq)
            .all(&self.db)
            .await?
            .into_iter()
            .map(StoredEvent::from)
            .collect())
    }

    /// A conversation's messages, oldest first.
    pub async fn messages(&self, conversation_id: &str) -> StoreResult<Vec<Message>> {
        Ok(messages::Entity::find()
            .filter(messages::Column::ConversationId.eq(conversation_id))
            .order_by_asc(messages::Column::CreatedAtMs)
            .order_by_asc(messages::Column::Id)
            .all(&self.db)
            .await?
            .into_iter()
            .map(Message::from)
            .collect())
    }

    /// Removes the person's message of `turn_id` and every message after it: an edited message,
    /// or a reply asked for again, replaces the rest of the conversation. The events of the
    /// removed turns stay in the log (its numbers only grow, so a page resuming from one misses
    /// nothing), but no message refers to them any more.
    pub async fn remove_messages_from_turn(
        &self,
        conversation_id: &str,
        turn_id: &str,
    ) -> StoreResult<()> {
        let Some(first) = messages::Entity::find()
            .filter(messages::Column::ConversationId.eq(conversation_id))
            .filter(messages::Column::TurnId.eq(turn_id))
            .filter(messages::Column::Role.eq("user"))
            .one(&self.db)
            .await?
        else {
            return Ok(());
        };
        messages::Entity::delete_many()
            .filter(messages::Column::ConversationId.eq(conversation_id))
            .filter(
                sea_orm::Condition::any()
                    .add(messages::Column::CreatedAtMs.gt(first.created_at_ms))
                    .add(
                        sea_orm::Condition::all()
                            .add(messages::Column::CreatedAtMs.eq(first.created_at_ms))
                            .add(messages::Column::Id.gte(first.id)),
                    ),
            )
            .exec(&self.db)
            .await?;
        // The files of the removed turns go with them; the replaced message's stay, for the
        // message that replaces it.
        let backend = self.db.get_database_backend();
        let sql = match backend {
            sea_orm::DbBackend::Postgres => FILES_OF_REMOVED_TURNS_POSTGRES,
            _ => FILES_OF_REMOVED_TURNS_SQLITE,
        };
        self.db
            .execute_raw(sea_orm::Statement::from_sql_and_values(
                backend,
                sql,
                [conversation_id.into(), turn_id.into()],
            ))
            .await?;
        Ok(())
    }

    /// Adds a message; its conversation's `updated_at_ms` becomes the message's time in the
    /// same statement (a trigger, migration m0014).
    pub async fn add_message(
        &self,
        conversation_id: &str,
        role: &str,
        content: &str,
        turn_id: Option<&str>,
    ) -> StoreResult<()> {
        let now = now_ms();
        messages::ActiveModel {
            id: Set(message_id(now)),
            conversation_id: Set(conversation_id.to_owned()),
            role: Set(role.to_owned()),
            content: Set(content.to_owned()),
            turn_id: Set(turn_id.map(str::to_owned)),
            created_at_ms: Set(now),
        }
        .insert(&self.db)
        .await?;
        Ok(())
    }

    /// Starts a turn run by the process `owner_replica`, unless one is already running in the
    /// conversation.
    pub async fn start_turn(
        &self,
        conversation_id: &str,
        owner_replica: &str,
    ) -> StoreResult<String> {
        let id = uuid::Uuid::new_v4().to_string();
        let model = turns::ActiveModel {
            id: Set(id.clone()),
            conversation_id: Set(conversation_id.to_owned()),
            state: Set("running".into()),
            started_at_ms: Set(now_ms()),
            ended_at_ms: Set(None),
            error: Set(None),
            owner_replica: Set(Some(owner_replica.to_owned())),
            stop_requested_at_ms: Set(None),
        };
        match model.insert(&self.db).await {
            Ok(_) => Ok(id),
            Err(err) if is_unique_violation(&err) => Err(StoreError::TurnRunning),
            Err(err) => Err(err.into()),
        }
    }

    /// The running turn of a conversation, if any.
    pub async fn running_turn(&self, conversation_id: &str) -> StoreResult<Option<String>> {
        Ok(turns::Entity::find()
            .filter(turns::Column::ConversationId.eq(conversation_id))
            .filter(turns::Column::State.eq("running"))
            .one(&self.db)
            .await?
            .map(|t| t.id))
    }

    /// Asks the process running the conversation's turn to stop it (it looks every second).
    /// False when no turn is running.
    pub async fn request_stop(&self, conversation_id: &str) -> StoreResult<bool> {
        let result = turns::Entity::update_many()
            .col_expr(turns::Column::StopRequestedAtMs, Expr::value(now_ms()))
            .filter(turns::Column::ConversationId.eq(conversation_id))
            .filter(turns::Column::State.eq("running"))
            .exec(&self.db)
            .await?;
        Ok(result.rows_affected > 0)
    }

    /// Whether someone asked for this turn to stop.
    pub async fn stop_requested(&self, turn_id: &str) -> StoreResult<bool> {
        Ok(turns::Entity::find_by_id(turn_id)
            .one(&self.db)
            .await?
            .is_some_and(|t| t.stop_requested_at_ms.is_some()))
    }

    /// Marks every running turn failed (start-up of the only process: nobody runs them anymore)
    /// and says so in each one's log, so a tab watching it sees the turn end and why.
    pub async fn fail_running_turns(&self, reason: &str) -> StoreResult<u64> {
        let running =
            turns::Entity::find().filter(turns::Column::State.eq("running")).all(&self.db).await?;
        self.fail_turns(&running, reason).await
    }

    /// Fails the running turns whose process has not heartbeated since `alive_since_ms` (it
    /// crashed or was killed): nobody will finish them, and each would block its conversation.
    pub async fn fail_orphaned_turns(&self, alive_since_ms: i64, reason: &str) -> StoreResult<u64> {
        let alive: Vec<String> =
            crate::approvals::replicas_alive_since(self, alive_since_ms).await?;
        let running =
            turns::Entity::find().filter(turns::Column::State.eq("running")).all(&self.db).await?;
        let orphaned: Vec<_> = running
            .into_iter()
            .filter(|t| t.owner_replica.as_ref().is_none_or(|owner| !alive.contains(owner)))
            .collect();
        self.fail_turns(&orphaned, reason).await
    }

    async fn fail_turns(&self, running: &[turns::Model], reason: &str) -> StoreResult<u64> {
        for turn in running {
            // A card the turn was waiting on can no longer be answered: its step says so, as
            // the live turn's timeline would have.
            for call in crate::approvals::unsettled_calls_of_turn(self, &turn.id).await? {
                let step = Step {
                    call_id: Some(call.id),
                    ..Step::mcp_call(
                        call.model_tool_name,
                        call.server_label,
                        call.tool_name,
                        StepState::Interrupted,
                    )
                };
                let step = TurnEvent::step(step).encode();
                self.append_event(&turn.conversation_id, &turn.id, &step).await?;
            }
            let error = TurnEvent::error(reason).encode();
            self.append_event(&turn.conversation_id, &turn.id, &error).await?;
            self.end_turn(&turn.conversation_id, &turn.id, EndState::Failed, Some(reason)).await?;
        }
        Ok(running.len() as u64)
    }

    /// Appends an event to the conversation's log and returns its number.
    pub async fn append_event(
        &self,
        conversation_id: &str,
        turn_id: &str,
        event: &EncodedEvent,
    ) -> StoreResult<i64> {
        self.append(conversation_id, turn_id, event).await
    }

    /// Ends a running turn (`done`, `failed` or `stopped`) by appending its `end` event: the
    /// insert ends the turn in the same statement (a trigger, migration m0015); returns the
    /// event's number and the event as written. A tab that sees `end` can send at once (the turn
    /// is no longer running), and no event of the next turn is numbered before it. `error`, the
    /// reason a failed turn failed, is kept on the turn for whoever reads the database.
    pub async fn end_turn(
        &self,
        conversation_id: &str,
        turn_id: &str,
        state: EndState,
        error: Option<&str>,
    ) -> StoreResult<(i64, EncodedEvent)> {
        let end = TurnEvent::end(state).encode();
        let seq = self.append(conversation_id, turn_id, &end).await?;
        if let Some(error) = error {
            self.record_turn_error(turn_id, error).await?;
        }
        Ok((seq, end))
    }

    /// Keeps why a turn failed on its row.
    pub(crate) async fn record_turn_error(&self, turn_id: &str, error: &str) -> StoreResult<()> {
        if let Some(inline) = &self.inline {
            inline
                .run(|conn| {
                    conn.prepare_cached(TURN_ERROR_SQLITE)?.execute((error, turn_id))?;
                    Ok(())
                })
                .await?;
            return Ok(());
        }
        turns::Entity::update_many()
            .col_expr(turns::Column::Error, Expr::value(error.to_owned()))
            .filter(turns::Column::Id.eq(turn_id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    async fn append(
        &self,
        conversation_id: &str,
        turn_id: &str,
        event: &EncodedEvent,
    ) -> StoreResult<i64> {
        if let Some(inline) = &self.inline {
            return Ok(inline
                .run(|conn| Ok(insert_event(conn, conversation_id, turn_id, event, now_ms())?))
                .await?);
        }
        let backend = self.backend();
        for _ in 0..APPEND_ATTEMPTS {
            let values: [sea_orm::Value; 5] = [
                conversation_id.into(),
                turn_id.into(),
                event.kind.into(),
                event.data_json.as_str().into(),
                now_ms().into(),
            ];
            let statement = Statement::from_sql_and_values(backend, EVENT_POSTGRES, values);
            let numbered = match self.db.query_one_raw(statement).await {
                Ok(Some(row)) => row.try_get_by_index(0),
                Ok(None) => Err(DbErr::RecordNotInserted),
                Err(err) => Err(err),
            };
            match numbered {
                Ok(seq) => return Ok(seq),
                // Another writer took the number (two replicas): number it again.
                Err(err) if is_unique_violation(&err) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Err(StoreError::Database("could not number an event; try again".into()))
    }

    /// Where a page showing the stored messages starts reading the event log: after the last
    /// event of every turn but `running` (whose events the page has yet to show), 0 when none.
    /// Only one turn of a conversation runs at a time, so this is just before its first event.
    pub async fn resume_point(
        &self,
        conversation_id: &str,
        running: Option<&str>,
    ) -> StoreResult<i64> {
        let mut query = turn_events::Entity::find()
            .select_only()
            .column_as(turn_events::Column::Seq.max(), "max")
            .filter(turn_events::Column::ConversationId.eq(conversation_id));
        if let Some(turn_id) = running {
            query = query.filter(turn_events::Column::TurnId.ne(turn_id));
        }
        Ok(query.into_tuple::<Option<i64>>().one(&self.db).await?.flatten().unwrap_or(0))
    }

    /// The events a page needs to draw the finished replies: every event numbered up to
    /// `last_seq` but the weights of requests (`request`), oldest first.
    pub async fn timeline_events(
        &self,
        conversation_id: &str,
        last_seq: i64,
    ) -> StoreResult<Vec<StoredEvent>> {
        Ok(turn_events::Entity::find()
            .filter(turn_events::Column::ConversationId.eq(conversation_id))
            .filter(turn_events::Column::Seq.lte(last_seq))
            .filter(turn_events::Column::Kind.ne("request"))
            .order_by_asc(turn_events::Column::Seq)
            .all(&self.db)
            .await?
            .into_iter()
            .map(StoredEvent::from)
            .collect())
    }

    /// Events after `after_seq`, oldest first, at most `limit`.
    pub async fn events_after(
        &self,
        conversation_id: &str,
        after_seq: i64,
        limit: u64,
    ) -> StoreResult<Vec<StoredEvent>> {
        Ok(turn_events::Entity::find()
            .filter(turn_events::Column::ConversationId.eq(conversation_id))
            .filter(turn_events::Column::Seq.gt(after_seq))
            .order_by_asc(turn_events::Column::Seq)
            .limit(limit)
            .all(&self.db)
            .await?
            .into_iter()
            .map(StoredEvent::from)
            .collect())
    }
}

impl From<turn_events::Model> for StoredEvent {
    fn from(m: turn_events::Model) -> Self {
        StoredEvent {
            seq: m.seq,
            turn_id: m.turn_id,
            kind: m.kind,
            data_json: m.data_json,
            at_ms: m.at_ms,
        }
    }
}
