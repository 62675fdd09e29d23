//! A row read by column name, whichever connection it came from: sea-orm's (Postgres) or the
//! hot path's own SQLite connection ([`crate::inline`]). The queries of the hot path are
//! written once and read once, through this.

use std::cell::Cell;
use std::sync::OnceLock;

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

/// The column names of one query of the inline SQLite connection, read from SQLite on its
/// first row and kept: a call site's SQL is a constant, so its columns never change. Reading
/// them for every row (`column_names`, each name asked of SQLite and checked as UTF-8) repeated
/// the same work on every row of every turn.
pub(crate) struct ColumnNames(OnceLock<Box<[Box<str>]>>);

impl ColumnNames {
    pub(crate) const fn new() -> Self {
        ColumnNames(OnceLock::new())
    }
}

/// A row of the inline SQLite connection, read by column name. rusqlite finds a column by name
/// by asking SQLite for each column's name in turn, so a wide row read by name asks for the
/// same names over and over. Here the names are kept per query ([`ColumnNames`]) and a name is
/// looked for first after the column read last, since a query's columns are mostly read in
/// their order (a search from the first column each time walks past every column read before).
pub(crate) struct SqliteRow<'r, 's> {
    row: &'r rusqlite::Row<'s>,
    names: &'r [Box<str>],
    next: Cell<usize>,
}

impl<'r, 's> SqliteRow<'r, 's> {
    /// `row`, whose query's names `names` holds (or will hold, read from this first row).
    pub(crate) fn new(row: &'r rusqlite::Row<'s>, names: &'r ColumnNames) -> Self {
        let statement: &'r rusqlite::Statement<'s> = row.as_ref();
        let names =
            names.0.get_or_init(|| statement.column_names().into_iter().map(Box::from).collect());
        debug_assert_eq!(
            names.len(),
            statement.column_count(),
            "a ColumnNames was used for two queries"
        );
        SqliteRow { row, names, next: Cell::new(0) }
    }

    fn get<T: rusqlite::types::FromSql>(&self, column: &str) -> StoreResult<T> {
        let count = self.names.len();
        let from = self.next.get();
        let index = (from..count)
            .chain(0..from)
            .find(|&i| &*self.names[i] == column)
            .ok_or_else(|| StoreError::Corrupt(format!("the query has no column {column}")))?;
        self.next.set(index + 1);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_found_by_name_in_any_order_and_a_missing_one_is_an_error() {
        static NAMES: ColumnNames = ColumnNames::new();
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let mut statement = conn.prepare("SELECT 'a' AS one, 2 AS two, 1 AS three").unwrap();
        for _ in 0..2 {
            let mut rows = statement.query([]).unwrap();
            let row = SqliteRow::new(rows.next().unwrap().unwrap(), &NAMES);
            assert_eq!(row.int("three").unwrap(), Some(1));
            assert_eq!(row.text("one").unwrap().as_deref(), Some("a"));
            assert_eq!(row.int("two").unwrap(), Some(2));
            assert_eq!(row.int("three").unwrap(), Some(1));
            assert!(matches!(row.int("four"), Err(StoreError::Corrupt(_))));
            assert_eq!(row.text("one").unwrap().as_deref(), Some("a"));
        }
    }
}
