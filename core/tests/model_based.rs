//! Model-based test: random sequences of operations run against each backend and against a
//! `BTreeMap` model of the table service's semantics; every outcome and the final contents
//! must agree.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use tablekit_core::prelude::*;
use tablekit_core::{ErrorKind, Properties};

const TABLE: &str = "Model";

#[derive(Clone, Debug)]
enum Cond {
    Any,
    Current,
    Stale,
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u8, u8, Props),
    Replace(u8, u8, Props, Cond),
    Merge(u8, u8, Props, Cond),
    InsertOrReplace(u8, u8, Props),
    InsertOrMerge(u8, u8, Props),
    Delete(u8, u8, Cond),
    Get(u8, u8),
    QueryPartition(u8, Option<usize>),
    QueryRange(u8, u8, u8),
    Batch(u8, Vec<(u8, BatchKind, Props, Cond)>),
}

#[derive(Clone, Copy, Debug)]
enum BatchKind {
    Insert,
    Replace,
    Merge,
    Upsert,
    Delete,
}

type Props = Vec<(u8, i32)>;

fn pk(p: u8) -> String {
    format!("p{p}")
}

fn rk(r: u8) -> String {
    format!("r{r:02}")
}

fn props(p: &Props) -> Properties {
    let mut out = Properties::new();
    for (name, v) in p {
        let name = format!("P{name}");
        // Alternate types so type changes across writes are exercised too.
        let value = if v % 3 == 0 {
            Value::String(format!("s{v}"))
        } else {
            Value::Int32(*v)
        };
        out.insert(name, value);
    }
    out
}

fn entity(p: u8, r: u8, ps: &Props) -> Entity {
    let mut e = Entity::new(pk(p), rk(r));
    e.properties = props(ps);
    e
}

fn arb_props() -> impl Strategy<Value = Props> {
    prop::collection::vec((0u8..4, -20i32..20), 0..4)
}

fn arb_cond() -> impl Strategy<Value = Cond> {
    prop_oneof![Just(Cond::Any), Just(Cond::Current), Just(Cond::Stale)]
}

fn arb_kind() -> impl Strategy<Value = BatchKind> {
    prop_oneof![
        Just(BatchKind::Insert),
        Just(BatchKind::Replace),
        Just(BatchKind::Merge),
        Just(BatchKind::Upsert),
        Just(BatchKind::Delete),
    ]
}

fn arb_op() -> impl Strategy<Value = Op> {
    let p = 0u8..2;
    let r = 0u8..6;
    prop_oneof![
        (p.clone(), r.clone(), arb_props()).prop_map(|(p, r, x)| Op::Insert(p, r, x)),
        (p.clone(), r.clone(), arb_props(), arb_cond())
            .prop_map(|(p, r, x, c)| Op::Replace(p, r, x, c)),
        (p.clone(), r.clone(), arb_props(), arb_cond())
            .prop_map(|(p, r, x, c)| Op::Merge(p, r, x, c)),
        (p.clone(), r.clone(), arb_props()).prop_map(|(p, r, x)| Op::InsertOrReplace(p, r, x)),
        (p.clone(), r.clone(), arb_props()).prop_map(|(p, r, x)| Op::InsertOrMerge(p, r, x)),
        (p.clone(), r.clone(), arb_cond()).prop_map(|(p, r, c)| Op::Delete(p, r, c)),
        (p.clone(), r.clone()).prop_map(|(p, r)| Op::Get(p, r)),
        (p.clone(), prop::option::of(1usize..4)).prop_map(|(p, t)| Op::QueryPartition(p, t)),
        (p.clone(), r.clone(), r.clone()).prop_map(|(p, a, b)| Op::QueryRange(p, a, b)),
        (
            p,
            prop::collection::vec((r, arb_kind(), arb_props(), arb_cond()), 1..5)
        )
            .prop_map(|(p, ops)| Op::Batch(p, ops)),
    ]
}

/// The model: stored properties by key, and a version counter standing in for ETags.
#[derive(Default, Clone)]
struct Model {
    rows: BTreeMap<(String, String), (Properties, u64)>,
    next_version: u64,
}

type Outcome = Result<(), ErrorKind>;

impl Model {
    fn condition_holds(&self, key: &(String, String), cond: &Cond, known: Option<u64>) -> bool {
        let stored = self.rows.get(key).map(|(_, v)| *v);
        match cond {
            Cond::Any => true,
            Cond::Current => known.is_some() && known == stored,
            Cond::Stale => false,
        }
    }

    fn put(&mut self, key: (String, String), props: Properties) {
        self.next_version += 1;
        self.rows.insert(key, (props, self.next_version));
    }

    /// Applies one write; `known` is the version the caller last saw for this key.
    fn write(&mut self, kind: BatchKind, e: &Entity, cond: &Cond, known: Option<u64>) -> Outcome {
        let key = (e.partition_key.clone(), e.row_key.clone());
        let exists = self.rows.contains_key(&key);
        match kind {
            BatchKind::Insert if exists => Err(ErrorKind::AlreadyExists),
            BatchKind::Insert | BatchKind::Upsert => {
                self.put(key, e.properties.clone());
                Ok(())
            }
            BatchKind::Replace | BatchKind::Merge | BatchKind::Delete if !exists => {
                Err(ErrorKind::NotFound)
            }
            _ if !self.condition_holds(&key, cond, known) => Err(ErrorKind::PreconditionFailed),
            BatchKind::Replace => {
                self.put(key, e.properties.clone());
                Ok(())
            }
            BatchKind::Merge => {
                let mut merged = self.rows[&key].0.clone();
                merged.extend(e.properties.clone());
                self.put(key, merged);
                Ok(())
            }
            BatchKind::Delete => {
                self.rows.remove(&key);
                Ok(())
            }
        }
    }
}

/// Tracks, per key, the backend's latest ETag and the model version it corresponds to.
#[derive(Default)]
struct Known {
    etags: HashMap<(String, String), (ETag, u64)>,
}

fn if_match(known: &Known, key: &(String, String), cond: &Cond) -> IfMatch {
    match cond {
        Cond::Any => IfMatch::Any,
        Cond::Current => match known.etags.get(key) {
            Some((etag, _)) => IfMatch::ETag(etag.clone()),
            None => IfMatch::ETag(ETag::new("W/\"never-issued\"")),
        },
        Cond::Stale => IfMatch::ETag(ETag::new("W/\"stale\"")),
    }
}

fn write_op(kind: BatchKind, e: Entity, m: IfMatch) -> WriteOp {
    match kind {
        BatchKind::Insert => WriteOp::Insert(e),
        BatchKind::Replace => WriteOp::Replace(e, m),
        BatchKind::Merge => WriteOp::Merge(e, m),
        BatchKind::Upsert => WriteOp::InsertOrReplace(e),
        BatchKind::Delete => WriteOp::Delete {
            partition_key: e.partition_key,
            row_key: e.row_key,
            if_match: m,
        },
    }
}

fn single(op: &Op) -> Option<(BatchKind, Entity, Cond)> {
    Some(match op {
        Op::Insert(p, r, x) => (BatchKind::Insert, entity(*p, *r, x), Cond::Any),
        Op::Replace(p, r, x, c) => (BatchKind::Replace, entity(*p, *r, x), c.clone()),
        Op::Merge(p, r, x, c) => (BatchKind::Merge, entity(*p, *r, x), c.clone()),
        Op::InsertOrReplace(p, r, x) => (BatchKind::Upsert, entity(*p, *r, x), Cond::Any),
        Op::Delete(p, r, c) => (BatchKind::Delete, entity(*p, *r, &Vec::new()), c.clone()),
        _ => return None,
    })
}

fn rows_of(entities: &[Entity]) -> Vec<(String, String, Properties)> {
    entities
        .iter()
        .map(|e| {
            (
                e.partition_key.clone(),
                e.row_key.clone(),
                e.properties.clone(),
            )
        })
        .collect()
}

fn model_rows<'a>(
    iter: impl Iterator<Item = (&'a (String, String), &'a (Properties, u64))>,
) -> Vec<(String, String, Properties)> {
    iter.map(|((p, r), (props, _))| (p.clone(), r.clone(), props.clone()))
        .collect()
}

async fn run<S: TableStore>(store: &S, ops: Vec<Op>) -> Result<(), TestCaseError> {
    store.create_table(TABLE).await.expect("create table");
    let mut model = Model::default();
    let mut known = Known::default();
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::InsertOrMerge(p, r, x) => {
                let e = entity(*p, *r, x);
                let key = (e.partition_key.clone(), e.row_key.clone());
                let got = store.insert_or_merge(TABLE, e.clone()).await;
                let exists = model.rows.contains_key(&key);
                let kind = if exists {
                    BatchKind::Merge
                } else {
                    BatchKind::Upsert
                };
                let expected = model.write(kind, &e, &Cond::Any, None);
                prop_assert_eq!(
                    got.as_ref().map(drop).map_err(Error::kind),
                    expected,
                    "step {}: {:?}",
                    step,
                    op
                );
                if let Ok(etag) = got {
                    known.etags.insert(key, (etag, model.next_version));
                }
            }
            Op::Get(p, r) => {
                let got = store.get(TABLE, &pk(*p), &rk(*r), None).await.expect("get");
                let key = (pk(*p), rk(*r));
                let expected = model.rows.get(&key).map(|(props, _)| props.clone());
                prop_assert_eq!(
                    got.as_ref().map(|e| e.properties.clone()),
                    expected,
                    "step {}",
                    step
                );
                if let Some(e) = got {
                    let version = model.rows[&key].1;
                    known
                        .etags
                        .insert(key, (e.etag.expect("stored etag"), version));
                }
            }
            Op::QueryPartition(p, top) => {
                let mut q = Query::partition(pk(*p));
                if let Some(t) = top {
                    q = q.top(*t);
                }
                let got = store.query_all(TABLE, q).await.expect("query");
                let lo = (pk(*p), String::new());
                let mut expected = model_rows(
                    model
                        .rows
                        .range(lo..)
                        .take_while(|((kp, _), _)| *kp == pk(*p)),
                );
                if let Some(t) = top {
                    expected.truncate(*t);
                }
                prop_assert_eq!(rows_of(&got), expected, "step {}", step);
            }
            Op::QueryRange(p, a, b) => {
                let f = format!(
                    "PartitionKey eq '{}' and RowKey ge '{}' and RowKey lt '{}'",
                    pk(*p),
                    rk(*a),
                    rk(*b)
                );
                let got = store
                    .query_all(TABLE, Query::parse(&f).expect("filter"))
                    .await
                    .expect("query");
                let expected = model_rows(
                    model
                        .rows
                        .iter()
                        .filter(|((kp, kr), _)| *kp == pk(*p) && *kr >= rk(*a) && *kr < rk(*b)),
                );
                prop_assert_eq!(rows_of(&got), expected, "step {}", step);
            }
            Op::Batch(p, items) => {
                let mut batch = Batch::new();
                let mut trial = model.clone();
                let mut expected: Result<(), (usize, ErrorKind)> = Ok(());
                let mut seen = std::collections::HashSet::new();
                let duplicate = items.iter().any(|(r, ..)| !seen.insert(*r));
                for (index, (r, kind, x, c)) in items.iter().enumerate() {
                    let e = entity(*p, *r, x);
                    let key = (e.partition_key.clone(), e.row_key.clone());
                    let known_version = known.etags.get(&key).map(|(_, v)| *v);
                    batch.push(write_op(*kind, e.clone(), if_match(&known, &key, c)));
                    if expected.is_ok()
                        && let Err(k) = trial.write(*kind, &e, c, known_version)
                    {
                        expected = Err((index, k));
                    }
                }
                let got = store.submit_batch(TABLE, batch).await;
                if duplicate {
                    prop_assert_eq!(
                        got.map(drop).map_err(|e| e.kind()),
                        Err(ErrorKind::InvalidInput),
                        "step {}",
                        step
                    );
                    continue;
                }
                match (&got, &expected) {
                    (Ok(etags), Ok(())) => {
                        model = trial;
                        for ((r, ..), etag) in items.iter().zip(etags) {
                            let key = (pk(*p), rk(*r));
                            match (etag, model.rows.get(&key)) {
                                (Some(etag), Some((_, v))) => {
                                    known.etags.insert(key, (etag.clone(), *v));
                                }
                                _ => {
                                    known.etags.remove(&key);
                                }
                            }
                        }
                    }
                    (Err(e), Err((index, kind))) => {
                        prop_assert_eq!(e.batch_index(), Some(*index), "step {}: {}", step, e);
                        prop_assert_eq!(e.kind(), *kind, "step {}", step);
                    }
                    _ => prop_assert!(false, "step {step}: backend {got:?}, model {expected:?}"),
                }
            }
            op => {
                let (kind, e, cond) = single(op).expect("a single write");
                let key = (e.partition_key.clone(), e.row_key.clone());
                let m = if_match(&known, &key, &cond);
                let known_version = known.etags.get(&key).map(|(_, v)| *v);
                let got = store.execute(TABLE, write_op(kind, e.clone(), m)).await;
                let expected = model.write(kind, &e, &cond, known_version);
                prop_assert_eq!(
                    got.as_ref().map(drop).map_err(Error::kind),
                    expected,
                    "step {}: {:?}",
                    step,
                    op
                );
                match got {
                    Ok(Some(etag)) => {
                        known.etags.insert(key, (etag, model.next_version));
                    }
                    Ok(None) => {
                        known.etags.remove(&key);
                    }
                    Err(_) => {}
                }
            }
        }
    }
    let all = store
        .query_all(TABLE, Query::new())
        .await
        .expect("final query");
    prop_assert_eq!(rows_of(&all), model_rows(model.rows.iter()));
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn memory_store_agrees_with_the_model(ops in prop::collection::vec(arb_op(), 1..40)) {
        runtime().block_on(run(&MemoryStore::new(), ops))?;
    }

    #[test]
    fn sqlite_store_agrees_with_the_model(ops in prop::collection::vec(arb_op(), 1..40)) {
        let dir = tempfile::tempdir().expect("tempdir");
        let rt = runtime();
        rt.block_on(async {
            let store = SqliteStore::create(dir.path().join("model.db")).await.expect("open");
            run(&store, ops).await
        })?;
    }
}
