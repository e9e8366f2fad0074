//! RocketMQ's `Permission`: the bits an account owns or a request needs, the strings
//! `plain_acl.yml` writes them as, and the request codes only an admin account may send.

use crate::remoting::request_code;

pub(crate) const DENY: u8 = 1;
/// Either PUB or SUB satisfies it (`Permission.ANY`; kept for the check's sake, nothing
/// rocketha serves needs it).
pub(crate) const ANY: u8 = 1 << 1;
pub(crate) const PUB: u8 = 1 << 2;
pub(crate) const SUB: u8 = 1 << 3;

/// `Permission.ADMIN_CODE` (RocketMQ 4.9's ACL 1.0): what changes a broker's topics, groups or
/// config.
const ADMIN_CODES: [i32; 5] = [
    request_code::UPDATE_AND_CREATE_TOPIC,
    request_code::UPDATE_BROKER_CONFIG,
    request_code::DELETE_TOPIC_IN_BROKER,
    request_code::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    request_code::DELETE_SUBSCRIPTIONGROUP,
];

pub(crate) fn need_admin_perm(code: i32) -> bool {
    ADMIN_CODES.contains(&code)
}

/// `Permission.checkPermission`: DENY wins over everything.
pub(crate) fn check_permission(needed: u8, owned: u8) -> bool {
    if owned & DENY != 0 {
        return false;
    }
    if needed & ANY != 0 {
        return owned & (PUB | SUB) != 0;
    }
    needed & owned != 0
}

/// A permission string of `plain_acl.yml` (`DENY`, `PUB`, `SUB`, `PUB|SUB`, `SUB|PUB`).
/// RocketMQ reads anything else as DENY; rocketha refuses it, so a typo does not silently
/// lock an account out.
pub(crate) fn parse_perm(s: &str) -> Result<u8, String> {
    match s.trim() {
        "DENY" => Ok(DENY),
        "PUB" => Ok(PUB),
        "SUB" => Ok(SUB),
        "PUB|SUB" | "SUB|PUB" => Ok(PUB | SUB),
        other => Err(format!(
            "permission {other:?} is none of DENY, PUB, SUB, PUB|SUB"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_wins_and_any_takes_either() {
        assert!(check_permission(PUB, PUB | SUB));
        assert!(!check_permission(PUB, SUB));
        assert!(!check_permission(SUB, DENY | SUB));
        assert!(check_permission(ANY, SUB));
        assert!(!check_permission(ANY, DENY));
    }

    #[test]
    fn perm_strings() {
        assert_eq!(parse_perm(" SUB|PUB "), Ok(PUB | SUB));
        assert_eq!(parse_perm("DENY"), Ok(DENY));
        assert!(parse_perm("READ").unwrap_err().contains("READ"));
    }
}
