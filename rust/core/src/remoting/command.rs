//! The command a remoting frame carries (RocketMQ's `RemotingCommand`) and its header in both
//! serialize types:
//!
//! - JSON, as fastjson writes a `RemotingCommand`: fields in alphabetical order, `language` and
//!   `serializeTypeCurrentRPC` as enum constant names, null fields left out. Reading is as
//!   lenient as fastjson: unknown fields are ignored, missing optional ones take Java's defaults,
//!   scalars where strings are expected are taken as their text.
//! - ROCKETMQ (`RocketMQSerializable`): `i16 code | u8 language | i16 version | i32 opaque |
//!   i32 flag | i32 remarkLen | remark | i32 extLen | (i16 keyLen | key | i32 valLen | val)*`,
//!   big-endian; a zero length means null.
//!
//! The typed views of its `extFields` are the custom headers ([`super::header`]).

use serde_json::Value;

use super::codes::{LanguageCode, SerializeType};
use super::frame::{encode_frame, RawFrame, RemotingFrameError};
use super::header::{CustomHeader, ExtFields, HeaderError};
use crate::protocol::json::write_json_string;
use crate::protocol::reader::{ReadError, Reader};

/// `RemotingCommand`'s flag bits.
const FLAG_RESPONSE: i32 = 1;
const FLAG_ONEWAY: i32 = 1 << 1;

/// ROCKETMQ header bytes before the remark: code, language, version, opaque, flag.
const FIXED_LEN: usize = 2 + 1 + 2 + 4 + 4;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum CommandError {
    #[error("JSON remoting header is not valid JSON: {0}")]
    Json(String),
    #[error("JSON remoting header is {0}, not an object")]
    NotAnObject(&'static str),
    #[error("JSON remoting header has no `code`")]
    MissingCode,
    #[error("JSON remoting header field `{field}` is {found}, expected {expected}")]
    BadField {
        field: &'static str,
        found: String,
        expected: &'static str,
    },
    #[error("ROCKETMQ remoting header: {0}")]
    Read(#[from] ReadError),
    #[error("ROCKETMQ remoting header has {0} bytes left after its extFields")]
    TrailingBytes(usize),
    #[error("{field} {value} does not fit the 16 bits a ROCKETMQ header gives it")]
    OutOfRange { field: &'static str, value: i32 },
    #[error("extFields key of {0} bytes exceeds the 32767 bytes a ROCKETMQ header can hold")]
    KeyTooLong(usize),
    #[error(transparent)]
    Frame(#[from] RemotingFrameError),
}

/// RocketMQ's `RemotingCommand`: a request or a response, its header fields and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "harness", visibility::make(pub))]
pub(crate) struct RemotingCommand {
    /// A request code, or a response code when the response bit of `flag` is set.
    pub code: i32,
    pub language: LanguageCode,
    /// The sender's `MQVersion` ordinal.
    pub version: i32,
    /// Matches a response to its request.
    pub opaque: i32,
    /// Bit 0: response; bit 1: oneway.
    pub flag: i32,
    pub remark: Option<String>,
    pub ext_fields: ExtFields,
    /// The type the command arrived in, so its response answers in the same one.
    pub serialize_type: SerializeType,
    pub body: Vec<u8>,
}

impl RemotingCommand {
    /// A request as rocketha sends it: JSON header (RocketMQ's default), language RUST.
    pub fn request(code: i32, opaque: i32) -> RemotingCommand {
        RemotingCommand {
            code,
            language: LanguageCode::Rust,
            version: 0,
            opaque,
            flag: 0,
            remark: None,
            ext_fields: ExtFields::new(),
            serialize_type: SerializeType::Json,
            body: Vec::new(),
        }
    }

    /// The response to `request`: its opaque and its serialize type, the response bit set.
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) fn response_to(
        request: &RemotingCommand,
        code: i32,
        remark: Option<String>,
    ) -> Self {
        RemotingCommand {
            code,
            language: LanguageCode::Rust,
            version: request.version,
            opaque: request.opaque,
            flag: FLAG_RESPONSE,
            remark,
            ext_fields: ExtFields::new(),
            serialize_type: request.serialize_type,
            body: Vec::new(),
        }
    }

    pub(crate) fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    pub(crate) fn mark_response(&mut self) {
        self.flag |= FLAG_RESPONSE;
    }

    pub(crate) fn mark_oneway(&mut self) {
        self.flag |= FLAG_ONEWAY;
    }

    /// Decodes the command in a frame (header and a copy of the body).
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) fn decode(frame: &RawFrame<'_>) -> Result<RemotingCommand, CommandError> {
        let mut cmd = RemotingCommand::decode_header(frame.header, frame.serialize_type)?;
        cmd.body = frame.body.to_vec();
        Ok(cmd)
    }

    /// Decodes a header of the given type; the body is left empty.
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) fn decode_header(
        header: &[u8],
        serialize_type: SerializeType,
    ) -> Result<RemotingCommand, CommandError> {
        match serialize_type {
            SerializeType::Json => decode_json_header(header),
            SerializeType::RocketMq => decode_rocketmq_header(header),
        }
    }

    /// The header in the command's own serialize type.
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) fn encode_header(&self) -> Result<Vec<u8>, CommandError> {
        match self.serialize_type {
            SerializeType::Json => Ok(self.encode_json_header().into_bytes()),
            SerializeType::RocketMq => self.encode_rocketmq_header(),
        }
    }

    /// The whole frame, refusing one larger than `max_frame_size`.
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) fn encode(&self, max_frame_size: usize) -> Result<Vec<u8>, CommandError> {
        let header = self.encode_header()?;
        let mut out = Vec::new();
        encode_frame(
            self.serialize_type,
            &header,
            &self.body,
            max_frame_size,
            &mut out,
        )?;
        Ok(out)
    }

    /// The JSON header as fastjson writes `RemotingCommand`: getters in alphabetical order,
    /// nulls left out. `extFields` keys are sorted so the bytes are reproducible.
    pub(crate) fn encode_json_header(&self) -> String {
        let mut out = String::with_capacity(128);
        out.push_str("{\"code\":");
        out.push_str(&self.code.to_string());
        if !self.ext_fields.is_empty() {
            out.push_str(",\"extFields\":{");
            let mut keys: Vec<&String> = self.ext_fields.keys().collect();
            keys.sort();
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(&mut out, k, false);
                out.push(':');
                write_json_string(&mut out, &self.ext_fields[k], false);
            }
            out.push('}');
        }
        out.push_str(",\"flag\":");
        out.push_str(&self.flag.to_string());
        out.push_str(",\"language\":\"");
        out.push_str(self.language.name());
        out.push_str("\",\"opaque\":");
        out.push_str(&self.opaque.to_string());
        if let Some(remark) = &self.remark {
            out.push_str(",\"remark\":");
            write_json_string(&mut out, remark, false);
        }
        out.push_str(",\"serializeTypeCurrentRPC\":\"");
        out.push_str(SerializeType::Json.name());
        out.push_str("\",\"version\":");
        out.push_str(&self.version.to_string());
        out.push('}');
        out
    }

    /// The ROCKETMQ binary header. An empty remark or value goes out as length 0, which the
    /// peer reads as null, as Java's encoder does.
    pub(crate) fn encode_rocketmq_header(&self) -> Result<Vec<u8>, CommandError> {
        let code = i16::try_from(self.code).map_err(|_| CommandError::OutOfRange {
            field: "code",
            value: self.code,
        })?;
        let version = i16::try_from(self.version).map_err(|_| CommandError::OutOfRange {
            field: "version",
            value: self.version,
        })?;
        let remark = self.remark.as_deref().unwrap_or("").as_bytes();
        let mut ext = Vec::new();
        let mut keys: Vec<&String> = self.ext_fields.keys().collect();
        keys.sort();
        for k in keys {
            let v = self.ext_fields[k].as_bytes();
            let key_len = i16::try_from(k.len()).map_err(|_| CommandError::KeyTooLong(k.len()))?;
            ext.extend_from_slice(&key_len.to_be_bytes());
            ext.extend_from_slice(k.as_bytes());
            ext.extend_from_slice(&len_i32(v.len())?.to_be_bytes());
            ext.extend_from_slice(v);
        }
        let mut out = Vec::with_capacity(FIXED_LEN + 8 + remark.len() + ext.len());
        out.extend_from_slice(&code.to_be_bytes());
        out.push(self.language.code());
        out.extend_from_slice(&version.to_be_bytes());
        out.extend_from_slice(&self.opaque.to_be_bytes());
        out.extend_from_slice(&self.flag.to_be_bytes());
        out.extend_from_slice(&len_i32(remark.len())?.to_be_bytes());
        out.extend_from_slice(remark);
        out.extend_from_slice(&len_i32(ext.len())?.to_be_bytes());
        out.extend_from_slice(&ext);
        Ok(out)
    }

    /// Decodes this command's `extFields` as a typed custom header.
    pub(crate) fn decode_custom_header<H: CustomHeader>(&self) -> Result<H, HeaderError> {
        H::from_ext_fields(&self.ext_fields)
    }

    /// Adds a typed custom header's fields to `extFields` (`makeCustomHeaderToNet`).
    #[cfg_attr(feature = "harness", visibility::make(pub))]
    pub(crate) fn write_custom_header<H: CustomHeader>(&mut self, header: &H) {
        self.ext_fields.extend(header.to_ext_fields());
    }
}

/// A length that must fit the i32 RocketMQ gives it; a header beyond 16 MiB is refused by the
/// frame anyway, so this only guards the conversion.
fn len_i32(len: usize) -> Result<i32, CommandError> {
    i32::try_from(len).map_err(|_| CommandError::Frame(RemotingFrameError::HeaderTooLong(len)))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An int field: a JSON integer, or a string holding one (fastjson converts both).
fn json_i32(v: &Value, field: &'static str) -> Result<i32, CommandError> {
    let parsed = match v {
        Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
        Value::String(s) => s.trim().parse::<i32>().ok(),
        _ => None,
    };
    parsed.ok_or_else(|| CommandError::BadField {
        field,
        found: v.to_string(),
        expected: "a 32-bit integer",
    })
}

/// A string field: a JSON string, or any other scalar taken as its JSON text, as fastjson does.
fn json_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn decode_json_header(header: &[u8]) -> Result<RemotingCommand, CommandError> {
    let value: Value =
        serde_json::from_slice(header).map_err(|e| CommandError::Json(e.to_string()))?;
    let Value::Object(map) = value else {
        return Err(CommandError::NotAnObject(json_kind(&value)));
    };
    let code = match map.get("code") {
        None | Some(Value::Null) => return Err(CommandError::MissingCode),
        Some(v) => json_i32(v, "code")?,
    };
    let int_or_zero = |field: &'static str| match map.get(field) {
        None | Some(Value::Null) => Ok(0),
        Some(v) => json_i32(v, field),
    };
    let language = match map.get("language") {
        // Java's field default.
        None | Some(Value::Null) => LanguageCode::Java,
        // fastjson maps an unknown constant name to null; OTHER keeps the command usable.
        Some(Value::String(name)) => LanguageCode::from_name(name).unwrap_or(LanguageCode::Other),
        // fastjson also reads an enum from its ordinal.
        Some(v) => u8::try_from(json_i32(v, "language")?)
            .ok()
            .and_then(LanguageCode::from_code)
            .unwrap_or(LanguageCode::Other),
    };
    let mut ext_fields = ExtFields::new();
    match map.get("extFields") {
        None | Some(Value::Null) => {}
        Some(Value::Object(fields)) => {
            for (k, v) in fields {
                if let Some(v) = json_text(v) {
                    ext_fields.insert(k.clone(), v);
                }
            }
        }
        Some(other) => {
            return Err(CommandError::BadField {
                field: "extFields",
                found: json_kind(other).to_string(),
                expected: "an object",
            })
        }
    }
    Ok(RemotingCommand {
        code,
        language,
        version: int_or_zero("version")?,
        opaque: int_or_zero("opaque")?,
        flag: int_or_zero("flag")?,
        remark: map.get("remark").and_then(json_text),
        ext_fields,
        serialize_type: SerializeType::Json,
        body: Vec::new(),
    })
}

fn decode_rocketmq_header(header: &[u8]) -> Result<RemotingCommand, CommandError> {
    let mut r = Reader::new(header);
    let code = r.i16("code")?;
    let [language] = r.array::<1>("language")?;
    let version = r.i16("version")?;
    let opaque = r.i32("opaque")?;
    let flag = r.i32("flag")?;
    let remark_len = r.i32("remark length")?;
    let remark_len = Reader::len(remark_len, "remark")?;
    let remark = match remark_len {
        0 => None,
        n => Some(r.text(n, "remark")?),
    };
    let ext_len = r.i32("extFields length")?;
    let ext_len = Reader::len(ext_len, "extFields")?;
    let ext = r.take(ext_len, "extFields")?;
    if r.pos != header.len() {
        return Err(CommandError::TrailingBytes(header.len() - r.pos));
    }
    let mut e = Reader::new(ext);
    let mut ext_fields = ExtFields::new();
    while e.pos < ext.len() {
        let key_len = e.i16("extFields key length")?;
        let key_len = Reader::len(i32::from(key_len), "extFields key")?;
        let key = e.text(key_len, "extFields key")?;
        let val_len = e.i32("extFields value length")?;
        let val_len = Reader::len(val_len, "extFields value")?;
        let val = e.text(val_len, "extFields value")?;
        ext_fields.insert(key, val);
    }
    Ok(RemotingCommand {
        code: i32::from(code),
        // Java's `LanguageCode.valueOf` gives null for an unknown byte; OTHER keeps it usable.
        language: LanguageCode::from_code(language).unwrap_or(LanguageCode::Other),
        version: i32::from(version),
        opaque,
        flag,
        remark,
        ext_fields,
        serialize_type: SerializeType::RocketMq,
        body: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::codes::request_code;
    use crate::remoting::frame::{decode_frame, Decoded, DEFAULT_MAX_FRAME_SIZE};
    use proptest::prelude::*;

    fn push_i16(v: &mut Vec<u8>, x: i16) {
        v.extend_from_slice(&x.to_be_bytes());
    }

    fn push_i32(v: &mut Vec<u8>, x: i32) {
        v.extend_from_slice(&x.to_be_bytes());
    }

    fn fields(pairs: &[(&str, &str)]) -> ExtFields {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn decode_one(bytes: &[u8]) -> RemotingCommand {
        match decode_frame(bytes, DEFAULT_MAX_FRAME_SIZE).unwrap() {
            Decoded::Frame { frame, consumed } => {
                assert_eq!(consumed, bytes.len());
                RemotingCommand::decode(&frame).unwrap()
            }
            Decoded::NeedMore { .. } => panic!("incomplete frame"),
        }
    }

    /// A JSON request frame, built field by field: what a Java 5.x producer sends for
    /// GET_ROUTEINFO_BY_TOPIC with fastjson's alphabetical field order.
    #[test]
    fn golden_json_request_frame() {
        let mut cmd = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC, 7);
        cmd.language = LanguageCode::Java;
        cmd.version = 475;
        cmd.ext_fields = fields(&[("topic", "TopicTest")]);
        let header = concat!(
            r#"{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","#,
            r#""opaque":7,"serializeTypeCurrentRPC":"JSON","version":475}"#
        );
        let mut expected = Vec::new();
        push_i32(&mut expected, 4 + header.len() as i32);
        push_i32(&mut expected, header.len() as i32); // serialize type 0 (JSON) in the top byte
        expected.extend_from_slice(header.as_bytes());
        assert_eq!(cmd.encode(DEFAULT_MAX_FRAME_SIZE).unwrap(), expected);
        assert_eq!(decode_one(&expected), cmd);
    }

    /// A JSON response frame with a remark and a body: the response bit in `flag`, the
    /// request's opaque, the remark escaped as fastjson escapes it.
    #[test]
    fn golden_json_response_frame() {
        let request = RemotingCommand::request(request_code::GET_ROUTEINFO_BY_TOPIC, 42);
        let mut cmd = RemotingCommand::response_to(
            &request,
            17, // TOPIC_NOT_EXIST
            Some("No topic route info for \"T\"\n".into()),
        );
        cmd.body = b"{}".to_vec();
        let header = concat!(
            r#"{"code":17,"flag":1,"language":"RUST","opaque":42,"#,
            r#""remark":"No topic route info for \"T\"\n","#,
            r#""serializeTypeCurrentRPC":"JSON","version":0}"#
        );
        let mut expected = Vec::new();
        push_i32(&mut expected, 4 + header.len() as i32 + 2);
        push_i32(&mut expected, header.len() as i32);
        expected.extend_from_slice(header.as_bytes());
        expected.extend_from_slice(b"{}");
        assert_eq!(cmd.encode(DEFAULT_MAX_FRAME_SIZE).unwrap(), expected);
        let back = decode_one(&expected);
        assert!(back.is_response());
        assert_eq!(back, cmd);
    }

    /// A ROCKETMQ response frame with a remark, two extFields and a body.
    #[test]
    fn golden_rocketmq_response_frame() {
        let request = RemotingCommand {
            serialize_type: SerializeType::RocketMq,
            ..RemotingCommand::request(request_code::SEND_MESSAGE_V2, 0x0102_0304)
        };
        let mut cmd = RemotingCommand::response_to(&request, 0, Some("ok".into()));
        cmd.language = LanguageCode::Java;
        cmd.version = 1;
        cmd.ext_fields = fields(&[("queueId", "3"), ("msgId", "AB")]);
        cmd.body = b"xyz".to_vec();

        let mut header = Vec::new();
        push_i16(&mut header, 0); // code SUCCESS
        header.push(0); // language JAVA
        push_i16(&mut header, 1); // version
        push_i32(&mut header, 0x0102_0304); // opaque, copied from the request
        push_i32(&mut header, 1); // flag: response
        push_i32(&mut header, 2); // remark
        header.extend_from_slice(b"ok");
        let mut ext = Vec::new();
        for (k, v) in [("msgId", "AB"), ("queueId", "3")] {
            push_i16(&mut ext, k.len() as i16);
            ext.extend_from_slice(k.as_bytes());
            push_i32(&mut ext, v.len() as i32);
            ext.extend_from_slice(v.as_bytes());
        }
        push_i32(&mut header, ext.len() as i32);
        header.extend_from_slice(&ext);
        let mut expected = Vec::new();
        push_i32(&mut expected, 4 + header.len() as i32 + 3);
        push_i32(&mut expected, (1 << 24) | header.len() as i32);
        expected.extend_from_slice(&header);
        expected.extend_from_slice(b"xyz");

        assert_eq!(cmd.encode(DEFAULT_MAX_FRAME_SIZE).unwrap(), expected);
        let back = decode_one(&expected);
        assert_eq!(back, cmd);
        assert!(back.is_response() && !back.is_oneway());
    }

    /// A oneway ROCKETMQ request with neither remark nor extFields: both lengths are 0.
    #[test]
    fn golden_rocketmq_oneway_frame() {
        let mut cmd = RemotingCommand {
            serialize_type: SerializeType::RocketMq,
            ..RemotingCommand::request(request_code::UNREGISTER_CLIENT, -5)
        };
        cmd.mark_oneway();
        let mut expected = Vec::new();
        push_i32(&mut expected, 4 + 21);
        push_i32(&mut expected, (1 << 24) | 21);
        push_i16(&mut expected, 35);
        expected.push(12); // RUST
        push_i16(&mut expected, 0);
        push_i32(&mut expected, -5);
        push_i32(&mut expected, 2); // flag: oneway
        push_i32(&mut expected, 0); // no remark
        push_i32(&mut expected, 0); // no extFields
        assert_eq!(cmd.encode(DEFAULT_MAX_FRAME_SIZE).unwrap(), expected);
        let back = decode_one(&expected);
        assert!(back.is_oneway() && !back.is_response());
        assert_eq!(back, cmd);
    }

    #[test]
    fn json_reading_is_lenient_like_fastjson() {
        let raw = br#"{"code":"11","language":"NO_SUCH","flag":1,"remark":null,
            "extFields":{"a":1,"b":true,"c":null,"d":"x"},"unknownField":[1,2],"opaque":9}"#;
        let cmd = RemotingCommand::decode_header(raw, SerializeType::Json).unwrap();
        assert_eq!(cmd.code, 11);
        assert_eq!(cmd.language, LanguageCode::Other);
        assert_eq!(cmd.version, 0);
        assert_eq!(cmd.opaque, 9);
        assert!(cmd.is_response());
        assert_eq!(cmd.remark, None);
        assert_eq!(
            cmd.ext_fields,
            fields(&[("a", "1"), ("b", "true"), ("d", "x")])
        );
        let minimal = RemotingCommand::decode_header(br#"{"code":0}"#, SerializeType::Json);
        assert_eq!(minimal.unwrap().language, LanguageCode::Java);
    }

    #[test]
    fn json_header_errors() {
        let decode = |raw: &[u8]| RemotingCommand::decode_header(raw, SerializeType::Json);
        assert_eq!(decode(b"[1,2]"), Err(CommandError::NotAnObject("an array")));
        assert_eq!(
            decode(b"\"code\""),
            Err(CommandError::NotAnObject("a string"))
        );
        assert_eq!(decode(br#"{"flag":0}"#), Err(CommandError::MissingCode));
        assert!(matches!(decode(b"{\"code\":"), Err(CommandError::Json(_))));
        assert!(matches!(decode(b"\xff"), Err(CommandError::Json(_))));
        let err = decode(br#"{"code":1.5}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "JSON remoting header field `code` is 1.5, expected a 32-bit integer"
        );
        assert!(matches!(
            decode(br#"{"code":4294967296}"#),
            Err(CommandError::BadField { field: "code", .. })
        ));
        assert!(matches!(
            decode(br#"{"code":1,"extFields":[]}"#),
            Err(CommandError::BadField {
                field: "extFields",
                ..
            })
        ));
    }

    #[test]
    fn rocketmq_header_errors() {
        let mut cmd = RemotingCommand::request(10, 1);
        cmd.remark = Some("remark".into());
        cmd.ext_fields = fields(&[("key", "value")]);
        let full = cmd.encode_rocketmq_header().unwrap();
        let decode = |raw: &[u8]| RemotingCommand::decode_header(raw, SerializeType::RocketMq);
        // Every proper prefix is truncated somewhere, and says where.
        for cut in 0..full.len() {
            match decode(&full[..cut]) {
                Err(CommandError::Read(ReadError::Truncated { len, .. })) => assert_eq!(len, cut),
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
        let err = decode(&full[..5]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "ROCKETMQ remoting header: truncated: opaque needs 4 bytes at offset 5 of 5"
        );
        let mut trailing = full.clone();
        trailing.push(0);
        assert_eq!(decode(&trailing), Err(CommandError::TrailingBytes(1)));
        let mut negative = full.clone();
        negative[FIXED_LEN..FIXED_LEN + 4].copy_from_slice(&(-2i32).to_be_bytes());
        assert_eq!(
            decode(&negative),
            Err(CommandError::Read(ReadError::NegativeLength {
                field: "remark",
                length: -2
            }))
        );
        let mut huge = full;
        huge[FIXED_LEN..FIXED_LEN + 4].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            decode(&huge),
            Err(CommandError::Read(ReadError::Truncated {
                field: "remark",
                ..
            }))
        ));
        cmd.code = 40_000;
        assert_eq!(
            cmd.encode_rocketmq_header(),
            Err(CommandError::OutOfRange {
                field: "code",
                value: 40_000
            })
        );
    }

    fn arb_command() -> impl Strategy<Value = RemotingCommand> {
        (
            any::<i16>(),
            prop::sample::select(LanguageCode::ALL.to_vec()),
            any::<i16>(),
            any::<i32>(),
            any::<i32>(),
            prop::option::of(".{1,20}"),
            prop::collection::hash_map(".{0,12}", ".{1,20}", 0..6),
            prop::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(
                |(code, language, version, opaque, flag, remark, ext_fields, body)| {
                    RemotingCommand {
                        code: i32::from(code),
                        language,
                        version: i32::from(version),
                        opaque,
                        flag,
                        remark,
                        ext_fields,
                        serialize_type: SerializeType::Json,
                        body,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn json_frames_round_trip(cmd in arb_command()) {
            let bytes = cmd.encode(DEFAULT_MAX_FRAME_SIZE).unwrap();
            prop_assert_eq!(decode_one(&bytes), cmd);
        }

        #[test]
        fn rocketmq_frames_round_trip(cmd in arb_command()) {
            let cmd = RemotingCommand { serialize_type: SerializeType::RocketMq, ..cmd };
            let bytes = cmd.encode(DEFAULT_MAX_FRAME_SIZE).unwrap();
            prop_assert_eq!(decode_one(&bytes), cmd);
        }

    }
}
