//! A row read by column name, whichever connection it came from: sea-orm's (Postgres) or the
//! hot path's own SQLite connection ([`crate::inline`]). The queries of the hot path are
//! written once and read once, through this.

use crate::{StoreError, StoreResult};

pub(crate) trait Columns {
    fn text(&self, column: &str) -> StoreResult<Option<String>>;
    fn int(&self, column: &str) -> StoreResult<Option<i64>>;
    fn flag(&self, column: &str) -> StoreResult<Option<bool>>;

    fn required_text(&self, column: &str) -> StoreResult<String> {
        self.text(column)?.ok_or_else(|| empty(column))
    }
    fn required_int(&self, column: &str) -> StoreResult<i64> {
        self.int(column)?.ok_or_else(|| empty(column))
    }
    fn required_flag(&self, column: &str) -> StoreResult<bool> {
        self.flag(column)?.ok_or_else(|| empty(column))
    }
}

fn empty(column: &str) -> StoreError {
    StoreError::Corrupt(format!("the column {column} is empty"))
}

impl Columns for sea_orm::QueryResult {
    fn text(&self, column: &str) -> StoreResult<Option<String>> {
        Ok(self.try_get("", column)?)
    }
    fn int(&self, column: &str) -> StoreResult<Option<i64>> {
        Ok(self.try_get("", column)?)
    }
    fn flag(&self, column: &str) -> StoreResult<Option<bool>> {
        Ok(self.try_get("", column)?)
    }
}

/// A row of the inline SQLite connection, its columns' names read once. rusqlite finds a column
/// by name by asking SQLite for each column's name in turn: a turn's context (35 columns, read by
/// name) asked some 600 times, 3% of a plain turn's instructions.
pub(crate) struct SqliteRow<'r, 's> {
    row: &'r rusqlite::Row<'s>,
    names: Vec<&'r str>,
}

impl<'r, 's> SqliteRow<'r, 's> {
    pub(crate) fn new(row: &'r rusqlite::Row<'s>) -> Self {
        let statement: &'r rusqlite::Statement<'s> = row.as_ref();
        SqliteRow { row, names: statement.column_names() }
    }

    fn get<T: rusqlite::types::FromSql>(&self, column: &str) -> StoreResult<T> {
        let index = self
            .names
            .iter()
            .position(|name| *name == column)
            .ok_or_else(|| StoreError::Corrupt(format!("the query has no column {column}")))?;
        self.row.get(index).map_err(|e| column_error(column, &e))
    }
}

impl Columns for SqliteRow<'_, '_> {
    fn text(&self, column: &str) -> StoreResult<Option<String>> {
        self.get(column)
    }
    fn int(&self, column: &str) -> StoreResult<Option<i64>> {
        self.get(column)
    }
    fn flag(&self, column: &str) -> StoreResult<Option<bool>> {
        self.get(column)
    }
}

fn column_error(column: &str, err: &rusqlite::Error) -> StoreError {
    StoreError::Corrupt(format!("the column {column} cannot be read: {err}"))
}
