//! The row encoding of an entity's user properties: a compact, typed, order-preserving
//! binary format, stored in one BLOB column.
//!
//! ```text
//! version:u8 = 1, then per property:
//!   name_len:u16le name:utf8 tag:u8 payload
//!   payload: String/Binary len:u32le bytes | Int32 i32le | Int64 i64le | Double f64le
//!            | Boolean u8 | DateTime secs:i64le nanos:u32le | Guid 16 bytes
//! ```

use chrono::DateTime;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::model::{Properties, Value};

const VERSION: u8 = 1;

const STRING: u8 = 1;
const INT32: u8 = 2;
const INT64: u8 = 3;
const DOUBLE: u8 = 4;
const BOOLEAN: u8 = 5;
const DATETIME: u8 = 6;
const GUID: u8 = 7;
const BINARY: u8 = 8;

/// Encodes properties. Names and values were checked against the limits before, so every
/// length fits its field (names ≤ 255 chars, values ≤ 64 KiB).
pub fn encode(properties: &Properties) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + properties.len() * 24);
    encode_into(properties, &mut out);
    out
}

/// Encodes properties into `out`, replacing what it held: a caller encoding many
/// entities reuses one buffer.
pub fn encode_into(properties: &Properties, out: &mut Vec<u8>) {
    out.clear();
    out.push(VERSION);
    for (name, value) in properties {
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        match value {
            Value::String(s) => {
                out.push(STRING);
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            Value::Int32(v) => {
                out.push(INT32);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Value::Int64(v) => {
                out.push(INT64);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Value::Double(v) => {
                out.push(DOUBLE);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Value::Boolean(v) => {
                out.push(BOOLEAN);
                out.push(u8::from(*v));
            }
            Value::DateTime(v) => {
                out.push(DATETIME);
                out.extend_from_slice(&v.timestamp().to_le_bytes());
                out.extend_from_slice(&v.timestamp_subsec_nanos().to_le_bytes());
            }
            Value::Guid(v) => {
                out.push(GUID);
                out.extend_from_slice(v.as_bytes());
            }
            Value::Binary(b) => {
                out.push(BINARY);
                out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                out.extend_from_slice(b);
            }
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
}

fn corrupt(what: &str) -> Error {
    Error::Backend {
        message: format!("corrupt entity row: {what}"),
    }
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(corrupt("truncated"));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn text(&mut self, len: usize) -> Result<String> {
        std::str::from_utf8(self.take(len)?)
            .map(str::to_owned)
            .map_err(|_| corrupt("invalid UTF-8"))
    }
}

/// The value of the property `name` in bytes written by [`encode`], decoding only that
/// value: the others are stepped over by their lengths.
///
/// # Errors
/// As [`decode`], for the part of the row read before the property is found.
pub fn find(bytes: &[u8], name: &str) -> Result<Option<Value>> {
    let mut r = Reader { bytes };
    if r.array::<1>()?[0] != VERSION {
        return Err(corrupt("unknown format version"));
    }
    while !r.bytes.is_empty() {
        let name_len = u16::from_le_bytes(r.array()?) as usize;
        if r.take(name_len)? == name.as_bytes() {
            return value(&mut r).map(Some);
        }
        let skip = match r.array::<1>()?[0] {
            STRING | BINARY => u32::from_le_bytes(r.array()?) as usize,
            INT32 => 4,
            INT64 | DOUBLE => 8,
            BOOLEAN => 1,
            DATETIME => 12,
            GUID => 16,
            _ => return Err(corrupt("unknown type tag")),
        };
        r.take(skip)?;
    }
    Ok(None)
}

/// The tagged value at the reader's position.
fn value(r: &mut Reader<'_>) -> Result<Value> {
    Ok(match r.array::<1>()?[0] {
        STRING => {
            let len = u32::from_le_bytes(r.array()?) as usize;
            Value::String(r.text(len)?)
        }
        INT32 => Value::Int32(i32::from_le_bytes(r.array()?)),
        INT64 => Value::Int64(i64::from_le_bytes(r.array()?)),
        DOUBLE => Value::Double(f64::from_le_bytes(r.array()?)),
        BOOLEAN => Value::Boolean(r.array::<1>()?[0] != 0),
        DATETIME => {
            let secs = i64::from_le_bytes(r.array()?);
            let nanos = u32::from_le_bytes(r.array()?);
            Value::DateTime(
                DateTime::from_timestamp(secs, nanos).ok_or_else(|| corrupt("bad DateTime"))?,
            )
        }
        GUID => Value::Guid(Uuid::from_bytes(r.array()?)),
        BINARY => {
            let len = u32::from_le_bytes(r.array()?) as usize;
            Value::Binary(r.take(len)?.to_vec())
        }
        _ => return Err(corrupt("unknown type tag")),
    })
}

/// Decodes properties written by [`encode`].
///
/// # Errors
/// `Backend` for bytes that are not a valid row (truncated, unknown tag, bad UTF-8).
pub fn decode(bytes: &[u8]) -> Result<Properties> {
    let mut r = Reader { bytes };
    if r.array::<1>()?[0] != VERSION {
        return Err(corrupt("unknown format version"));
    }
    let mut properties = Properties::new();
    while !r.bytes.is_empty() {
        let name_len = u16::from_le_bytes(r.array()?) as usize;
        let name = r.text(name_len)?;
        let value = value(&mut r)?;
        properties.insert(name, value);
    }
    Ok(properties)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_in_order() {
        let mut p = Properties::new();
        p.insert("s".into(), Value::String("héllo".into()));
        p.insert("i".into(), Value::Int32(-5));
        p.insert("l".into(), Value::Int64(i64::MIN));
        p.insert("d".into(), Value::Double(1.5e-300));
        p.insert("b".into(), Value::Boolean(true));
        p.insert(
            "t".into(),
            Value::DateTime(
                DateTime::from_timestamp(1_700_000_000, 123_456_789).unwrap_or_default(),
            ),
        );
        p.insert("g".into(), Value::Guid(Uuid::from_u128(42)));
        p.insert("x".into(), Value::Binary(vec![0, 255, 7]));
        let decoded = decode(&encode(&p)).ok();
        assert_eq!(decoded.as_ref(), Some(&p));
        let names: Vec<_> = decoded.iter().flat_map(|d| d.keys()).collect();
        assert_eq!(names, ["s", "i", "l", "d", "b", "t", "g", "x"]);
    }

    #[test]
    fn truncated_rows_are_reported_not_panicked() {
        let mut p = Properties::new();
        p.insert("s".into(), Value::String("abc".into()));
        let bytes = encode(&p);
        for cut in 0..bytes.len() {
            let _ = decode(&bytes[..cut]);
        }
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn find_reads_one_property_as_decode_does() {
        let mut p = Properties::new();
        p.insert("s".into(), Value::String("héllo".into()));
        p.insert("i".into(), Value::Int32(-5));
        p.insert("d".into(), Value::Double(2.5));
        p.insert(
            "t".into(),
            Value::DateTime(DateTime::from_timestamp(7, 8).unwrap_or_default()),
        );
        p.insert("g".into(), Value::Guid(Uuid::from_u128(9)));
        p.insert("x".into(), Value::Binary(vec![1, 2]));
        p.insert("b".into(), Value::Boolean(false));
        p.insert("l".into(), Value::Int64(3));
        let bytes = encode(&p);
        for (name, value) in &p {
            assert_eq!(
                find(&bytes, name).ok().flatten().as_ref(),
                Some(value),
                "{name}"
            );
        }
        assert_eq!(find(&bytes, "missing").ok(), Some(None));
        assert_eq!(
            find(&bytes, "S").ok(),
            Some(None),
            "names are case-sensitive"
        );
        for cut in 1..bytes.len() {
            let _ = find(&bytes[..cut], "missing");
        }
        assert!(find(&bytes[..bytes.len() - 1], "missing").is_err());
        assert!(find(&[2], "i").is_err(), "unknown version");
    }
}
