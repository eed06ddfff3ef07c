//! Open tagged values: a stored value of one of the declarations' own types (a target a
//! primary's record lists, an operation of follow-up work), held behind a trait object
//! and stored internally tagged — `{"t":"copy",…}`, `{"op":"put_copy",…}` — byte for byte
//! as the closed enums they replace stored it. A declaration's folder defines its types
//! and submits their codecs ([`Codec`], collected with `inventory`); a stored value is
//! decoded by its tag among them, so nothing below the declarations lists them. Written here because serde
//! derives only closed enums; the field serialisation of a trait object is
//! `erased-serde`'s.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Where a stored value keeps its tag.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TagKey {
    /// `t`: a target of a primary's record.
    Target,
    /// `op`: an operation of follow-up work.
    Operation,
}

impl TagKey {
    fn name(self) -> &'static str {
        match self {
            TagKey::Target => "t",
            TagKey::Operation => "op",
        }
    }
}

/// Writes `value` as `{"<key>":"<tag>", …its fields}`, the shape the closed enums'
/// internally tagged variants were written in.
pub(crate) fn serialize<S: Serializer>(
    key: TagKey,
    tag: &'static str,
    fields: &dyn erased_serde::Serialize,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Target<'a> {
        t: &'static str,
        #[serde(flatten)]
        fields: &'a dyn erased_serde::Serialize,
    }
    #[derive(Serialize)]
    struct Operation<'a> {
        op: &'static str,
        #[serde(flatten)]
        fields: &'a dyn erased_serde::Serialize,
    }
    match key {
        TagKey::Target => Target { t: tag, fields }.serialize(serializer),
        TagKey::Operation => Operation { op: tag, fields }.serialize(serializer),
    }
}

/// Reads a stored value's tag (under `key`) and the rest of its fields.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
    key: TagKey,
    deserializer: D,
) -> Result<(String, Value), D::Error> {
    let key = key.name();
    let mut map = Map::<String, Value>::deserialize(deserializer)?;
    match map.remove(key) {
        Some(Value::String(tag)) => Ok((tag, Value::Object(map))),
        Some(_) => Err(D::Error::custom(format!("`{key}` is not a string"))),
        None => Err(D::Error::missing_field(key)),
    }
}

/// How a stored value of one type is decoded: its tag and its decoder. A declaration's
/// folder submits one per type it stores (`inventory::submit!`).
pub(crate) struct Codec<T: 'static> {
    /// The attribute of the declaration that stores it.
    pub attribute: &'static str,
    /// The tag.
    pub tag: &'static str,
    /// Decodes the fields (the tag taken out).
    pub decode: fn(Value) -> serde_json::Result<T>,
}

/// Decodes `fields` as a `V` and wraps it.
pub(crate) fn decode<V: DeserializeOwned, T: From<V>>(fields: Value) -> serde_json::Result<T> {
    serde_json::from_value::<V>(fields).map(T::from)
}

/// Finds the codec of `tag` among the declarations' submitted `codecs` and decodes
/// `fields` with it.
pub(crate) fn decode_by_tag<'a, T: 'static>(
    what: &str,
    tag: &str,
    fields: Value,
    mut codecs: impl Iterator<Item = &'a Codec<T>>,
) -> Result<T, String> {
    let codec = codecs
        .find(|c| c.tag == tag)
        .ok_or_else(|| format!("unknown {what} `{tag}`: no registered declaration stores it"))?;
    (codec.decode)(fields).map_err(|e| format!("{what} `{tag}` of `{}`: {e}", codec.attribute))
}
