//! `#[derive(Entity)]` over many shapes: every field type, every attribute, every key
//! template format, and property tests that a value survives the trip to an entity, through
//! the SQLite row codec, and back.

#![allow(missing_docs, dead_code)]

use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use tablekit::core::keys;
use tablekit::core::sqlite::codec;
use tablekit::prelude::*;
use tablekit::typed::FieldStorage;
use uuid::Uuid;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
struct Address {
    street: String,
    city: String,
    lines: Vec<String>,
}

fn default_rating() -> f64 {
    2.5
}

/// Every field type the derive maps, optional or not.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "AllTypes", partition_key = "{pk}", row_key = "{id:020}")]
struct AllTypes {
    pk: String,
    id: u64,
    text: String,
    tiny: i8,
    small: i16,
    int: i32,
    long: i64,
    size: isize,
    byte: u8,
    word: u16,
    dword: u32,
    usize_: usize,
    real: f64,
    flag: bool,
    at: DateTime<Utc>,
    guid: Uuid,
    bytes: Vec<u8>,
    maybe_text: Option<String>,
    maybe_int: Option<i32>,
    maybe_long: Option<u64>,
    maybe_real: Option<f64>,
    maybe_flag: Option<bool>,
    maybe_at: Option<DateTime<Utc>>,
    maybe_guid: Option<Uuid>,
    maybe_bytes: Option<Vec<u8>>,
    #[entity(json)]
    address: Address,
    #[entity(json)]
    maybe_address: Option<Address>,
    #[entity(json)]
    tags: Vec<String>,
    #[entity(blob)]
    photo: Option<Vec<u8>>,
    #[entity(blob)]
    notes: String,
}

/// Attributes that change how fields are stored.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Renamed",
    kind = "renamed-thing",
    version = 7,
    partition_key = "{region}",
    row_key = "r_{type}",
    rename_all = "PascalCase",
    kind_property = "Kind",
    version_property = "Rev"
)]
pub(crate) struct Renamed {
    /// A doc comment on a field is fine.
    region: String,
    r#type: String,
    first_name: String,
    #[entity(rename = "mail")]
    email_address: String,
    #[entity(skip)]
    cached: Option<u64>,
    #[entity(default)]
    visits: u32,
    #[entity(default = default_rating)]
    rating: f64,
    #[entity(json, default)]
    address: Address,
}

/// Every key template format.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Keys",
    partition_key = "{user:hash4}_{user}",
    row_key = "{at:ticks_desc}|{seq:04}|{tag}"
)]
#[index(
    name = "by_guid",
    partition_key = "g_{guid}",
    row_key = "{flag}_{when}_{n}"
)]
#[index(name = "literal", partition_key = "{{const}}", row_key = "{small:03}")]
struct Keyed {
    user: u64,
    at: DateTime<Utc>,
    seq: u16,
    tag: String,
    guid: Uuid,
    flag: bool,
    when: DateTime<Utc>,
    n: i64,
    small: u8,
}

/// Constant keys: a singleton entity.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "Settings", partition_key = "settings", row_key = "global")]
struct Settings {
    theme: String,
}

fn only_adults(p: &Person) -> bool {
    p.age >= 18
}

/// Indexes of every placement, index entities of every storage, denormalised fields.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "People", partition_key = "{team}", row_key = "p_{id:06}")]
#[index(name = "email", partition_key = "{team}", row_key = "email_{email}", properties = ["id", "email"])]
#[index(name = "adults", partition_key = "{team}", row_key = "adult_{id:06}", when = only_adults)]
#[index(name = "by_email", partition_key = "email", row_key = "{email}")]
#[index(
    name = "elsewhere",
    table = "PeopleByAge",
    partition_key = "{age:03}",
    row_key = "{id:06}"
)]
#[index_entity(name = "last_name", key = "{last_name}")]
#[index_entity(
    name = "city",
    key = "{city}",
    storage = "table",
    table = "PeopleByCity"
)]
#[index_entity(name = "age", key = "{age:03}", storage = "blob")]
struct Person {
    team: String,
    id: u32,
    email: String,
    last_name: String,
    city: String,
    age: u8,
    manager_id: u32,
    #[entity(denormalized(
        from = "Person",
        partition_key = "{team}",
        row_key = "p_{manager_id:06}",
        property = "email"
    ))]
    manager_email: Option<String>,
}

#[derive(EntityKind, Clone, Debug, PartialEq)]
enum Stored3 {
    Settings(Settings),
    Other(OtherSettings),
    Third(ThirdSettings),
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "Settings", partition_key = "settings", row_key = "other")]
struct OtherSettings {
    level: i32,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "Settings", partition_key = "settings", row_key = "third_{n}")]
struct ThirdSettings {
    n: u8,
}

#[derive(Projection, Clone, Debug, PartialEq)]
#[entity(rename_all = "PascalCase")]
struct NameOnly {
    first_name: String,
    #[entity(rename = "mail")]
    email_address: String,
    #[entity(default)]
    visits: u32,
}

mod nested {
    use tablekit::Entity;

    /// A type declared in a module, with no prelude in scope.
    #[derive(Entity, Debug, PartialEq)]
    #[entity(table = "Nested", partition_key = "{a}", row_key = "{b}")]
    pub(crate) struct Inner {
        pub(crate) a: String,
        pub(crate) b: i32,
    }
}

fn instant() -> impl Strategy<Value = DateTime<Utc>> {
    // 1601-01-01 ..= 9999-12-31, the table service's DateTime range.
    (-11_644_473_600i64..253_402_300_799, 0u32..1_000_000_000)
        .prop_map(|(s, n)| DateTime::from_timestamp(s, n).unwrap_or_default())
}

fn any_text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 _é€-]{0,24}"
}

fn key_text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_é€-]{1,16}"
}

prop_compose! {
    fn address()(street in any_text(), city in any_text(), lines in prop::collection::vec(any_text(), 0..3)) -> Address {
        Address { street, city, lines }
    }
}

prop_compose! {
    fn all_types()(
        pk in key_text(), id in 0..=i64::MAX as u64, text in any_text(),
        tiny in any::<i8>(), small in any::<i16>(), int in any::<i32>(), long in any::<i64>(),
        size in any::<isize>(), byte in any::<u8>(), word in any::<u16>(), dword in any::<u32>(),
        usize_ in 0..=i64::MAX as usize, real in any::<f64>().prop_filter("NaN is not equal to itself", |f| !f.is_nan()),
        flag in any::<bool>(), at in instant(), guid in any::<u128>().prop_map(Uuid::from_u128),
        bytes in prop::collection::vec(any::<u8>(), 0..64),
    )(
        pk in Just(pk), id in Just(id), text in Just(text), tiny in Just(tiny), small in Just(small),
        int in Just(int), long in Just(long), size in Just(size), byte in Just(byte), word in Just(word),
        dword in Just(dword), usize_ in Just(usize_), real in Just(real), flag in Just(flag), at in Just(at),
        guid in Just(guid), bytes in Just(bytes),
        maybe_text in prop::option::of(any_text()), maybe_int in prop::option::of(any::<i32>()),
        maybe_long in prop::option::of(0..=i64::MAX as u64), maybe_real in prop::option::of(-1e300f64..1e300),
        maybe_flag in prop::option::of(any::<bool>()), maybe_at in prop::option::of(instant()),
        maybe_guid in prop::option::of(any::<u128>().prop_map(Uuid::from_u128)),
        maybe_bytes in prop::option::of(prop::collection::vec(any::<u8>(), 0..16)),
        address in address(), maybe_address in prop::option::of(address()),
        tags in prop::collection::vec(any_text(), 0..4),
        photo in prop::option::of(prop::collection::vec(any::<u8>(), 0..128)), notes in any_text(),
    ) -> AllTypes {
        AllTypes {
            pk, id, text, tiny, small, int, long, size, byte, word, dword, usize_, real, flag, at,
            guid, bytes, maybe_text, maybe_int, maybe_long, maybe_real, maybe_flag, maybe_at,
            maybe_guid, maybe_bytes, address, maybe_address, tags, photo, notes,
        }
    }
}

/// The value back from its entity, directly and through the SQLite row codec.
fn round_trip<R: Record + Clone + PartialEq + std::fmt::Debug>(value: &R) {
    let entity = value.to_entity().expect("converts");
    let direct = R::from_entity(entity.clone()).expect("reads back");
    assert_eq!(&direct.value, value);
    let mut decoded = Entity::new(entity.partition_key.clone(), entity.row_key.clone());
    decoded.properties = codec::decode(&codec::encode(&entity.properties)).expect("decodes");
    assert_eq!(&R::from_entity(decoded).expect("reads back").value, value);
}

proptest! {
    #[test]
    fn every_field_type_round_trips(value in all_types()) {
        round_trip(&value);
        let entity = value.to_entity().expect("converts");
        // Option fields that are None are absent properties, not nulls.
        prop_assert_eq!(entity.get("maybe_text").is_some(), value.maybe_text.is_some());
        prop_assert_eq!(entity.get("maybe_address").is_some(), value.maybe_address.is_some());
        prop_assert_eq!(entity.row_key.clone(), keys::pad(value.id, 20).expect("fits"));
    }

    #[test]
    fn every_key_template_format_round_trips_and_keeps_order(
        user in 0..=i64::MAX as u64, at in instant(), later in instant(), seq in any::<u16>().prop_map(|s| s % 10_000),
        tag in key_text(), n in any::<i64>(), small in 0u8..=255, flag in any::<bool>(),
    ) {
        let keyed = |at: DateTime<Utc>| Keyed {
            user, at, seq, tag: tag.clone(), guid: Uuid::from_u128(u128::from(user)), flag, when: at, n, small,
        };
        let a = keyed(at);
        round_trip(&a);
        let pk = a.partition_key().expect("renders");
        prop_assert_eq!(pk, format!("{}_{user}", keys::hash_prefix(&user.to_string(), 4)));
        let rk = a.row_key().expect("renders");
        let parts = Keyed::schema().row_key.split(&rk).expect("splits");
        prop_assert_eq!(keys::parse_ticks_desc(parts[0].1).expect("ticks"), truncate_to_tick(at));
        prop_assert_eq!(keys::parse_padded(parts[1].1).expect("padded"), u64::from(seq));
        prop_assert_eq!(parts[2].1, tag.as_str());
        // Inverted ticks: a later instant sorts first.
        let b = keyed(later);
        if truncate_to_tick(later) > truncate_to_tick(at) {
            prop_assert!(b.row_key().expect("renders") < rk);
        }
        prop_assert_eq!(
            a.index_keys("literal").expect("renders"),
            Some(("{const}".to_owned(), format!("{small:03}")))
        );
    }

    #[test]
    fn renamed_and_defaulted_fields_round_trip(
        region in key_text(), kind in key_text(), first_name in any_text(), email in any_text(),
        visits in any::<u32>(), rating in -1e9f64..1e9, address in address(),
    ) {
        let value = Renamed {
            region, r#type: kind, first_name, email_address: email, cached: None, visits, rating, address,
        };
        round_trip(&value);
    }
}

fn truncate_to_tick(at: DateTime<Utc>) -> DateTime<Utc> {
    keys::from_dotnet_ticks(keys::dotnet_ticks(at).expect("in range")).expect("in range")
}

#[test]
fn properties_follow_rename_rules_and_system_property_names() {
    let value = Renamed {
        region: "eu".into(),
        r#type: "x".into(),
        first_name: "Ada".into(),
        email_address: "ada@example.com".into(),
        cached: Some(9),
        visits: 3,
        rating: 4.0,
        address: Address::default(),
    };
    let entity = value.to_entity().expect("converts");
    let names: Vec<&str> = entity.properties.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "Kind",
            "Rev",
            "Region",
            "Type",
            "FirstName",
            "mail",
            "Visits",
            "Rating",
            "Address"
        ]
    );
    assert_eq!(entity.get("Kind"), Some(&Value::from("renamed-thing")));
    assert_eq!(entity.get("Rev"), Some(&Value::Int32(7)));
    assert_eq!(entity.row_key, "r_x");
    // A skipped field is not stored and reads back as its default.
    let back = Renamed::from_entity(entity).expect("reads").value;
    assert_eq!(back.cached, None);
}

#[test]
fn integers_beyond_the_stored_range_are_refused_with_the_property_and_keys() {
    let keyed = Keyed {
        user: u64::MAX,
        at: Utc
            .with_ymd_and_hms(2020, 1, 2, 3, 4, 5)
            .single()
            .expect("valid"),
        seq: 1,
        tag: "t".into(),
        guid: Uuid::nil(),
        flag: false,
        when: Utc::now(),
        n: 0,
        small: 0,
    };
    let error = keyed.to_entity().expect_err("u64 above i64::MAX");
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    let message = error.to_string();
    assert!(message.contains("property `user`"), "{message}");
    assert!(message.contains(&format!("_{}", u64::MAX)), "{message}");
    // A stored Int64 too large for the field's type is refused on read.
    let entity = Entity::new("p", "r").with("level", i64::MAX);
    let error = OtherSettings::from_entity(entity).expect_err("i64 into i32");
    assert_eq!(error.kind(), ErrorKind::InvalidData);
    assert!(error.to_string().contains("property `level`"), "{error}");
}

#[test]
fn defaults_fill_missing_properties() {
    let entity = Entity::new("eu", "r_x")
        .with("Region", "eu")
        .with("Type", "x")
        .with("FirstName", "Ada")
        .with("mail", "a@b")
        .with("Kind", "renamed-thing")
        .with("Rev", 7);
    let value = Renamed::from_entity(entity).expect("reads").value;
    assert_eq!(value.visits, 0);
    assert_eq!(value.rating, 2.5);
    assert_eq!(value.address, Address::default());
}

#[test]
fn schema_describes_fields_indexes_index_entities_and_denormalised_fields() {
    let schema = Person::schema();
    assert_eq!(schema.table, "People");
    assert_eq!(schema.kind, "Person");
    assert_eq!(schema.version, 1);
    assert_eq!(schema.partition_key.source(), "{team}");
    // Each index: its name, its copies' table (only when it is another table), whether it
    // is sparse, and its templates.
    let indexes: Vec<(&str, Option<&str>, bool)> = schema
        .indexes()
        .map(|i| (i.name, i.table, i.flag("sparse")))
        .collect();
    assert_eq!(
        indexes,
        [
            ("email", None, false),
            ("adults", None, true),
            ("by_email", None, false),
            ("elsewhere", Some("PeopleByAge"), false),
        ]
    );
    let by_email = schema.index("by_email").expect("declared");
    assert_eq!(by_email.key.as_ref().map(|k| k.source()), None);
    assert_eq!(
        by_email.template("partition_key").map(|t| t.source()),
        Some("email")
    );
    assert_eq!(
        by_email.template("row_key").map(|t| t.source()),
        Some("{email}")
    );
    assert_eq!(
        schema.index("email").and_then(|i| i.setting("properties")),
        Some("id,email")
    );
    assert_eq!(
        schema.index("email").map(|i| i.settings),
        Some(&[("properties", "id,email")][..])
    );
    assert_eq!(schema.index("elsewhere").map(|i| i.settings), Some(&[][..]));
    let storages: Vec<(&str, Option<&str>)> = schema
        .index_entities()
        .map(|i| (i.name, i.setting("storage")))
        .collect();
    assert_eq!(
        storages,
        [
            ("last_name", Some("partition")),
            ("city", Some("table")),
            ("age", Some("blob"))
        ]
    );
    assert_eq!(
        schema.index_entity("city").and_then(|i| i.table),
        Some("PeopleByCity")
    );
    assert_eq!(
        schema
            .index_entity("age")
            .and_then(|i| i.key.as_ref())
            .map(|k| k.source()),
        Some("{age:03}")
    );
    let denormalized = schema.denormalized().next().expect("declared");
    assert_eq!(denormalized.name, "manager_email");
    assert_eq!(
        denormalized.settings,
        [
            ("field", "manager_email"),
            ("from", "Person"),
            ("property", "email")
        ]
    );
    // What the type declares, in order: indexes, index entities, then denormalised fields.
    assert_eq!(
        schema
            .declared
            .iter()
            .map(|d| (d.attribute, d.name))
            .collect::<Vec<_>>(),
        [
            ("index", "email"),
            ("index", "adults"),
            ("index", "by_email"),
            ("index", "elsewhere"),
            ("index_entity", "last_name"),
            ("index_entity", "city"),
            ("index_entity", "age"),
            ("denormalized", "manager_email"),
        ]
    );
    assert!(schema.field("manager_email").is_some_and(|f| f.optional));
    assert_eq!(
        AllTypes::schema()
            .blob_fields()
            .map(|f| f.name)
            .collect::<Vec<_>>(),
        ["photo", "notes"]
    );
    assert_eq!(
        AllTypes::schema().field("address").map(|f| f.storage),
        Some(FieldStorage::Json)
    );
}

#[test]
fn index_keys_follow_the_declared_templates_and_sparse_predicates() {
    let mut person = Person {
        team: "blue".into(),
        id: 42,
        email: "ann@example.com".into(),
        last_name: "Lee".into(),
        city: "Oslo".into(),
        age: 17,
        manager_id: 7,
        manager_email: None,
    };
    assert_eq!(
        person.index_keys("email").expect("renders"),
        Some(("blue".into(), "email_ann@example.com".into()))
    );
    assert_eq!(person.index_keys("adults").expect("renders"), None);
    person.age = 30;
    assert_eq!(
        person.index_keys("adults").expect("renders"),
        Some(("blue".into(), "adult_000042".into()))
    );
    assert_eq!(
        person.index_keys("elsewhere").expect("renders"),
        Some(("030".into(), "000042".into()))
    );
    assert_eq!(
        person.index_entity_key("last_name").expect("renders"),
        "Lee"
    );
    let error = person.index_keys("nope").expect_err("undeclared");
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(
        error.to_string().contains("declares no index `nope`"),
        "{error}"
    );
    // The denormalised source is addressed from this entity's fields.
    let d = Person::schema().denormalized().next().expect("declared");
    let rk = d
        .template("row_key")
        .expect("a row_key template")
        .render(|f| person.key_part(f))
        .expect("renders");
    assert_eq!(rk, "p_000007");
}

#[test]
fn an_enum_of_kinds_reads_each_variant() {
    let values = [
        Stored3::Settings(Settings {
            theme: "dark".into(),
        }),
        Stored3::Other(OtherSettings { level: 3 }),
        Stored3::Third(ThirdSettings { n: 1 }),
    ];
    for value in values {
        round_trip(&value);
    }
    assert_eq!(
        Stored3::kinds(),
        ["Settings", "OtherSettings", "ThirdSettings"]
    );
    let stranger = Entity::new("settings", "x").with("EntityKind", "Unknown");
    let error = Stored3::from_entity(stranger).expect_err("unknown kind");
    assert!(error.to_string().contains("one of"), "{error}");
    assert_eq!(error.kind(), ErrorKind::InvalidData);
}

#[test]
fn projections_read_only_their_properties() {
    assert_eq!(NameOnly::PROPERTIES, ["FirstName", "mail", "Visits"]);
    let entity = Entity::new("eu", "r_x")
        .with("FirstName", "Ada")
        .with("mail", "a@b")
        .with("Extra", 1);
    let name = NameOnly::from_entity(entity).expect("reads").value;
    assert_eq!(
        name,
        NameOnly {
            first_name: "Ada".into(),
            email_address: "a@b".into(),
            visits: 0
        }
    );
}

#[test]
fn a_type_in_a_module_derives_without_imports() {
    let inner = nested::Inner {
        a: "x".into(),
        b: -4,
    };
    let entity = inner.to_entity().expect("converts");
    assert_eq!(entity.row_key, "-4");
    assert_eq!(
        nested::Inner::from_entity(entity).expect("reads").value,
        inner
    );
}

#[test]
fn key_parts_cover_every_template_field() {
    let at = Utc
        .with_ymd_and_hms(2020, 1, 2, 3, 4, 5)
        .single()
        .expect("valid");
    let keyed = Keyed {
        user: 1,
        at,
        seq: 2,
        tag: "t".into(),
        guid: Uuid::nil(),
        flag: true,
        when: at,
        n: -3,
        small: 4,
    };
    for field in [
        "user", "at", "seq", "tag", "guid", "flag", "when", "n", "small",
    ] {
        assert!(keyed.key_part(field).is_some(), "{field}");
    }
    let mut text = String::new();
    keyed
        .key_part("guid")
        .expect("a key field")
        .write_key(tablekit::typed::KeyFormat::Plain, &mut text)
        .expect("writes");
    assert_eq!(text, Uuid::nil().to_string());
    assert_eq!(
        keyed.index_keys("by_guid").expect("renders"),
        Some((
            format!("g_{}", Uuid::nil()),
            "true_2020-01-02T03:04:05.000000000Z_-3".to_owned()
        ))
    );
}
