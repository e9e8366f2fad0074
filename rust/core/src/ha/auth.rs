//! Optional challenge-response before any log byte flows (`haAuthSecret` on both sides).
//!
//! ```text
//! master -> slave: "RHA1" | master_nonce[32]
//! slave -> master: HMAC(secret, master_nonce | "slave" | slave_id | flags | slave_nonce)[32]
//!                  | slave_id u64 | flags u32 | slave_nonce[32]
//! master -> slave: HMAC(secret, master_nonce | slave_nonce | "master" | accepted)[32]
//!                  | accepted flags u32
//! ```
//! Each side proves knowledge of the secret over a nonce the *other* side just chose, so a
//! recorded handshake replays to neither.
//! Then the classic protocol, with the extensions both sides accepted. The slave id lets the
//! master count one slave once however many connections it has had. Without a secret none of
//! this happens and the wire is exactly RocketMQ's.

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub(crate) const CHALLENGE_MAGIC: &[u8; 4] = b"RHA1";
pub(crate) const NONCE_LEN: usize = 32;
pub(crate) const CHALLENGE_LEN: usize = 4 + NONCE_LEN;
pub(crate) const MAC_LEN: usize = 32;
pub(crate) const SLAVE_RESPONSE_LEN: usize = MAC_LEN + 8 + 4 + NONCE_LEN;
pub(crate) const MASTER_PROOF_LEN: usize = MAC_LEN + 4;

/// Extension: every frame and report carries a CRC32 trailer (see [`super::frame`]).
pub(crate) const FLAG_FRAME_CRC: u32 = 1;
const KNOWN_FLAGS: u32 = FLAG_FRAME_CRC;

fn hmac(secret: &[u8]) -> Hmac<Sha256> {
    // HMAC takes keys of any length, so this cannot fail.
    <Hmac<Sha256> as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!())
}

fn nonce(out: &mut [u8]) {
    // The OS RNG failing leaves us without a safe nonce; refuse rather than reuse zeros.
    getrandom::fill(out).unwrap_or_else(|e| panic!("no OS randomness for the HA nonce: {e}"));
}

pub(crate) fn challenge() -> [u8; CHALLENGE_LEN] {
    let mut out = [0u8; CHALLENGE_LEN];
    out[..4].copy_from_slice(CHALLENGE_MAGIC);
    nonce(&mut out[4..]);
    out
}

const SLAVE_NONCE_AT: usize = MAC_LEN + 8 + 4;

/// The MAC of a slave response covers everything after the MAC itself.
fn slave_mac(
    secret: &[u8],
    challenge: &[u8; CHALLENGE_LEN],
    response: &[u8; SLAVE_RESPONSE_LEN],
) -> Hmac<Sha256> {
    let mut m = hmac(secret);
    m.update(&challenge[4..]);
    m.update(b"slave");
    m.update(&response[MAC_LEN..]);
    m
}

fn master_mac(
    secret: &[u8],
    challenge: &[u8; CHALLENGE_LEN],
    response: &[u8; SLAVE_RESPONSE_LEN],
    flags: u32,
) -> Hmac<Sha256> {
    let mut m = hmac(secret);
    m.update(&challenge[4..]);
    m.update(&response[SLAVE_NONCE_AT..]);
    m.update(b"master");
    m.update(&flags.to_be_bytes());
    m
}

/// The slave's answer, with a fresh slave nonce; `None` when the bytes are not a challenge
/// (a master without a secret).
pub(crate) fn slave_response(
    secret: &[u8],
    challenge: &[u8; CHALLENGE_LEN],
    slave_id: u64,
    flags: u32,
) -> Option<[u8; SLAVE_RESPONSE_LEN]> {
    if &challenge[..4] != CHALLENGE_MAGIC {
        return None;
    }
    let mut out = [0u8; SLAVE_RESPONSE_LEN];
    out[MAC_LEN..MAC_LEN + 8].copy_from_slice(&slave_id.to_be_bytes());
    out[MAC_LEN + 8..SLAVE_NONCE_AT].copy_from_slice(&flags.to_be_bytes());
    nonce(&mut out[SLAVE_NONCE_AT..]);
    let mac = slave_mac(secret, challenge, &out).finalize().into_bytes();
    out[..MAC_LEN].copy_from_slice(&mac);
    Some(out)
}

/// Checks a slave's response in constant time; returns its id and the flags it asked for.
pub(crate) fn verify_slave(
    secret: &[u8],
    challenge: &[u8; CHALLENGE_LEN],
    response: &[u8; SLAVE_RESPONSE_LEN],
) -> Option<(u64, u32)> {
    slave_mac(secret, challenge, response)
        .verify_slice(&response[..MAC_LEN])
        .ok()?;
    let id = u64::from_be_bytes(response[MAC_LEN..MAC_LEN + 8].try_into().ok()?);
    let flags = u32::from_be_bytes(response[MAC_LEN + 8..SLAVE_NONCE_AT].try_into().ok()?);
    Some((id, flags))
}

/// The master's proof over both nonces, accepting the flags it supports out of those requested.
pub(crate) fn master_proof(
    secret: &[u8],
    challenge: &[u8; CHALLENGE_LEN],
    response: &[u8; SLAVE_RESPONSE_LEN],
    requested: u32,
) -> [u8; MASTER_PROOF_LEN] {
    let accepted = requested & KNOWN_FLAGS;
    let mut out = [0u8; MASTER_PROOF_LEN];
    out[..MAC_LEN].copy_from_slice(
        &master_mac(secret, challenge, response, accepted)
            .finalize()
            .into_bytes(),
    );
    out[MAC_LEN..].copy_from_slice(&accepted.to_be_bytes());
    out
}

/// Checks the master's proof against the response this slave sent; returns the accepted flags.
pub(crate) fn verify_master(
    secret: &[u8],
    challenge: &[u8; CHALLENGE_LEN],
    response: &[u8; SLAVE_RESPONSE_LEN],
    proof: &[u8; MASTER_PROOF_LEN],
) -> Option<u32> {
    let accepted = u32::from_be_bytes(proof[MAC_LEN..].try_into().ok()?);
    master_mac(secret, challenge, response, accepted)
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
        let p = master_proof(b"s3cret", &c, &r, FLAG_FRAME_CRC | 0x80);
        assert_eq!(verify_master(b"s3cret", &c, &r, &p), Some(FLAG_FRAME_CRC));
        assert_eq!(verify_master(b"nope", &c, &r, &p), None);
        let mut bad = c;
        bad[0] = b'X';
        assert!(slave_response(b"s3cret", &bad, 7, 0).is_none());
    }

    #[test]
    fn flags_cannot_be_changed_in_flight() {
        let c = challenge();
        let mut r = slave_response(b"k", &c, 1, FLAG_FRAME_CRC).unwrap();
        let p = master_proof(b"k", &c, &r, FLAG_FRAME_CRC);
        let mut stripped = p;
        stripped[MASTER_PROOF_LEN - 1] = 0;
        assert_eq!(verify_master(b"k", &c, &r, &stripped), None);
        r[SLAVE_NONCE_AT - 1] = 0; // an attacker strips the CRC request
        assert_eq!(verify_slave(b"k", &c, &r), None);
    }

    /// A master's proof recorded from one handshake does not verify in another: the slave's
    /// fresh nonce is part of it.
    #[test]
    fn recorded_master_proof_does_not_replay() {
        let c = challenge();
        let first = slave_response(b"k", &c, 1, 0).unwrap();
        let recorded = master_proof(b"k", &c, &first, 0);
        let second = slave_response(b"k", &c, 1, 0).unwrap();
        assert_eq!(verify_master(b"k", &c, &first, &recorded), Some(0));
        assert_eq!(verify_master(b"k", &c, &second, &recorded), None);
    }
}
