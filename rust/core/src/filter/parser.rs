//! RocketMQ's `SelectorParser` on `sqlparser`: the crate parses the expression under a dialect
//! shaped like RocketMQ's grammar (its identifiers, its unary `NOT` binding tighter than a
//! comparison, and 5.x's `CONTAINS` / `STARTSWITH` / `ENDSWITH`), then the AST is translated
//! into [`Expression`] with the checks RocketMQ's `create*` factories make. Whatever RocketMQ's
//! subset lacks (arithmetic, `LIKE`, functions, quoted identifiers, ...) is refused by name.

use sqlparser::ast::{BinaryOperator, Expr, Ident, InTarget, UnaryOperator, Value as SqlValue};
use sqlparser::dialect::{Dialect, Precedence};
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

use super::expression::{Comparison, Expression, TextTest, Value};

/// The words of 5.x's string tests, as `BinaryOperator::Custom` carries them.
const TEXT_TESTS: [(&str, TextTest); 3] = [
    ("CONTAINS", TextTest::Contains),
    ("STARTSWITH", TextTest::StartsWith),
    ("ENDSWITH", TextTest::EndsWith),
];
/// `NOT <test>`'s operator, as the dialect writes it.
const NOT_PREFIX: &str = "NOT ";
/// RocketMQ's reserved words: every other word is a property, even one SQL reserves (`user`,
/// `date`, `order`, ...).
const RESERVED: [&str; 12] = [
    "NOT",
    "AND",
    "OR",
    "BETWEEN",
    "IN",
    "TRUE",
    "FALSE",
    "NULL",
    "IS",
    "CONTAINS",
    "STARTSWITH",
    "ENDSWITH",
];

/// RocketMQ's grammar as a `sqlparser` dialect.
#[derive(Debug)]
struct RocketMqDialect;

impl RocketMqDialect {
    /// The string test the parser is at (`CONTAINS`, or `NOT CONTAINS` when `negated`).
    fn text_test_at(parser: &Parser, negated: bool) -> Option<&'static str> {
        let at = usize::from(negated);
        if negated && !is_word(&parser.peek_nth_token_ref(0).token, "NOT") {
            return None;
        }
        let token = &parser.peek_nth_token_ref(at).token;
        TEXT_TESTS
            .iter()
            .map(|(word, _)| *word)
            .find(|word| is_word(token, word))
    }
}

fn is_word(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

impl Dialect for RocketMqDialect {
    /// `ID : ["a"-"z", "_", "$"] (["a"-"z","0"-"9","_", "$"])*`, case-insensitive.
    fn is_identifier_start(&self, ch: char) -> bool {
        ch.is_ascii_alphabetic() || ch == '_' || ch == '$'
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        ch.is_ascii_alphanumeric() || ch == '_' || ch == '$'
    }

    fn parse_prefix(&self, parser: &mut Parser) -> Option<Result<Expr, ParserError>> {
        let Token::Word(w) = &parser.peek_token_ref().token else {
            return None;
        };
        if w.quote_style.is_some() || RESERVED.iter().any(|r| w.value.eq_ignore_ascii_case(r)) {
            return None;
        }
        let ident = Ident::new(w.value.clone());
        parser.next_token();
        Some(Ok(Expr::Identifier(ident)))
    }

    fn get_next_precedence(&self, parser: &Parser) -> Option<Result<u8, ParserError>> {
        let test = Self::text_test_at(parser, false).or_else(|| Self::text_test_at(parser, true));
        test.map(|_| Ok(self.prec_value(Precedence::Between)))
    }

    fn parse_infix(
        &self,
        parser: &mut Parser,
        expr: &Expr,
        _precedence: u8,
    ) -> Option<Result<Expr, ParserError>> {
        let negated = Self::text_test_at(parser, false).is_none();
        let word = Self::text_test_at(parser, negated)?;
        for _ in 0..=usize::from(negated) {
            parser.next_token();
        }
        let search = parser.next_token();
        let Token::SingleQuotedString(search) = search.token else {
            return Some(parser.expected("a string literal", search));
        };
        let op = if negated {
            format!("{NOT_PREFIX}{word}")
        } else {
            word.to_owned()
        };
        Some(Ok(Expr::BinaryOp {
            left: Box::new(expr.clone()),
            op: BinaryOperator::Custom(op),
            right: Box::new(Expr::Value(SqlValue::SingleQuotedString(search).into())),
        }))
    }

    /// RocketMQ's `NOT` is a unary operator like `-`: `NOT a = 1` is `(NOT a) = 1`.
    fn prec_value(&self, prec: Precedence) -> u8 {
        match prec {
            Precedence::UnaryNot => 25,
            other => default_precedence(other),
        }
    }
}

/// `Dialect::prec_value`'s defaults, which an override cannot call.
fn default_precedence(prec: Precedence) -> u8 {
    #[derive(Debug)]
    struct Defaults;
    impl Dialect for Defaults {
        fn is_identifier_start(&self, _: char) -> bool {
            false
        }
        fn is_identifier_part(&self, _: char) -> bool {
            false
        }
    }
    Defaults.prec_value(prec)
}

/// `SelectorParser.parse`: the whole text must be one boolean expression.
pub(crate) fn parse(text: &str) -> Result<Expression, String> {
    let mut parser = Parser::new(&RocketMqDialect)
        .try_with_sql(text)
        .map_err(|e| e.to_string())?;
    let expr = parser.parse_expr().map_err(|e| e.to_string())?;
    let rest = parser.next_token();
    if rest.token != Token::EOF {
        return Err(format!("unexpected {} at {}", rest.token, rest.span.start));
    }
    as_boolean(translate(&expr)?)
}

/// `asBooleanExpression`: a property stands for its boolean cast; a constant other than
/// TRUE, FALSE or NULL, or a number-valued expression, cannot be a condition.
fn as_boolean(e: Expression) -> Result<Expression, String> {
    match e {
        Expression::Property(_) => Ok(Expression::BooleanCast(Box::new(e))),
        _ if is_boolean(&e) => Ok(e),
        other => Err(format!(
            "Expression will not result in a boolean value: {other:?}"
        )),
    }
}

/// RocketMQ's `BooleanExpression`s (TRUE, FALSE and NULL are `BooleanConstantExpression`s).
fn is_boolean(e: &Expression) -> bool {
    !matches!(
        e,
        Expression::Property(_)
            | Expression::Negate(_)
            | Expression::Constant(
                Value::Int(_) | Value::Long(_) | Value::Double(_) | Value::Str(_)
            )
    )
}

fn translate(expr: &Expr) -> Result<Expression, String> {
    let boxed = |e: &Expr| translate(e).map(Box::new);
    let boolean = |e: &Expr| translate(e).and_then(as_boolean).map(Box::new);
    Ok(match expr {
        Expr::Identifier(id) if id.quote_style.is_none() => Expression::Property(id.value.clone()),
        Expr::Value(v) => Expression::Constant(constant(&v.value)?),
        Expr::Nested(e) => translate(e)?,
        Expr::UnaryOp { op, expr } => match op {
            UnaryOperator::Plus => translate(expr)?,
            UnaryOperator::Minus => Expression::Negate(boxed(expr)?),
            UnaryOperator::Not => Expression::Not(boolean(expr)?),
            other => return Err(unsupported(&format!("the operator {other}"))),
        },
        Expr::BinaryOp { left, op, right } => binary(left, op, right)?,
        Expr::IsNull(e) => is_null(translate(e)?),
        Expr::IsNotNull(e) => Expression::Not(Box::new(is_null(translate(e)?))),
        Expr::Between {
            expr,
            negated,
            low,
            high,
        } => between(
            translate(expr)?,
            translate(low)?,
            translate(high)?,
            *negated,
        )?,
        Expr::In {
            expr,
            target: InTarget::List(list),
            negated,
            global: false,
        } => in_list(expr, list, *negated)?,
        other => return Err(unsupported(&format!("{other}"))),
    })
}

fn unsupported(what: &str) -> String {
    format!("RocketMQ's SQL92 filter does not support {what}")
}

/// `literal()`: strings, decimal integers (an `Integer` when it fits, else a `Long`), floats,
/// TRUE, FALSE and NULL.
fn constant(v: &SqlValue) -> Result<Value<'static>, String> {
    Ok(match v {
        SqlValue::SingleQuotedString(s) => Value::Str(s.clone().into()),
        SqlValue::Boolean(b) => Value::Bool(*b),
        SqlValue::Null => Value::Null,
        SqlValue::Number(n, _) if n.bytes().all(|b| b.is_ascii_digit()) => {
            let l: i64 = n
                .parse()
                .map_err(|_| format!("{n} is out of the range of a long"))?;
            i32::try_from(l).map_or(Value::Long(l), Value::Int)
        }
        SqlValue::Number(n, _) => match n.parse::<f64>() {
            Ok(d) if d.is_finite() => Value::Double(d),
            _ => return Err(format!("{n} is not a finite double")),
        },
        other => return Err(unsupported(&format!("the literal {other}"))),
    })
}

fn binary(left: &Expr, op: &BinaryOperator, right: &Expr) -> Result<Expression, String> {
    let (l, r) = (translate(left)?, translate(right)?);
    let compare = |c| comparison(l.clone(), c, r.clone());
    Ok(match op {
        BinaryOperator::And => Expression::And(Box::new(as_boolean(l)?), Box::new(as_boolean(r)?)),
        BinaryOperator::Or => Expression::Or(Box::new(as_boolean(l)?), Box::new(as_boolean(r)?)),
        BinaryOperator::Eq => equal(l, r)?,
        BinaryOperator::NotEq => Expression::Not(Box::new(equal(l, r)?)),
        BinaryOperator::Gt => compare(Comparison::Greater)?,
        BinaryOperator::GtEq => compare(Comparison::GreaterEqual)?,
        BinaryOperator::Lt => compare(Comparison::Less)?,
        BinaryOperator::LtEq => compare(Comparison::LessEqual)?,
        BinaryOperator::Custom(word) => text_test(l, word, r)?,
        other => return Err(unsupported(&format!("the operator {other}"))),
    })
}

/// `createEqual`: NULL cannot be compared with `=` (`IS NULL` says that), nor a boolean
/// constant with another kind of constant.
fn equal(l: Expression, r: Expression) -> Result<Expression, String> {
    for e in [&l, &r] {
        if *e == Expression::Constant(Value::Null) {
            return Err("'NULL' cannot be compared: use IS NULL".into());
        }
    }
    if let (Expression::Constant(lv @ Value::Bool(_)), Expression::Constant(rv)) = (&l, &r) {
        if !matches!(rv, Value::Bool(_)) {
            return Err(format!("'{lv:?}' cannot be compared with '{rv:?}'"));
        }
    }
    Ok(Expression::Equal(Box::new(l), Box::new(r)))
}

fn is_null(e: Expression) -> Expression {
    Expression::Equal(Box::new(e), Box::new(Expression::Constant(Value::Null)))
}

/// `checkLessThanOperand`: only numbers and non-boolean expressions can be ordered.
fn comparison(l: Expression, op: Comparison, r: Expression) -> Result<Expression, String> {
    for e in [&l, &r] {
        let number = matches!(
            e,
            Expression::Constant(Value::Int(_) | Value::Long(_) | Value::Double(_))
        );
        if !number && (matches!(e, Expression::Constant(_)) || is_boolean(e)) {
            return Err(format!("Value '{e:?}' cannot be compared with {op:?}"));
        }
    }
    Ok(Expression::Compare(Box::new(l), op, Box::new(r)))
}

/// `createBetween` / `createNotBetween`: constant bounds must be in order.
fn between(
    value: Expression,
    low: Expression,
    high: Expression,
    negated: bool,
) -> Result<Expression, String> {
    if let (Expression::Constant(lv), Expression::Constant(hv)) = (&low, &high) {
        let (l, h) = (as_f64(lv), as_f64(hv));
        if l.zip(h).is_some_and(|(l, h)| h < l) {
            return Err(format!(
                "Illegal values of between, left value({lv:?}) must less than or equal to \
                 right value({hv:?})"
            ));
        }
    }
    Ok(if negated {
        Expression::Or(
            Box::new(comparison(value.clone(), Comparison::Less, low)?),
            Box::new(comparison(value, Comparison::Greater, high)?),
        )
    } else {
        Expression::And(
            Box::new(comparison(value.clone(), Comparison::GreaterEqual, low)?),
            Box::new(comparison(value, Comparison::LessEqual, high)?),
        )
    })
}

fn as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some((*i).into()),
        Value::Long(l) => Some(*l as f64),
        Value::Double(d) => Some(*d),
        _ => None,
    }
}

/// `createInFilter`: a property against string literals.
fn in_list(expr: &Expr, list: &[Expr], not: bool) -> Result<Expression, String> {
    let Expression::Property(property) = translate(expr)? else {
        return Err(format!(
            "Expected a property for In expression, got: {expr}"
        ));
    };
    let list = list
        .iter()
        .map(|item| match item {
            Expr::Value(v) => match &v.value {
                SqlValue::SingleQuotedString(s) => Ok(s.clone()),
                other => Err(format!("IN takes string literals only, got: {other}")),
            },
            other => Err(format!("IN takes string literals only, got: {other}")),
        })
        .collect::<Result<_, _>>()?;
    Ok(Expression::In {
        property,
        list,
        not,
    })
}

/// `CONTAINS` and its kin, from the dialect's custom operators.
fn text_test(operand: Expression, word: &str, search: Expression) -> Result<Expression, String> {
    let (not, word) = match word.strip_prefix(NOT_PREFIX) {
        Some(w) => (true, w),
        None => (false, word),
    };
    let test = TEXT_TESTS
        .iter()
        .find(|(w, _)| *w == word)
        .map(|(_, t)| *t)
        .ok_or_else(|| unsupported(&format!("the operator {word}")))?;
    let Expression::Constant(Value::Str(search)) = search else {
        return Err(format!("{word} takes a string literal"));
    };
    Ok(Expression::Text {
        operand: Box::new(operand),
        test,
        search: search.into_owned(),
        not,
    })
}
