//! The writes that open and close a conversation's turn, each sent to the database as one
//! request: opening is the turn's row, the person's message and the `start` event; closing is
//! the reply and the `end` event. They used to be five statements; each statement is a round
//! trip (on SQLite two hand-offs to sqlx's worker thread and back), and a turn's cost was
//! mostly those.
//!
//! SQLite runs the statements of one request in order and stops at the first that fails (each
//! commits on its own, as they did one by one); Postgres gets one statement of common table
//! expressions, all or nothing. Either way, a failure leaves what it did before as separate
//! statements would have: the caller ends a turn it could not finish opening.

use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter, Statement,
};

use llooma_types::{EncodedEvent, EndState, TurnEvent, TurnStarted};

use crate::conversations::{APPEND_ATTEMPTS as ATTEMPTS, message_id};
use crate::entities::turns;
use crate::{Store, StoreError, StoreResult, is_unique_violation, now_ms};

const OPEN_SQLITE: &str = "INSERT INTO turns (id, conversation_id, state, started_at_ms, \
    owner_replica) VALUES (?, ?, 'running', ?, ?); \
    INSERT INTO messages (id, conversation_id, role, content, turn_id, created_at_ms) \
    VALUES (?, ?, 'user', ?, ?, ?); \
    INSERT INTO turn_events (conversation_id, seq, turn_id, kind, data_json, at_ms) \
    SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM turn_events \
    WHERE conversation_id = ? RETURNING seq";

const OPEN_POSTGRES: &str = "WITH turn AS (INSERT INTO turns (id, conversation_id, state, \
    started_at_ms, owner_replica) VALUES ($1, $2, 'running', $3, $4) RETURNING id), \
    message AS (INSERT INTO messages (id, conversation_id, role, content, turn_id, \
    created_at_ms) SELECT $5, $2, 'user', $6, turn.id, $3 FROM turn) \
    INSERT INTO turn_events (conversation_id, seq, turn_id, kind, data_json, at_ms) \
    SELECT $2, COALESCE(MAX(seq), 0) + 1, $1, $7, $8, $3 FROM turn_events \
    WHERE conversation_id = $2 RETURNING seq";

const CLOSE_SQLITE: &str = "INSERT INTO messages (id, conversation_id, role, content, turn_id, \
    created_at_ms) VALUES (?, ?, 'assistant', ?, ?, ?); \
    INSERT INTO turn_events (conversation_id, seq, turn_id, kind, data_json, at_ms) \
    SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM turn_events \
    WHERE conversation_id = ? RETURNING seq";

const CLOSE_POSTGRES: &str = "WITH message AS (INSERT INTO messages (id, conversation_id, role, \
    content, turn_id, created_at_ms) VALUES ($1, $2, 'assistant', $3, $4, $5)) \
    INSERT INTO turn_events (conversation_id, seq, turn_id, kind, data_json, at_ms) \
    SELECT $2, COALESCE(MAX(seq), 0) + 1, $4, $6, $7, $5 FROM turn_events \
    WHERE conversation_id = $2 RETURNING seq";

/// Two events of a turn logged together, numbered one after the other.
const PAIR_SQLITE: &str = "INSERT INTO turn_events \
    (conversation_id, seq, turn_id, kind, data_json, at_ms) \
    SELECT ?, last.seq + v.column1, ?, v.column2, v.column3, ? \
    FROM (VALUES (1, ?, ?), (2, ?, ?)) AS v, \
    (SELECT COALESCE(MAX(seq), 0) AS seq FROM turn_events WHERE conversation_id = ?) AS last \
    ORDER BY v.column1 RETURNING seq";

const PAIR_POSTGRES: &str = "INSERT INTO turn_events \
    (conversation_id, seq, turn_id, kind, data_json, at_ms) \
    SELECT $1, last.seq + v.column1, $2, v.column2, v.column3, $3 \
    FROM (VALUES (1, $4, $5), (2, $6, $7)) AS v, \
    (SELECT COALESCE(MAX(seq), 0) AS seq FROM turn_events WHERE conversation_id = $1) AS last \
    ORDER BY v.column1 RETURNING seq";

/// A turn just opened: its id, and its `start` event as numbered and written.
#[derive(Debug)]
pub struct OpenedTurn {
    pub turn_id: String,
    pub start_seq: i64,
    pub start: EncodedEvent,
}

impl Store {
    /// Opens a turn of `conversation_id` run by the process `owner_replica`: its row, the
    /// person's `message` and its `start` event (`started`, given the new turn's id), in one
    /// request. [`StoreError::TurnRunning`] when one is already running (nothing is written).
    pub async fn open_turn(
        &self,
        conversation_id: &str,
        owner_replica: &str,
        message: &str,
        mut started: TurnStarted,
    ) -> StoreResult<OpenedTurn> {
        let turn_id = uuid::Uuid::new_v4().to_string();
        started.turn_id.clone_from(&turn_id);
        let start = TurnEvent::Start(started).encode();
        let backend = self.db.get_database_backend();
        for _ in 0..ATTEMPTS {
            let now = now_ms();
            let message_id = message_id(now);
            let statement = if backend == DbBackend::Postgres {
                let values: [sea_orm::Value; 8] = [
                    turn_id.as_str().into(),
                    conversation_id.into(),
                    now.into(),
                    owner_replica.into(),
                    message_id.into(),
                    message.into(),
                    start.kind.into(),
                    start.data_json.as_str().into(),
                ];
                Statement::from_sql_and_values(backend, OPEN_POSTGRES, values)
            } else {
                let values: [sea_orm::Value; 15] = [
                    turn_id.as_str().into(),
                    conversation_id.into(),
                    now.into(),
                    owner_replica.into(),
                    message_id.into(),
                    conversation_id.into(),
                    message.into(),
                    turn_id.as_str().into(),
                    now.into(),
                    conversation_id.into(),
                    turn_id.as_str().into(),
                    start.kind.into(),
                    start.data_json.as_str().into(),
                    now.into(),
                    conversation_id.into(),
                ];
                Statement::from_sql_and_values(backend, OPEN_SQLITE, values)
            };
            match self.numbered(statement).await {
                Ok(start_seq) => return Ok(OpenedTurn { turn_id, start_seq, start }),
                Err(err) if is_unique_violation(&err) => {
                    if self.running_turn(conversation_id).await?.is_some() {
                        return Err(StoreError::TurnRunning);
                    }
                    // Another replica took the event's number (Postgres): all or nothing was
                    // written, so number it again.
                }
                Err(err) => {
                    // On SQLite the turn's row may have been written before the failure: it
                    // must not keep the conversation busy.
                    let _ = self.fail_turn_quietly(&turn_id, &err.to_string()).await;
                    return Err(err.into());
                }
            }
        }
        Err(StoreError::Database("could not number an event; try again".into()))
    }

    /// Closes a turn: stores the model's `reply` (when there is one) and logs `end`, which ends
    /// the turn (see [`Store::end_turn`]), in one request; returns the event's number and the
    /// event as written.
    pub async fn close_turn(
        &self,
        conversation_id: &str,
        turn_id: &str,
        reply: &str,
        state: EndState,
        error: Option<&str>,
    ) -> StoreResult<(i64, EncodedEvent)> {
        if reply.is_empty() {
            return self.end_turn(conversation_id, turn_id, state, error).await;
        }
        let end = TurnEvent::end(state).encode();
        let backend = self.db.get_database_backend();
        for _ in 0..ATTEMPTS {
            let now = now_ms();
            let message_id = message_id(now);
            let statement = if backend == DbBackend::Postgres {
                let values: [sea_orm::Value; 7] = [
                    message_id.into(),
                    conversation_id.into(),
                    reply.into(),
                    turn_id.into(),
                    now.into(),
                    end.kind.into(),
                    end.data_json.as_str().into(),
                ];
                Statement::from_sql_and_values(backend, CLOSE_POSTGRES, values)
            } else {
                let values: [sea_orm::Value; 11] = [
                    message_id.into(),
                    conversation_id.into(),
                    reply.into(),
                    turn_id.into(),
                    now.into(),
                    conversation_id.into(),
                    turn_id.into(),
                    end.kind.into(),
                    end.data_json.as_str().into(),
                    now.into(),
                    conversation_id.into(),
                ];
                Statement::from_sql_and_values(backend, CLOSE_SQLITE, values)
            };
            match self.numbered(statement).await {
                Ok(seq) => {
                    if let Some(error) = error {
                        self.record_turn_error(turn_id, error).await?;
                    }
                    return Ok((seq, end));
                }
                // Postgres, another replica took the number: nothing was written, again.
                Err(err) if is_unique_violation(&err) && backend == DbBackend::Postgres => {}
                Err(err) => return Err(err.into()),
            }
        }
        Err(StoreError::Database("could not number an event; try again".into()))
    }

    /// Ends a running turn as failed without logging anything (its log never started).
    async fn fail_turn_quietly(&self, turn_id: &str, error: &str) -> StoreResult<()> {
        turns::Entity::update_many()
            .col_expr(turns::Column::State, Expr::value("failed"))
            .col_expr(turns::Column::EndedAtMs, Expr::value(now_ms()))
            .col_expr(turns::Column::Error, Expr::value(error.to_owned()))
            .filter(turns::Column::Id.eq(turn_id))
            .filter(turns::Column::State.eq("running"))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Logs two events of a turn in one statement, `first` numbered before `second`; returns
    /// their numbers.
    pub async fn append_event_pair(
        &self,
        conversation_id: &str,
        turn_id: &str,
        first: &EncodedEvent,
        second: &EncodedEvent,
    ) -> StoreResult<(i64, i64)> {
        let backend = self.db.get_database_backend();
        for _ in 0..ATTEMPTS {
            let now = now_ms();
            let mut values: Vec<sea_orm::Value> = vec![
                conversation_id.into(),
                turn_id.into(),
                now.into(),
                first.kind.into(),
                first.data_json.as_str().into(),
                second.kind.into(),
                second.data_json.as_str().into(),
            ];
            let sql = if backend == DbBackend::Postgres {
                PAIR_POSTGRES
            } else {
                values.push(conversation_id.into());
                PAIR_SQLITE
            };
            let statement = Statement::from_sql_and_values(backend, sql, values);
            match self.db.query_all_raw(statement).await {
                Ok(rows) => {
                    let mut seqs = rows.iter().map(|row| row.try_get_by_index::<i64>(0));
                    let (Some(a), Some(b)) = (seqs.next(), seqs.next()) else {
                        return Err(StoreError::Database("two events were not logged".into()));
                    };
                    let (a, b) = (a?, b?);
                    return Ok((a.min(b), a.max(b)));
                }
                // Another writer took a number (Postgres, two replicas): number them again.
                Err(err) if is_unique_violation(&err) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Err(StoreError::Database("could not number an event; try again".into()))
    }

    /// Runs a request whose last statement returns an event's number.
    async fn numbered(&self, statement: Statement) -> Result<i64, DbErr> {
        let row = self.db.query_one_raw(statement).await?.ok_or(DbErr::RecordNotInserted)?;
        row.try_get_by_index(0)
    }
}
