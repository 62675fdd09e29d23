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

impl Columns for rusqlite::Row<'_> {
    fn text(&self, column: &str) -> StoreResult<Option<String>> {
        self.get(column).map_err(|e| column_error(column, &e))
    }
    fn int(&self, column: &str) -> StoreResult<Option<i64>> {
        self.get(column).map_err(|e| column_error(column, &e))
    }
    fn flag(&self, column: &str) -> StoreResult<Option<bool>> {
        self.get(column).map_err(|e| column_error(column, &e))
    }
}

fn column_error(column: &str, err: &rusqlite::Error) -> StoreError {
    StoreError::Corrupt(format!("the column {column} cannot be read: {err}"))
}
