//! `AclUtils.combineRequestContent` and `AclSigner.calSignature`: what is signed, and how.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha1::Sha1;

use crate::remoting::ExtFields;

/// `SessionCredentials.ACCESS_KEY`.
pub(crate) const ACCESS_KEY: &str = "AccessKey";
/// `SessionCredentials.SECRET_KEY`'s companion on the wire: the request's signature.
pub(crate) const SIGNATURE: &str = "Signature";
/// `SessionCredentials.SECURITY_TOKEN`.
pub(crate) const SECURITY_TOKEN: &str = "SecurityToken";
/// `MixAll.UNIQUE_MSG_QUERY_FLAG`: a query flag the broker leaves out of the signed content.
pub(crate) const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";

/// The bytes a request's signature covers: the values of its ext fields sorted by key (Java's
/// `TreeMap`; keys are ASCII, so byte order is Java's `String` order), each key in `skip`
/// left out, concatenated as UTF-8, then the body.
pub(crate) fn combine_request_content(fields: &ExtFields, body: &[u8], skip: &[&str]) -> Vec<u8> {
    let mut keys: Vec<&String> = fields
        .keys()
        .filter(|k| !skip.contains(&k.as_str()))
        .collect();
    keys.sort_unstable();
    let mut content: Vec<u8> = Vec::with_capacity(body.len() + 64 * keys.len());
    for key in keys {
        content.extend_from_slice(fields[key].as_bytes());
    }
    content.extend_from_slice(body);
    content
}

/// HmacSHA1 of `content` keyed with the secret key's UTF-8 bytes, base64 (standard, padded).
pub(crate) fn cal_signature(content: &[u8], secret_key: &str) -> String {
    // HMAC takes a key of any length, so this cannot fail.
    let mut mac = <Hmac<Sha1> as Mac>::new_from_slice(secret_key.as_bytes())
        .unwrap_or_else(|_| unreachable!());
    mac.update(content);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Compares two signatures in constant time, so timing does not reveal how much of a guess
/// matched.
pub(crate) fn signatures_equal(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> ExtFields {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn content_is_sorted_values_then_body_without_the_signature() {
        let f = fields(&[
            ("b", "topicA"),
            ("AccessKey", "RocketMQ"),
            ("a", "group"),
            ("Signature", "ignored"),
        ]);
        let content = combine_request_content(&f, b"hello", &[SIGNATURE]);
        assert_eq!(content, b"RocketMQgrouptopicAhello");
    }

    /// Vector from RFC 2202 (HMAC-SHA1 test case 2), base64 encoded.
    #[test]
    fn signature_is_base64_hmac_sha1() {
        assert_eq!(
            cal_signature(b"what do ya want for nothing?", "Jefe"),
            "7/zfauXrL6LSdBbV8YTfnCWafHk="
        );
    }

    /// Computed independently with Python:
    /// `base64.b64encode(hmac.new(b"12345678", b"RocketMQgroupAtopicA", hashlib.sha1).digest())`.
    #[test]
    fn signature_matches_python_hmac() {
        assert_eq!(
            cal_signature(b"RocketMQgroupAtopicA", "12345678"),
            "wdcuftYlFelDqj+xx4pKlzipUO8="
        );
    }

    #[test]
    fn constant_time_compare() {
        assert!(signatures_equal("abc=", "abc="));
        assert!(!signatures_equal("abc=", "abd="));
        assert!(!signatures_equal("abc=", "abc"));
    }
}
