//! How each key's text is read and written back, by the key's type.

use crate::commitlog::flush::FlushDiskType;

/// A key's value as its type has it (enums by RocketMQ's name), for bindings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    Unset,
}

/// One key's type: how its text is read and written back.
pub(crate) trait ConfigValue: Sized {
    fn value(&self) -> Value;
    /// What a bad value was expected to be, for the error.
    const EXPECTED: &'static str;
    fn parse(text: &str) -> Option<Self>;
    /// `None`: the key is unset and not written.
    fn render(&self) -> Option<String>;
}

impl ConfigValue for String {
    fn value(&self) -> Value {
        Value::Str(self.clone())
    }

    const EXPECTED: &'static str = "str";
    fn parse(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
    fn render(&self) -> Option<String> {
        Some(self.clone())
    }
}

impl ConfigValue for i64 {
    fn value(&self) -> Value {
        Value::Int(*self)
    }

    const EXPECTED: &'static str = "int";
    fn parse(text: &str) -> Option<Self> {
        text.parse().ok()
    }
    fn render(&self) -> Option<String> {
        Some(self.to_string())
    }
}

impl ConfigValue for bool {
    fn value(&self) -> Value {
        Value::Bool(*self)
    }

    const EXPECTED: &'static str = "bool";
    fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        }
    }
    fn render(&self) -> Option<String> {
        Some(self.to_string())
    }
}

/// Optional keys: an empty value unsets them.
impl<T: ConfigValue> ConfigValue for Option<T> {
    fn value(&self) -> Value {
        self.as_ref().map_or(Value::Unset, T::value)
    }

    const EXPECTED: &'static str = T::EXPECTED;
    fn parse(text: &str) -> Option<Self> {
        if text.is_empty() {
            return Some(None);
        }
        T::parse(text).map(Some)
    }
    fn render(&self) -> Option<String> {
        self.as_ref().and_then(T::render)
    }
}

impl ConfigValue for FlushDiskType {
    fn value(&self) -> Value {
        self.render().map_or(Value::Unset, Value::Str)
    }

    const EXPECTED: &'static str = "FlushDiskType (one of ASYNC_FLUSH, SYNC_FLUSH)";
    fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_uppercase().as_str() {
            "ASYNC_FLUSH" => Some(Self::AsyncFlush),
            "SYNC_FLUSH" => Some(Self::SyncFlush),
            _ => None,
        }
    }
    fn render(&self) -> Option<String> {
        Some(
            match self {
                Self::AsyncFlush => "ASYNC_FLUSH",
                Self::SyncFlush => "SYNC_FLUSH",
            }
            .to_owned(),
        )
    }
}
