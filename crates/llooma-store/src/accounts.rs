//! Accounts, and the first-run rule: the first account registered becomes the administrator.

use llooma_types::Role;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};

use crate::entities::{accounts, instance_settings, instance_state, sessions};
use crate::{Store, StoreError, StoreResult, is_unique_violation, now_ms};

/// An account as stored.
#[derive(Clone, PartialEq, Eq)]
pub struct Account {
    pub id: String,
    pub username: String,
    pub display_name: String,
    pub role: Role,
    /// An argon2 PHC string.
    pub password_hash: String,
    pub created_at_ms: i64,
    pub password_changed_at_ms: i64,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("id", &self.id)
            .field("username", &self.username)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

/// What is needed to create an account. The password is already hashed.
#[derive(Clone)]
pub struct NewAccount {
    pub username: String,
    pub display_name: String,
    pub password_hash: String,
}

impl std::fmt::Debug for NewAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewAccount").field("username", &self.username).finish_non_exhaustive()
    }
}

/// How a registration ended.
#[derive(Debug)]
pub enum RegisterOutcome {
    /// The account exists; its role says whether it was the first one.
    Created(Account),
    /// The instance already has its administrator and registration is not open.
    Closed,
}

pub(crate) fn from_model(model: accounts::Model) -> StoreResult<Account> {
    let role = Role::parse(&model.role)
        .ok_or_else(|| StoreError::Corrupt(format!("unknown role {:?}", model.role)))?;
    Ok(Account {
        id: model.id,
        username: model.username,
        display_name: model.display_name,
        role,
        password_hash: model.password_hash,
        created_at_ms: model.created_at_ms,
        password_changed_at_ms: model.password_changed_at_ms,
    })
}

/// Claims the first-run slot. Exactly one caller ever sees `true`: the update is conditional, and
/// on Postgres a concurrent claimer waits on the row lock and then finds the slot taken.
async fn claim_setup<C: ConnectionTrait>(conn: &C) -> StoreResult<bool> {
    let result = instance_state::Entity::update_many()
        .col_expr(instance_state::Column::SetupComplete, Expr::value(true))
        .col_expr(instance_state::Column::UpdatedAtMs, Expr::value(now_ms()))
        .filter(instance_state::Column::Id.eq(1))
        .filter(instance_state::Column::SetupComplete.eq(false))
        .exec(conn)
        .await?;
    Ok(result.rows_affected == 1)
}

async fn insert_account<C: ConnectionTrait>(
    conn: &C,
    new: NewAccount,
    role: Role,
) -> StoreResult<Account> {
    let now = now_ms();
    let model = accounts::ActiveModel {
        id: Set(uuid::Uuid::new_v4().to_string()),
        username: Set(new.username),
        display_name: Set(new.display_name),
        password_hash: Set(new.password_hash),
        role: Set(role.as_str().to_owned()),
        created_at_ms: Set(now),
        password_changed_at_ms: Set(now),
    };
    match model.insert(conn).await {
        Ok(model) => from_model(model),
        Err(err) if is_unique_violation(&err) => Err(StoreError::UsernameTaken),
        Err(err) => Err(err.into()),
    }
}

impl Store {
    /// Registers an account from the sign-up form: the first one ever becomes the administrator;
    /// later ones are users, and only while administrators keep registration open.
    pub async fn register_account(&self, new: NewAccount) -> StoreResult<RegisterOutcome> {
        let (_held, txn) = self.begin().await?;
        let role = if claim_setup(&txn).await? {
            Role::Admin
        } else {
            let settings =
                instance_settings::Entity::find_by_id(1).one(&txn).await?.ok_or_else(|| {
                    StoreError::Corrupt("the instance_settings row is missing".into())
                })?;
            if !settings.registration_open {
                txn.rollback().await?;
                return Ok(RegisterOutcome::Closed);
            }
            Role::User
        };
        let account = insert_account(&txn, new, role).await?;
        txn.commit().await?;
        Ok(RegisterOutcome::Created(account))
    }

    /// Creates an administrator from the shell (`llooma admin create`), whatever the settings.
    pub async fn create_admin(&self, new: NewAccount) -> StoreResult<Account> {
        let (_held, txn) = self.begin().await?;
        claim_setup(&txn).await?;
        let account = insert_account(&txn, new, Role::Admin).await?;
        txn.commit().await?;
        Ok(account)
    }

    pub async fn account_by_username(&self, username: &str) -> StoreResult<Option<Account>> {
        accounts::Entity::find()
            .filter(accounts::Column::Username.eq(username))
            .one(&self.db)
            .await?
            .map(from_model)
            .transpose()
    }

    pub async fn account(&self, id: &str) -> StoreResult<Option<Account>> {
        accounts::Entity::find_by_id(id.to_owned()).one(&self.db).await?.map(from_model).transpose()
    }

    /// Every account, oldest first.
    pub async fn list_accounts(&self) -> StoreResult<Vec<Account>> {
        accounts::Entity::find()
            .order_by_asc(accounts::Column::CreatedAtMs)
            .all(&self.db)
            .await?
            .into_iter()
            .map(from_model)
            .collect()
    }

    /// Replaces the password hash and ends every session of the account, in one transaction.
    pub async fn change_password(&self, account_id: &str, password_hash: &str) -> StoreResult<()> {
        let (_held, txn) = self.begin().await?;
        let result = accounts::Entity::update_many()
            .col_expr(accounts::Column::PasswordHash, Expr::value(password_hash))
            .col_expr(accounts::Column::PasswordChangedAtMs, Expr::value(now_ms()))
            .filter(accounts::Column::Id.eq(account_id))
            .exec(&txn)
            .await?;
        if result.rows_affected != 1 {
            return Err(StoreError::NotFound);
        }
        sessions::Entity::delete_many()
            .filter(sessions::Column::AccountId.eq(account_id))
            .exec(&txn)
            .await?;
        txn.commit().await?;
        Ok(())
    }
}

/// Deletes an account unless it is the instance's last administrator, in one statement.
const DELETE_ACCOUNT: &str = "DELETE FROM accounts WHERE id = ? AND (role <> 'admin' OR \
    (SELECT COUNT(*) FROM accounts WHERE role = 'admin') > 1)";

/// What became of a request to delete an account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deleted {
    /// The account and everything of its are gone.
    Yes,
    /// It is the last administrator: nothing was deleted.
    LastAdministrator,
    NotFound,
}

impl Store {
    /// Deletes the account and, by the database's cascades, everything of its: sessions,
    /// conversations with their messages, turns and files, personas, MCP servers and their
    /// views, remembered consent, cards, bot integrations, usage and limits. Refused for the
    /// last administrator, so an instance always keeps one.
    pub async fn delete_account(&self, account_id: &str) -> StoreResult<Deleted> {
        use sea_orm::ConnectionTrait;
        let backend = self.db.get_database_backend();
        let statement = sea_orm::Statement::from_sql_and_values(
            backend,
            crate::numbered_placeholders(backend, DELETE_ACCOUNT),
            [account_id.into()],
        );
        if self.db.execute_raw(statement).await?.rows_affected() == 1 {
            return Ok(Deleted::Yes);
        }
        Ok(match self.account(account_id).await? {
            Some(_) => Deleted::LastAdministrator,
            None => Deleted::NotFound,
        })
    }

    /// The account's conversations with a turn running, on any replica.
    pub async fn running_conversations(&self, account_id: &str) -> StoreResult<Vec<String>> {
        use sea_orm::ConnectionTrait;
        let backend = self.db.get_database_backend();
        let sql = "SELECT DISTINCT c.id FROM conversations c JOIN turns t \
            ON t.conversation_id = c.id WHERE c.account_id = ? AND t.state = 'running'";
        let statement = sea_orm::Statement::from_sql_and_values(
            backend,
            crate::numbered_placeholders(backend, sql),
            [account_id.into()],
        );
        let rows = self.db.query_all_raw(statement).await?;
        rows.iter().map(|row| Ok(row.try_get_by_index(0)?)).collect()
    }
}
