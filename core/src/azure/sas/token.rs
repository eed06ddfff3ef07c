//! The one reader of shared access signature tokens, for every service: what a token
//! says about itself (its services, permissions, times, table and key range), read before
//! any request so that a call outside it fails with a typed error and sends nothing.
//!
//! A field the checks use that does not read (a time in no documented format, bad
//! percent-encoding) is an [`Error::InvalidSas`]: never dropped, because a dropped expiry
//! would let every call through to the service's 403.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};

use super::sas_time;
use crate::error::{Error, Result};

/// How far the local clock may be from the service's: a token is refused here only once
/// it has been expired (or not yet valid) for longer than this, so that a token the
/// service still accepts is never refused. Within the allowance the service decides.
pub const SAS_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// One end of a table token's key range: a PartitionKey and, optionally, a RowKey.
pub type KeyBound = (String, Option<String>);

/// What a token says about itself. Its signature is not kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SasToken {
    /// An account SAS's services (`ss`: `b`, `q`, `t`, `f`).
    pub services: Option<String>,
    /// An account SAS's resource types (`srt`).
    pub resource_types: Option<String>,
    /// The permission letters (`sp`).
    pub permissions: Option<String>,
    /// When the token becomes valid (`st`).
    pub start: Option<DateTime<Utc>>,
    /// When it stops being valid (`se`).
    pub expiry: Option<DateTime<Utc>>,
    /// The stored access policy it is bound to (`si`).
    pub identifier: Option<String>,
    /// A table SAS's table (`tn`).
    pub table: Option<String>,
    /// A table SAS's first key (`spk`, `srk`).
    pub start_key: Option<KeyBound>,
    /// A table SAS's last key (`epk`, `erk`).
    pub end_key: Option<KeyBound>,
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidSas {
        reason: reason.into(),
    }
}

/// Reads the time formats the service accepts in `st` and `se`: `YYYY-MM-DD`,
/// `YYYY-MM-DDThh:mmZ`, `YYYY-MM-DDThh:mm:ssZ` (with or without fractions).
pub fn parse_time(value: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        return Some(t.with_timezone(&Utc));
    }
    if let Ok(t) = NaiveDateTime::parse_from_str(value, "%Y-%m-%dT%H:%MZ") {
        return Some(t.and_utc());
    }
    NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

impl SasToken {
    /// Reads a token (the query string, with or without `?`).
    ///
    /// # Errors
    /// [`Error::InvalidSas`] naming the field when a time or the encoding does not read,
    /// or a RowKey bound comes without its PartitionKey.
    pub fn parse(token: &str) -> Result<Self> {
        let mut read = SasToken::default();
        let (mut spk, mut srk, mut epk, mut erk) = (None, None, None, None);
        for part in token.trim_start_matches('?').split('&') {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            let value = percent_encoding::percent_decode_str(value)
                .decode_utf8()
                .map(|v| v.into_owned())
                .map_err(|_| invalid(format!("`{name}` is not percent-encoded UTF-8")))?;
            let time = |value: &str| {
                parse_time(value).ok_or_else(|| {
                    invalid(format!(
                        "`{name}={value}` is not a time (expected YYYY-MM-DD, \
                         YYYY-MM-DDThh:mmZ or YYYY-MM-DDThh:mm:ssZ)"
                    ))
                })
            };
            match name {
                "ss" => read.services = Some(value),
                "srt" => read.resource_types = Some(value),
                "tn" => read.table = Some(value),
                "sp" => read.permissions = Some(value),
                "st" => read.start = Some(time(&value)?),
                "se" => read.expiry = Some(time(&value)?),
                "si" => read.identifier = Some(value),
                "spk" => spk = Some(value),
                "srk" => srk = Some(value),
                "epk" => epk = Some(value),
                "erk" => erk = Some(value),
                _ => {}
            }
        }
        if spk.is_none() && srk.is_some() {
            return Err(invalid("`srk` needs `spk`"));
        }
        if epk.is_none() && erk.is_some() {
            return Err(invalid("`erk` needs `epk`"));
        }
        read.start_key = spk.map(|pk| (pk, srk));
        read.end_key = epk.map(|pk| (pk, erk));
        Ok(read)
    }

    /// Whether it is an account SAS (`ss`/`srt`), as opposed to one resource's.
    pub fn is_account_sas(&self) -> bool {
        self.services.is_some() || self.resource_types.is_some()
    }

    /// Checks the token's times at `now`, allowing [`SAS_CLOCK_SKEW`] either way.
    ///
    /// # Errors
    /// Why the token is not valid now, for a permission error of the caller's service.
    pub fn check_time(&self, now: DateTime<Utc>) -> std::result::Result<(), String> {
        let skew = chrono::Duration::from_std(SAS_CLOCK_SKEW).unwrap_or_default();
        if let Some(expiry) = self.expiry
            && now > expiry + skew
        {
            return Err(format!(
                "the access signature expired at {} (now {})",
                sas_time(expiry),
                sas_time(now)
            ));
        }
        if let Some(start) = self.start
            && now < start - skew
        {
            return Err(format!(
                "the access signature is valid from {} (now {})",
                sas_time(start),
                sas_time(now)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_read_times_in_every_documented_format() {
        for (text, expected) in [
            ("2026-11-22", "2026-11-22T00:00:00Z"),
            ("2026-11-22T10:30Z", "2026-11-22T10:30:00Z"),
            ("2026-11-22T10:30:15Z", "2026-11-22T10:30:15Z"),
            ("2026-11-22T10:30:15.1234567Z", "2026-11-22T10:30:15Z"),
        ] {
            let parsed = parse_time(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(sas_time(parsed), expected);
        }
    }

    #[test]
    fn a_time_that_does_not_read_is_an_error_never_dropped() {
        for token in ["sv=2019-02-02&se=tomorrow&sig=x", "st=22%2F11%2F2026&sp=r"] {
            match SasToken::parse(token) {
                Err(Error::InvalidSas { reason }) => {
                    assert!(reason.contains("is not a time"), "{reason}");
                    assert!(
                        !reason.contains("sig"),
                        "the signature is not echoed: {reason}"
                    );
                }
                other => panic!("expected InvalidSas for {token}, got {other:?}"),
            }
        }
        assert!(matches!(
            SasToken::parse("srk=a"),
            Err(Error::InvalidSas { .. })
        ));
    }

    #[test]
    fn account_and_service_tokens_are_told_apart() {
        let account = SasToken::parse("?sv=1&ss=qt&srt=sco&sp=raup&se=2999-01-01").expect("reads");
        assert!(account.is_account_sas());
        assert_eq!(account.services.as_deref(), Some("qt"));
        let table = SasToken::parse("tn=Orders&spk=a&epk=b&erk=z").expect("reads");
        assert!(!table.is_account_sas());
        assert_eq!(table.start_key, Some(("a".to_owned(), None)));
        assert_eq!(table.end_key, Some(("b".to_owned(), Some("z".to_owned()))));
    }

    #[test]
    fn times_are_checked_with_the_one_clock_skew_allowance() {
        let token =
            SasToken::parse("st=2026-11-22T10:00:00Z&se=2026-11-22T11:00:00Z").expect("reads");
        let at = |t: &str| parse_time(t).expect("a time");
        assert!(
            token.check_time(at("2026-11-22T09:59:30Z")).is_ok(),
            "within the skew"
        );
        assert!(token.check_time(at("2026-11-22T09:58:00Z")).is_err());
        assert!(
            token.check_time(at("2026-11-22T11:00:30Z")).is_ok(),
            "within the skew"
        );
        let expired = token
            .check_time(at("2026-11-22T11:02:00Z"))
            .expect_err("expired");
        assert!(
            expired.contains("expired at 2026-11-22T11:00:00Z"),
            "{expired}"
        );
    }
}
