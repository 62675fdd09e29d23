//! The writes that open and close a conversation's turn, each sent to the database as one
//! request: opening is the turn's row, the person's message and the `start` event; closing is
//! the reply and the `end` event. They used to be five statements; each statement is a round
//! trip (on SQLite two hand-offs to sqlx's worker thread and back), and a turn's cost was
//! mostly those.
//!
//! SQLite runs them in one transaction on the hot path's own connection ([`crate::inline`]);
//! Postgres gets one statement of common table expressions. Either way it is all or nothing.

use sea_orm::{ConnectionTrait, DbErr, Statement};

use llooma_types::{EncodedEvent, EndState, TurnEnded, TurnEvent, TurnStarted};

use crate::{Store, StoreError, StoreResult, UsageRow, inline, is_unique_violation, now_ms};

/// Numbering an event again after another replica took its number (Postgres), at most this
/// often.
pub(crate) const APPEND_ATTEMPTS: usize = 5;

/// A new message's id: its time first, so ids sort by time, then a UUID v7, which this process
/// hands out in increasing order, so that messages written within the same millisecond (a
/// person's message and a fast model's reply) still sort in the order they were written.
pub(crate) fn message_id(now_ms: i64) -> String {
    format!("{now_ms:015}-{}", uuid::Uuid::now_v7().simple())
}

/// An event numbered after the conversation's last and written, in one statement (no
/// read-then-write); the database gives back its number.
/// SQLite: one row of `VALUES` numbered by a subquery, and no `RETURNING`; the number is read
/// back by rowid ([`EVENT_SEQ_SQLITE`]). SQLite runs an `INSERT … SELECT` from the table it
/// inserts into, and a `RETURNING`, each through a temporary table of its own.
const EVENT_SQLITE: &str = "INSERT INTO turn_events \
    (conversation_id, seq, turn_id, kind, data_json, at_ms) \
    VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM turn_events WHERE conversation_id = ?1), \
    ?2, ?3, ?4, ?5)";
const EVENT_SEQ_SQLITE: &str = "SELECT seq FROM turn_events WHERE rowid = ?";
pub(crate) const EVENT_POSTGRES: &str = "INSERT INTO turn_events \
    (conversation_id, seq, turn_id, kind, data_json, at_ms) \
    SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3, $4, $5 FROM turn_events \
    WHERE conversation_id = $1 RETURNING seq";

const TURN_SQLITE: &str = "INSERT INTO turns (id, conversation_id, state, started_at_ms, \
    owner_replica) VALUES (?, ?, 'running', ?, ?)";

const MESSAGE_SQLITE: &str = "INSERT INTO messages (id, conversation_id, role, content, turn_id, \
    created_at_ms) VALUES (?, ?, ?, ?, ?, ?)";

pub(crate) const TURN_ERROR_SQLITE: &str = "UPDATE turns SET error = ? WHERE id = ?";

const OPEN_POSTGRES: &str = "WITH turn AS (INSERT INTO turns (id, conversation_id, state, \
    started_at_ms, owner_replica) VALUES ($1, $2, 'running', $3, $4) RETURNING id), \
    message AS (INSERT INTO messages (id, conversation_id, role, content, turn_id, \
    created_at_ms) SELECT $5, $2, 'user', $6, turn.id, $3 FROM turn) \
    INSERT INTO turn_events (conversation_id, seq, turn_id, kind, data_json, at_ms) \
    SELECT $2, COALESCE(MAX(seq), 0) + 1, $1, $7, $8, $3 FROM turn_events \
    WHERE conversation_id = $2 RETURNING seq";

/// Closing on Postgres: the reply, and the turn's last events then `end` numbered in order after
/// the rest, in one statement; `{rows}` is `(1, $6, $7), (2, $8, $9), …`, one per event.
const CLOSE_POSTGRES: &str = "WITH message AS (INSERT INTO messages (id, conversation_id, role, \
    content, turn_id, created_at_ms) VALUES ($1, $2, 'assistant', $3, $4, $5)) \
    INSERT INTO turn_events (conversation_id, seq, turn_id, kind, data_json, at_ms) \
    SELECT $2, last.seq + v.column1, $4, v.column2, v.column3, $5 \
    FROM (VALUES {rows}) AS v, \
    (SELECT COALESCE(MAX(seq), 0) AS seq FROM turn_events WHERE conversation_id = $2) AS last \
    ORDER BY v.column1 RETURNING seq";

/// Two events of a turn logged together, numbered one after the other.
const PAIR_POSTGRES: &str = "INSERT INTO turn_events \
    (conversation_id, seq, turn_id, kind, data_json, at_ms) \
    SELECT $1, last.seq + v.column1, $2, v.column2, v.column3, $3 \
    FROM (VALUES (1, $4, $5), (2, $6, $7)) AS v, \
    (SELECT COALESCE(MAX(seq), 0) AS seq FROM turn_events WHERE conversation_id = $1) AS last \
    ORDER BY v.column1 RETURNING seq";

/// A turn just closed: the numbers of the events logged before `end` (those given, in order),
/// and `end` as numbered and written.
#[derive(Debug)]
pub struct ClosedTurn {
    pub before_seqs: Vec<i64>,
    pub end_seq: i64,
    pub end: EncodedEvent,
}

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
        let opened =
            |start_seq| OpenedTurn { turn_id: turn_id.clone(), start_seq, start: start.clone() };
        if let Some(inline) = &self.inline {
            let written = inline
                .write(|txn| {
                    let now = now_ms();
                    txn.prepare_cached(TURN_SQLITE)?.execute((
                        &turn_id,
                        conversation_id,
                        now,
                        owner_replica,
                    ))?;
                    let message_id = message_id(now);
                    txn.prepare_cached(MESSAGE_SQLITE)?.execute((
                        message_id,
                        conversation_id,
                        "user",
                        message,
                        &turn_id,
                        now,
                    ))?;
                    Ok(insert_event(txn, conversation_id, &turn_id, &start, now)?)
                })
                .await;
            return match written {
                Ok(start_seq) => Ok(opened(start_seq)),
                Err(err) if inline::is_unique_violation(&err) => Err(StoreError::TurnRunning),
                Err(err) => Err(err.into()),
            };
        }
        let backend = self.backend();
        for _ in 0..APPEND_ATTEMPTS {
            let now = now_ms();
            let values: [sea_orm::Value; 8] = [
                turn_id.as_str().into(),
                conversation_id.into(),
                now.into(),
                owner_replica.into(),
                message_id(now).into(),
                message.into(),
                start.kind.into(),
                start.data_json.as_str().into(),
            ];
            let statement = Statement::from_sql_and_values(backend, OPEN_POSTGRES, values);
            match self.numbered(statement).await {
                Ok(start_seq) => return Ok(opened(start_seq)),
                Err(err) if is_unique_violation(&err) => {
                    if self.running_turn(conversation_id).await?.is_some() {
                        return Err(StoreError::TurnRunning);
                    }
                    // Another replica took the event's number: nothing was written, so number
                    // it again.
                }
                Err(err) => return Err(err.into()),
            }
        }
        Err(StoreError::Database("could not number an event; try again".into()))
    }

    /// Closes a turn: logs `before` (the turn's last events not written yet, in order), stores
    /// the model's `reply` (when there is one) and logs `end`, which ends the turn (see
    /// [`Store::end_turn`]), in one request (SQLite: one transaction; Postgres: one statement);
    /// returns the events' numbers and `end` as written.
    pub async fn close_turn(
        &self,
        conversation_id: &str,
        turn_id: &str,
        before: &[EncodedEvent],
        reply: &str,
        state: EndState,
        error: Option<&str>,
    ) -> StoreResult<ClosedTurn> {
        let ended = TurnEnded { state, context: None };
        self.close_turn_counted(conversation_id, turn_id, before, reply, ended, error, None).await
    }

    /// [`Store::close_turn`], adding what the turn's model requests used (`usage`, see
    /// [`Store::add_usage`]) in the same write on SQLite: counted by the time `end` is seen,
    /// and without a commit of its own on the hot path.
    #[expect(clippy::too_many_arguments, reason = "close_turn's, and what the turn used")]
    pub async fn close_turn_counted(
        &self,
        conversation_id: &str,
        turn_id: &str,
        before: &[EncodedEvent],
        reply: &str,
        ended: TurnEnded,
        error: Option<&str>,
        usage: Option<&UsageRow>,
    ) -> StoreResult<ClosedTurn> {
        let state = ended.state;
        if let Some(usage) = usage
            && (reply.is_empty() || self.inline.is_none())
        {
            self.add_usage(usage).await?;
        }
        if reply.is_empty() {
            let before_seqs = self.append_events(conversation_id, turn_id, before).await?;
            let (end_seq, end) = self.end_turn(conversation_id, turn_id, state, error).await?;
            return Ok(ClosedTurn { before_seqs, end_seq, end });
        }
        let counted = usage.map(|usage| {
            let (sql, values) = crate::usage::add_usage_statement(usage);
            Statement::from_sql_and_values(sea_orm::DbBackend::Sqlite, sql, values)
        });
        let end = TurnEvent::End(ended).encode();
        if let Some(inline) = &self.inline {
            let (before_seqs, end_seq) = inline
                .write(|txn| {
                    let now = now_ms();
                    let before_seqs = before
                        .iter()
                        .map(|event| insert_event(txn, conversation_id, turn_id, event, now))
                        .collect::<Result<Vec<_>, _>>()?;
                    txn.prepare_cached(MESSAGE_SQLITE)?.execute((
                        message_id(now),
                        conversation_id,
                        "assistant",
                        reply,
                        turn_id,
                        now,
                    ))?;
                    let seq = insert_event(txn, conversation_id, turn_id, &end, now)?;
                    if let Some(error) = error {
                        txn.prepare_cached(TURN_ERROR_SQLITE)?.execute((error, turn_id))?;
                    }
                    if let Some(counted) = &counted {
                        crate::inline_orm::execute(txn, counted)?;
                    }
                    Ok((before_seqs, seq))
                })
                .await?;
            return Ok(ClosedTurn { before_seqs, end_seq, end });
        }
        let backend = self.backend();
        let events: Vec<&EncodedEvent> = before.iter().chain([&end]).collect();
        let rows: Vec<String> = (0..events.len())
            .map(|i| format!("({}, ${}, ${})", i + 1, 6 + 2 * i, 7 + 2 * i))
            .collect();
        let sql = CLOSE_POSTGRES.replace("{rows}", &rows.join(", "));
        for _ in 0..APPEND_ATTEMPTS {
            let now = now_ms();
            let mut values: Vec<sea_orm::Value> = vec![
                message_id(now).into(),
                conversation_id.into(),
                reply.into(),
                turn_id.into(),
                now.into(),
            ];
            for event in &events {
                values.extend([event.kind.into(), event.data_json.as_str().into()]);
            }
            let statement = Statement::from_sql_and_values(backend, &sql, values);
            match self.db.query_all_raw(statement).await {
                Ok(rows) => {
                    let mut seqs = rows
                        .iter()
                        .map(|row| row.try_get_by_index::<i64>(0))
                        .collect::<Result<Vec<_>, _>>()?;
                    seqs.sort_unstable();
                    let Some(end_seq) = seqs.pop().filter(|_| seqs.len() == before.len()) else {
                        return Err(StoreError::Database(
                            "a turn's last events were not logged".into(),
                        ));
                    };
                    if let Some(error) = error {
                        self.record_turn_error(turn_id, error).await?;
                    }
                    return Ok(ClosedTurn { before_seqs: seqs, end_seq, end });
                }
                // Another replica took a number: nothing was written, again.
                Err(err) if is_unique_violation(&err) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Err(StoreError::Database("could not number an event; try again".into()))
    }

    /// Logs a turn's `events` in order, two to a request; returns their numbers.
    pub async fn append_events(
        &self,
        conversation_id: &str,
        turn_id: &str,
        events: &[EncodedEvent],
    ) -> StoreResult<Vec<i64>> {
        let mut seqs = Vec::with_capacity(events.len());
        for chunk in events.chunks(2) {
            match chunk {
                [first, second] => {
                    let (a, b) =
                        self.append_event_pair(conversation_id, turn_id, first, second).await?;
                    seqs.extend([a, b]);
                }
                [one] => seqs.push(self.append_event(conversation_id, turn_id, one).await?),
                _ => {}
            }
        }
        Ok(seqs)
    }

    /// Logs two events of a turn in one request, `first` numbered before `second`; returns
    /// their numbers.
    pub async fn append_event_pair(
        &self,
        conversation_id: &str,
        turn_id: &str,
        first: &EncodedEvent,
        second: &EncodedEvent,
    ) -> StoreResult<(i64, i64)> {
        if let Some(inline) = &self.inline {
            return Ok(inline
                .write(|txn| {
                    let now = now_ms();
                    let a = insert_event(txn, conversation_id, turn_id, first, now)?;
                    let b = insert_event(txn, conversation_id, turn_id, second, now)?;
                    Ok((a, b))
                })
                .await?);
        }
        let backend = self.backend();
        for _ in 0..APPEND_ATTEMPTS {
            let values: [sea_orm::Value; 7] = [
                conversation_id.into(),
                turn_id.into(),
                now_ms().into(),
                first.kind.into(),
                first.data_json.as_str().into(),
                second.kind.into(),
                second.data_json.as_str().into(),
            ];
            let statement = Statement::from_sql_and_values(backend, PAIR_POSTGRES, values);
            match self.db.query_all_raw(statement).await {
                Ok(rows) => {
                    let mut seqs = rows.iter().map(|row| row.try_get_by_index::<i64>(0));
                    let (Some(a), Some(b)) = (seqs.next(), seqs.next()) else {
                        return Err(StoreError::Database("two events were not logged".into()));
                    };
                    let (a, b) = (a?, b?);
                    return Ok((a.min(b), a.max(b)));
                }
                // Another writer took a number (two replicas): number them again.
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

/// Numbers and writes `event` on the hot path's SQLite connection; returns its number.
pub(crate) fn insert_event(
    conn: &rusqlite::Connection,
    conversation_id: &str,
    turn_id: &str,
    event: &EncodedEvent,
    now: i64,
) -> rusqlite::Result<i64> {
    conn.prepare_cached(EVENT_SQLITE)?.execute((
        conversation_id,
        turn_id,
        event.kind,
        &event.data_json,
        now,
    ))?;
    conn.prepare_cached(EVENT_SEQ_SQLITE)?.query_row([conn.last_insert_rowid()], |row| row.get(0))
}
