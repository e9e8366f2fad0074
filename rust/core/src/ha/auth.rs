//! Optional challenge-response before any log byte flows (`haAuthSecret` on both sides).
//!
//! master -> slave: `"RHA1" | nonce[32]`;
//! slave -> master: `HMAC(secret, nonce | "slave" | slave_id) [32] | slave_id u64`;
//! master -> slave: `HMAC(secret, nonce | "master") [32]`.
//! Then the classic protocol. The slave id lets the master count one slave once however many
//! connections it has had.

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const CHALLENGE_MAGIC: &[u8; 4] = b"RHA1";
pub const NONCE_LEN: usize = 32;
pub const CHALLENGE_LEN: usize = 4 + NONCE_LEN;
pub const MAC_LEN: usize = 32;
pub const SLAVE_RESPONSE_LEN: usize = MAC_LEN + 8;

fn mac(secret: &[u8], parts: &[&[u8]]) -> [u8; MAC_LEN] {
    // HMAC takes keys of any length, so this cannot fail.
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!());
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

pub fn challenge() -> [u8; CHALLENGE_LEN] {
    let mut out = [0u8; CHALLENGE_LEN];
    out[..4].copy_from_slice(CHALLENGE_MAGIC);
    // The OS RNG failing leaves us without a safe nonce; refuse rather than reuse zeros.
    getrandom::fill(&mut out[4..])
        .unwrap_or_else(|e| panic!("no OS randomness for the HA nonce: {e}"));
    out
}

pub fn slave_response(
    secret: &[u8],
    challenge: &[u8; CHALLENGE_LEN],
    slave_id: u64,
) -> Option<[u8; SLAVE_RESPONSE_LEN]> {
    if &challenge[..4] != CHALLENGE_MAGIC {
        return None;
    }
    let id = slave_id.to_be_bytes();
    let m = mac(secret, &[&challenge[4..], b"slave", &id]);
    let mut out = [0u8; SLAVE_RESPONSE_LEN];
    out[..MAC_LEN].copy_from_slice(&m);
    out[MAC_LEN..].copy_from_slice(&id);
    Some(out)
}

/// Checks a slave's response in constant time; returns its id.
pub fn verify_slave(
    secret: &[u8],
    challenge: &[u8; CHALLENGE_LEN],
    response: &[u8; SLAVE_RESPONSE_LEN],
) -> Option<u64> {
    let id: [u8; 8] = response[MAC_LEN..].try_into().ok()?;
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).ok()?;
    m.update(&challenge[4..]);
    m.update(b"slave");
    m.update(&id);
    m.verify_slice(&response[..MAC_LEN]).ok()?;
    Some(u64::from_be_bytes(id))
}

pub fn master_proof(secret: &[u8], challenge: &[u8; CHALLENGE_LEN]) -> [u8; MAC_LEN] {
    mac(secret, &[&challenge[4..], b"master"])
}

pub fn verify_master(
    secret: &[u8],
    challenge: &[u8; CHALLENGE_LEN],
    proof: &[u8; MAC_LEN],
) -> bool {
    let Ok(mut m) = <Hmac<Sha256> as Mac>::new_from_slice(secret) else {
        return false;
    };
    m.update(&challenge[4..]);
    m.update(b"master");
    m.verify_slice(proof).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_round_trip_and_wrong_secret() {
        let c = challenge();
        let r = slave_response(b"s3cret", &c, 7).unwrap();
        assert_eq!(verify_slave(b"s3cret", &c, &r), Some(7));
        assert_eq!(verify_slave(b"other", &c, &r), None);
        let p = master_proof(b"s3cret", &c);
        assert!(verify_master(b"s3cret", &c, &p));
        assert!(!verify_master(b"nope", &c, &p));
        let mut bad = c;
        bad[0] = b'X';
        assert!(slave_response(b"s3cret", &bad, 7).is_none());
    }
}
