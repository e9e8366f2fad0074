//! RocketMQ's `RemoteAddressStrategy` for IPv4: the patterns `whiteRemoteAddress` and
//! `globalWhiteRemoteAddresses` accept. A request from a matching address passes without a
//! signature.
//!
//! A pattern is four dot-separated parts, each a number, a range `1-200`, a set `{1,2,3}` or
//! `*`; trailing parts may be left out after a `*` (`192.168.*`), and `*` alone matches every
//! address. An empty pattern matches nothing.

use std::net::IpAddr;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Any,
    Range(u8, u8),
    Set(Vec<u8>),
}

impl Part {
    fn matches(&self, octet: u8) -> bool {
        match self {
            Part::Any => true,
            Part::Range(lo, hi) => (*lo..=*hi).contains(&octet),
            Part::Set(values) => values.contains(&octet),
        }
    }
}

/// One parsed pattern; `None` matches nothing (RocketMQ's `NullRemoteAddressStrategy`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct RemoteAddressStrategy(Option<[Part; 4]>);

impl RemoteAddressStrategy {
    pub(crate) fn parse(pattern: &str) -> Result<Self, String> {
        let pattern = pattern.trim();
        if pattern.is_empty() {
            return Ok(Self(None));
        }
        let bad = |why: &str| format!("remote address {pattern:?}: {why}");
        let parts: Vec<&str> = pattern.split('.').collect();
        if parts.len() > 4 || (parts.len() < 4 && parts.last() != Some(&"*")) {
            return Err(bad(
                "expected four parts (a.b.c.d), or fewer ending in * (a.b.*)",
            ));
        }
        let octet = |s: &str| {
            s.trim()
                .parse::<u8>()
                .map_err(|_| bad(&format!("{s:?} is not a number from 0 to 255")))
        };
        let mut out: [Part; 4] = [Part::Any, Part::Any, Part::Any, Part::Any];
        for (slot, part) in out.iter_mut().zip(&parts) {
            *slot = if *part == "*" {
                Part::Any
            } else if let Some(set) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                Part::Set(set.split(',').map(octet).collect::<Result<_, _>>()?)
            } else if let Some((lo, hi)) = part.split_once('-') {
                let (lo, hi) = (octet(lo)?, octet(hi)?);
                if lo > hi {
                    return Err(bad(&format!("range {part} is empty")));
                }
                Part::Range(lo, hi)
            } else {
                let v = octet(part)?;
                Part::Range(v, v)
            };
        }
        Ok(Self(Some(out)))
    }

    pub(crate) fn matches(&self, addr: IpAddr) -> bool {
        let Some(parts) = &self.0 else {
            return false;
        };
        let v4 = match addr {
            IpAddr::V4(v4) => v4,
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => v4,
                None => return false,
            },
        };
        parts.iter().zip(v4.octets()).all(|(p, o)| p.matches(o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, addr: &str) -> bool {
        RemoteAddressStrategy::parse(pattern)
            .unwrap()
            .matches(addr.parse().unwrap())
    }

    #[test]
    fn patterns() {
        assert!(matches("*", "10.1.2.3"));
        assert!(matches("192.168.0.*", "192.168.0.7"));
        assert!(!matches("192.168.0.*", "192.168.1.7"));
        assert!(matches("192.168.*", "192.168.9.7"));
        assert!(matches("192.168.1.1-5", "192.168.1.5"));
        assert!(!matches("192.168.1.1-5", "192.168.1.6"));
        assert!(matches("10.0.0.{1,3}", "10.0.0.3"));
        assert!(!matches("10.0.0.{1,3}", "10.0.0.2"));
        assert!(matches("127.0.0.1", "::ffff:127.0.0.1"));
        assert!(!matches("", "127.0.0.1"));
    }

    #[test]
    fn bad_patterns_name_the_problem() {
        for (p, why) in [
            ("10.0.0", "four parts"),
            ("10.0.0.300", "\"300\""),
            ("10.0.0.9-3", "empty"),
        ] {
            let e = RemoteAddressStrategy::parse(p).unwrap_err();
            assert!(e.contains(why), "{p}: {e}");
        }
    }
}
