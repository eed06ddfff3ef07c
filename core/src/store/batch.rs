//! Entity group transactions: [`Batch`] and its rules, and [`plan_batches`], which groups
//! writes into batches.

use std::collections::HashMap;

use super::write::WriteOp;
use crate::limits::{self, MAX_BATCH_BYTES, MAX_BATCH_OPERATIONS, Violation};
use crate::model::{Entity, IfMatch};

/// An entity group transaction: up to 100 operations on distinct entities of one
/// partition, applied all or nothing.
///
/// ```
/// use tablekit_core::{Entity, IfMatch, store::Batch};
///
/// let mut batch = Batch::new();
/// batch.insert(Entity::new("Sales", "empid_000001").with("Age", 30));
/// batch.delete("Sales", "empid_000002", IfMatch::Any);
/// assert_eq!(batch.len(), 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Batch {
    ops: Vec<WriteOp>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Batch::default()
    }

    /// Adds any operation.
    pub fn push(&mut self, op: WriteOp) -> &mut Self {
        self.ops.push(op);
        self
    }

    /// Adds an insert.
    pub fn insert(&mut self, entity: Entity) -> &mut Self {
        self.push(WriteOp::Insert(entity))
    }

    /// Adds a replace.
    pub fn replace(&mut self, entity: Entity, if_match: IfMatch) -> &mut Self {
        self.push(WriteOp::Replace(entity, if_match))
    }

    /// Adds a merge.
    pub fn merge(&mut self, entity: Entity, if_match: IfMatch) -> &mut Self {
        self.push(WriteOp::Merge(entity, if_match))
    }

    /// Adds an insert-or-replace.
    pub fn insert_or_replace(&mut self, entity: Entity) -> &mut Self {
        self.push(WriteOp::InsertOrReplace(entity))
    }

    /// Adds an insert-or-merge.
    pub fn insert_or_merge(&mut self, entity: Entity) -> &mut Self {
        self.push(WriteOp::InsertOrMerge(entity))
    }

    /// Adds a delete.
    pub fn delete(
        &mut self,
        partition_key: impl Into<String>,
        row_key: impl Into<String>,
        if_match: IfMatch,
    ) -> &mut Self {
        self.push(WriteOp::Delete {
            partition_key: partition_key.into(),
            row_key: row_key.into(),
            if_match,
        })
    }

    /// The operations, in order.
    pub fn operations(&self) -> &[WriteOp] {
        &self.ops
    }

    /// Operation `index`, to change (a declaration reshaping what another planned).
    pub fn operation_mut(&mut self, index: usize) -> Option<&mut WriteOp> {
        self.ops.get_mut(index)
    }

    /// Takes the operations out.
    pub fn into_operations(self) -> Vec<WriteOp> {
        self.ops
    }

    /// How many operations the batch holds.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The partition the batch writes (that of its first operation).
    pub fn partition_key(&self) -> Option<&str> {
        self.ops.first().map(|op| op.key().0)
    }

    /// Checks the batch rules: 1 to 100 operations, one partition, one operation per
    /// entity, every operation valid, at most 4 MiB of request payload in all (see
    /// [`WriteOp::payload_size`]).
    ///
    /// # Errors
    /// The first [`Violation`] found; those about one operation name its index.
    pub fn check(&self) -> Result<(), Violation> {
        if self.ops.is_empty() {
            return Err(Violation::BatchEmpty);
        }
        if self.ops.len() > MAX_BATCH_OPERATIONS {
            return Err(Violation::BatchTooManyOperations {
                count: self.ops.len(),
                max: MAX_BATCH_OPERATIONS,
            });
        }
        let partition = self.ops[0].key().0;
        let duplicate = self.first_duplicate();
        let mut previous: Option<&Entity> = None;
        let mut size = 0;
        for (index, op) in self.ops.iter().enumerate() {
            match op.entity() {
                Some(e) => {
                    limits::check_entity_sized_after(e, previous).map_err(|v| v.in_batch(index))?;
                    previous = Some(e);
                }
                None => op.checked_size().map(drop).map_err(|v| v.in_batch(index))?,
            }
            let (pk, rk) = op.key();
            if pk != partition {
                return Err(Violation::BatchMixedPartitions {
                    index,
                    expected: partition.to_owned(),
                    found: pk.to_owned(),
                });
            }
            if let Some((dup_index, first_index)) = duplicate
                && dup_index == index
            {
                return Err(Violation::BatchDuplicateEntity {
                    index,
                    first_index,
                    row_key: rk.to_owned(),
                });
            }
            size += op.payload_size();
        }
        if size > MAX_BATCH_BYTES {
            return Err(Violation::BatchTooLarge {
                size,
                max: MAX_BATCH_BYTES,
            });
        }
        Ok(())
    }
}

impl Batch {
    /// The first operation (in batch order) whose RowKey an earlier one already has, with
    /// the index of that earlier one. Row keys in ascending order, as planners and most
    /// callers build batches, are seen clean in one pass; others are sorted (at most 100).
    fn first_duplicate(&self) -> Option<(usize, usize)> {
        let keys = || self.ops.iter().map(|op| op.key().1);
        if keys().zip(keys().skip(1)).all(|(a, b)| a < b) {
            return None;
        }
        let mut sorted: Vec<(&str, usize)> = keys().zip(0..).collect();
        // Stable on the index: within a run of equal keys the first is the earliest.
        sorted.sort_unstable();
        sorted
            .windows(2)
            .filter(|pair| pair[0].0 == pair[1].0)
            .map(|pair| (pair[1].1, pair[0].1))
            .min()
    }
}

/// An entity group transaction planned by [`plan_batches`], with the position of each of
/// its operations in the planner's input.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlannedBatch {
    /// The batch, ready to submit.
    pub batch: Batch,
    /// For each operation of the batch, its index in the planner's input.
    pub inputs: Vec<usize>,
}

/// Plans writes into entity group transactions: grouped by partition (in the order the
/// partitions first appear, each partition's writes kept in their order), at most 100
/// operations and 4 MiB per batch. A second write to an entity already in the batch being
/// filled starts the next batch, so every write applies in input order.
///
/// # Errors
/// The first invalid operation's [`Violation`], naming its input index; nothing is planned.
pub fn plan_batches(
    ops: impl IntoIterator<Item = WriteOp>,
) -> Result<Vec<PlannedBatch>, Violation> {
    struct Filling {
        planned: PlannedBatch,
        size: usize,
        rows: std::collections::HashSet<String>,
    }
    let mut done: Vec<(usize, PlannedBatch)> = Vec::new();
    let mut filling: Vec<Filling> = Vec::new();
    let mut partitions: HashMap<String, usize> = HashMap::new();
    let mut order = 0usize;
    for (input, op) in ops.into_iter().enumerate() {
        op.checked_size().map_err(|v| v.in_batch(input))?;
        let size = op.payload_size();
        let (pk, rk) = op.key();
        let slot = match partitions.get(pk) {
            Some(&slot) => slot,
            None => {
                partitions.insert(pk.to_owned(), filling.len());
                filling.push(Filling {
                    planned: PlannedBatch::default(),
                    size: 0,
                    rows: std::collections::HashSet::new(),
                });
                filling.len() - 1
            }
        };
        let current = &mut filling[slot];
        if current.planned.batch.len() == MAX_BATCH_OPERATIONS
            || current.size + size > MAX_BATCH_BYTES
            || current.rows.contains(rk)
        {
            let full = std::mem::take(&mut current.planned);
            done.push((order, full));
            order += 1;
            current.size = 0;
            current.rows.clear();
        }
        current.rows.insert(rk.to_owned());
        current.size += size;
        current.planned.inputs.push(input);
        current.planned.batch.push(op);
    }
    for current in filling {
        if !current.planned.batch.is_empty() {
            done.push((order, current.planned));
            order += 1;
        }
    }
    done.sort_by_key(|(order, _)| *order);
    Ok(done.into_iter().map(|(_, planned)| planned).collect())
}

impl FromIterator<WriteOp> for Batch {
    fn from_iter<I: IntoIterator<Item = WriteOp>>(iter: I) -> Self {
        Batch {
            ops: iter.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(pk: &str, rk: usize) -> WriteOp {
        WriteOp::InsertOrReplace(Entity::new(pk, format!("{rk:04}")).with("N", rk as i64))
    }

    #[test]
    fn planning_groups_by_partition_and_keeps_each_partitions_order() {
        let ops = (0..250).map(|i| put(["a", "b"][i % 2], i));
        let plan = plan_batches(ops).expect("valid");
        let shapes: Vec<(Option<&str>, usize)> = plan
            .iter()
            .map(|p| (p.batch.partition_key(), p.batch.len()))
            .collect();
        assert_eq!(
            shapes,
            [
                (Some("a"), 100),
                (Some("b"), 100),
                (Some("a"), 25),
                (Some("b"), 25)
            ]
        );
        for planned in &plan {
            assert!(planned.batch.check().is_ok());
            assert!(planned.inputs.windows(2).all(|w| w[0] < w[1]));
        }
        let mut all: Vec<usize> = plan.iter().flat_map(|p| p.inputs.clone()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..250).collect::<Vec<_>>());
    }

    #[test]
    fn the_first_duplicate_in_batch_order_is_reported_with_its_first_occurrence() {
        let batch = |keys: &[usize]| -> Batch { keys.iter().map(|&k| put("a", k)).collect() };
        let duplicate = |b: &Batch| match b.check() {
            Err(Violation::BatchDuplicateEntity {
                index, first_index, ..
            }) => Some((index, first_index)),
            Err(other) => panic!("unexpected {other:?}"),
            Ok(()) => None,
        };
        assert_eq!(duplicate(&batch(&[1, 2, 3, 4])), None);
        assert_eq!(duplicate(&batch(&[4, 3, 2, 1])), None);
        assert_eq!(duplicate(&batch(&[1, 2, 1])), Some((2, 0)));
        // Key 9 repeats first (index 3), before key 1's second (index 4) and third copy.
        assert_eq!(duplicate(&batch(&[1, 9, 5, 9, 1, 1])), Some((3, 1)));
        assert_eq!(duplicate(&batch(&[7, 3, 3, 7])), Some((2, 1)));
        // Every order of a small multiset agrees with a reference that walks the batch.
        let keys = [1, 2, 2, 3, 3, 3];
        for seed in 0..200u64 {
            let mut shuffled = keys;
            let mut x = seed;
            for i in (1..shuffled.len()).rev() {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                shuffled.swap(i, (x >> 33) as usize % (i + 1));
            }
            let reference = (0..shuffled.len())
                .find_map(|i| (0..i).find(|&j| shuffled[j] == shuffled[i]).map(|j| (i, j)));
            assert_eq!(duplicate(&batch(&shuffled)), reference, "{shuffled:?}");
        }
    }

    #[test]
    fn an_invalid_operation_before_the_duplicate_is_reported_first_and_after_it_is_not() {
        let mut early = Batch::new();
        early
            .push(put("a", 1))
            .push(WriteOp::InsertOrReplace(Entity::new("a", "x/y")))
            .push(put("a", 1));
        assert!(matches!(
            early.check(),
            Err(Violation::InBatch { index: 1, violation })
                if matches!(*violation, Violation::KeyForbiddenCharacter { .. })
        ));
        let mut late = Batch::new();
        late.push(put("a", 1))
            .push(put("a", 1))
            .push(WriteOp::InsertOrReplace(Entity::new("a", "x/y")));
        assert!(matches!(
            late.check(),
            Err(Violation::BatchDuplicateEntity {
                index: 1,
                first_index: 0,
                ..
            })
        ));
    }

    #[test]
    fn a_second_write_to_an_entity_starts_the_next_batch() {
        let plan = plan_batches([put("a", 1), put("a", 2), put("a", 1)]).expect("valid");
        let inputs: Vec<Vec<usize>> = plan.into_iter().map(|p| p.inputs).collect();
        assert_eq!(inputs, [vec![0, 1], vec![2]]);
    }

    #[test]
    fn an_invalid_write_is_refused_with_its_input_position() {
        let bad = WriteOp::Insert(Entity::new("a/b", "x"));
        let error = plan_batches([put("a", 1), bad]).expect_err("invalid key");
        assert_eq!(error.batch_index(), Some(1));
    }
}
