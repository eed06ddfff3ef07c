//! What a shared access signature allows, read from the token a store was opened with, and
//! the checks that refuse an operation outside it before any request is sent.
//!
//! A service SAS for a table (`tn`) is checked for its table, its permissions
//! (`sp`: query `r`, insert `a`, update `u`, delete `d`; an upsert needs `a` and `u`), its
//! key range (`spk`/`srk` to `epk`/`erk`, compared as the service orders keys: by
//! PartitionKey, then RowKey, in UTF-16 code units) and its times (`st`, `se`), each with
//! [`SAS_CLOCK_SKEW`](super::sas::SAS_CLOCK_SKEW) of allowance. What a token bound to a stored access policy (`si`) leaves
//! out lives on the service and is not checked here: the service's 403 says it. An account
//! SAS (`ss`/`srt`) is checked for its times only.

use chrono::{DateTime, Utc};
use std::cmp::Ordering;
use std::ops::Bound;

use super::sas::{KeyBound, SasToken};
use crate::error::{Error, Result};
use crate::filter::{self, Filter};
use crate::query::Query;
use crate::store::{KeyOrder, WriteOp};

/// The scope of the token a store was opened with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SasScope {
    token: SasToken,
}

/// What an operation needs, for the message that refuses it.
const PERMISSION_NAMES: [(char, &str); 4] = [
    ('r', "read"),
    ('a', "add"),
    ('u', "update"),
    ('d', "delete"),
];

/// A key position in the service's order, with the first and last row of a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Row<'a> {
    First,
    Key(&'a str),
    Last,
}

type Position<'a> = (&'a str, Row<'a>);

fn compare(a: &Position<'_>, b: &Position<'_>) -> Ordering {
    let order = KeyOrder::Utf16;
    order.compare(a.0, b.0).then_with(|| match (&a.1, &b.1) {
        (Row::Key(x), Row::Key(y)) => order.compare(x, y),
        (x, y) => rank(x).cmp(&rank(y)),
    })
}

fn rank(row: &Row<'_>) -> u8 {
    match row {
        Row::First => 0,
        Row::Key(_) => 1,
        Row::Last => 2,
    }
}

/// The lower end of a query's key range: a position and whether it is excluded.
fn query_start<'a>(range: &'a crate::query::KeyRange) -> Option<(Position<'a>, bool)> {
    if let Some(pk) = range.partition() {
        return Some(match &range.rk_start {
            Bound::Unbounded => ((pk, Row::First), false),
            Bound::Included(rk) => ((pk, Row::Key(rk)), false),
            Bound::Excluded(rk) => ((pk, Row::Key(rk)), true),
        });
    }
    match &range.pk_start {
        Bound::Unbounded => None,
        Bound::Included(pk) => Some(((pk, Row::First), false)),
        Bound::Excluded(pk) => Some(((pk, Row::Last), true)),
    }
}

/// The upper end of a query's key range.
fn query_end<'a>(range: &'a crate::query::KeyRange) -> Option<(Position<'a>, bool)> {
    if let Some(pk) = range.partition() {
        return Some(match &range.rk_end {
            Bound::Unbounded => ((pk, Row::Last), false),
            Bound::Included(rk) => ((pk, Row::Key(rk)), false),
            Bound::Excluded(rk) => ((pk, Row::Key(rk)), true),
        });
    }
    match &range.pk_end {
        Bound::Unbounded => None,
        Bound::Included(pk) => Some(((pk, Row::Last), false)),
        Bound::Excluded(pk) => Some(((pk, Row::First), true)),
    }
}

impl SasScope {
    /// Reads a token (the query string, without `?`).
    ///
    /// # Errors
    /// [`Error::InvalidSas`] when a field the checks use does not read.
    pub(crate) fn parse(token: &str) -> Result<Self> {
        SasToken::parse(token).map(|token| SasScope { token })
    }

    /// A service SAS for one table: it grants entity operations only.
    pub(crate) fn is_table_sas(&self) -> bool {
        !self.token.is_account_sas()
    }

    /// Refuses an operation on tables themselves (create, delete, list) under a table
    /// SAS, which the service never allows; checks an account SAS's times.
    pub(crate) fn check_table_operation(&self, table: &str, what: &str) -> Result<()> {
        if self.is_table_sas() {
            return Err(Error::permission_denied(
                table,
                format!(
                    "a table access signature grants entity operations only; {what} needs an \
                     account SAS or the account key"
                ),
            ));
        }
        self.check_time(table, Utc::now())
    }

    /// Checks a point read or write of `table` (named `service_table` on the service).
    pub(crate) fn check_entity(
        &self,
        table: &str,
        service_table: &str,
        needs: &str,
        what: &str,
        (pk, rk): (&str, &str),
    ) -> Result<()> {
        self.check_common(table, service_table, needs, what, Utc::now())?;
        if self.token.is_account_sas() {
            return Ok(());
        }
        let position = (pk, Row::Key(rk));
        let below = self
            .lower_position()
            .is_some_and(|lower| compare(&position, &lower).is_lt());
        let above = self
            .upper_position()
            .is_some_and(|upper| compare(&position, &upper).is_gt());
        if below || above {
            return Err(Error::permission_denied(
                table,
                format!(
                    "PartitionKey `{pk}`, RowKey `{rk}` is outside the access signature's key \
                     range {}",
                    self.describe_range()
                ),
            ));
        }
        Ok(())
    }

    /// Checks a write, with the permissions its kind needs.
    pub(crate) fn check_write(&self, table: &str, service_table: &str, op: &WriteOp) -> Result<()> {
        let (needs, what) = write_needs(op);
        self.check_entity(table, service_table, needs, what, op.key())
    }

    /// Checks a query and returns the filter that keeps it inside the key range, when its
    /// own filter may reach outside: as the service answers a query only with the keys
    /// inside the range, the query is narrowed to them. A query whose keys all lie outside
    /// the range is refused.
    pub(crate) fn check_query(
        &self,
        table: &str,
        service_table: &str,
        query: &Query,
    ) -> Result<Option<Filter>> {
        self.check_common(table, service_table, "r", "querying", Utc::now())?;
        if self.token.is_account_sas()
            || (self.token.start_key.is_none() && self.token.end_key.is_none())
        {
            return Ok(None);
        }
        let range = query.key_range();
        let start = query_start(&range);
        let end = query_end(&range);
        let lower = self.lower_position();
        let upper = self.upper_position();
        let disjoint = match (&start, &upper) {
            (Some((s, excluded)), Some(u)) => match compare(s, u) {
                Ordering::Greater => true,
                Ordering::Equal => *excluded,
                Ordering::Less => false,
            },
            _ => false,
        } || match (&end, &lower) {
            (Some((e, excluded)), Some(l)) => match compare(e, l) {
                Ordering::Less => true,
                Ordering::Equal => *excluded,
                Ordering::Greater => false,
            },
            _ => false,
        };
        if disjoint {
            return Err(Error::permission_denied(
                table,
                format!(
                    "the query reads only keys outside the access signature's key range {}",
                    self.describe_range()
                ),
            ));
        }
        let needs_lower = match (&start, &lower) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some((s, _)), Some(l)) => compare(s, l).is_lt(),
        };
        let needs_upper = match (&end, &upper) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some((e, _)), Some(u)) => compare(e, u).is_gt(),
        };
        Ok(self.range_filter(needs_lower, needs_upper))
    }

    /// The filter selecting the keys inside the range (only the ends asked for).
    fn range_filter(&self, lower: bool, upper: bool) -> Option<Filter> {
        let pk = filter::partition_key;
        let rk = filter::row_key;
        let lower = self.token.start_key.as_ref().filter(|_| lower);
        let upper = self.token.end_key.as_ref().filter(|_| upper);
        // One partition: a partition scan the service can serve as one.
        if let (Some((spk, srk)), Some((epk, erk))) = (&self.token.start_key, &self.token.end_key)
            && spk == epk
        {
            let mut filter = pk().eq(spk.as_str());
            if let Some(srk) = srk.as_ref().filter(|_| lower.is_some()) {
                filter = filter & rk().ge(srk.as_str());
            }
            if let Some(erk) = erk.as_ref().filter(|_| upper.is_some()) {
                filter = filter & rk().le(erk.as_str());
            }
            return (lower.is_some() || upper.is_some()).then_some(filter);
        }
        let lower = lower.map(|(spk, srk)| match srk {
            None => pk().ge(spk.as_str()),
            Some(srk) => pk().gt(spk.as_str()) | (pk().eq(spk.as_str()) & rk().ge(srk.as_str())),
        });
        let upper = upper.map(|(epk, erk)| match erk {
            None => pk().le(epk.as_str()),
            Some(erk) => pk().lt(epk.as_str()) | (pk().eq(epk.as_str()) & rk().le(erk.as_str())),
        });
        match (lower, upper) {
            (Some(l), Some(u)) => Some(l & u),
            (Some(x), None) | (None, Some(x)) => Some(x),
            (None, None) => None,
        }
    }

    fn lower_position(&self) -> Option<Position<'_>> {
        self.token
            .start_key
            .as_ref()
            .map(|(pk, rk)| (pk.as_str(), rk.as_deref().map_or(Row::First, Row::Key)))
    }

    fn upper_position(&self) -> Option<Position<'_>> {
        self.token
            .end_key
            .as_ref()
            .map(|(pk, rk)| (pk.as_str(), rk.as_deref().map_or(Row::Last, Row::Key)))
    }

    fn describe_range(&self) -> String {
        let end = |bound: &Option<KeyBound>, open: &str| match bound {
            None => open.to_owned(),
            Some((pk, None)) => format!("PartitionKey `{pk}`"),
            Some((pk, Some(rk))) => format!("(PartitionKey `{pk}`, RowKey `{rk}`)"),
        };
        format!(
            "from {} to {}",
            end(&self.token.start_key, "the first key"),
            end(&self.token.end_key, "the last key")
        )
    }

    /// The checks every entity operation shares: the table, the permissions, the times.
    fn check_common(
        &self,
        table: &str,
        service_table: &str,
        needs: &str,
        what: &str,
        now: DateTime<Utc>,
    ) -> Result<()> {
        if let Some(signed) = &self.token.table
            && !signed.eq_ignore_ascii_case(service_table)
        {
            return Err(Error::permission_denied(
                table,
                format!("the access signature is for table `{signed}`, not `{service_table}`"),
            ));
        }
        if !self.token.is_account_sas()
            && let Some(granted) = &self.token.permissions
            && let Some(missing) = needs.chars().find(|p| !granted.contains(*p))
        {
            let name = PERMISSION_NAMES
                .iter()
                .find(|(letter, _)| *letter == missing)
                .map_or("", |(_, name)| name);
            return Err(Error::permission_denied(
                table,
                format!(
                    "{what} needs permission `{missing}` ({name}); the access signature grants \
                     `{granted}`"
                ),
            ));
        }
        self.check_time(table, now)
    }

    fn check_time(&self, table: &str, now: DateTime<Utc>) -> Result<()> {
        self.token
            .check_time(now)
            .map_err(|reason| Error::permission_denied(table, reason))
    }
}

/// The permissions a write needs, and its name for messages.
fn write_needs(op: &WriteOp) -> (&'static str, &'static str) {
    match op {
        WriteOp::Insert(_) => ("a", "inserting"),
        WriteOp::Replace(..) => ("u", "replacing"),
        WriteOp::Merge(..) => ("u", "merging"),
        WriteOp::InsertOrReplace(_) => ("au", "inserting or replacing"),
        WriteOp::InsertOrMerge(_) => ("au", "inserting or merging"),
        WriteOp::Delete { .. } => ("d", "deleting"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Entity, IfMatch};

    fn scope(token: &str) -> SasScope {
        SasScope::parse(token).expect("a token")
    }

    fn denied(result: Result<impl std::fmt::Debug>) -> String {
        match result {
            Err(Error::PermissionDenied {
                reason,
                service_code: None,
                ..
            }) => reason,
            other => panic!("expected a local PermissionDenied, got {other:?}"),
        }
    }

    const FUTURE: &str = "se=2999-01-01T00%3A00%3A00Z";

    #[test]
    fn tokens_that_do_not_read_are_refused() {
        assert!(SasScope::parse("se=tomorrow").is_err());
        assert!(SasScope::parse("srk=a").is_err());
    }

    #[test]
    fn the_table_is_compared_without_case_and_with_the_prefix() {
        let s = scope(&format!("tn=t1orders&sp=r&{FUTURE}"));
        assert!(
            s.check_entity("Orders", "t1Orders", "r", "reading", ("p", "r"))
                .is_ok()
        );
        let reason = denied(s.check_entity("Orders", "Orders", "r", "reading", ("p", "r")));
        assert!(
            reason.contains("for table `t1orders`, not `Orders`"),
            "{reason}"
        );
    }

    #[test]
    fn each_write_needs_its_permission_and_upserts_need_two() {
        let s = scope(&format!("tn=T&sp=ra&{FUTURE}"));
        let e = Entity::new("p", "r");
        assert!(s.check_write("T", "T", &WriteOp::Insert(e.clone())).is_ok());
        let reason = denied(s.check_write("T", "T", &WriteOp::InsertOrMerge(e.clone())));
        assert!(reason.contains("needs permission `u` (update)"), "{reason}");
        assert!(reason.contains("grants `ra`"), "{reason}");
        let reason = denied(s.check_write(
            "T",
            "T",
            &WriteOp::Delete {
                partition_key: "p".into(),
                row_key: "r".into(),
                if_match: IfMatch::Any,
            },
        ));
        assert!(reason.contains("deleting needs permission `d`"), "{reason}");
    }

    #[test]
    fn keys_are_checked_in_the_services_composite_order() {
        let s = scope(&format!("tn=T&sp=raud&{FUTURE}&spk=b&srk=5&epk=d&erk=2"));
        let check = |pk, rk| s.check_entity("T", "T", "r", "reading", (pk, rk));
        // Inside: the start key, anything in a partition between, the end key.
        for (pk, rk) in [
            ("b", "5"),
            ("b", "9"),
            ("c", ""),
            ("c", "zzz"),
            ("d", "2"),
            ("d", "1"),
        ] {
            assert!(check(pk, rk).is_ok(), "({pk}, {rk})");
        }
        for (pk, rk) in [("a", "9"), ("b", "4"), ("d", "3"), ("e", "")] {
            let reason = denied(check(pk, rk));
            assert!(
                reason.contains(&format!("PartitionKey `{pk}`, RowKey `{rk}` is outside")),
                "{reason}"
            );
        }
        // Without row keys, a range of whole partitions.
        let s = scope(&format!("tn=T&sp=r&{FUTURE}&spk=b&epk=b"));
        assert!(s.check_entity("T", "T", "r", "reading", ("b", "")).is_ok());
        assert!(
            s.check_entity("T", "T", "r", "reading", ("b", "\u{10FFFF}"))
                .is_ok()
        );
        assert!(
            s.check_entity("T", "T", "r", "reading", ("ba", ""))
                .is_err()
        );
    }

    #[test]
    fn keys_compare_by_utf16_code_units_as_the_service_does() {
        // U+FFFD sorts after U+10000 by code point, before it in UTF-16.
        let s = scope(&format!("tn=T&sp=r&{FUTURE}&spk=p&srk=%F0%90%80%80&epk=p"));
        assert!(
            s.check_entity("T", "T", "r", "reading", ("p", "\u{FFFD}"))
                .is_ok()
        );
    }

    #[test]
    fn queries_inside_the_range_are_sent_as_they_are() {
        let s = scope(&format!("tn=T&sp=r&{FUTURE}&spk=p&srk=a&epk=p&erk=m"));
        let q = Query::parse("PartitionKey eq 'p' and RowKey ge 'b' and RowKey lt 'k'")
            .expect("a filter");
        assert_eq!(s.check_query("T", "T", &q).expect("allowed"), None);
    }

    #[test]
    fn queries_reaching_outside_the_range_are_narrowed_to_it() {
        let s = scope(&format!("tn=T&sp=r&{FUTURE}&spk=p&srk=a&epk=p&erk=m"));
        let all = s.check_query("T", "T", &Query::new()).expect("allowed");
        assert_eq!(
            all.map(|f| f.to_odata()),
            Some("(PartitionKey eq 'p' and RowKey ge 'a') and RowKey le 'm'".to_owned())
        );
        let tail = Query::parse("PartitionKey eq 'p' and RowKey ge 'c'").expect("a filter");
        assert_eq!(
            s.check_query("T", "T", &tail)
                .expect("allowed")
                .map(|f| f.to_odata()),
            Some("PartitionKey eq 'p' and RowKey le 'm'".to_owned())
        );
        let s = scope(&format!("tn=T&sp=r&{FUTURE}&spk=b&srk=5&epk=d"));
        let narrowed = s
            .check_query("T", "T", &Query::parse("Age gt 3").expect("a filter"))
            .expect("allowed")
            .expect("narrowed");
        assert_eq!(
            narrowed.to_odata(),
            "(PartitionKey gt 'b' or (PartitionKey eq 'b' and RowKey ge '5')) and PartitionKey le 'd'"
        );
        for (pk, rk, inside) in [
            ("b", "4", false),
            ("b", "5", true),
            ("d", "z", true),
            ("e", "", false),
        ] {
            assert_eq!(
                narrowed.matches(&Entity::new(pk, rk)),
                inside,
                "({pk}, {rk})"
            );
        }
    }

    #[test]
    fn queries_entirely_outside_the_range_are_refused() {
        let s = scope(&format!("tn=T&sp=r&{FUTURE}&spk=p&srk=a&epk=p&erk=m"));
        for filter in [
            "PartitionKey eq 'q'",
            "PartitionKey eq 'p' and RowKey gt 'm'",
            "PartitionKey eq 'p' and RowKey lt 'a'",
            "PartitionKey gt 'p'",
            "PartitionKey lt 'p'",
        ] {
            let q = Query::parse(filter).expect("a filter");
            let reason = denied(s.check_query("T", "T", &q));
            assert!(reason.contains("only keys outside"), "{filter}: {reason}");
        }
        let q = Query::parse("PartitionKey eq 'p' and RowKey ge 'm'").expect("a filter");
        assert!(s.check_query("T", "T", &q).is_ok(), "the end key is inside");
    }

    #[test]
    fn times_are_checked_with_the_clock_skew_allowance() {
        let s = scope("tn=T&sp=r&st=2026-11-22T10%3A00%3A00Z&se=2026-11-22T11%3A00%3A00Z");
        let at = |t: &str| super::super::sas::parse_time(t).expect("a time");
        assert!(
            s.check_common("T", "T", "r", "reading", at("2026-11-22T10:30:00Z"))
                .is_ok()
        );
        assert!(
            s.check_common("T", "T", "r", "reading", at("2026-11-22T11:00:59Z"))
                .is_ok()
        );
        assert!(
            s.check_common("T", "T", "r", "reading", at("2026-11-22T09:59:01Z"))
                .is_ok()
        );
        let reason = denied(s.check_common("T", "T", "r", "reading", at("2026-11-22T11:01:01Z")));
        assert!(
            reason.contains("expired at 2026-11-22T11:00:00Z"),
            "{reason}"
        );
        let reason = denied(s.check_common("T", "T", "r", "reading", at("2026-11-22T09:58:59Z")));
        assert!(
            reason.contains("valid from 2026-11-22T10:00:00Z"),
            "{reason}"
        );
    }

    #[test]
    fn a_policy_token_is_checked_only_for_what_it_carries() {
        let s = scope("tn=T&si=readers&spk=p&epk=p");
        assert!(
            s.check_entity("T", "T", "d", "deleting", ("p", "r"))
                .is_ok()
        );
        assert!(
            s.check_entity("T", "T", "d", "deleting", ("q", "r"))
                .is_err()
        );
        let s = scope("tn=T&si=readers&sp=r");
        assert!(
            s.check_entity("T", "T", "d", "deleting", ("p", "r"))
                .is_err()
        );
    }

    #[test]
    fn a_table_sas_cannot_create_delete_or_list_tables() {
        let reason = denied(
            scope(&format!("tn=T&sp=raud&{FUTURE}")).check_table_operation("T", "creating a table"),
        );
        assert!(reason.contains("entity operations only"), "{reason}");
        let account = scope(&format!("ss=t&srt=sco&sp=rl&{FUTURE}"));
        assert!(
            account
                .check_table_operation("T", "creating a table")
                .is_ok()
        );
        assert!(
            account
                .check_write("T", "T", &WriteOp::Insert(Entity::new("p", "r")))
                .is_ok(),
            "an account SAS's permissions are the service's to check"
        );
        let expired = scope("ss=t&srt=sco&sp=rl&se=2000-01-01");
        assert!(denied(expired.check_table_operation("T", "listing tables")).contains("expired"));
    }
}
