//! Optional challenge-response before any log byte flows (`haAuthSecret` on both sides).
//!
//! ```text
//! master -> slave: "RHA1" | nonce[32]
//! slave -> master: HMAC(secret, nonce | "slave" | slave_id | flags)[32] | slave_id u64 | flags u32
//! master -> slave: HMAC(secret, nonce | "master" | accepted flags)[32] | accepted flags u32
//! ```
//! Then the classic protocol, with the extensions both sides accepted. The slave id lets the
//! master count one slave once however many connections it has had. Without a secret none of
//! this happens and the wire is exactly RocketMQ's.

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const CHALLENGE_MAGIC: &[u8; 4] = b"RHA1";
pub const NONCE_LEN: usize = 32;
pub const CHALLENGE_LEN: usize = 4 + NONCE_LEN;
pub const MAC_LEN: usize = 32;
pub const SLAVE_RESPONSE_LEN: usize = MAC_LEN + 8 + 4;
pub const MASTER_PROOF_LEN: usize = MAC_LEN + 4;

/// Extension: every frame and report carries a CRC32 trailer (see [`super::frame`]).
pub const FLAG_FRAME_CRC: u32 = 1;
const KNOWN_FLAGS: u32 = FLAG_FRAME_CRC;

fn hmac(secret: &[u8]) -> Hmac<Sha256> {
    // HMAC takes keys of any length, so this cannot fail.
    <Hmac<Sha256> as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!())
}

pub fn challenge() -> [u8; CHALLENGE_LEN] {
    let mut out = [0u8; CHALLENGE_LEN];
    out[..4].copy_from_slice(CHALLENGE_MAGIC);
    // The OS RNG failing leaves us without a safe nonce; refuse rather than reuse zeros.
    getrandom::fill(&mut out[4..])
        .unwrap_or_else(|e| panic!("no OS randomness for the HA nonce: {e}"));
    out
}

fn slave_mac(secret: &[u8], challenge: &[u8; CHALLENGE_LEN], id: u64, flags: u32) -> Hmac<Sha256> {
    let mut m = hmac(secret);
    m.update(&challenge[4..]);
    m.update(b"slave");
    m.update(&id.to_be_bytes());
    m.update(&flags.to_be_bytes());
    m
}

fn master_mac(secret: &[u8], challenge: &[u8; CHALLENGE_LEN], flags: u32) -> Hmac<Sha256> {
    let mut m = hmac(secret);
    m.update(&challenge[4..]);
    m.update(b"master");
    m.update(&flags.to_be_bytes());
    m
}

/// The slave's answer; `None` when the bytes are not a challenge (a master without a secret).
pub fn slave_response(
    secret: &[u8],
    challenge: &[u8; CHALLENGE_LEN],
    slave_id: u64,
    flags: u32,
) -> Option<[u8; SLAVE_RESPONSE_LEN]> {
    if &challenge[..4] != CHALLENGE_MAGIC {
        return None;
    }
    let mut out = [0u8; SLAVE_RESPONSE_LEN];
    out[..MAC_LEN].copy_from_slice(
        &slave_mac(secret, challenge, slave_id, flags)
            .finalize()
            .into_bytes(),
    );
    out[MAC_LEN..MAC_LEN + 8].copy_from_slice(&slave_id.to_be_bytes());
    out[MAC_LEN + 8..].copy_from_slice(&flags.to_be_bytes());
    Some(out)
}

/// Checks a slave's response in constant time; returns its id and the flags it asked for.
pub fn verify_slave(
    secret: &[u8],
    challenge: &[u8; CHALLENGE_LEN],
    response: &[u8; SLAVE_RESPONSE_LEN],
) -> Option<(u64, u32)> {
    let id = u64::from_be_bytes(response[MAC_LEN..MAC_LEN + 8].try_into().ok()?);
    let flags = u32::from_be_bytes(response[MAC_LEN + 8..].try_into().ok()?);
    slave_mac(secret, challenge, id, flags)
        .verify_slice(&response[..MAC_LEN])
        .ok()?;
    Some((id, flags))
}

/// The master's proof, accepting the flags it supports out of those requested.
pub fn master_proof(
    secret: &[u8],
    challenge: &[u8; CHALLENGE_LEN],
    requested: u32,
) -> [u8; MASTER_PROOF_LEN] {
    let accepted = requested & KNOWN_FLAGS;
    let mut out = [0u8; MASTER_PROOF_LEN];
    out[..MAC_LEN].copy_from_slice(
        &master_mac(secret, challenge, accepted)
            .finalize()
            .into_bytes(),
    );
    out[MAC_LEN..].copy_from_slice(&accepted.to_be_bytes());
    out
}

/// Checks the master's proof; returns the flags it accepted.
pub fn verify_master(
    secret: &[u8],
    challenge: &[u8; CHALLENGE_LEN],
    proof: &[u8; MASTER_PROOF_LEN],
) -> Option<u32> {
    let accepted = u32::from_be_bytes(proof[MAC_LEN..].try_into().ok()?);
    master_mac(secret, challenge, accepted)
        .verify_slice(&proof[..MAC_LEN])
        .ok()?;
    Some(accepted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_round_trip_and_wrong_secret() {
        let c = challenge();
        let r = slave_response(b"s3cret", &c, 7, FLAG_FRAME_CRC).unwrap();
        assert_eq!(verify_slave(b"s3cret", &c, &r), Some((7, FLAG_FRAME_CRC)));
        assert_eq!(verify_slave(b"other", &c, &r), None);
        let p = master_proof(b"s3cret", &c, FLAG_FRAME_CRC | 0x80);
        assert_eq!(verify_master(b"s3cret", &c, &p), Some(FLAG_FRAME_CRC));
        assert_eq!(verify_master(b"nope", &c, &p), None);
        let mut bad = c;
        bad[0] = b'X';
        assert!(slave_response(b"s3cret", &bad, 7, 0).is_none());
    }

    #[test]
    fn flags_cannot_be_changed_in_flight() {
        let c = challenge();
        let mut r = slave_response(b"k", &c, 1, FLAG_FRAME_CRC).unwrap();
        r[SLAVE_RESPONSE_LEN - 1] = 0; // an attacker strips the CRC request
        assert_eq!(verify_slave(b"k", &c, &r), None);
        let mut p = master_proof(b"k", &c, FLAG_FRAME_CRC);
        p[MASTER_PROOF_LEN - 1] = 0;
        assert_eq!(verify_master(b"k", &c, &p), None);
    }
}
