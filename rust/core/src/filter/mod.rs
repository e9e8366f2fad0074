//! RocketMQ's `filter` module: SQL92 property filters (`ExpressionType.SQL92`). The broker
//! compiles a consumer's expression ([`SqlFilter::compile`]) and evaluates it over each
//! message's properties (`ExpressionMessageFilter.isMatchedByCommitLog`); user properties and
//! system ones such as `TAGS` are all properties here.

mod expression;
mod parser;
#[cfg(test)]
mod tests;

use crate::commitlog::record::find_property;
use expression::{Expression, Value};

/// `ExpressionType.TAG`.
pub(crate) const TAG: &str = "TAG";
/// `ExpressionType.SQL92`.
pub(crate) const SQL92: &str = "SQL92";

/// A compiled SQL92 expression (`SqlFilter.compile`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SqlFilter {
    expression: Expression,
}

impl SqlFilter {
    /// Parses `text` under RocketMQ's SQL92 subset; the error names what is wrong with it.
    pub(crate) fn compile(text: &str) -> Result<Self, String> {
        if text.trim().is_empty() {
            return Err("the SQL92 expression is empty".into());
        }
        parser::parse(text).map(|expression| Self { expression })
    }

    /// True when the expression is TRUE for a message with these encoded properties. An
    /// evaluation that fails (a property that is not the number it is compared with) does not
    /// match, as RocketMQ logs and skips it.
    pub(crate) fn matches(&self, properties: &[u8]) -> bool {
        let lookup =
            |name: &str| find_property(properties, name).and_then(|v| std::str::from_utf8(v).ok());
        self.evaluate(&lookup)
    }

    fn evaluate<'a>(&'a self, lookup: &impl Fn(&str) -> Option<&'a str>) -> bool {
        matches!(self.expression.evaluate(lookup), Ok(Value::Bool(true)))
    }
}
