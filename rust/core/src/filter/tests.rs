use super::*;
use crate::commitlog::record::encode_properties;

fn matches(sql: &str, props: &[(&str, &str)]) -> bool {
    let filter = SqlFilter::compile(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    filter.matches(&encode_properties(props.iter().copied()).unwrap())
}

fn refused(sql: &str) -> String {
    SqlFilter::compile(sql).expect_err(sql)
}

#[test]
fn numbers_compare_as_numbers_and_strings_as_strings() {
    let a7 = [("a", "7")];
    for sql in [
        "a > 5", "a >= 7", "a < 7.5", "a <= 7", "a = 7", "a <> 8", "7 = a", "5 < a",
    ] {
        assert!(matches(sql, &a7), "{sql}");
    }
    for sql in ["a > 7", "a < 5", "a = 8", "a <> 7", "a > 10"] {
        assert!(!matches(sql, &a7), "{sql}");
    }
    // Numerically, not lexicographically: "10" > "9".
    assert!(matches("a > 9", &[("a", "10")]));
    assert!(matches("a > -1", &[("a", "0")]));
    assert!(matches("a = 3000000000", &[("a", "3000000000")]));
    assert!(matches("a = 'x'", &[("a", "x")]));
    assert!(!matches("a = 'x'", &[("a", "y")]));
    assert!(matches("a = 'it''s'", &[("a", "it's")]));
    // A value that is not the number it is compared with fails the evaluation: no match.
    assert!(!matches("a > 5", &[("a", "abc")]));
    assert!(!matches("a > 5 OR TRUE", &[("a", "abc")]));
    assert!(!matches("a = 7", &[("a", "7.0")]));
    assert!(matches("a = 7.0", &[("a", "7")]));
}

#[test]
fn a_missing_property_is_null() {
    let none: [(&str, &str); 0] = [];
    for sql in [
        "a > 5",
        "a = 5",
        "a <> 5",
        "a = 'x'",
        "a IN ('x')",
        "a NOT IN ('x')",
    ] {
        assert!(!matches(sql, &none), "{sql}");
        assert!(!matches(&format!("NOT ({sql})"), &none), "NOT ({sql})");
    }
    assert!(matches("a IS NULL", &none));
    assert!(!matches("a IS NOT NULL", &none));
    assert!(matches("a IS NOT NULL", &[("a", "1")]));
    assert!(!matches("a IS NULL", &[("a", "1")]));
    // Three-valued logic: null OR TRUE is TRUE, null AND FALSE is FALSE.
    assert!(matches("a > 5 OR b = 1", &[("b", "1")]));
    assert!(!matches("NOT (a > 5 AND b = 1)", &[("b", "1")]));
    assert!(matches("NOT (a > 5 AND b = 2)", &[("a", "9"), ("b", "1")]));
}

#[test]
fn between_in_not_and_precedence() {
    assert!(matches("a BETWEEN 1 AND 3", &[("a", "3")]));
    assert!(!matches("a BETWEEN 1 AND 3", &[("a", "4")]));
    assert!(matches("a NOT BETWEEN 1 AND 3", &[("a", "4")]));
    assert!(!matches("a NOT BETWEEN 1 AND 3", &[]));
    assert!(matches("b IN ('x', 'y')", &[("b", "y")]));
    assert!(!matches("b IN ('x', 'y')", &[("b", "z")]));
    assert!(matches("b NOT IN ('x', 'y')", &[("b", "z")]));
    assert!(matches("NOT (b = 'x')", &[("b", "z")]));
    // AND binds tighter than OR.
    assert!(matches("a = 1 OR a = 2 AND b = 'x'", &[("a", "1")]));
    assert!(!matches("(a = 1 OR a = 2) AND b = 'x'", &[("a", "1")]));
    assert!(matches("TRUE", &[]));
    assert!(!matches("FALSE", &[]));
    assert!(matches("a > 1 AND TRUE", &[("a", "2")]));
    // A bare property is its boolean cast: a string is never TRUE.
    assert!(!matches("a", &[("a", "true")]));
}

#[test]
fn tags_and_the_string_tests_of_5x() {
    let tagged = [("TAGS", "TagA")];
    assert!(matches("TAGS = 'TagA'", &tagged));
    assert!(matches("TAGS IN ('TagA', 'TagB')", &tagged));
    assert!(matches("TAGS is not null and TAGS in ('TagA')", &tagged));
    assert!(matches("TAGS CONTAINS 'agA'", &tagged));
    assert!(matches("TAGS STARTSWITH 'Tag'", &tagged));
    assert!(matches("TAGS ENDSWITH 'A'", &tagged));
    assert!(!matches("TAGS NOT ENDSWITH 'A'", &tagged));
    assert!(matches("TAGS NOT CONTAINS 'B'", &tagged));
    assert!(!matches("TAGS CONTAINS ''", &tagged));
    assert!(!matches("x NOT CONTAINS 'B'", &tagged));
}

#[test]
fn what_rocketmq_refuses_is_refused_by_name() {
    for (sql, why) in [
        ("a >", "Expected"),
        ("a > 'x'", "cannot be compared"),
        ("a > TRUE", "cannot be compared"),
        ("a = NULL", "IS NULL"),
        ("TRUE = 1", "cannot be compared"),
        ("a BETWEEN 3 AND 1", "Illegal values of between"),
        ("a IN (1, 2)", "string literals only"),
        ("'x' IN ('x')", "Expected a property"),
        ("a LIKE 'x%'", "does not support"),
        ("a + 1 > 2", "does not support"),
        ("f(a)", "unexpected ("),
        ("\"a\" = 1", "does not support"),
        ("a.b = 1", "does not support"),
        ("5", "will not result in a boolean"),
        ("a > 5 garbage", "unexpected"),
        // NOT binds as tightly as in RocketMQ's grammar: `(NOT a) > 1`.
        ("NOT a > 1", "cannot be compared"),
        ("a CONTAINS b", "string literal"),
        ("99999999999999999999 = a", "range of a long"),
        ("  ", "empty"),
    ] {
        let err = refused(sql);
        assert!(err.contains(why), "{sql}: {err}");
    }
}

#[test]
fn identifiers_and_literals_follow_the_grammar() {
    assert!(matches(
        "$a_1 = 1 AND _b = 2",
        &[("$a_1", "1"), ("_b", "2")]
    ));
    assert!(matches("a > .5 AND a < 5E1", &[("a", "1")]));
    assert!(matches("a = 5 -- a comment\n", &[("a", "5")]));
    assert!(matches("a /* block */ = 5", &[("a", "5")]));
    assert!(matches("a = -5", &[("a", "-5")]));
    assert!(matches("a = 5L", &[("a", "5")]));
    // Leniency (docs/differences.md): `!=` is read as `<>`.
    assert!(matches("a != 5", &[("a", "6")]));
    assert!(!matches("a AND b IS NULL", &[("a", "x")]));
    // Words SQL reserves are properties in RocketMQ's grammar.
    let props = [
        ("user", "u"),
        ("date", "d"),
        ("order", "1"),
        ("key", "k"),
        ("case", "2"),
    ];
    let sql = "user = 'u' AND date = 'd' AND order = 1 AND key = 'k' AND case > 1";
    assert!(matches(sql, &props));
    assert!(matches(
        "KEYS = 'k1' AND interval IS NULL",
        &[("KEYS", "k1")]
    ));
}
