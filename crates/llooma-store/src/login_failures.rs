//! Failed sign-ins, counted per account name and per client address, for throttling. Kept in the
//! database so every replica sees the same count.

use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, Set};

use crate::entities::login_failures;
use crate::{Store, StoreResult};

/// What a failure is counted against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureScope {
    /// The account name typed, whether or not such an account exists.
    Account,
    /// The client address the attempt came from.
    Address,
}

impl FailureScope {
    fn as_str(self) -> &'static str {
        match self {
            FailureScope::Account => "account",
            FailureScope::Address => "address",
        }
    }
}

impl Store {
    /// Records an attempt as a failure and returns its id (a sign-in records first and forgets
    /// the row on success, so parallel attempts all count).
    pub async fn record_login_failure(
        &self,
        scope: FailureScope,
        subject: &str,
        now_ms: i64,
    ) -> StoreResult<String> {
        let id = uuid::Uuid::new_v4().to_string();
        login_failures::ActiveModel {
            id: Set(id.clone()),
            scope: Set(scope.as_str().to_owned()),
            subject: Set(subject.to_owned()),
            at_ms: Set(now_ms),
        }
        .insert(&self.db)
        .await?;
        Ok(id)
    }

    /// Forgets one recorded attempt (it turned out to be a successful sign-in).
    pub async fn forget_login_attempt(&self, id: &str) -> StoreResult<()> {
        login_failures::Entity::delete_by_id(id.to_owned()).exec(&self.db).await?;
        Ok(())
    }

    /// Failures recorded at or after `since_ms`.
    pub async fn count_login_failures(
        &self,
        scope: FailureScope,
        subject: &str,
        since_ms: i64,
    ) -> StoreResult<u64> {
        Ok(login_failures::Entity::find()
            .filter(login_failures::Column::Scope.eq(scope.as_str()))
            .filter(login_failures::Column::Subject.eq(subject))
            .filter(login_failures::Column::AtMs.gte(since_ms))
            .count(&self.db)
            .await?)
    }

    /// The oldest failure still inside the window, to tell a person when to try again.
    pub async fn oldest_login_failure(
        &self,
        scope: FailureScope,
        subject: &str,
        since_ms: i64,
    ) -> StoreResult<Option<i64>> {
        use sea_orm::QueryOrder;
        Ok(login_failures::Entity::find()
            .filter(login_failures::Column::Scope.eq(scope.as_str()))
            .filter(login_failures::Column::Subject.eq(subject))
            .filter(login_failures::Column::AtMs.gte(since_ms))
            .order_by_asc(login_failures::Column::AtMs)
            .one(&self.db)
            .await?
            .map(|row| row.at_ms))
    }

    /// Forgets an account name's failures after a successful sign-in.
    pub async fn clear_login_failures(
        &self,
        scope: FailureScope,
        subject: &str,
    ) -> StoreResult<()> {
        login_failures::Entity::delete_many()
            .filter(login_failures::Column::Scope.eq(scope.as_str()))
            .filter(login_failures::Column::Subject.eq(subject))
            .exec(&self.db)
            .await?;
        Ok(())
    }

    /// Drops failures older than the window; run now and then.
    pub async fn purge_login_failures(&self, before_ms: i64) -> StoreResult<u64> {
        let result = login_failures::Entity::delete_many()
            .filter(login_failures::Column::AtMs.lt(before_ms))
            .exec(&self.db)
            .await?;
        Ok(result.rows_affected)
    }
}
