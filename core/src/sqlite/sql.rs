//! The SQL text the store runs (the catalog and each table's statements) and the
//! mapping of SQLite's errors onto tablekit's.

use rusqlite::ErrorCode;

use crate::error::Error;

pub(super) const CREATE_CATALOG: &str = "CREATE TABLE IF NOT EXISTS tablekit_tables (
    name_key TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL
) WITHOUT ROWID";
pub(super) const INSERT_CATALOG: &str =
    "INSERT INTO tablekit_tables (name_key, name) VALUES (?1, ?2)";
pub(super) const DELETE_CATALOG: &str = "DELETE FROM tablekit_tables WHERE name_key = ?1";
pub(super) const LIST_CATALOG: &str = "SELECT name FROM tablekit_tables ORDER BY name";

/// The SQL statements over one entity table, named by what they do.
pub(super) struct TableSql {
    pub(super) create: String,
    pub(super) drop: String,
    pub(super) select_one: String,
    pub(super) insert: String,
    pub(super) upsert: String,
    pub(super) delete: String,
    pub(super) name: String,
}

impl TableSql {
    pub(super) fn new(table: &str) -> Self {
        let t = format!("\"t_{}\"", table.to_ascii_lowercase());
        TableSql {
            create: format!(
                "CREATE TABLE {t} (pk TEXT NOT NULL, rk TEXT NOT NULL, ts INTEGER NOT NULL, \
                 etag TEXT NOT NULL, props BLOB NOT NULL, PRIMARY KEY (pk, rk)) WITHOUT ROWID"
            ),
            drop: format!("DROP TABLE {t}"),
            select_one: format!("SELECT ts, etag, props FROM {t} WHERE pk = ?1 AND rk = ?2"),
            insert: format!(
                "INSERT INTO {t} (pk, rk, ts, etag, props) VALUES (?1, ?2, ?3, ?4, ?5)"
            ),
            upsert: format!(
                "INSERT OR REPLACE INTO {t} (pk, rk, ts, etag, props) VALUES (?1, ?2, ?3, ?4, ?5)"
            ),
            delete: format!("DELETE FROM {t} WHERE pk = ?1 AND rk = ?2"),
            name: t,
        }
    }
}

pub(super) fn sqlite_error(e: rusqlite::Error) -> Error {
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) =>
        {
            Error::Transient {
                message: e.to_string(),
            }
        }
        _ => Error::Backend {
            message: e.to_string(),
        },
    }
}

pub(super) fn is_missing_table(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(_, Some(msg)) if msg.starts_with("no such table"))
}

pub(super) fn is_constraint(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::ConstraintViolation)
}

/// Maps a SQLite error met while working on `table`.
pub(super) fn table_error(table: &str) -> impl Fn(rusqlite::Error) -> Error + '_ {
    move |e| {
        if is_missing_table(&e) {
            Error::table_not_found(table)
        } else {
            sqlite_error(e)
        }
    }
}
