//! fastjson-compatible JSON: bodies are fastjson text. fastjson writes a map with non-string
//! keys with the keys bare (`"brokerAddrs":{0:"127.0.0.1:10911"}`), which is not JSON; the Java
//! client reads it, and a Java broker or name server may send it. So reading goes through
//! [`quote_bare_keys`] before serde_json, and writing has two styles ([`JsonStyle`]):
//! fastjson's default, for old clients, and the standard JSON the name server gives clients
//! from 4.9.4 on.

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// How to write a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonStyle {
    /// fastjson's `JSON.toJSONString(obj)`: `brokerAddrs` keys bare, text as is.
    Fastjson,
    /// fastjson with `BrowserCompatible, QuoteFieldNames, MapSortField`: every key quoted,
    /// non-ASCII escaped, integers beyond 2^53 as strings (what a browser can hold).
    Standard,
}

/// Writes `value` in fastjson's manner: fields and map keys sorted (fastjson orders fields by
/// name; map order is free, sorting makes it reproducible), null entries left out.
pub(crate) fn to_json<T: Serialize>(value: &T, style: JsonStyle) -> String {
    let mut out = String::new();
    match serde_json::to_value(value) {
        Ok(v) => write_value(&mut out, &v, style, false),
        // Our bodies have only string and integer keys, which always serialize; writing null
        // keeps this total instead of threading an impossible error through every caller.
        Err(_) => out.push_str("null"),
    }
    out
}

/// Integers a JavaScript number holds exactly (`BrowserCompatible`'s bound).
const BROWSER_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

fn write_value(out: &mut String, v: &Value, style: JsonStyle, bare_keys: bool) {
    let ascii_only = style == JsonStyle::Standard;
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match n.as_i64() {
            Some(i)
                if ascii_only && !(-BROWSER_SAFE_INTEGER..=BROWSER_SAFE_INTEGER).contains(&i) =>
            {
                out.push('"');
                out.push_str(&i.to_string());
                out.push('"');
            }
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => write_json_string(out, s, ascii_only),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, style, false);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> =
                map.iter().filter(|(_, v)| !v.is_null()).collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if bare_keys && style == JsonStyle::Fastjson && k.parse::<i64>().is_ok() {
                    out.push_str(k);
                } else {
                    write_json_string(out, k, ascii_only);
                }
                out.push(':');
                write_value(out, v, style, k == "brokerAddrs");
            }
            out.push('}');
        }
    }
}

/// Parses fastjson text, bare integer keys included.
pub(crate) fn parse_lenient<T: DeserializeOwned>(
    data: &[u8],
    what: &'static str,
) -> Result<T, JsonError> {
    // Most bodies are standard JSON: read as they are, without the two passes the lenient
    // reading costs (a 10,000-topic registration spends a fifth of its time in them).
    if let Ok(value) = serde_json::from_slice(data) {
        return Ok(value);
    }
    let text = String::from_utf8_lossy(data);
    let quoted = quote_bare_keys(&text);
    serde_json::from_str(&quoted).map_err(|e| JsonError {
        what,
        reason: e.to_string(),
    })
}

/// A body that does not parse, named by what it should have been.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{what} is not valid JSON: {reason}")]
pub(crate) struct JsonError {
    pub(crate) what: &'static str,
    pub(crate) reason: String,
}

/// Puts quotes around object keys written as bare integers (`{0:"a"}` becomes `{"0":"a"}`),
/// leaving strings, values and everything else untouched, so serde_json can read fastjson's
/// maps with `Long` keys. Text that is not JSON stays not JSON and fails in the parser.
pub(crate) fn quote_bare_keys(text: &str) -> Cow<'_, str> {
    #[derive(PartialEq)]
    enum Container {
        Object,
        Array,
    }
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0; // bytes of `text` already in `out`
    let mut stack: Vec<Container> = Vec::new();
    let mut expect_key = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                // Skip the string, escapes included.
                expect_key = false;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                continue;
            }
            b'{' => {
                stack.push(Container::Object);
                expect_key = true;
            }
            b'[' => {
                stack.push(Container::Array);
                expect_key = false;
            }
            b'}' | b']' => {
                stack.pop();
                expect_key = false;
            }
            b',' => expect_key = stack.last() == Some(&Container::Object),
            b':' => expect_key = false,
            b'-' | b'0'..=b'9' if expect_key => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
                let buf = out.get_or_insert_with(|| String::with_capacity(text.len() + 16));
                // `start` and `i` sit on ASCII bytes, so both are char boundaries.
                buf.push_str(&text[copied..start]);
                buf.push('"');
                buf.push_str(&text[start..i]);
                buf.push('"');
                copied = i;
                expect_key = false;
                continue;
            }
            b' ' | b'\t' | b'\n' | b'\r' => {}
            _ => expect_key = false,
        }
        i += 1;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut buf) => {
            buf.push_str(&text[copied..]);
            Cow::Owned(buf)
        }
    }
}

/// Appends `s` as a JSON string literal. `ascii_only` escapes every non-ASCII character as
/// `\uXXXX` (UTF-16 units), as fastjson's `BrowserCompatible` does for the name server's
/// standard-JSON answers; otherwise only what JSON requires is escaped, as fastjson's default.
pub(crate) fn write_json_string(out: &mut String, s: &str, ascii_only: bool) {
    use std::fmt::Write;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ascii_only && !c.is_ascii()) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    // Writing into a String cannot fail.
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_parse_back() {
        for s in ["", "plain", "q\"b\\s", "\u{1}\n\t", "é中😀", "\u{7f}/"] {
            for ascii_only in [false, true] {
                let mut out = String::new();
                write_json_string(&mut out, s, ascii_only);
                assert!(!ascii_only || out.is_ascii(), "{out}");
                let back: String = serde_json::from_str(&out).unwrap();
                assert_eq!(back, s);
            }
        }
        let mut out = String::new();
        write_json_string(&mut out, "é😀", true);
        assert_eq!(out, "\"\\u00e9\\ud83d\\ude00\"");
    }

    #[test]
    fn quote_bare_keys_touches_only_keys() {
        let cases = [
            ("{}", "{}"),
            ("{0:\"a\"}", "{\"0\":\"a\"}"),
            (
                "{ -12 : 3 , 7:[1,2,{8:9}]}",
                "{ \"-12\" : 3 , \"7\":[1,2,{\"8\":9}]}",
            ),
            // Digits in strings and array elements stay as they are.
            (
                "{\"k\":\"{0:1}\",\"a\":[0,1]}",
                "{\"k\":\"{0:1}\",\"a\":[0,1]}",
            ),
            ("{\"e\\\"\":{1:\"x\\\\\"}}", "{\"e\\\"\":{\"1\":\"x\\\\\"}}"),
            ("[{5:\"é\"}]", "[{\"5\":\"é\"}]"),
        ];
        for (input, expected) in cases {
            assert_eq!(quote_bare_keys(input), expected, "{input}");
        }
        assert!(matches!(quote_bare_keys("{\"a\":1}"), Cow::Borrowed(_)));
        // Garbage stays garbage and never panics.
        for junk in ["{", "{0", "\"", "\\", "{\"\\", "]]}}", "{1:{2:", "{-"] {
            let _ = quote_bare_keys(junk);
            assert!(parse_lenient::<serde_json::Value>(junk.as_bytes(), "junk").is_err());
        }
    }
}
