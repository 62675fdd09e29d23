//! Sign-in sessions. The cookie carries a random token; only its SHA-256 is stored, so a copy of
//! the database does not let anyone sign in.

use std::sync::OnceLock;

use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DbBackend, EntityTrait, QueryFilter,
    Set, Statement,
};

use crate::Account;
use crate::columns::{ColumnNames, Columns, SqliteRow};
use crate::entities::{accounts, sessions};
use crate::{Store, StoreResult, numbered_placeholders};

/// A stored session.
#[derive(Clone, PartialEq, Eq)]
pub struct Session {
    pub token_hash: String,
    pub account_id: String,
    pub csrf_token: String,
    pub created_at_ms: i64,
    pub last_seen_at_ms: i64,
    /// The absolute end, whatever the activity.
    pub expires_at_ms: i64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("account_id", &self.account_id)
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

/// What is needed to open a session.
#[derive(Clone)]
pub struct NewSession {
    pub token_hash: String,
    pub account_id: String,
    pub csrf_token: String,
    pub now_ms: i64,
    pub expires_at_ms: i64,
    pub client_addr: Option<String>,
    pub user_agent: Option<String>,
}

impl std::fmt::Debug for NewSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewSession").field("account_id", &self.account_id).finish_non_exhaustive()
    }
}

/// A session and its account; the account's columns carry a prefix.
const SESSION_WITH_ACCOUNT: &str = "SELECT s.token_hash, s.account_id, s.csrf_token, \
    s.created_at_ms, s.last_seen_at_ms, s.expires_at_ms, a.id AS a_id, a.username AS a_username, \
    a.display_name AS a_display_name, a.password_hash AS a_password_hash, a.role AS a_role, \
    a.created_at_ms AS a_created_at_ms, a.password_changed_at_ms AS a_password_changed_at_ms \
    FROM sessions s JOIN accounts a ON a.id = s.account_id WHERE s.token_hash = ?";

fn session_and_account(row: &impl Columns) -> StoreResult<(Session, Account)> {
    let session = Session {
        token_hash: row.required_text("token_hash")?,
        account_id: row.required_text("account_id")?,
        csrf_token: row.required_text("csrf_token")?,
        created_at_ms: row.required_int("created_at_ms")?,
        last_seen_at_ms: row.required_int("last_seen_at_ms")?,
        expires_at_ms: row.required_int("expires_at_ms")?,
    };
    let account = crate::accounts::from_model(accounts::Model {
        id: row.required_text("a_id")?,
        username: row.required_text("a_username")?,
        display_name: row.required_text("a_display_name")?,
        password_hash: row.required_text("a_password_hash")?,
        role: row.required_text("a_role")?,
        created_at_ms: row.required_int("a_created_at_ms")?,
        password_changed_at_ms: row.required_int("a_password_changed_at_ms")?,
    })?;
    Ok((session, account))
}

fn from_model(model: sessions::Model) -> Session {
    Session {
        token_hash: model.token_hash,
        account_id: model.account_id,
        csrf_token: model.csrf_token,
        created_at_ms: model.created_at_ms,
        last_seen_at_ms: model.last_seen_at_ms,
        expires_at_ms: model.expires_at_ms,
    }
}

impl Store {
    pub async fn create_session(&self, new: NewSession) -> StoreResult<Session> {
        let model = sessions::ActiveModel {
            token_hash: Set(new.token_hash),
            account_id: Set(new.account_id),
            csrf_token: Set(new.csrf_token),
            created_at_ms: Set(new.now_ms),
            last_seen_at_ms: Set(new.now_ms),
            expires_at_ms: Set(new.expires_at_ms),
            client_addr: Set(new.client_addr),
            user_agent: Set(new.user_agent),
        };
        Ok(from_model(model.insert(&self.db).await?))
    }

    /// A session with its account, in one query (every signed-in request asks this first).
    /// `None` when either is gone.
    pub async fn session_with_account(
        &self,
        token_hash: &str,
    ) -> StoreResult<Option<(Session, Account)>> {
        if let Some(inline) = &self.inline {
            return Ok(inline
                .run(|conn| {
                    let mut statement = conn.prepare_cached(SESSION_WITH_ACCOUNT)?;
                    let mut rows = statement.query([token_hash])?;
                    Ok(match rows.next()? {
                        Some(row) => {
                            static NAMES: ColumnNames = ColumnNames::new();
                            Some(session_and_account(&SqliteRow::new(row, &NAMES))?)
                        }
                        None => None,
                    })
                })
                .await?);
        }
        // Postgres numbers its placeholders: the query is written so once.
        static POSTGRES: OnceLock<String> = OnceLock::new();
        let sql = POSTGRES
            .get_or_init(|| numbered_placeholders(DbBackend::Postgres, SESSION_WITH_ACCOUNT));
        let statement =
            Statement::from_sql_and_values(DbBackend::Postgres, sql, [token_hash.into()]);
        match self.db.query_one_raw(statement).await? {
            Some(row) => Ok(Some(session_and_account(&row)?)),
            None => Ok(None),
        }
    }

    /// Of `token_hashes`, those whose session still stands at `now_ms` (not removed, not past its
    /// absolute end, not idle for `idle_ms` or longer): one query, however many streams watch.
    pub async fn sessions_standing(
        &self,
        token_hashes: &[String],
        now_ms: i64,
        idle_ms: i64,
    ) -> StoreResult<std::collections::HashSet<String>> {
        let mut standing = std::collections::HashSet::new();
        // Bounded lists: a bind parameter per hash.
        for chunk in token_hashes.chunks(500) {
            let rows = sessions::Entity::find()
                .filter(sessions::Column::TokenHash.is_in(chunk.iter().cloned()))
                .filter(sessions::Column::ExpiresAtMs.gt(now_ms))
                .filter(sessions::Column::LastSeenAtMs.gt(now_ms.saturating_sub(idle_ms)))
                .all(&self.db)
                .await?;
            standing.extend(rows.into_iter().map(|m| m.token_hash));
        }
        Ok(standing)
    }

    /// Records activity on a session (moves its idle deadline).
    pub async fn touch_session(&self, token_hash: &str, now_ms: i64) -> StoreResult<()> {
        sessions::Entity::update_many()
            .col_expr(sessions::Column::LastSeenAtMs, Expr::value(now_ms))
            .filter(sessions::Column::TokenHash.eq(token_hash))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    pub async fn delete_session(&self, token_hash: &str) -> StoreResult<()> {
        sessions::Entity::delete_by_id(token_hash.to_owned()).exec(&self.db).await?;
        Ok(())
    }

    /// Removes sessions past their absolute end or idle for longer than `idle_ms`.
    pub async fn purge_expired_sessions(&self, now_ms: i64, idle_ms: i64) -> StoreResult<u64> {
        let result = sessions::Entity::delete_many()
            .filter(
                Condition::any()
                    .add(sessions::Column::ExpiresAtMs.lte(now_ms))
                    .add(sessions::Column::LastSeenAtMs.lte(now_ms - idle_ms)),
            )
            .exec(&self.db)
            .await?;
        Ok(result.rows_affected)
    }
}
