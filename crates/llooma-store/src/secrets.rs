//! The list of every encrypted column, and re-encrypting all of them at once when the instance
//! secret is rotated.
//!
//! Invariant: a column that holds a vault ciphertext is listed in [`ENCRYPTED_COLUMNS`]; a
//! column missing from the list would be left under the old secret by a rotation (the rotation
//! test in `llooma-e2e` covers every listed column).

use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, Statement};

use crate::entities::instance_state;
use crate::{Store, StoreError, StoreResult, placeholder};

/// A column that holds vault ciphertexts, bound to (table, column, row id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncryptedColumn {
    pub table: &'static str,
    pub column: &'static str,
    pub id_column: &'static str,
}

/// Every encrypted column in the schema.
pub const ENCRYPTED_COLUMNS: &[EncryptedColumn] = &[
    EncryptedColumn { table: "providers", column: "api_key_ciphertext", id_column: "id" },
    EncryptedColumn { table: "mcp_servers", column: "token_ciphertext", id_column: "id" },
    EncryptedColumn { table: "bot_integrations", column: "api_key_ciphertext", id_column: "id" },
];

impl Store {
    /// Re-encrypts every stored secret and the canary in one transaction: either all of them are
    /// under the new secret afterwards, or none is. `reencrypt` maps (column, row id, old
    /// ciphertext) to the new ciphertext. Returns how many values were rewritten.
    pub async fn reencrypt_all<F, E>(&self, new_canary: &str, reencrypt: F) -> StoreResult<usize>
    where
        F: Fn(&EncryptedColumn, &str, &str) -> Result<String, E>,
        E: std::fmt::Display,
    {
        let backend = self.backend();
        let (_held, txn) = self.begin().await?;
        let mut count = 0;
        for column in ENCRYPTED_COLUMNS {
            let select = format!(
                "SELECT {id}, {col} FROM {table} WHERE {col} IS NOT NULL",
                id = column.id_column,
                col = column.column,
                table = column.table
            );
            let rows = txn.query_all_raw(Statement::from_string(backend, select)).await?;
            for row in rows {
                let id: String = row.try_get_by_index(0)?;
                let old: String = row.try_get_by_index(1)?;
                let new = reencrypt(column, &id, &old).map_err(|e| {
                    StoreError::Corrupt(format!("{}.{} row {id}: {e}", column.table, column.column))
                })?;
                let update = format!(
                    "UPDATE {table} SET {col} = {p1} WHERE {id} = {p2}",
                    table = column.table,
                    col = column.column,
                    id = column.id_column,
                    p1 = placeholder(backend, 1),
                    p2 = placeholder(backend, 2),
                );
                txn.execute_raw(Statement::from_sql_and_values(
                    backend,
                    update,
                    [new.into(), id.into()],
                ))
                .await?;
                count += 1;
            }
        }
        instance_state::Entity::update_many()
            .col_expr(instance_state::Column::VaultCanary, Expr::value(new_canary))
            .filter(instance_state::Column::Id.eq(1))
            .exec(&txn)
            .await?;
        txn.commit().await?;
        Ok(count)
    }
}
