//! `#[derive(FieldEnum)]`: unit enums as fields (by name or by discriminant, optional or
//! not), as key parts and look-up keys, as filter literals, and what a read does with a
//! stored value no variant names.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use tablekit::core::EdmType;
use tablekit::core::filter::property_named;
use tablekit::patterns::index::IndexedTable;
use tablekit::prelude::*;
use tablekit::typed::{Direction, FieldProblem, KeyPart};

#[derive(FieldEnum, Clone, Copy, Debug, PartialEq, Eq)]
#[field_enum(rename_all = "snake_case")]
enum Status {
    Placed,
    OnHold,
    #[field_enum(rename = "sent")]
    Shipped,
}

#[derive(FieldEnum, Clone, Copy, Debug, PartialEq, Eq)]
#[field_enum(repr = "int")]
enum Priority {
    Low = 1,
    Normal = 5,
    High,
    Urgent = 12,
}

#[derive(FieldEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Channel {
    Web,
    Phone,
    #[field_enum(other)]
    Unknown,
}

#[derive(FieldEnum, Clone, Copy, Debug, PartialEq, Eq)]
#[field_enum(repr = "int")]
enum Code {
    Ok = 200,
    NotFound = 404,
    #[field_enum(other)]
    Unrecognised = 0,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "Orders", partition_key = "{status}", row_key = "{id:06}")]
#[index(
    name = "by_priority",
    table = "OrdersByPriority",
    partition_key = "{status}",
    row_key = "{priority:02},{id:06}"
)]
struct Order {
    status: Status,
    id: u32,
    priority: Priority,
    previous: Option<Status>,
    channel: Channel,
    code: Option<Code>,
}

fn order(status: Status, id: u32, priority: Priority) -> Order {
    Order {
        status,
        id,
        priority,
        previous: None,
        channel: Channel::Web,
        code: None,
    }
}

/// Orders declare an index, so they are written through the one write path that keeps it.
async fn orders() -> IndexedTable<Order, MemoryStore> {
    IndexedTable::<Order, _>::options()
        .inline_apply()
        .open(MemoryStore::new())
        .await
        .unwrap()
}

/// The entity as stored, read past the typed table.
async fn raw(orders: &IndexedTable<Order, MemoryStore>, pk: &str, rk: &str) -> Entity {
    orders
        .store()
        .get("Orders", pk, rk, None)
        .await
        .unwrap()
        .expect("stored")
}

#[tokio::test]
async fn string_enums_are_stored_by_name_and_read_back() {
    let orders = orders().await;
    let mut held = order(Status::OnHold, 7, Priority::High);
    held.previous = Some(Status::Shipped);
    held.channel = Channel::Phone;
    orders.insert(&held).await.unwrap();

    let entity = raw(&orders, "on_hold", "000007").await;
    assert_eq!(entity.get("status"), Some(&Value::from("on_hold")));
    assert_eq!(entity.get("previous"), Some(&Value::from("sent")));
    assert_eq!(entity.get("channel"), Some(&Value::from("Phone")));
    let stored = orders
        .get("on_hold", "000007")
        .await
        .unwrap()
        .expect("found");
    assert_eq!(stored.value, held);
}

#[tokio::test]
async fn int_enums_are_stored_as_their_discriminants() {
    let orders = orders().await;
    let mut placed = order(Status::Placed, 1, Priority::High);
    placed.code = Some(Code::NotFound);
    orders.insert(&placed).await.unwrap();

    let entity = raw(&orders, "placed", "000001").await;
    // `High` follows `Normal = 5`.
    assert_eq!(entity.get("priority"), Some(&Value::Int32(6)));
    assert_eq!(entity.get("code"), Some(&Value::Int32(404)));
    assert_eq!(
        Order::schema().field("priority").unwrap().edm,
        Some(EdmType::Int32)
    );
    let stored = orders
        .get("placed", "000001")
        .await
        .unwrap()
        .expect("found");
    assert_eq!(stored.value, placed);
}

#[tokio::test]
async fn an_optional_enum_field_is_an_absent_property_when_none() {
    let orders = orders().await;
    let fresh = order(Status::Placed, 2, Priority::Low);
    orders.insert(&fresh).await.unwrap();

    let entity = raw(&orders, "placed", "000002").await;
    assert_eq!(entity.get("previous"), None);
    assert_eq!(entity.get("code"), None);
    let stored = orders
        .get("placed", "000002")
        .await
        .unwrap()
        .expect("found");
    assert_eq!((stored.value.previous, stored.value.code), (None, None));
}

#[test]
fn rename_and_rename_all_spell_the_stored_names() {
    #[derive(FieldEnum, Debug, PartialEq)]
    #[field_enum(rename_all = "SCREAMING_SNAKE_CASE")]
    enum Shouted {
        OnHold,
        #[field_enum(rename = "gone")]
        Cancelled,
    }
    #[derive(FieldEnum, Debug, PartialEq)]
    #[field_enum(rename_all = "kebab-case")]
    enum Kebab {
        OnHold,
    }
    #[derive(FieldEnum, Debug, PartialEq)]
    #[field_enum(rename_all = "camelCase")]
    enum Camel {
        OnHold,
    }

    assert_eq!(Shouted::OnHold.as_str(), "ON_HOLD");
    assert_eq!(Shouted::Cancelled.to_string(), "gone");
    assert_eq!("gone".parse::<Shouted>(), Ok(Shouted::Cancelled));
    assert_eq!(Kebab::OnHold.as_str(), "on-hold");
    assert_eq!(Camel::OnHold.as_str(), "onHold");
    assert_eq!(Status::Shipped.as_str(), "sent");
    assert_eq!(Value::from(Status::OnHold), Value::from("on_hold"));
    assert_eq!(Value::from(&Priority::Urgent), Value::Int32(12));
}

#[test]
fn parsing_reads_the_stored_text() {
    assert_eq!("on_hold".parse::<Status>(), Ok(Status::OnHold));
    // The Rust name is not the stored name.
    assert!(matches!(
        "OnHold".parse::<Status>(),
        Err(FieldProblem::UnknownVariant { value, .. }) if value == "OnHold"
    ));
    assert_eq!("6".parse::<Priority>(), Ok(Priority::High));
    // A padded key's text reads back.
    assert_eq!("06".parse::<Priority>(), Ok(Priority::High));
    assert!("seven".parse::<Priority>().is_err());
    assert_eq!("Fax".parse::<Channel>(), Ok(Channel::Unknown));
}

#[test]
fn keys_render_the_stored_text_of_an_enum() {
    let mut held = order(Status::OnHold, 42, Priority::Normal);
    assert_eq!(held.partition_key().unwrap(), "on_hold");
    assert_eq!(
        held.index_keys("by_priority").unwrap(),
        Some(("on_hold".to_owned(), "05,000042".to_owned()))
    );
    held.priority = Priority::Urgent;
    assert_eq!(
        held.index_keys("by_priority").unwrap().unwrap().1,
        "12,000042"
    );

    // The key text of an int enum is the stored Int32's, so a key rendered from the
    // stored entity (as an untyped backfill does) is the same.
    let mut typed = String::new();
    Priority::High
        .write_key(tablekit::typed::KeyFormat::Pad(2), &mut typed)
        .unwrap();
    let mut stored = String::new();
    Value::Int32(6)
        .write_key(tablekit::typed::KeyFormat::Pad(2), &mut stored)
        .unwrap();
    assert_eq!((typed.as_str(), stored.as_str()), ("06", "06"));
}

#[test]
fn padded_int_enum_keys_sort_by_discriminant_and_parse_back() {
    use tablekit::typed::KeyFormat;

    let all = [
        Priority::Low,
        Priority::Normal,
        Priority::High,
        Priority::Urgent,
    ];
    let text = |p: &Priority, format| {
        let mut out = String::new();
        p.write_key(format, &mut out).unwrap();
        out
    };
    for a in &all {
        for b in &all {
            assert_eq!(
                text(a, KeyFormat::Pad(2)).cmp(&text(b, KeyFormat::Pad(2))),
                (*a as i32).cmp(&(*b as i32)),
                "{a:?} and {b:?}"
            );
        }
        assert_eq!(text(a, KeyFormat::Pad(2)).parse::<Priority>(), Ok(*a));
        assert_eq!(text(a, KeyFormat::Plain).parse::<Priority>(), Ok(*a));
    }
    for s in [Status::Placed, Status::OnHold, Status::Shipped] {
        assert_eq!(text_of(&s).parse::<Status>(), Ok(s));
    }
}

fn text_of(part: &dyn KeyPart) -> String {
    let mut out = String::new();
    part.write_key(tablekit::typed::KeyFormat::Plain, &mut out)
        .unwrap();
    out
}

#[test]
fn a_range_over_an_unpadded_int_enum_key_is_refused_as_for_an_integer() {
    #[derive(Entity)]
    #[entity(
        table = "Tickets",
        partition_key = "tickets",
        row_key = "{priority},{id}"
    )]
    struct Ticket {
        priority: Priority,
        id: String,
    }

    assert_eq!(
        Ticket {
            priority: Priority::Urgent,
            id: "a".into()
        }
        .row_key()
        .unwrap(),
        "12,a"
    );
    let row_key = &Ticket::schema().row_key;
    let refused = row_key
        .range(&[], &Priority::Low, &Priority::Urgent)
        .expect_err("`12,` sorts before `5,`");
    assert!(refused.to_string().contains("pad it"), "{refused}");
    // A prefix has no order to keep.
    assert_eq!(row_key.prefix(&[&Priority::Normal]).unwrap().start, "5,");
}

#[tokio::test]
async fn a_range_over_a_padded_int_enum_key_sorts_by_discriminant() {
    #[derive(Entity, Clone, Debug, PartialEq)]
    #[entity(
        table = "Tickets",
        partition_key = "tickets",
        row_key = "{priority:02},{id}"
    )]
    struct Ticket {
        priority: Priority,
        id: String,
    }

    let tickets = Table::<Ticket, _>::new(MemoryStore::new());
    tickets.create().await.unwrap();
    // Declared order is not alphabetical order: `Urgent` (12) sorts after `Low` (1) only
    // when padded.
    for (priority, id) in [
        (Priority::Urgent, "a"),
        (Priority::Low, "b"),
        (Priority::High, "c"),
        (Priority::Normal, "d"),
        (Priority::Low, "e"),
    ] {
        tickets
            .insert(&Ticket {
                priority,
                id: id.into(),
            })
            .await
            .unwrap();
    }
    let in_order: Vec<Priority> = tickets
        .partition("tickets")
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.value.priority)
        .collect();
    assert_eq!(
        in_order,
        [
            Priority::Low,
            Priority::Low,
            Priority::Normal,
            Priority::High,
            Priority::Urgent
        ]
    );

    let row_key = &Ticket::schema().row_key;
    let bounds = row_key
        .range(&[], &Priority::Normal, &Priority::Urgent)
        .unwrap();
    let ids: Vec<String> = tickets
        .range("tickets", &bounds)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.value.id)
        .collect();
    assert_eq!(ids, ["d", "c", "a"]);

    let low = row_key.prefix(&[&Priority::Low]).unwrap();
    let ids: Vec<String> = tickets
        .range("tickets", &low)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.value.id)
        .collect();
    assert_eq!(ids, ["b", "e"]);
}

#[tokio::test]
async fn a_prefix_over_a_string_enum_key_keeps_each_name_apart() {
    #[derive(FieldEnum, Clone, Copy, Debug, PartialEq)]
    enum Stage {
        Draft,
        DraftReview,
    }

    #[derive(Entity, Clone, Debug, PartialEq)]
    #[entity(table = "Docs", partition_key = "docs", row_key = "{stage},{id}")]
    struct Doc {
        stage: Stage,
        id: String,
    }

    let docs = Table::<Doc, _>::new(MemoryStore::new());
    docs.create().await.unwrap();
    for (stage, id) in [
        (Stage::DraftReview, "a"),
        (Stage::Draft, "b"),
        (Stage::Draft, "c"),
    ] {
        docs.insert(&Doc {
            stage,
            id: id.into(),
        })
        .await
        .unwrap();
    }
    assert_eq!(
        Doc {
            stage: Stage::DraftReview,
            id: "a".into()
        }
        .row_key()
        .unwrap(),
        "DraftReview,a"
    );
    // `Draft,` is not a prefix of `DraftReview,…`: the separator sorts below every name.
    let drafts = Doc::schema().row_key.prefix(&[&Stage::Draft]).unwrap();
    let ids: Vec<String> = docs
        .range("docs", &drafts)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.value.id)
        .collect();
    assert_eq!(ids, ["b", "c"]);
}

#[tokio::test]
async fn an_unknown_stored_value_is_an_error_naming_the_property_the_value_and_the_keys() {
    let orders = orders().await;
    let written = order(Status::Placed, 3, Priority::Low).to_entity().unwrap();
    let mut lost = written.clone();
    lost.set("previous", "lost");
    orders.store().insert("Orders", lost).await.unwrap();

    let error = orders
        .get("placed", "000003")
        .await
        .expect_err("no variant is stored as `lost`");
    let Error::Field(field) = &error else {
        panic!("a field error: {error}");
    };
    assert_eq!(field.direction, Direction::Read);
    assert_eq!(field.property, "previous");
    assert_eq!(
        (field.partition_key.as_str(), field.row_key.as_str()),
        ("placed", "000003")
    );
    assert_eq!(
        field.problem,
        FieldProblem::UnknownVariant {
            type_name: "Status",
            value: "lost".into(),
            expected: &["placed", "on_hold", "sent"],
        }
    );
    let message = error.to_string();
    for part in ["`previous`", "`placed`", "`000003`", "`lost`", "`on_hold`"] {
        assert!(message.contains(part), "{part} in {message}");
    }

    // An unknown number, the same way.
    let mut unknown = written.clone();
    unknown.row_key = "000004".into();
    unknown.set("priority", 3);
    orders.store().insert("Orders", unknown).await.unwrap();
    let error = orders
        .get("placed", "000004")
        .await
        .expect_err("no variant is 3");
    let Error::Field(field) = &error else {
        panic!("a field error: {error}");
    };
    assert_eq!(field.property, "priority");
    assert!(
        error
            .to_string()
            .contains("`3` is not a value of `Priority`, expected one of `Low = 1`, `Normal = 5`, `High = 6` or `Urgent = 12`"),
        "{error}"
    );

    // A value of another type is the type error every field gives.
    let mut text = written;
    text.row_key = "000005".into();
    text.set("priority", "High");
    orders.store().insert("Orders", text).await.unwrap();
    let error = orders.get("placed", "000005").await.expect_err("a string");
    assert!(
        matches!(&error, Error::Field(f) if matches!(f.problem, FieldProblem::WrongType { .. })),
        "{error}"
    );
}

#[tokio::test]
async fn the_other_variant_takes_values_no_variant_names() {
    let orders = orders().await;
    let mut newer = order(Status::Placed, 9, Priority::Low).to_entity().unwrap();
    newer.set("channel", "Fax");
    newer.set("code", 503);
    orders.store().insert("Orders", newer).await.unwrap();

    let stored = orders
        .get("placed", "000009")
        .await
        .unwrap()
        .expect("found");
    assert_eq!(stored.value.channel, Channel::Unknown);
    assert_eq!(stored.value.code, Some(Code::Unrecognised));
    // Known values still read as their variants.
    assert_eq!("Web".parse::<Channel>(), Ok(Channel::Web));
    assert_eq!("200".parse::<Code>(), Ok(Code::Ok));
}

#[tokio::test]
async fn enums_are_filter_literals() {
    let orders = orders().await;
    for (id, priority) in [
        (1, Priority::Low),
        (2, Priority::Urgent),
        (3, Priority::Urgent),
    ] {
        orders
            .insert(&order(Status::Shipped, id, priority))
            .await
            .unwrap();
    }
    let urgent = orders
        .table()
        .query(Query::with_filter(
            property_named("priority").eq(Priority::Urgent),
        ))
        .await
        .unwrap();
    assert_eq!(urgent.iter().map(|o| o.id).collect::<Vec<_>>(), [2, 3]);
    let shipped = orders
        .table()
        .query(Query::with_filter(
            property_named("status").eq(Status::Shipped),
        ))
        .await
        .unwrap();
    assert_eq!(shipped.len(), 3);
}

#[tokio::test]
async fn enums_are_the_keys_of_typed_look_ups() {
    let orders = IndexedTable::<Order, _>::options()
        .inline_apply()
        .open(MemoryStore::new())
        .await
        .unwrap();
    for (status, id, priority) in [
        (Status::Placed, 1, Priority::Urgent),
        (Status::Placed, 2, Priority::Low),
        (Status::Placed, 3, Priority::Normal),
        (Status::OnHold, 4, Priority::Low),
    ] {
        orders.insert(&order(status, id, priority)).await.unwrap();
    }

    let found = orders
        .lookup(Order::BY_PRIORITY)
        .key(Status::Placed)
        .key(Priority::Low)
        .key(2u32)
        .get()
        .await
        .unwrap()
        .expect("found");
    assert_eq!(found.id, 2);

    // A key value by reference, as a look-up also takes it.
    #[allow(clippy::needless_borrows_for_generic_args)]
    let placed = orders
        .lookup(Order::BY_PRIORITY)
        .key(&Status::Placed)
        .range(Priority::Low, Priority::Normal)
        .all()
        .await
        .unwrap();
    assert_eq!(placed.iter().map(|o| o.id).collect::<Vec<_>>(), [2, 3]);

    // By name, the key values' types are checked: a priority is stored as an Int32, a
    // status as a string.
    let by_name = orders
        .lookup_named("by_priority")
        .keys(&[&Status::Placed, &Priority::Low, &2u32])
        .get()
        .await
        .unwrap()
        .expect("found by name");
    assert_eq!(by_name.id, 2);
    let wrong = orders
        .lookup_named("by_priority")
        .keys(&[&Priority::Low, &Status::Placed])
        .all()
        .await
        .expect_err("a priority where the status goes");
    assert!(wrong.to_string().contains("Priority"), "{wrong}");
}
