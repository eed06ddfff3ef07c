//! What tablekit stores for each kind of target (in a primary's `TablekitTargets`) and
//! each operation of follow-up work (in outbox entries and queue messages), pinned as
//! JSON: data written by an earlier release reads unchanged, and code that moves these
//! types between modules writes what it wrote before.

use std::collections::BTreeSet;

use tablekit_patterns::index::operation::{
    AddMember, Bury, ClaimUnique, DeleteCopy, PutCopy, ReleaseUnique, RemoveLink, RemoveMember,
    SyncDenormalized, SyncNewDependents,
};
use tablekit_patterns::index::operation::{IndexOperation, IndexOperations};
use tablekit_patterns::index::reclaim::Reclaim;
use tablekit_patterns::index::record::{
    CopyTarget, DenormalizedTarget, EntityRef, MemberStorage, MemberTarget, Target, UniqueTarget,
};

fn at(row_key: &str) -> EntityRef {
    EntityRef::new("T", "p", row_key)
}

fn targets() -> Vec<Target> {
    vec![
        Target::from(CopyTarget {
            index: "by_email".into(),
            at: at("c"),
            properties: None,
        }),
        Target::from(CopyTarget {
            index: "by_city".into(),
            at: at("c2"),
            properties: Some(vec!["city".into()]),
        }),
        Target::from(DenormalizedTarget {
            property: "holder_email".into(),
            source: at("s"),
            source_property: "email".into(),
        }),
        Target::from(MemberTarget {
            index: "by_city".into(),
            storage: MemberStorage::Table,
            table: "Ids".into(),
            value: "Paris".into(),
        }),
        Target::from(UniqueTarget {
            name: "email".into(),
            at: at("u"),
        }),
    ]
}

fn operations() -> Vec<IndexOperation> {
    let source = at("s");
    vec![
        IndexOperation::from(PutCopy {
            source: source.clone(),
            version: 7,
            index: "by_email".into(),
            target: at("c"),
            properties: Some(vec!["email".into()]),
            kind_property: "EntityKind".into(),
        }),
        IndexOperation::from(DeleteCopy {
            source: source.clone(),
            version: 7,
            index: "by_email".into(),
            target: at("c"),
        }),
        IndexOperation::from(AddMember {
            source: source.clone(),
            version: 7,
            index: "by_city".into(),
            storage: MemberStorage::Blob,
            table: "ids".into(),
            value: "Paris".into(),
        }),
        IndexOperation::from(RemoveMember {
            source: source.clone(),
            version: 7,
            index: "by_city".into(),
            storage: MemberStorage::Partition,
            table: "T".into(),
            value: "Paris".into(),
        }),
        IndexOperation::from(SyncDenormalized {
            dependent: at("d"),
            property: "holder_email".into(),
            source: source.clone(),
            source_property: "email".into(),
        }),
        IndexOperation::from(SyncNewDependents {
            source: source.clone(),
            properties: vec!["email".into()],
            seen: vec!["~dep~s~T~p~d~holder_email".into()],
        }),
        IndexOperation::from(RemoveLink {
            dependent: at("d"),
            property: "holder_email".into(),
            source: source.clone(),
            source_property: "email".into(),
        }),
        IndexOperation::from(ReleaseUnique {
            source: source.clone(),
            version: 7,
            name: "email".into(),
            at: at("u"),
        }),
        IndexOperation::from(ClaimUnique {
            source: source.clone(),
            version: 7,
            name: "email".into(),
            at: at("u"),
        }),
        IndexOperation::from(Bury { source, version: 7 }),
    ]
}

const TARGETS: [&str; 5] = [
    r#"{"t":"copy","index":"by_email","at":{"table":"T","partition_key":"p","row_key":"c"}}"#,
    r#"{"t":"copy","index":"by_city","at":{"table":"T","partition_key":"p","row_key":"c2"},"properties":["city"]}"#,
    r#"{"t":"denormalized","property":"holder_email","source":{"table":"T","partition_key":"p","row_key":"s"},"source_property":"email"}"#,
    r#"{"t":"member","index":"by_city","storage":"table","table":"Ids","value":"Paris"}"#,
    r#"{"t":"unique","name":"email","at":{"table":"T","partition_key":"p","row_key":"u"}}"#,
];

const OPERATIONS: [&str; 10] = [
    r#"{"op":"put_copy","source":{"table":"T","partition_key":"p","row_key":"s"},"version":7,"index":"by_email","target":{"table":"T","partition_key":"p","row_key":"c"},"properties":["email"],"kind_property":"EntityKind"}"#,
    r#"{"op":"delete_copy","source":{"table":"T","partition_key":"p","row_key":"s"},"version":7,"index":"by_email","target":{"table":"T","partition_key":"p","row_key":"c"}}"#,
    r#"{"op":"add_member","source":{"table":"T","partition_key":"p","row_key":"s"},"version":7,"index":"by_city","storage":"blob","table":"ids","value":"Paris"}"#,
    r#"{"op":"remove_member","source":{"table":"T","partition_key":"p","row_key":"s"},"version":7,"index":"by_city","storage":"partition","table":"T","value":"Paris"}"#,
    r#"{"op":"sync_denormalized","dependent":{"table":"T","partition_key":"p","row_key":"d"},"property":"holder_email","source":{"table":"T","partition_key":"p","row_key":"s"},"source_property":"email"}"#,
    r#"{"op":"sync_new_dependents","source":{"table":"T","partition_key":"p","row_key":"s"},"properties":["email"],"seen":["~dep~s~T~p~d~holder_email"]}"#,
    r#"{"op":"remove_link","dependent":{"table":"T","partition_key":"p","row_key":"d"},"property":"holder_email","source":{"table":"T","partition_key":"p","row_key":"s"},"source_property":"email"}"#,
    r#"{"op":"release_unique","source":{"table":"T","partition_key":"p","row_key":"s"},"version":7,"name":"email","at":{"table":"T","partition_key":"p","row_key":"u"}}"#,
    r#"{"op":"claim_unique","source":{"table":"T","partition_key":"p","row_key":"s"},"version":7,"name":"email","at":{"table":"T","partition_key":"p","row_key":"u"}}"#,
    r#"{"op":"bury","source":{"table":"T","partition_key":"p","row_key":"s"},"version":7}"#,
];

const RECLAIM: &str = r#"{"id":"i1","source":{"table":"T","partition_key":"p","row_key":"s"},"reservations":[{"table":"T","partition_key":"p","row_key":"u"}],"links":[["holder_email",{"table":"T","partition_key":"p","row_key":"m"},"email"]],"blob_nonce":"n1"}"#;

const WORK: &str = r#"{"id":"w1","operations":[{"op":"put_copy","source":{"table":"T","partition_key":"p","row_key":"s"},"version":7,"index":"by_email","target":{"table":"T","partition_key":"p","row_key":"c"},"properties":["email"],"kind_property":"EntityKind"}]}"#;

fn reclaim() -> Reclaim {
    Reclaim {
        id: "i1".into(),
        source: at("s"),
        reservations: vec![at("u")],
        links: vec![("holder_email".into(), at("m"), "email".into())],
        blob_nonce: Some("n1".into()),
    }
}

#[test]
fn each_kind_of_target_is_stored_as_before() {
    let targets = targets();
    assert_eq!(targets.len(), TARGETS.len());
    for (target, stored) in targets.iter().zip(TARGETS) {
        assert_eq!(serde_json::to_string(target).expect("encode"), stored);
        assert_eq!(
            &serde_json::from_str::<Target>(stored).expect("decode"),
            target
        );
    }
    // A record's targets, as a set.
    let set: BTreeSet<Target> = targets.into_iter().collect();
    let json = serde_json::to_string(&set).expect("encode");
    assert_eq!(
        serde_json::from_str::<BTreeSet<Target>>(&json).expect("decode"),
        set
    );
}

#[test]
fn each_operation_is_stored_as_before() {
    let operations = operations();
    assert_eq!(operations.len(), OPERATIONS.len());
    for (operation, stored) in operations.iter().zip(OPERATIONS) {
        assert_eq!(serde_json::to_string(operation).expect("encode"), stored);
        assert_eq!(
            &serde_json::from_str::<IndexOperation>(stored).expect("decode"),
            operation
        );
    }
    let work = IndexOperations {
        id: "w1".into(),
        operations: operations[..1].to_vec(),
    };
    assert_eq!(serde_json::to_string(&work).expect("encode"), WORK);
    assert_eq!(
        serde_json::from_str::<IndexOperations>(WORK).expect("decode"),
        work
    );
}

#[test]
fn an_undoing_is_stored_as_before() {
    assert_eq!(serde_json::to_string(&reclaim()).expect("encode"), RECLAIM);
    assert_eq!(
        serde_json::from_str::<Reclaim>(RECLAIM).expect("decode"),
        reclaim()
    );
}
