//! Keys that cannot collide: a string key field followed by a separator is refused when
//! it holds the separator or a character below it, so no look-up (exact, prefix, range,
//! id list) returns a row whose fields differ from the key given, and every rendered key
//! splits back into its fields. The derive refuses, at compile time, a separator that does
//! not sort below the characters a field's type can hold (`core/derive/tests/ui`).

#![allow(missing_docs)]

use std::collections::BTreeSet;

use proptest::prelude::*;
use tablekit::core::keys::KeyError;
use tablekit::core::typed::KeyTemplate;
use tablekit::core::{MemoryStore, TableStore};
use tablekit::patterns::index::{AuditOptions, Drift};
use tablekit::prelude::*;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Orders",
    kind = "Order",
    partition_key = "{region}",
    row_key = "o_{customer},{id:08}"
)]
#[index(
    name = "status",
    partition_key = "{region}",
    row_key = "s_{status},{customer},{id:08}"
)]
#[index_entity(name = "customer", key = "{customer}")]
struct Order {
    region: String,
    customer: String,
    id: u32,
    status: String,
}

fn order(customer: &str, id: u32) -> Order {
    Order {
        region: "eu".into(),
        customer: customer.into(),
        id,
        status: "placed".into(),
    }
}

async fn orders() -> IndexedTable<Order, MemoryStore> {
    let table = IndexedTable::<Order, _>::options()
        .inline_apply()
        .open(MemoryStore::new())
        .await
        .expect("open");
    table.create().await.expect("create");
    table
}

fn is_separator_refusal(error: &tablekit::Error) -> bool {
    let tablekit::Error::Key(KeyError::Entity { type_name, source }) = error else {
        return false;
    };
    *type_name == "Order"
        && matches!(source.as_ref(), KeyError::Field { source, .. }
            if matches!(source.as_ref(), KeyError::PartBelowSeparator { .. }))
}

#[tokio::test]
async fn a_customer_holding_the_separator_cannot_be_written_into_anothers_keys() {
    let orders = orders().await;
    orders.insert(&order("bob", 1)).await.expect("bob");
    let error = orders
        .insert(&order("bob,x", 2))
        .await
        .expect_err("`bob,x` would render into bob's keys");
    assert!(is_separator_refusal(&error), "{error:?}");
    let text = error.to_string();
    for part in ["Order", "customer", "','", "o_{customer},{id:08}"] {
        assert!(text.contains(part), "`{part}` in: {text}");
    }
    // Nothing of the refused write landed.
    let rows = orders
        .store()
        .query_all("Orders", Query::new())
        .await
        .expect("read");
    assert!(
        rows.iter().all(|r| !r.row_key.contains("bob,x")),
        "{rows:?}"
    );

    let hits = orders
        .lookup(Order::STATUS)
        .key("eu")
        .key("placed")
        .key("bob")
        .all()
        .await
        .expect("look up");
    assert_eq!(hits.len(), 1);
    assert_eq!(
        (hits[0].value.customer.as_str(), hits[0].value.id),
        ("bob", 1)
    );
    // A look-up given the ambiguous value is refused too, never answered.
    let asked = orders
        .lookup(Order::STATUS)
        .key("eu")
        .key("placed")
        .key("bob,x")
        .all()
        .await;
    assert!(asked.is_err(), "{asked:?}");
    // A value with a character below the separator (a space is below `,`) would sort
    // inside another value's range: refused as well.
    let error = orders.insert(&order("bob x", 3)).await.expect_err("space");
    assert!(is_separator_refusal(&error), "{error:?}");
}

/// A value refused by a declaration's key (the index `status`), not by the primary's,
/// names the declaration as well as the type, template and field; nothing lands.
#[tokio::test]
async fn a_separator_refusal_names_the_declaration_and_field() {
    let orders = orders().await;
    let mut refused = order("ann", 1);
    refused.status = "placed,x".into();
    let error = orders.insert(&refused).await.expect_err("status holds `,`");
    let tablekit::Error::Key(key) = &error else {
        panic!("a key error: {error:?}");
    };
    assert!(key.is_separator_refusal(), "{error:?}");
    assert!(
        matches!(key, KeyError::Declaration { attribute, name, .. } if attribute == "index" && name == "status"),
        "{error:?}"
    );
    let text = error.to_string();
    for part in [
        "#[index] `status`",
        "Order",
        "`status`",
        "s_{status},{customer},{id:08}",
    ] {
        assert!(text.contains(part), "`{part}` in: {text}");
    }
    let rows = orders
        .store()
        .query_all("Orders", Query::new())
        .await
        .expect("read");
    assert!(rows.is_empty(), "{rows:?}");
}

#[test]
fn every_rendered_key_splits_back_into_its_fields() {
    let template = KeyTemplate::parse("s_{status},{customer},{id:08}").expect("template");
    proptest!(|(status in "[ -~]{0,6}", customer in "[ -~]{0,6}", id in 0u32..100_000)| {
        match template.render_args(&[&status, &customer, &id]) {
            Ok(key) => {
                prop_assert!(status.chars().all(|c| c > ',') && customer.chars().all(|c| c > ','));
                let parts = template.split(&key).expect("a rendered key splits");
                prop_assert_eq!(parts[0], ("status", status.as_str()));
                prop_assert_eq!(parts[1], ("customer", customer.as_str()));
                prop_assert_eq!(parts[2].1.parse::<u32>().ok(), Some(id));
            }
            Err(error) => {
                prop_assert!(status.chars().chain(customer.chars()).any(|c| c <= ','), "{error}");
            }
        }
    });
}

/// Values drawn from characters around the separator (`,` itself, the ones just below and
/// above it, letters), so that collisions are likely when the rule does not hold.
fn customer() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[ +,\\-.a-c]{0,4}").expect("regex")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_look_up_returns_a_row_whose_fields_differ_from_the_key_given(
        customers in proptest::collection::vec(customer(), 1..12),
        probe in customer(),
        lo in customer(),
        hi in customer(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let orders = orders().await;
            let mut written: BTreeSet<(String, u32)> = BTreeSet::new();
            for (id, customer) in customers.iter().enumerate() {
                let id = u32::try_from(id).expect("small");
                match orders.insert(&order(customer, id)).await {
                    Ok(_) => { written.insert((customer.clone(), id)); }
                    Err(error) => {
                        prop_assert!(is_separator_refusal(&error), "{error:?}");
                        prop_assert!(customer.chars().any(|c| c <= ','), "refused {customer:?}");
                    }
                }
            }
            let expect = |keep: &dyn Fn(&str) -> bool| -> Vec<(String, u32)> {
                written.iter().filter(|(c, _)| keep(c)).cloned().collect()
            };
            let found = |hits: Vec<Stored<Order>>| -> Vec<(String, u32)> {
                let mut got: Vec<(String, u32)> = hits.into_iter().map(|h| (h.value.customer, h.value.id)).collect();
                got.sort();
                got
            };
            // Prefix (the customer's orders) and range (customers lo ..= hi).
            let by_customer = orders.lookup(Order::STATUS).key("eu").key("placed").key(probe.clone()).all().await;
            let in_range = orders.lookup(Order::STATUS).key("eu").key("placed").range(lo.clone(), hi.clone()).all().await;
            let list = orders.list(Order::CUSTOMER).in_partition("eu").key(probe.clone()).all().await;
            if probe.chars().all(|c| c > ',') {
                prop_assert_eq!(found(by_customer.expect("prefix")), expect(&|c| c == probe));
                prop_assert_eq!(found(list.expect("id list")), expect(&|c| c == probe));
                for (customer, id) in expect(&|c| c == probe) {
                    let hit = orders.lookup(Order::STATUS).key("eu").key("placed").key(customer.clone()).key(id).get().await.expect("exact");
                    prop_assert_eq!(hit.map(|h| (h.value.customer, h.value.id)), Some((customer, id)));
                }
            } else {
                prop_assert!(by_customer.is_err(), "a probe holding the separator is refused");
            }
            if lo.chars().chain(hi.chars()).all(|c| c > ',') {
                let got = found(in_range.expect("range"));
                prop_assert_eq!(got, expect(&|c| lo.as_str() <= c && c <= hi.as_str()));
            } else {
                prop_assert!(in_range.is_err(), "range bounds holding the separator are refused");
            }
            Ok(())
        })?;
    }
}

/// Sets the customer of the stored primary `row_key` to `customer` under the entity's
/// keys, as a write before keys were checked could have left it.
async fn store_as_before_keys_were_checked(
    orders: &IndexedTable<Order, MemoryStore>,
    row_key: &str,
    customer: &str,
) {
    let mut stored = orders
        .store()
        .get("Orders", "eu", row_key, None)
        .await
        .expect("read")
        .expect("stored");
    stored
        .properties
        .insert("customer".to_owned(), Value::from(customer));
    orders
        .store()
        .replace("Orders", stored, IfMatch::Any)
        .await
        .expect("an old write");
}

#[tokio::test]
async fn the_audit_reports_a_primary_stored_with_an_ambiguous_key_and_keeps_it_readable() {
    let orders = orders().await;
    orders.insert(&order("bob", 1)).await.expect("bob");
    orders.insert(&order("ann", 2)).await.expect("ann");
    store_as_before_keys_were_checked(&orders, "o_bob,00000001", "bob,x").await;

    let report = orders.audit(&AuditOptions::default()).await.expect("audit");
    assert_eq!(report.ambiguous, 1, "{report:?}");
    let finding = report
        .findings
        .iter()
        .find(|f| f.drift == Drift::Ambiguous)
        .expect("a finding");
    assert_eq!(
        finding.source.as_ref().map(|s| s.row_key.as_str()),
        Some("o_bob,00000001")
    );
    assert!(finding.target.contains("bob,x"), "{}", finding.target);
    // Still readable by its keys; a new write of the value is refused.
    let old = orders.get("eu", "o_bob,00000001").await.expect("get");
    assert_eq!(old.map(|o| o.value.customer), Some("bob,x".to_owned()));
    assert!(orders.upsert(&order("bob,x", 1)).await.is_err());
}

#[tokio::test]
async fn a_migration_leaves_an_ambiguous_entity_as_it_is_and_goes_on() {
    let orders = orders().await;
    for (customer, id) in [("ann", 1), ("bob", 2), ("cy", 3)] {
        orders.insert(&order(customer, id)).await.expect("insert");
    }
    store_as_before_keys_were_checked(&orders, "o_bob,00000002", "bob,x").await;
    // The next program declares version 2 of the type and migrates the stored ones.
    #[derive(Entity, Clone, Debug, PartialEq)]
    #[entity(
        table = "Orders",
        kind = "Order",
        version = 2,
        partition_key = "{region}",
        row_key = "o_{customer},{id:08}"
    )]
    #[index(
        name = "status",
        partition_key = "{region}",
        row_key = "s_{status},{customer},{id:08}"
    )]
    #[index_entity(name = "customer", key = "{customer}")]
    struct OrderV2 {
        region: String,
        customer: String,
        id: u32,
        status: String,
    }
    let next = IndexedTable::<OrderV2, _>::options()
        .inline_apply()
        .open(orders.store().clone())
        .await
        .expect("open");
    let report = tablekit::patterns::index::migrate(&next, &AuditOptions::default())
        .await
        .expect("the migration goes on past the ambiguous entity");
    assert_eq!((report.ambiguous, report.rewritten), (1, 2), "{report:?}");
}
