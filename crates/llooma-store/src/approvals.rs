//! Storage for the approval broker: pending tool calls, replica heartbeats, and the
//! notification source that carries changes between replicas (Postgres `LISTEN/NOTIFY`).
//!
//! Every state change is one conditional `UPDATE ... WHERE state = 'pending'`, and the notice
//! about it is sent with `pg_notify` inside the same transaction, so other replicas hear of a
//! change only once it is committed, and never of one that was rolled back. SQLite has no such
//! mechanism and needs none: one process owns the file, its waiters are woken in-process, and
//! the broker's periodic re-check covers everything else.

use llooma_approval_broker::port::{AnswerUpdate, ApprovalPort, Orphans};
use llooma_approval_broker::{CallState, Notice, PendingCall, PortError};
use sea_orm::sea_query::{Expr, Query};
use sea_orm::sqlx::postgres::PgListener;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbBackend, EntityTrait, QueryFilter,
    QueryOrder, QueryTrait, Set, Statement,
};
use tokio::sync::mpsc;

use crate::{Engine, Store, StoreError, StoreResult};

/// The Postgres channel approval notices travel on.
pub const APPROVAL_CHANNEL: &str = "llooma_approvals";

/// Notices buffered between the listener task and the broker.
const NOTICE_BUFFER: usize = 4096;

pub(crate) mod calls_entity {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "approval_calls")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub account_id: String,
        pub conversation_id: String,
        pub turn_id: String,
        pub server_id: String,
        pub server_label: String,
        pub server_address: String,
        pub tool_name: String,
        pub model_tool_name: String,
        pub tool_description: String,
        pub tool_definition_hash: String,
        pub tool_hints_json: Option<String>,
        pub question_json: Option<String>,
        pub reply_json: Option<String>,
        pub arguments_json: String,
        pub arguments_sha256: String,
        pub created_at_ms: i64,
        pub deadline_ms: i64,
        pub state: String,
        pub answered_by: Option<String>,
        pub answered_at_ms: Option<i64>,
        pub remember: bool,
        pub reason: Option<String>,
        pub owner_replica: String,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub(crate) mod replicas_entity {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "replicas")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub started_at_ms: i64,
        pub heartbeat_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

use calls_entity as calls;
use replicas_entity as replicas;

/// Ids of the processes whose heartbeat is at or after `since_ms`.
pub(crate) async fn replicas_alive_since(store: &Store, since_ms: i64) -> StoreResult<Vec<String>> {
    Ok(replicas::Entity::find()
        .filter(replicas::Column::HeartbeatAtMs.gte(since_ms))
        .all(&store.db)
        .await?
        .into_iter()
        .map(|r| r.id)
        .collect())
}

const PENDING: &str = "pending";

/// The calls of a turn still waiting for an answer, or interrupted because their process went
/// away: a turn that is ended for them gives each an `interrupted` step.
pub(crate) async fn unsettled_calls_of_turn(
    store: &Store,
    turn_id: &str,
) -> StoreResult<Vec<calls::Model>> {
    Ok(calls::Entity::find()
        .filter(calls::Column::TurnId.eq(turn_id))
        .filter(calls::Column::State.is_in([PENDING, CallState::Interrupted.as_str()]))
        .order_by_asc(calls::Column::CreatedAtMs)
        .order_by_asc(calls::Column::Id)
        .all(&store.db)
        .await?)
}

fn from_model(model: calls::Model) -> StoreResult<PendingCall> {
    let state = CallState::parse(&model.state)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown call state {:?}", model.state)))?;
    Ok(PendingCall {
        id: model.id,
        account_id: model.account_id,
        conversation_id: model.conversation_id,
        turn_id: model.turn_id,
        server_id: model.server_id,
        server_label: model.server_label,
        server_address: model.server_address,
        tool_name: model.tool_name,
        model_tool_name: model.model_tool_name,
        tool_description: model.tool_description,
        tool_definition_hash: model.tool_definition_hash,
        tool_hints_json: model.tool_hints_json,
        question_json: model.question_json,
        reply_json: model.reply_json,
        arguments_json: model.arguments_json,
        arguments_sha256: model.arguments_sha256,
        created_at_ms: model.created_at_ms,
        deadline_ms: model.deadline_ms,
        state,
        answered_by: model.answered_by,
        answered_at_ms: model.answered_at_ms,
        remember: model.remember,
        reason: model.reason,
        owner_replica: model.owner_replica,
    })
}

fn to_active(call: &PendingCall) -> calls::ActiveModel {
    calls::ActiveModel {
        id: Set(call.id.clone()),
        account_id: Set(call.account_id.clone()),
        conversation_id: Set(call.conversation_id.clone()),
        turn_id: Set(call.turn_id.clone()),
        server_id: Set(call.server_id.clone()),
        server_label: Set(call.server_label.clone()),
        server_address: Set(call.server_address.clone()),
        tool_name: Set(call.tool_name.clone()),
        model_tool_name: Set(call.model_tool_name.clone()),
        tool_description: Set(call.tool_description.clone()),
        tool_definition_hash: Set(call.tool_definition_hash.clone()),
        tool_hints_json: Set(call.tool_hints_json.clone()),
        question_json: Set(call.question_json.clone()),
        reply_json: Set(call.reply_json.clone()),
        arguments_json: Set(call.arguments_json.clone()),
        arguments_sha256: Set(call.arguments_sha256.clone()),
        created_at_ms: Set(call.created_at_ms),
        deadline_ms: Set(call.deadline_ms),
        state: Set(call.state.as_str().to_owned()),
        answered_by: Set(call.answered_by.clone()),
        answered_at_ms: Set(call.answered_at_ms),
        remember: Set(call.remember),
        reason: Set(call.reason.clone()),
        owner_replica: Set(call.owner_replica.clone()),
    }
}

impl From<StoreError> for PortError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Unavailable(text) => PortError::Unavailable(text),
            StoreError::Corrupt(text) => PortError::Corrupt(text),
            other => PortError::Database(other.to_string()),
        }
    }
}

impl Store {
    /// Sends `notice` to every replica's listener when `conn` commits (Postgres only).
    async fn notify<C: ConnectionTrait>(&self, conn: &C, notice: &Notice) -> StoreResult<()> {
        if self.engine == Engine::Postgres {
            // NOTIFY takes no bind parameters; pg_notify does.
            conn.execute_raw(Statement::from_sql_and_values(
                DbBackend::Postgres,
                "SELECT pg_notify($1, $2)",
                [APPROVAL_CHANNEL.into(), notice.to_payload().into()],
            ))
            .await?;
        }
        Ok(())
    }

    /// Sets every pending row matching `filter` to `state` with one conditional statement
    /// (`RETURNING` the rows it changed), and announces each of them. Returns the changes.
    async fn settle<C: ConnectionTrait>(
        &self,
        conn: &C,
        filter: sea_orm::Condition,
        state: CallState,
        at_ms: i64,
        reason: Option<&str>,
        origin: &str,
    ) -> StoreResult<Vec<Notice>> {
        let mut update = calls::Entity::update_many()
            .col_expr(calls::Column::State, Expr::value(state.as_str()))
            .col_expr(calls::Column::AnsweredAtMs, Expr::value(at_ms))
            .filter(calls::Column::State.eq(PENDING))
            .filter(filter);
        if let Some(reason) = reason {
            update = update.col_expr(calls::Column::Reason, Expr::value(reason));
        }
        let changed = update.exec_with_returning(conn).await?;
        let mut notices = Vec::with_capacity(changed.len());
        for row in changed {
            let notice = Notice {
                call_id: row.id,
                account_id: row.account_id,
                state,
                origin: origin.into(),
            };
            self.notify(conn, &notice).await?;
            notices.push(notice);
        }
        Ok(notices)
    }

    async fn insert_call_row(&self, call: &PendingCall) -> StoreResult<()> {
        if let Some(inline) = &self.inline {
            // One statement, on the calling thread; SQLite has no notices to send.
            let statement = calls::Entity::insert(to_active(call)).build(DbBackend::Sqlite);
            inline.run(|conn| crate::inline_orm::execute(conn, &statement)).await?;
            return Ok(());
        }
        let (_held, txn) = self.begin().await?;
        to_active(call).insert(&txn).await?;
        if call.state == CallState::Pending {
            let notice = Notice {
                call_id: call.id.clone(),
                account_id: call.account_id.clone(),
                state: CallState::Pending,
                origin: call.owner_replica.clone(),
            };
            self.notify(&txn, &notice).await?;
        }
        txn.commit().await?;
        Ok(())
    }

    /// One stored call, whatever its state.
    pub async fn approval_call(&self, call_id: &str) -> StoreResult<Option<PendingCall>> {
        self.find_one(calls::Entity::find_by_id(call_id.to_owned()))
            .await?
            .map(from_model)
            .transpose()
    }

    /// The account's pending calls, oldest first.
    pub async fn pending_approval_calls(&self, account_id: &str) -> StoreResult<Vec<PendingCall>> {
        let query = calls::Entity::find()
            .filter(calls::Column::AccountId.eq(account_id))
            .filter(calls::Column::State.eq(PENDING))
            .order_by_asc(calls::Column::CreatedAtMs)
            .order_by_asc(calls::Column::Id);
        self.find_all(query).await?.into_iter().map(from_model).collect()
    }

    async fn answer_call_row(&self, update: AnswerUpdate<'_>) -> StoreResult<bool> {
        // The whole race is this statement: whoever changes the row from 'pending' won.
        let answer = calls::Entity::update_many()
            .col_expr(calls::Column::State, Expr::value(update.state.as_str()))
            .col_expr(calls::Column::AnsweredBy, Expr::value(update.by_session))
            .col_expr(calls::Column::AnsweredAtMs, Expr::value(update.at_ms))
            .col_expr(calls::Column::Remember, Expr::value(update.remember))
            .col_expr(calls::Column::ReplyJson, Expr::value(update.reply_json))
            .filter(calls::Column::Id.eq(update.call_id))
            .filter(calls::Column::AccountId.eq(update.account_id))
            .filter(calls::Column::State.eq(PENDING))
            .filter(calls::Column::DeadlineMs.gt(update.at_ms))
            .filter(if update.question {
                calls::Column::QuestionJson.is_not_null()
            } else {
                calls::Column::QuestionJson.is_null()
            });
        if let Some(inline) = &self.inline
            && !update.remember
        {
            // Nothing else to write and no notice to send on SQLite: the one statement, on the
            // calling thread. Through sea-orm's connection it was a transaction of three
            // hand-offs to another thread, and a write from a second connection, after which
            // the hot path's connection read its cached pages from the file again.
            let statement = answer.build(DbBackend::Sqlite);
            let changed = inline.run(|conn| crate::inline_orm::execute(conn, &statement)).await?;
            return Ok(changed == 1);
        }
        let (_held, txn) = self.begin().await?;
        let result = answer.exec(&txn).await?;
        if result.rows_affected != 1 {
            txn.rollback().await?;
            return Ok(false);
        }
        if update.remember {
            let row = calls::Entity::find_by_id(update.call_id.to_owned())
                .one(&txn)
                .await?
                .ok_or_else(|| StoreError::Corrupt("an answered call vanished".into()))?;
            crate::consent::insert_grant(
                &txn,
                crate::consent::NewGrant {
                    account_id: row.account_id,
                    server_address: row.server_address,
                    tool_name: row.tool_name,
                    tool_definition_hash: row.tool_definition_hash,
                    arguments_json: row.arguments_json,
                    arguments_sha256: row.arguments_sha256,
                    source_call_id: Some(row.id),
                },
                update.at_ms,
            )
            .await?;
        }
        let notice = Notice {
            call_id: update.call_id.to_owned(),
            account_id: update.account_id.to_owned(),
            state: update.state,
            origin: update.origin.to_owned(),
        };
        self.notify(&txn, &notice).await?;
        txn.commit().await?;
        Ok(true)
    }

    async fn expire_rows(
        &self,
        filter: sea_orm::Condition,
        at_ms: i64,
        origin: &str,
    ) -> StoreResult<Vec<Notice>> {
        let (_held, txn) = self.begin().await?;
        let filter = filter.add(calls::Column::DeadlineMs.lte(at_ms));
        let notices = self.settle(&txn, filter, CallState::Expired, at_ms, None, origin).await?;
        txn.commit().await?;
        Ok(notices)
    }

    async fn interrupt_rows(
        &self,
        which: Orphans<'_>,
        at_ms: i64,
        reason: &str,
        origin: &str,
    ) -> StoreResult<Vec<Notice>> {
        let (_held, txn) = self.begin().await?;
        let filter = match which {
            Orphans::NotAlive { me, alive_since_ms } => {
                // A subquery, not a read followed by a write: on SQLite a deferred transaction
                // that reads and then writes fails at once if another connection wrote between.
                let alive = Query::select()
                    .column(replicas::Column::Id)
                    .from(replicas::Entity)
                    .and_where(replicas::Column::HeartbeatAtMs.gte(alive_since_ms))
                    .to_owned();
                sea_orm::Condition::all()
                    .add(calls::Column::OwnerReplica.ne(me))
                    .add(calls::Column::OwnerReplica.not_in_subquery(alive))
            }
            Orphans::AllExcept { me } => {
                sea_orm::Condition::all().add(calls::Column::OwnerReplica.ne(me))
            }
            Orphans::OwnedBy { owners } => {
                if owners.is_empty() {
                    return Ok(Vec::new());
                }
                sea_orm::Condition::all()
                    .add(calls::Column::OwnerReplica.is_in(owners.iter().cloned()))
            }
        };
        let notices =
            self.settle(&txn, filter, CallState::Interrupted, at_ms, Some(reason), origin).await?;
        txn.commit().await?;
        Ok(notices)
    }

    async fn write_heartbeat(&self, replica_id: &str, at_ms: i64) -> StoreResult<()> {
        let result = replicas::Entity::update_many()
            .col_expr(replicas::Column::HeartbeatAtMs, Expr::value(at_ms))
            .filter(replicas::Column::Id.eq(replica_id))
            .exec(&self.db)
            .await?;
        if result.rows_affected == 0 {
            // First beat of this process. Replica ids are fresh per start, so nobody else
            // inserts this one concurrently.
            replicas::ActiveModel {
                id: Set(replica_id.to_owned()),
                started_at_ms: Set(at_ms),
                heartbeat_at_ms: Set(at_ms),
            }
            .insert(&self.db)
            .await?;
        }
        Ok(())
    }

    async fn clear_reply(&self, call_id: &str) -> StoreResult<()> {
        calls::Entity::update_many()
            .col_expr(calls::Column::ReplyJson, Expr::value(None::<String>))
            .filter(calls::Column::Id.eq(call_id))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    async fn delete_replica(&self, replica_id: &str) -> StoreResult<()> {
        replicas::Entity::delete_by_id(replica_id.to_owned()).exec(&self.db).await?;
        Ok(())
    }

    /// A stream of approval notices from every replica (Postgres), or `None` (SQLite).
    ///
    /// The listener holds one pool connection for good and reconnects through the pool after a
    /// dropped connection; notices sent while it was disconnected are lost, which the broker's
    /// periodic re-check covers.
    pub async fn approval_notices(&self) -> StoreResult<Option<mpsc::Receiver<Notice>>> {
        if self.engine != Engine::Postgres {
            return Ok(None);
        }
        let pool = self.db.get_postgres_connection_pool();
        let mut listener = PgListener::connect_with(pool)
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        listener
            .listen(APPROVAL_CHANNEL)
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?;
        let (tx, rx) = mpsc::channel(NOTICE_BUFFER);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tx.closed() => return,
                    received = listener.recv() => match received {
                        Ok(notification) => {
                            let Some(notice) = Notice::from_payload(notification.payload()) else {
                                tracing::warn!("ignored a malformed approval notice");
                                continue;
                            };
                            if tx.send(notice).await.is_err() {
                                return;
                            }
                        }
                        Err(err) => {
                            // The pool is closed (the store shut down) or reconnecting keeps
                            // failing; back off instead of spinning.
                            tracing::warn!(error = %err, "approval notice listener failed");
                            if tx.is_closed() {
                                return;
                            }
                            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                        }
                    },
                }
            }
        });
        Ok(Some(rx))
    }
}

fn by_id(call_id: &str) -> sea_orm::Condition {
    sea_orm::Condition::all().add(calls::Column::Id.eq(call_id))
}

impl ApprovalPort for Store {
    async fn insert_call(&self, call: &PendingCall) -> Result<(), PortError> {
        Ok(self.insert_call_row(call).await?)
    }

    async fn call_by_id(&self, call_id: &str) -> Result<Option<PendingCall>, PortError> {
        Ok(self.approval_call(call_id).await?)
    }

    async fn pending_for_account(&self, account_id: &str) -> Result<Vec<PendingCall>, PortError> {
        Ok(self.pending_approval_calls(account_id).await?)
    }

    async fn answer_call(&self, update: AnswerUpdate<'_>) -> Result<bool, PortError> {
        Ok(self.answer_call_row(update).await?)
    }

    async fn expire_call(
        &self,
        call_id: &str,
        at_ms: i64,
        origin: &str,
    ) -> Result<bool, PortError> {
        Ok(!self.expire_rows(by_id(call_id), at_ms, origin).await?.is_empty())
    }

    async fn expire_overdue(&self, at_ms: i64, origin: &str) -> Result<Vec<Notice>, PortError> {
        Ok(self.expire_rows(sea_orm::Condition::all(), at_ms, origin).await?)
    }

    async fn interrupt_call(
        &self,
        call_id: &str,
        at_ms: i64,
        reason: &str,
        origin: &str,
    ) -> Result<bool, PortError> {
        let (_held, txn) = self.begin().await?;
        let notices = self
            .settle(&txn, by_id(call_id), CallState::Interrupted, at_ms, Some(reason), origin)
            .await?;
        txn.commit().await.map_err(StoreError::from)?;
        Ok(!notices.is_empty())
    }

    async fn interrupt_orphans(
        &self,
        which: Orphans<'_>,
        at_ms: i64,
        reason: &str,
        origin: &str,
    ) -> Result<Vec<Notice>, PortError> {
        Ok(self.interrupt_rows(which, at_ms, reason, origin).await?)
    }

    async fn heartbeat(&self, replica_id: &str, at_ms: i64) -> Result<(), PortError> {
        Ok(self.write_heartbeat(replica_id, at_ms).await?)
    }

    async fn forget_reply(&self, call_id: &str) -> Result<(), PortError> {
        Ok(self.clear_reply(call_id).await?)
    }

    async fn retire_replica(&self, replica_id: &str) -> Result<(), PortError> {
        Ok(self.delete_replica(replica_id).await?)
    }

    async fn notices(&self) -> Result<Option<mpsc::Receiver<Notice>>, PortError> {
        Ok(self.approval_notices().await?)
    }
}
