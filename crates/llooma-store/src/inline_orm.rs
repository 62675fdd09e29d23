//! sea-orm's queries, run on the hot path's own SQLite connection ([`crate::inline`]).
//!
//! A query is built by sea-orm for SQLite; here its SQL runs on the calling thread and each
//! row is read column by column as the entity declares the column (an `i64` as an integer, a
//! `bool` as a flag, text as text) into the entity's own model. So a repository's read is
//! written once, with sea-orm, and costs no thread hand-off on SQLite; Postgres runs the same
//! query through sea-orm.

use std::str::FromStr;

use rusqlite::Connection;
use rusqlite::types::Value as SqliteValue;
use sea_orm::sea_query::{ColumnType, Value};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, Statement, TryIntoModel};

use crate::StoreError;
use crate::inline::InlineError;

/// A statement's bound values as SQLite's.
fn parameters(statement: &Statement) -> Result<Vec<SqliteValue>, InlineError> {
    let Some(values) = &statement.values else {
        return Ok(Vec::new());
    };
    values.0.iter().map(parameter).collect()
}

fn parameter(value: &Value) -> Result<SqliteValue, InlineError> {
    let integer = |v: Option<i64>| v.map_or(SqliteValue::Null, SqliteValue::Integer);
    Ok(match value {
        Value::Bool(v) => integer(v.map(i64::from)),
        Value::TinyInt(v) => integer(v.map(i64::from)),
        Value::SmallInt(v) => integer(v.map(i64::from)),
        Value::Int(v) => integer(v.map(i64::from)),
        Value::BigInt(v) => integer(*v),
        Value::TinyUnsigned(v) => integer(v.map(i64::from)),
        Value::SmallUnsigned(v) => integer(v.map(i64::from)),
        Value::Unsigned(v) => integer(v.map(i64::from)),
        // A `LIMIT`, or an id: far below i64's end; one past it saturates.
        Value::BigUnsigned(v) => integer(v.map(|n| i64::try_from(n).unwrap_or(i64::MAX))),
        Value::String(v) => v.clone().map_or(SqliteValue::Null, SqliteValue::Text),
        Value::Bytes(v) => v.clone().map_or(SqliteValue::Null, SqliteValue::Blob),
        other => {
            return Err(InlineError::Store(StoreError::Database(format!(
                "a value of this kind is not stored by this server: {other:?}"
            ))));
        }
    })
}

/// Runs `statement` (sea-orm's, built for SQLite) and reads every row as `E`'s model.
pub(crate) fn entity_rows<E>(
    conn: &Connection,
    statement: &Statement,
) -> Result<Vec<E::Model>, InlineError>
where
    E: EntityTrait,
    E::ActiveModel: TryIntoModel<E::Model>,
{
    entity_rows_up_to::<E>(conn, statement, usize::MAX)
}

/// Runs `statement` as [`entity_rows`] does and reads only its first row, if any.
pub(crate) fn first_entity_row<E>(
    conn: &Connection,
    statement: &Statement,
) -> Result<Option<E::Model>, InlineError>
where
    E: EntityTrait,
    E::ActiveModel: TryIntoModel<E::Model>,
{
    Ok(entity_rows_up_to::<E>(conn, statement, 1)?.pop())
}

/// At most `limit` rows of `statement`, each as `E`'s model.
fn entity_rows_up_to<E>(
    conn: &Connection,
    statement: &Statement,
    limit: usize,
) -> Result<Vec<E::Model>, InlineError>
where
    E: EntityTrait,
    E::ActiveModel: TryIntoModel<E::Model>,
{
    let mut prepared = conn.prepare_cached(&statement.sql)?;
    let columns: Vec<(E::Column, ColumnType)> = prepared
        .column_names()
        .into_iter()
        .map(|name| {
            let column = E::Column::from_str(name).map_err(|_| {
                StoreError::Corrupt(format!("{} has no column {name}", E::default().table_name()))
            })?;
            Ok((column, column.def().get_column_type().clone()))
        })
        .collect::<Result<_, StoreError>>()?;
    let mut rows = prepared.query(rusqlite::params_from_iter(parameters(statement)?))?;
    let mut models = Vec::new();
    while models.len() < limit
        && let Some(row) = rows.next()?
    {
        let mut model = <E::ActiveModel as ActiveModelTrait>::default();
        for (i, (column, kind)) in columns.iter().enumerate() {
            model.try_set(*column, column_value(row, i, column, kind)?)?;
        }
        models.push(model.try_into_model()?);
    }
    Ok(models)
}

/// Runs `statement` (sea-orm's, built for SQLite) and returns how many rows it changed.
pub(crate) fn execute(conn: &Connection, statement: &Statement) -> Result<usize, InlineError> {
    let mut prepared = conn.prepare_cached(&statement.sql)?;
    Ok(prepared.execute(rusqlite::params_from_iter(parameters(statement)?))?)
}

/// Column `i` of `row`, as the entity declares it.
fn column_value(
    row: &rusqlite::Row<'_>,
    i: usize,
    column: &impl ColumnTrait,
    kind: &ColumnType,
) -> Result<Value, InlineError> {
    Ok(match kind {
        ColumnType::Boolean => Value::Bool(row.get(i)?),
        ColumnType::TinyInteger | ColumnType::SmallInteger | ColumnType::Integer => {
            Value::Int(row.get(i)?)
        }
        ColumnType::BigInteger => Value::BigInt(row.get(i)?),
        ColumnType::String(_) | ColumnType::Text | ColumnType::Char(_) => {
            Value::String(row.get(i)?)
        }
        ColumnType::Blob => Value::Bytes(row.get(i)?),
        other => {
            return Err(InlineError::Store(StoreError::Corrupt(format!(
                "the column {} has a type this server does not store: {other:?}",
                column.as_str()
            ))));
        }
    })
}

impl From<sea_orm::DbErr> for InlineError {
    fn from(err: sea_orm::DbErr) -> Self {
        InlineError::Store(err.into())
    }
}
