//! RocketMQ's `common.attribute`: what an attribute may hold (`Attribute`, `EnumAttribute`,
//! `LongRangeAttribute`), how an operator writes a change to some (`AttributeParser`:
//! `+key=value` sets, `-key` deletes, comma separated) and how a change applies to what an
//! entry holds (`AttributeUtil.alterCurrentAttributes`).
//!
//! The refusals keep RocketMQ's words, and add the key and the value where RocketMQ's leave
//! them out, since they reach the operator as the broker's remark. Unlike `AttributeParser`,
//! the whole text is checked here at once (a `+` or `-` inside a key, a key set twice), so a
//! change is either well formed or refused before any table is looked at.

use std::collections::BTreeMap;
use std::fmt;

/// `ATTR_ARRAY_SEPARATOR_COMMA`.
const SEPARATOR: char = ',';
/// `ATTR_KEY_VALUE_EQUAL_SIGN`.
const EQUAL_SIGN: char = '=';
/// `ATTR_ADD_PLUS_SIGN`: sets (adds or alters) the attribute.
const ADD_SIGN: char = '+';
/// `ATTR_DELETE_MINUS_SIGN`: deletes it.
const DELETE_SIGN: char = '-';

/// What values an attribute takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttributeKind {
    /// `EnumAttribute`: one of these, as written.
    Enum(&'static [&'static str]),
    /// `LongRangeAttribute`: a decimal long in `min..=max`.
    LongRange { min: i64, max: i64 },
}

/// `Attribute`: a key an entry may hold, whether an existing entry's value may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Attribute {
    pub(crate) name: &'static str,
    /// False: set when the entry is created, never added, altered or deleted after.
    pub(crate) changeable: bool,
    pub(crate) kind: AttributeKind,
}

impl Attribute {
    /// `verify`.
    fn verify(&self, value: &str) -> Result<(), AttributeError> {
        let key = self.name;
        match self.kind {
            AttributeKind::Enum(universe) if universe.contains(&value) => Ok(()),
            AttributeKind::Enum(universe) => Err(AttributeError::NotInSet {
                key,
                value: value.to_owned(),
                universe,
            }),
            AttributeKind::LongRange { min, max } => match value.parse::<i64>() {
                Ok(v) if (min..=max).contains(&v) => Ok(()),
                Ok(_) => Err(AttributeError::NotInRange {
                    key,
                    value: value.to_owned(),
                    min,
                    max,
                }),
                Err(_) => Err(AttributeError::NotALong {
                    key,
                    value: value.to_owned(),
                }),
            },
        }
    }
}

/// One change of an operator's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AttributeChange {
    /// `+key=value`.
    Set(String, String),
    /// `-key`.
    Delete(String),
}

impl AttributeChange {
    pub(crate) fn key(&self) -> &str {
        match self {
            Self::Set(key, _) | Self::Delete(key) => key,
        }
    }
}

/// Java's `Set.toString` of an enum's values.
struct Universe(&'static [&'static str]);

impl fmt::Display for Universe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.0.join(", "))
    }
}

/// Why a change is refused; RocketMQ answers each with `SYSTEM_ERROR` and this remark.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AttributeError {
    #[error("add/alter attribute format is wrong: {0} (write +key=value)")]
    AddFormat(String),
    #[error("delete attribute format is wrong: {0} (write -key)")]
    DeleteFormat(String),
    #[error("kv string format wrong: {0:?} (a key is not empty and has no '+' or '-')")]
    KeyFormat(String),
    #[error("alter duplication key. key: {0}")]
    Duplicated(String),
    #[error("only add attribute is supported while creating topic. key: {0}")]
    DeleteOnCreate(String),
    #[error("attempt to delete a nonexistent key: {0}")]
    DeleteNonexistent(String),
    #[error("unsupported key: {key} (supported: {supported})")]
    Unsupported { key: String, supported: String },
    #[error("attempt to update an unchangeable attribute. key: {0}")]
    Unchangeable(String),
    #[error("attribute {key}={value}: value is not in set: {}", Universe(universe))]
    NotInSet {
        key: &'static str,
        value: String,
        universe: &'static [&'static str],
    },
    #[error("attribute {key}={value}: value is not in range({min}, {max})")]
    NotInRange {
        key: &'static str,
        value: String,
        min: i64,
        max: i64,
    },
    #[error("attribute {key}={value}: value is not a long")]
    NotALong { key: &'static str, value: String },
    /// A value RocketMQ takes that this broker would not act on.
    #[error("attribute {key}={value} is not supported by this broker: {why}")]
    NotSupported {
        key: String,
        value: String,
        why: &'static str,
    },
}

/// `AttributeParser.parseToMap`: `+key1=value1,+key2=value2,-key3`; nothing for an empty text.
/// A trailing comma is allowed, as Java's `split` drops what follows it.
pub(crate) fn parse(text: &str) -> Result<Vec<AttributeChange>, AttributeError> {
    let mut changes: Vec<AttributeChange> = Vec::new();
    let pieces: Vec<&str> = text.split(SEPARATOR).collect();
    let used = pieces
        .iter()
        .rposition(|p| !p.is_empty())
        .map_or(0, |i| i + 1);
    for kv in &pieces[..used] {
        let change = match kv.split_once(EQUAL_SIGN) {
            Some((key, value)) => {
                let Some(key) = key.strip_prefix(ADD_SIGN) else {
                    return Err(AttributeError::AddFormat((*kv).to_owned()));
                };
                // Java's `split("=")` keeps what lies between the first and a second `=`.
                let value = value.split(EQUAL_SIGN).next().unwrap_or_default();
                if value.is_empty() {
                    return Err(AttributeError::AddFormat((*kv).to_owned()));
                }
                AttributeChange::Set(key.to_owned(), value.to_owned())
            }
            None => match kv.strip_prefix(DELETE_SIGN) {
                Some(key) => AttributeChange::Delete(key.to_owned()),
                None => return Err(AttributeError::DeleteFormat((*kv).to_owned())),
            },
        };
        let key = change.key();
        if key.is_empty() || key.contains(ADD_SIGN) || key.contains(DELETE_SIGN) {
            return Err(AttributeError::KeyFormat(key.to_owned()));
        }
        if changes.iter().any(|c| c.key() == key) {
            return Err(AttributeError::Duplicated(key.to_owned()));
        }
        changes.push(change);
    }
    Ok(changes)
}

/// `AttributeUtil.alterCurrentAttributes`: what an entry holds once `changes` apply to
/// `current`, each key checked against `all`. An entry being created (`create`) takes only
/// `+key=value`, and may set an unchangeable attribute; an existing one may add, alter and
/// delete changeable ones only.
pub(crate) fn alter_current_attributes(
    create: bool,
    all: &[Attribute],
    current: &BTreeMap<String, String>,
    changes: &[AttributeChange],
) -> Result<BTreeMap<String, String>, AttributeError> {
    // RocketMQ's order: what the request asks of the entry first, then each key's own checks.
    for change in changes {
        if let AttributeChange::Delete(key) = change {
            if create {
                return Err(AttributeError::DeleteOnCreate(key.clone()));
            }
            if !current.contains_key(key) {
                return Err(AttributeError::DeleteNonexistent(key.clone()));
            }
        }
    }
    let mut altered = current.clone();
    for change in changes {
        let key = change.key();
        let attribute = all.iter().find(|a| a.name == key).ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|a| a.name).collect();
            AttributeError::Unsupported {
                key: key.to_owned(),
                supported: names.join(", "),
            }
        })?;
        if !create && !attribute.changeable {
            return Err(AttributeError::Unchangeable(key.to_owned()));
        }
        match change {
            AttributeChange::Delete(_) => {
                altered.remove(key);
            }
            AttributeChange::Set(_, value) => {
                attribute.verify(value)?;
                altered.insert(key.to_owned(), value.clone());
            }
        }
    }
    Ok(altered)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[Attribute] = &[
        Attribute {
            name: "color",
            changeable: true,
            kind: AttributeKind::Enum(&["RED", "BLUE"]),
        },
        Attribute {
            name: "fixed",
            changeable: false,
            kind: AttributeKind::Enum(&["A", "B"]),
        },
        Attribute {
            name: "size",
            changeable: true,
            kind: AttributeKind::LongRange { min: -1, max: 10 },
        },
    ];

    fn set(key: &str, value: &str) -> AttributeChange {
        AttributeChange::Set(key.into(), value.into())
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn refused(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn the_parser_reads_rocketmqs_text() {
        assert_eq!(parse("").unwrap(), []);
        assert_eq!(
            parse("+message.type=FIFO,-reserve.time,+a=1,").unwrap(),
            [
                set("message.type", "FIFO"),
                AttributeChange::Delete("reserve.time".into()),
                set("a", "1"),
            ]
        );
        assert_eq!(parse("+a=1=2").unwrap(), [set("a", "1")], "as Java's split");
        assert!(refused("message.type=FIFO")
            .starts_with("add/alter attribute format is wrong: message.type=FIFO"));
        assert!(refused("+a").starts_with("delete attribute format is wrong: +a"));
        assert!(refused("+a=").starts_with("add/alter attribute format is wrong: +a="));
        assert!(refused("+a=1,,+b=2").starts_with("delete attribute format is wrong: "));
        assert!(refused("+a-b=1").starts_with("kv string format wrong: \"a-b\""));
        assert!(refused("-").starts_with("kv string format wrong: \"\""));
        assert_eq!(refused("+a=1,-a"), "alter duplication key. key: a");
        assert_eq!(refused("+a=1,+a=2"), "alter duplication key. key: a");
    }

    #[test]
    fn a_creation_sets_and_an_update_adds_alters_and_deletes() {
        let none = BTreeMap::new();
        let created =
            alter_current_attributes(true, ALL, &none, &[set("color", "RED"), set("fixed", "A")])
                .unwrap();
        assert_eq!(created, map(&[("color", "RED"), ("fixed", "A")]));
        let updated = alter_current_attributes(
            false,
            ALL,
            &created,
            &[set("color", "BLUE"), set("size", "-1")],
        )
        .unwrap();
        assert_eq!(
            updated,
            map(&[("color", "BLUE"), ("fixed", "A"), ("size", "-1")])
        );
        let deleted = alter_current_attributes(
            false,
            ALL,
            &updated,
            &[AttributeChange::Delete("size".into())],
        )
        .unwrap();
        assert_eq!(deleted, map(&[("color", "BLUE"), ("fixed", "A")]));
        assert_eq!(
            alter_current_attributes(false, ALL, &deleted, &[]).unwrap(),
            deleted,
            "no change keeps what is held"
        );
    }

    #[test]
    fn each_refusal_names_the_key() {
        let held = map(&[("color", "RED"), ("fixed", "A")]);
        let refuse = |create: bool, change: AttributeChange| {
            alter_current_attributes(create, ALL, &held, &[change])
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            refuse(true, AttributeChange::Delete("color".into())),
            "only add attribute is supported while creating topic. key: color"
        );
        assert_eq!(
            refuse(false, AttributeChange::Delete("size".into())),
            "attempt to delete a nonexistent key: size"
        );
        assert_eq!(
            refuse(false, set("fixed", "B")),
            "attempt to update an unchangeable attribute. key: fixed"
        );
        assert_eq!(
            refuse(false, AttributeChange::Delete("fixed".into())),
            "attempt to update an unchangeable attribute. key: fixed"
        );
        assert_eq!(
            refuse(false, set("shape", "x")),
            "unsupported key: shape (supported: color, fixed, size)"
        );
        assert_eq!(
            refuse(false, set("color", "GREEN")),
            "attribute color=GREEN: value is not in set: [RED, BLUE]"
        );
        assert_eq!(
            refuse(false, set("size", "11")),
            "attribute size=11: value is not in range(-1, 10)"
        );
        assert_eq!(
            refuse(false, set("size", "big")),
            "attribute size=big: value is not a long"
        );
    }
}
