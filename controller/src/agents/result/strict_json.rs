//! Strict JSON parsing for result blocks: like `serde_json::from_str` into a
//! `Value`, but an object with the same key twice is an error. The default
//! map keeps the last duplicate silently, which would let a result show a
//! reader one value while the controller uses another.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// The message our duplicate-key error carries; it quotes no input.
pub(super) const DUPLICATE_KEY: &str = "duplicate key in object";

/// Parses `text` as one JSON value, refusing duplicate object keys.
pub(super) fn parse(text: &str) -> Result<Value, serde_json::Error> {
    serde_json::from_str::<Strict>(text).map(|s| s.0)
}

struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(DUPLICATE_KEY));
            }
            let Strict(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_serde_json() {
        let text = r#"{"a": [1, -2, 3.5, "x", null, true], "b": {"c": {}}}"#;
        assert_eq!(
            parse(text).expect("valid"),
            serde_json::from_str::<Value>(text).expect("valid")
        );
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        for text in [r#"{"a": 1, "a": 2}"#, r#"{"x": [{"b": 1, "b": 1}]}"#] {
            let err = parse(text).expect_err("duplicate");
            assert!(err.to_string().starts_with(DUPLICATE_KEY), "{err}");
        }
    }

    #[test]
    fn trailing_text_is_refused() {
        assert!(parse(r#"{"a": 1} {"b": 2}"#).is_err());
    }
}
