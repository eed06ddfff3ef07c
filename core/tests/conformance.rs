//! The backend conformance suite, run against both bundled backends: the in-memory store
//! and the SQLite store (one database file per test, in a temporary directory that lives
//! as long as the test).

mod support;

mod memory {
    use tablekit_core::MemoryStore;

    tablekit_core::conformance_suite!(async { MemoryStore::new() });
}

mod sqlite {
    use tablekit_core::SqliteStore;

    // The `TempDir` travels with the store as the fixture's guard: it is deleted only
    // when the test is over, pass or fail.
    tablekit_core::conformance_suite!(async {
        let dir = tempfile::tempdir().expect("a temporary directory for the SQLite file");
        let store = SqliteStore::create(dir.path().join("conformance.db"))
            .await
            .expect("a SQLite store in the temporary directory");
        (store, dir)
    });
}

#[test]
fn suite_has_at_least_60_distinct_cases() {
    let cases = tablekit_core::conformance::CASES;
    assert!(cases.len() >= 60, "only {} conformance cases", cases.len());
    let distinct: std::collections::HashSet<&&str> = cases.iter().collect();
    assert_eq!(distinct.len(), cases.len(), "case names are unique");
}

/// Against Azurite (the Table service emulator): `TABLEKIT_AZURE_CONNECTION` if set, else
/// Azurite on its default port if it answers (`scripts/services.sh` starts it). Every test
/// gets its own table prefix, so the tests share one emulator.
#[cfg(feature = "azure")]
mod azure {
    use tablekit_core::AzureTableStore;

    fn connection() -> Option<String> {
        super::support::azurite_tables()
    }

    tablekit_core::conformance_suite!(if connection().is_some(), async {
        let connection = connection().expect("checked above");
        AzureTableStore::options()
            .table_prefix(format!("t{}", &uuid::Uuid::new_v4().simple().to_string()[..10]))
            .connect(&connection)
            .expect("a valid connection string")
    });
}
