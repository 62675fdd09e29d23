//! An account's own end: deleting it with everything of its.

use llooma_store::Deleted;

use crate::{App, AppError};

impl App {
    /// Deletes the account and everything of its (the database's cascades, see
    /// `Store::delete_account`). Its running replies are stopped first, here or on the replica
    /// that runs them. Refused (`Conflict`, `last_admin`) for the instance's last
    /// administrator.
    pub async fn delete_account(&self, account_id: &str) -> Result<(), AppError> {
        for conversation_id in self.store.running_conversations(account_id).await? {
            if !self.turns.stop_here(&conversation_id) {
                self.store.request_stop(&conversation_id).await?;
            }
        }
        match self.store.delete_account(account_id).await? {
            Deleted::Yes => {
                tracing::info!(account = %account_id, "account deleted with everything of its");
                Ok(())
            }
            Deleted::LastAdministrator => Err(AppError::conflict(
                "last_admin",
                "This is the instance's only administrator account: make another account an \
                 administrator first (`llooma admin create` on the server), then delete this one.",
            )),
            Deleted::NotFound => Err(AppError::NotFound),
        }
    }
}
