//! RocketMQ's remoting protocol, the client-facing port of a broker and of the name server:
//! the frame ([`frame`]), the command header in both serialize types, JSON and ROCKETMQ, and the
//! typed custom headers carried in its `extFields` ([`header`]), and the request and response
//! codes ([`codes`]). Everything follows Apache RocketMQ's wire format byte for byte, so its Java
//! client, `mqadmin` and name server talk to rocketha unchanged.
//!
//! On top of the codec, the network: [`server`] (RocketMQ's `NettyRemotingServer`, one mio
//! event loop dispatching requests to a processor) and [`client`] (`NettyRemotingClient`: one
//! event loop, one connection per address, many requests in flight on each), both optionally
//! over TLS ([`tls`]).
//!
//! Public (not `pub(crate)`) because the fuzz crate drives the decoders, and the broker, the
//! name server and the integration tests build on the server and the client.

pub mod client;
pub mod codes;
pub mod frame;
pub mod header;
pub mod server;
pub mod tls;

pub use client::{
    ClientConfig, ClientError, InvokeCallback, InvokeResult, NettyRemotingClient, RemotingClient,
};
pub use codes::{request_code, response_code, LanguageCode, SerializeType};
pub use frame::{decode_frame, encode_frame, Decoded, RawFrame, RemotingFrameError};
pub use header::{CommandError, CustomHeader, ExtFields, HeaderError, RemotingCommand};
pub use server::{
    not_supported, RemotingServer, RequestContext, RequestProcessor, Responder, ServerConfig,
    ServerEvent, ServerEventKind, ServerEvents,
};
pub use tls::{
    ClientAuth, ClientTls, ServerTls, ServerTrust, TlsError, TlsMode, TlsServerSettings,
};

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
}
