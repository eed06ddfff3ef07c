//! Entities as the Table service's JSON: typed properties carry an `@odata.type`
//! annotation where JSON cannot tell the type (Int64, Double, DateTime, Guid, Binary).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value as Json};

use crate::error::{Error, Result};
use crate::model::{ETag, Entity, Value};

const TYPE_SUFFIX: &str = "@odata.type";

fn malformed(message: impl Into<String>) -> Error {
    Error::Backend {
        message: format!(
            "the table service sent an entity this client cannot read: {}",
            message.into()
        ),
    }
}

/// DateTime as the service writes it: seven fraction digits (100 ns ticks).
pub(crate) fn format_datetime(at: &DateTime<Utc>) -> String {
    let text = at.to_rfc3339_opts(SecondsFormat::Nanos, true);
    // `…SS.nnnnnnnnnZ` → `…SS.nnnnnnnZ`.
    let (head, _) = text.split_at(text.len() - 3);
    format!("{head}Z")
}

/// The JSON body of an entity to write.
pub(crate) fn entity_to_json(entity: &Entity) -> Json {
    let mut map = Map::with_capacity(entity.properties.len() * 2 + 2);
    map.insert(
        "PartitionKey".into(),
        Json::String(entity.partition_key.clone()),
    );
    map.insert("RowKey".into(), Json::String(entity.row_key.clone()));
    for (name, value) in &entity.properties {
        let (json, edm) = match value {
            Value::String(s) => (Json::String(s.clone()), None),
            Value::Int32(n) => (Json::from(*n), None),
            Value::Int64(n) => (Json::String(n.to_string()), Some("Edm.Int64")),
            Value::Double(d) => (double_to_json(*d), Some("Edm.Double")),
            Value::Boolean(b) => (Json::Bool(*b), None),
            Value::DateTime(at) => (Json::String(format_datetime(at)), Some("Edm.DateTime")),
            Value::Guid(id) => (Json::String(id.hyphenated().to_string()), Some("Edm.Guid")),
            Value::Binary(bytes) => (Json::String(STANDARD.encode(bytes)), Some("Edm.Binary")),
        };
        if let Some(edm) = edm {
            map.insert(format!("{name}{TYPE_SUFFIX}"), Json::String(edm.to_owned()));
        }
        map.insert(name.clone(), json);
    }
    Json::Object(map)
}

fn double_to_json(d: f64) -> Json {
    if d.is_nan() {
        Json::String("NaN".into())
    } else if d == f64::INFINITY {
        Json::String("Infinity".into())
    } else if d == f64::NEG_INFINITY {
        Json::String("-Infinity".into())
    } else {
        serde_json::Number::from_f64(d).map_or(Json::Null, Json::Number)
    }
}

fn parse_datetime(text: &str) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.with_timezone(&Utc))
        .map_err(|e| malformed(format!("DateTime `{text}`: {e}")))
}

fn typed(name: &str, json: &Json, edm: &str) -> Result<Value> {
    let text = || {
        json.as_str()
            .ok_or_else(|| malformed(format!("`{name}` of type {edm} is not a string")))
    };
    Ok(match edm {
        "Edm.String" => Value::String(text()?.to_owned()),
        "Edm.Int32" => Value::Int32(
            json.as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| malformed(format!("`{name}` is not an Int32")))?,
        ),
        "Edm.Int64" => Value::Int64(
            match json {
                Json::String(s) => s.parse().ok(),
                other => other.as_i64(),
            }
            .ok_or_else(|| malformed(format!("`{name}` is not an Int64")))?,
        ),
        "Edm.Double" => Value::Double(match json {
            Json::String(s) => match s.as_str() {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                other => other
                    .parse()
                    .map_err(|_| malformed(format!("`{name}` is not a Double")))?,
            },
            other => other
                .as_f64()
                .ok_or_else(|| malformed(format!("`{name}` is not a Double")))?,
        }),
        "Edm.Boolean" => Value::Boolean(
            json.as_bool()
                .ok_or_else(|| malformed(format!("`{name}` is not a Boolean")))?,
        ),
        "Edm.DateTime" => Value::DateTime(parse_datetime(text()?)?),
        "Edm.Guid" => Value::Guid(
            text()?
                .parse()
                .map_err(|_| malformed(format!("`{name}` is not a Guid")))?,
        ),
        "Edm.Binary" => Value::Binary(
            STANDARD
                .decode(text()?)
                .map_err(|_| malformed(format!("`{name}` is not base64")))?,
        ),
        other => return Err(malformed(format!("`{name}` has the unknown type {other}"))),
    })
}

fn untyped(name: &str, json: &Json) -> Result<Value> {
    Ok(match json {
        Json::String(s) => Value::String(s.clone()),
        Json::Bool(b) => Value::Boolean(*b),
        // A number written with a fraction or an exponent is a Double; a whole number an
        // Int32 (the service annotates Int64).
        Json::Number(n) if n.is_f64() => Value::Double(n.as_f64().unwrap_or_default()),
        Json::Number(n) => match n.as_i64().and_then(|v| i32::try_from(v).ok()) {
            Some(v) => Value::Int32(v),
            None => Value::Int64(
                n.as_i64()
                    .ok_or_else(|| malformed(format!("`{name}` is out of range")))?,
            ),
        },
        other => return Err(malformed(format!("`{name}` holds {other}"))),
    })
}

/// Reads an entity from the service's JSON (minimal or full metadata).
pub(crate) fn entity_from_json(json: Json) -> Result<Entity> {
    let Json::Object(map) = json else {
        return Err(malformed("not a JSON object"));
    };
    let key = |name: &str| {
        map.get(name)
            .and_then(Json::as_str)
            .map(str::to_owned)
            .ok_or_else(|| malformed(format!("no {name}")))
    };
    let mut entity = Entity::new(key("PartitionKey")?, key("RowKey")?);
    if let Some(etag) = map.get("odata.etag").and_then(Json::as_str) {
        entity.etag = Some(ETag::new(etag));
    }
    if let Some(ts) = map.get("Timestamp").and_then(Json::as_str) {
        entity.timestamp = Some(parse_datetime(ts)?);
    }
    for (name, json) in &map {
        // A property a `$select` names but the entity lacks comes back as null.
        if json.is_null()
            || name.starts_with("odata.")
            || name.ends_with(TYPE_SUFFIX)
            || matches!(name.as_str(), "PartitionKey" | "RowKey" | "Timestamp")
        {
            continue;
        }
        let value = match map
            .get(&format!("{name}{TYPE_SUFFIX}"))
            .and_then(Json::as_str)
        {
            Some(edm) => typed(name, json, edm)?,
            None => untyped(name, json)?,
        };
        entity.properties.insert(name.clone(), value);
    }
    Ok(entity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips_through_the_service_json() {
        let at = DateTime::from_timestamp(1_700_000_000, 123_456_700).expect("valid");
        let entity = Entity::new("p", "r")
            .with("S", "text")
            .with("I", 5)
            .with("L", 5i64)
            .with("D", 5.0)
            .with("Nan", f64::NAN)
            .with("B", true)
            .with("T", at)
            .with("G", uuid::Uuid::nil())
            .with("X", vec![1u8, 2, 3]);
        let json = entity_to_json(&entity);
        assert_eq!(json["L"], Json::String("5".into()));
        assert_eq!(json["L@odata.type"], Json::String("Edm.Int64".into()));
        assert_eq!(
            json["T"],
            Json::String("2023-11-14T22:13:20.1234567Z".into())
        );
        let text = serde_json::to_string(&json).expect("serialises");
        let back = entity_from_json(serde_json::from_str(&text).expect("parses")).expect("reads");
        for (name, value) in &entity.properties {
            match value {
                Value::Double(d) if d.is_nan() => {
                    assert!(matches!(back.get(name), Some(Value::Double(x)) if x.is_nan()));
                }
                _ => assert_eq!(back.get(name), Some(value), "{name}"),
            }
        }
    }

    #[test]
    fn a_selected_property_the_entity_lacks_is_absent_not_an_error() {
        let json = serde_json::json!({"PartitionKey": "p", "RowKey": "r", "Nope": null, "A": 1});
        let entity = entity_from_json(json).expect("reads");
        assert_eq!(entity.get("Nope"), None);
        assert_eq!(entity.get("A"), Some(&Value::Int32(1)));
    }

    #[test]
    fn untyped_numbers_follow_their_json_form() {
        let json = serde_json::json!({"PartitionKey": "p", "RowKey": "r", "a": 5, "b": 5.0, "c": 5.5,
            "Timestamp": "2026-11-22T02:53:16.2915074Z", "odata.etag": "W/\"x\""});
        let entity = entity_from_json(json).expect("reads");
        assert_eq!(entity.get("a"), Some(&Value::Int32(5)));
        assert_eq!(entity.get("b"), Some(&Value::Double(5.0)));
        assert_eq!(entity.get("c"), Some(&Value::Double(5.5)));
        assert!(entity.timestamp.is_some());
        assert_eq!(entity.etag, Some(ETag::new("W/\"x\"")));
    }
}
