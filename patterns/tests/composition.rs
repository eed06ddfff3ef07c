//! Compositions the simulation of the whole system found broken, each pinned here at the
//! step that broke (the simulation's seeds drift as the code changes; these do not).

use tablekit_core::{MemoryStore, TableStore};
use tablekit_patterns::consistency::{Engine, Envelope};
use tablekit_patterns::index::links::link_ref;
use tablekit_patterns::index::operation::{Applied, IndexApplier, IndexOperations};
use tablekit_patterns::index::record::EntityRef;

/// A badge deleted, then inserted again with the same holder: the delete's late link
/// removal ran between the new write's link and its commit, read the badge before the
/// commit (not claiming the link) and deleted the new link. A link whose write is still
/// in flight is now left to that write (its commit claims it, its undoing removes it).
#[tokio::test]
async fn a_late_link_removal_leaves_the_link_of_a_write_in_flight() {
    let store = MemoryStore::new();
    for table in ["Badges", "Members"] {
        store
            .create_table_if_not_exists(table)
            .await
            .expect("table");
    }
    let engine = Engine::new(store.clone());
    let applier = IndexApplier::new(store.clone());
    let badge = EntityRef::new("Badges", "t1", "b_03");
    let holder = EntityRef::new("Members", "t1", "m_04");
    let envelope = Envelope::new(&IndexOperations::new(Vec::new())).expect("envelope");
    let intent = engine
        .record_intent("Badges", "t1", envelope)
        .await
        .expect("intent");
    applier
        .put_link_for(
            &badge,
            "holder_email",
            &holder,
            "email",
            Some(&intent.id()),
        )
        .await
        .expect("link");
    let link = link_ref(&badge, "holder_email", &holder);
    let exists = || async {
        store
            .get(&link.table, &link.partition_key, &link.row_key, None)
            .await
            .expect("get")
            .is_some()
    };
    // The earlier delete's removal arrives: the write is in flight, the link stays.
    assert_eq!(
        applier
            .remove_link(&badge, "holder_email", &holder, "email")
            .await
            .expect("remove"),
        Applied::Superseded
    );
    assert!(exists().await, "the in-flight write's link was removed");
    // The write is abandoned (its intent claimed): now nothing claims the link.
    engine.abandon(&intent).await;
    assert_eq!(
        applier
            .remove_link(&badge, "holder_email", &holder, "email")
            .await
            .expect("remove"),
        Applied::Changed
    );
    assert!(!exists().await);
}
