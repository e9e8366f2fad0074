//! RocketMQ's compiled selector (`filter.expression`): the tree [`super::parser`] builds and
//! its evaluation over a message's properties, with RocketMQ's three-valued logic. A missing
//! property is null; a comparison with null is null, and a message matches only when the whole
//! expression is TRUE. Property values are strings, converted to the constant's type when
//! compared with one (`ComparisonExpression` with `convertStringExpressions`, which
//! RocketMQ's parser always turns on).

use std::borrow::Cow;
use std::cmp::Ordering;

/// A value during evaluation: Java's `Boolean`, `Integer`, `Long`, `Double`, `String` or null.
/// A string borrows from the message's properties or the expression, so evaluating a record
/// allocates nothing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    Str(Cow<'a, str>),
}

/// `>`, `>=`, `<`, `<=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Comparison {
    Greater,
    GreaterEqual,
    Less,
    LessEqual,
}

/// 5.x's `CONTAINS`, `STARTSWITH`, `ENDSWITH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextTest {
    Contains,
    StartsWith,
    EndsWith,
}

/// RocketMQ's `Expression` classes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expression {
    /// `ConstantExpression` / `BooleanConstantExpression`.
    Constant(Value<'static>),
    /// `PropertyExpression`: a user or system property (`TAGS`, `KEYS`, ...).
    Property(String),
    /// `UnaryExpression.createNegate`.
    Negate(Box<Expression>),
    /// `UnaryExpression.createBooleanCast`: a property where a boolean is expected.
    BooleanCast(Box<Expression>),
    Not(Box<Expression>),
    And(Box<Expression>, Box<Expression>),
    Or(Box<Expression>, Box<Expression>),
    /// `ComparisonExpression.doCreateEqual` (`=`, and `IS NULL` against a null constant).
    Equal(Box<Expression>, Box<Expression>),
    Compare(Box<Expression>, Comparison, Box<Expression>),
    /// `UnaryInExpression`: a property against string literals.
    In {
        property: String,
        list: Vec<String>,
        not: bool,
    },
    Text {
        operand: Box<Expression>,
        test: TextTest,
        search: String,
        not: bool,
    },
}

/// Why an evaluation failed; RocketMQ logs it and the message does not match.
pub(crate) type EvalError = String;

impl Expression {
    /// `evaluate`: `lookup` answers a property's value, `None` when the message lacks it.
    pub(crate) fn evaluate<'a>(
        &'a self,
        lookup: &impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Value<'a>, EvalError> {
        Ok(match self {
            Self::Constant(Value::Str(s)) => Value::Str(Cow::Borrowed(s)),
            Self::Constant(v) => v.clone(),
            Self::Property(name) => lookup(name).map_or(Value::Null, |s| Value::Str(s.into())),
            Self::Negate(e) => match e.evaluate(lookup)? {
                Value::Int(i) => Value::Int(i.wrapping_neg()),
                Value::Long(l) => Value::Long(l.wrapping_neg()),
                Value::Double(d) => Value::Double(-d),
                _ => Value::Null,
            },
            Self::BooleanCast(e) => match e.evaluate(lookup)? {
                Value::Null => Value::Null,
                Value::Bool(b) => Value::Bool(b),
                _ => Value::Bool(false),
            },
            Self::Not(e) => match e.evaluate_bool(lookup)? {
                Some(b) => Value::Bool(!b),
                None => Value::Null,
            },
            Self::And(l, r) => logic(l.evaluate_bool(lookup)?, || r.evaluate_bool(lookup), false)?,
            Self::Or(l, r) => logic(l.evaluate_bool(lookup)?, || r.evaluate_bool(lookup), true)?,
            Self::Equal(l, r) => equal(l.evaluate(lookup)?, r.evaluate(lookup)?)?,
            Self::Compare(l, op, r) => compare(l.evaluate(lookup)?, *op, || r.evaluate(lookup))?,
            Self::In {
                property,
                list,
                not,
            } => match lookup(property) {
                None => Value::Null,
                Some(v) => Value::Bool(list.iter().any(|s| s == v) ^ not),
            },
            Self::Text {
                operand,
                test,
                search,
                not,
            } => match operand.evaluate(lookup)? {
                Value::Str(s) if !search.is_empty() => Value::Bool(test.holds(&s, search) ^ not),
                _ => Value::Bool(false),
            },
        })
    }

    /// The value of a boolean operand (null as `None`); the parser lets only boolean
    /// expressions reach here, as RocketMQ's `asBooleanExpression` does.
    fn evaluate_bool<'a>(
        &'a self,
        lookup: &impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Option<bool>, EvalError> {
        match self.evaluate(lookup)? {
            Value::Bool(b) => Ok(Some(b)),
            Value::Null => Ok(None),
            other => Err(format!("{other:?} is not a boolean")),
        }
    }
}

impl TextTest {
    fn holds(self, value: &str, search: &str) -> bool {
        match self {
            Self::Contains => value.contains(search),
            Self::StartsWith => value.starts_with(search),
            Self::EndsWith => value.ends_with(search),
        }
    }
}

/// `LogicExpression.createAND` (`short_on` false) and `createOR` (`short_on` true): the first
/// operand equal to `short_on` decides; otherwise a null operand makes the answer null.
fn logic<'a>(
    left: Option<bool>,
    right: impl FnOnce() -> Result<Option<bool>, EvalError>,
    short_on: bool,
) -> Result<Value<'a>, EvalError> {
    if left == Some(short_on) {
        return Ok(Value::Bool(short_on));
    }
    let right = right()?;
    Ok(match (left, right) {
        (_, Some(b)) if b == short_on => Value::Bool(short_on),
        (None, _) | (_, None) => Value::Null,
        _ => Value::Bool(!short_on),
    })
}

/// `doCreateEqual`: null equals only null; a null left operand against a value is null, a
/// null right operand FALSE (so `IS NULL` is TRUE exactly when the property is missing).
fn equal<'a>(left: Value<'a>, right: Value<'a>) -> Result<Value<'a>, EvalError> {
    Ok(match (&left, &right) {
        (Value::Null, Value::Null) => Value::Bool(true),
        (Value::Null, _) => Value::Null,
        (_, Value::Null) => Value::Bool(false),
        _ if java_equals(&left, &right) => Value::Bool(true),
        _ => Value::Bool(compare_values(left, right)? == Ordering::Equal),
    })
}

/// `Object.equals`: the same class and value (`Double.equals` compares bits).
fn java_equals(left: &Value, right: &Value) -> bool {
    match (left, right) {
        (Value::Double(l), Value::Double(r)) => l.to_bits() == r.to_bits(),
        _ => left == right,
    }
}

/// `ComparisonExpression.evaluate` for `>`, `>=`, `<`, `<=`: two strings compare as numbers
/// (`Double.valueOf`), or the evaluation fails.
fn compare<'a>(
    left: Value<'a>,
    op: Comparison,
    right: impl FnOnce() -> Result<Value<'a>, EvalError>,
) -> Result<Value<'a>, EvalError> {
    if left == Value::Null {
        return Ok(Value::Null);
    }
    let right = right()?;
    let ordering = match (left, right) {
        (_, Value::Null) => return Ok(Value::Null),
        (Value::Str(l), Value::Str(r)) => {
            let (l, r) = match (parse_double(&l), parse_double(&r)) {
                (Some(l), Some(r)) => (l, r),
                _ => {
                    return Err(format!(
                        "It's illegal to compare string by {op:?}: {l}, {r}"
                    ))
                }
            };
            l.total_cmp(&r)
        }
        (l, r) => compare_values(l, r)?,
    };
    Ok(Value::Bool(match op {
        Comparison::Greater => ordering.is_gt(),
        Comparison::GreaterEqual => ordering.is_ge(),
        Comparison::Less => ordering.is_lt(),
        Comparison::LessEqual => ordering.is_le(),
    }))
}

/// `ComparisonExpression.__compare`: values of different types are converted up (an integer
/// to a long or double, a string to the other side's number or boolean); types it cannot
/// compare answer -1, as in Java.
fn compare_values(left: Value<'_>, right: Value<'_>) -> Result<Ordering, EvalError> {
    use Value::{Bool, Double, Int, Long, Str};
    let (left, right) = match (left, right) {
        (Bool(_), Str(_)) => return Err("a boolean cannot be converted to a string".into()),
        (Int(l), Long(r)) => (Long(l.into()), Long(r)),
        (Long(l), Int(r)) => (Long(l), Long(r.into())),
        (Int(l), Double(r)) => (Double(l.into()), Double(r)),
        (Long(l), Double(r)) => (Double(l as f64), Double(r)),
        (Double(l), Int(r)) => (Double(l), Double(r.into())),
        (Double(l), Long(r)) => (Double(l), Double(r as f64)),
        (l, Str(s)) if !matches!(l, Str(_)) => (l.clone(), convert(&s, &l)?),
        (Str(s), r) if !matches!(r, Str(_)) => (convert(&s, &r)?, r),
        pair => pair,
    };
    Ok(match (left, right) {
        (Bool(l), Bool(r)) => l.cmp(&r),
        (Int(l), Int(r)) => l.cmp(&r),
        (Long(l), Long(r)) => l.cmp(&r),
        (Double(l), Double(r)) => l.total_cmp(&r),
        (Str(l), Str(r)) => l.cmp(&r),
        _ => Ordering::Less,
    })
}

/// A property's string as the other operand's type (`Integer.valueOf`, `Long.valueOf`,
/// `Double.valueOf`, `Boolean.valueOf`); a string that is not such a number fails the
/// evaluation, as Java's `NumberFormatException` does.
fn convert<'a>(s: &str, like: &Value<'_>) -> Result<Value<'a>, EvalError> {
    let bad = || format!("property value {s:?} is not a number like {like:?}");
    match like {
        Value::Bool(_) => Ok(Value::Bool(s.eq_ignore_ascii_case("true"))),
        Value::Int(_) => s.parse().map(Value::Int).map_err(|_| bad()),
        Value::Long(_) => s.parse().map(Value::Long).map_err(|_| bad()),
        Value::Double(_) => parse_double(s).map(Value::Double).ok_or_else(bad),
        Value::Null | Value::Str(_) => Ok(Value::Str(Cow::Owned(s.to_owned()))),
    }
}

/// `Double.valueOf`, which ignores surrounding whitespace.
fn parse_double(s: &str) -> Option<f64> {
    s.trim_matches(|c: char| c <= ' ').parse().ok()
}
