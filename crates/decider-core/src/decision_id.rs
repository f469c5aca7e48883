//! Decision ids: unique, carrying what an outcome needs to be counted, and verifiable by
//! the Worker that issued them (a keyed tag), so that an outcome counts only for a decision
//! the Worker made.
//!
//! ```text
//! 0f6c2a9e-8a3b-4c1d-9e2f-3b4c5d6e7f83.1a2b3c4d5e6d0.5f0c…(32 hex)
//! └ base ──────────────────────────────┘└ claims ────┘└ tag ─────┘
//! ```
//! - **base**: a random UUID whose last hex digit is replaced by the arm and source
//!   (`3·arm + source`, [`tag_base`]). Exploration draws from the base, so an explored
//!   decision can be replayed from its record.
//! - **claims**: when it was issued (ms since the epoch, 11 hex digits), the endpoint
//!   (`d` for `/v1/decide`, `r` for edge routing) and the action (its index in
//!   [`crate::ACTIONS`]).
//! - **tag**: HMAC-SHA-256 under `DECISION_ID_KEY` of `base.claims`, its first 16 bytes in
//!   hex. [`verify`] accepts the current key or the previous one (rotation).
//!
//! Without a key the Worker issues the base alone (unsigned): such an id can be logged and
//! joined offline, but no outcome for it is counted live.

use crate::actions::Action;
use crate::hex;
use crate::policy::Source;
use crate::record::Endpoint;
use crate::rollout::Arm;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

type HmacSha256 = Hmac<Sha256>;

/// The latest issue time a claim can say, ms since the epoch (11 hex digits).
pub const MAX_ISSUED_MS: u64 = (1 << 44) - 1;

/// Characters of the claims: the issue time, the endpoint, the action.
const CLAIMS_LEN: usize = 13;

/// Bytes of the HMAC kept in the tag (128 bits).
pub const TAG_BYTES: usize = 16;

/// Fewest bytes a key may have (`openssl rand -hex 32` gives 64).
pub const MIN_KEY_BYTES: usize = 16;

/// The keys decision ids are signed and checked with.
#[derive(Clone)]
pub struct DecisionKeys {
    current: HmacSha256,
    previous: Option<HmacSha256>,
}

impl std::fmt::Debug for DecisionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecisionKeys")
            .field("previous", &self.previous.is_some())
            .finish_non_exhaustive()
    }
}

/// Checks one key's length.
///
/// # Errors
/// A message when it is shorter than [`MIN_KEY_BYTES`].
pub fn check_key(key: &[u8]) -> Result<(), String> {
    if key.len() < MIN_KEY_BYTES {
        return Err(format!(
            "must be at least {MIN_KEY_BYTES} bytes (e.g. `openssl rand -hex 32`), got {}",
            key.len()
        ));
    }
    Ok(())
}

fn keyed(key: &[u8]) -> Result<HmacSha256, String> {
    check_key(key)?;
    HmacSha256::new_from_slice(key).map_err(|e| e.to_string())
}

impl DecisionKeys {
    /// Signs with `current`; accepts ids signed with `current` or `previous`.
    ///
    /// # Errors
    /// A message when a key is shorter than [`MIN_KEY_BYTES`].
    pub fn new(current: &[u8], previous: Option<&[u8]>) -> Result<DecisionKeys, String> {
        Ok(DecisionKeys {
            current: keyed(current)?,
            previous: previous.map(keyed).transpose()?,
        })
    }
}

/// What a signed id says of its decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claims {
    /// The rollout arm.
    pub arm: Arm,
    /// Who decided.
    pub source: Source,
    /// Which endpoint decided.
    pub endpoint: Endpoint,
    /// The action served.
    pub action: Action,
    /// When the decision was made, ms since the epoch (below 2⁴⁴: until the year 2527).
    pub issued_ms: u64,
}

/// Why an id was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IdError {
    /// The id carries no keyed tag.
    #[error(
        "decision_id carries no tag: it was not issued by this Worker with DECISION_ID_KEY set"
    )]
    Unsigned,
    /// The id is not of the form the Worker issues.
    #[error("decision_id is not of the form this Worker issues ({0})")]
    Malformed(&'static str),
    /// The tag does not verify under any accepted key.
    #[error("decision_id's tag does not verify: it was altered or not issued by this Worker")]
    Forged,
}

/// `id` with its last character replaced by the tag of (`arm`, `source`); an empty id
/// becomes the tag alone. A UUID stays a UUID (the tag is a hex digit).
pub fn tag_base(mut id: String, arm: Arm, source: Source) -> String {
    id.pop();
    id.push(char::from(b'0' + (3 * arm.index() + source.index()) as u8));
    id
}

/// The arm and source a base was tagged with by [`tag_base`]; None for an id that does not
/// end with a tag.
pub fn base_tag(base: &str) -> Option<(Arm, Source)> {
    let t = base.bytes().last()?.checked_sub(b'0')? as usize;
    (t < 9).then(|| (Arm::ALL[t / 3], Source::ALL[t % 3]))
}

/// The base of an id: everything before its first `.` (the whole id when unsigned).
pub fn base(id: &str) -> &str {
    id.split_once('.').map_or(id, |(b, _)| b)
}

fn claims_text(c: &Claims) -> String {
    let e = match c.endpoint {
        Endpoint::Decide => 'd',
        Endpoint::Route => 'r',
    };
    // `format!("{:011x}{e}{}")`, without `core::fmt` (module docs of `crate::time`).
    let ms = c.issued_ms.min(MAX_ISSUED_MS);
    let mut out = String::with_capacity(CLAIMS_LEN);
    out.extend((0..11).rev().map(|i| hex::digit((ms >> (4 * i)) as u8)));
    out.push(e);
    out.push(char::from(b'0' + c.action.index() as u8));
    out
}

fn mac(key: &HmacSha256, signed: &str) -> HmacSha256 {
    let mut m = key.clone();
    m.update(signed.as_bytes());
    m
}

fn unhex(s: &str) -> Option<[u8; TAG_BYTES]> {
    let b = s.as_bytes();
    if b.len() != 2 * TAG_BYTES {
        return None;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; TAG_BYTES];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (digit(b[2 * i])? << 4) | digit(b[2 * i + 1])?;
    }
    Some(out)
}

/// The signed id of a decision: `base.claims.tag` (module docs). The base's own tag must
/// be the claims' arm and source ([`tag_base`]).
pub fn sign(base: &str, claims: &Claims, keys: &DecisionKeys) -> String {
    let mut signed = String::with_capacity(base.len() + 2 + CLAIMS_LEN + 2 * TAG_BYTES);
    signed.push_str(base);
    signed.push('.');
    signed.push_str(&claims_text(claims));
    let tag = mac(&keys.current, &signed).finalize().into_bytes();
    signed.push('.');
    hex::push(&mut signed, &tag[..TAG_BYTES]);
    signed
}

/// Checks a signed id and reads its claims.
///
/// # Errors
/// [`IdError::Unsigned`] for an id without claims and tag, [`IdError::Malformed`] for one
/// not of the issued form, [`IdError::Forged`] when the tag verifies under neither key.
pub fn verify(id: &str, keys: &DecisionKeys) -> Result<Claims, IdError> {
    let Some((signed, tag)) = id.rsplit_once('.') else {
        return Err(IdError::Unsigned);
    };
    let Some((base, claims)) = signed.split_once('.') else {
        return Err(IdError::Malformed("three parts separated by dots"));
    };
    let tag = unhex(tag).ok_or(IdError::Malformed("a tag of 32 hex digits"))?;
    let ok = |k: &HmacSha256| mac(k, signed).verify_truncated_left(&tag).is_ok();
    if !(ok(&keys.current) || keys.previous.as_ref().is_some_and(ok)) {
        return Err(IdError::Forged);
    }
    // Signed by this Worker: the parts below are as it wrote them.
    let (arm, source) = base_tag(base).ok_or(IdError::Malformed("a tagged base"))?;
    let c = claims.as_bytes();
    if c.len() != CLAIMS_LEN {
        return Err(IdError::Malformed("claims of 13 characters"));
    }
    let issued_ms = u64::from_str_radix(&claims[..11], 16)
        .map_err(|_| IdError::Malformed("an issue time of 11 hex digits"))?;
    let endpoint = match c[11] {
        b'd' => Endpoint::Decide,
        b'r' => Endpoint::Route,
        _ => return Err(IdError::Malformed("an endpoint d or r")),
    };
    let action = c[12]
        .checked_sub(b'0')
        .and_then(|i| Action::from_index(usize::from(i)))
        .ok_or(IdError::Malformed("an action digit"))?;
    Ok(Claims {
        arm,
        source,
        endpoint,
        action,
        issued_ms,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const UUID: &str = "0f6c2a9e-8a3b-4c1d-9e2f-3b4c5d6e7f8a";

    fn keys() -> DecisionKeys {
        DecisionKeys::new(b"k1-0123456789abcdef", Some(b"k0-0123456789abcdef")).unwrap()
    }

    fn claims(arm: Arm, source: Source) -> Claims {
        Claims {
            arm,
            source,
            endpoint: Endpoint::Decide,
            action: Action::Reject,
            issued_ms: 1_796_205_600_123,
        }
    }

    #[test]
    fn claims_are_the_documented_digits() {
        for (ms, endpoint, action, want) in [
            (0, Endpoint::Decide, Action::RouteA, "00000000000d0"),
            (
                1_796_205_600_123,
                Endpoint::Route,
                Action::Reject,
                "1a236325d7br3",
            ),
            (
                MAX_ISSUED_MS,
                Endpoint::Decide,
                Action::RouteC,
                "fffffffffffd2",
            ),
            (u64::MAX, Endpoint::Route, Action::RouteB, "fffffffffffr1"),
        ] {
            let c = Claims {
                endpoint,
                action,
                issued_ms: ms,
                ..claims(Arm::Champion, Source::Model)
            };
            assert_eq!(claims_text(&c), want, "{ms}");
            assert_eq!(
                want,
                format!("{:011x}", ms.min(MAX_ISSUED_MS)) + &want[11..]
            );
        }
    }

    #[test]
    fn bases_carry_their_arm_and_source() {
        for arm in Arm::ALL {
            for source in Source::ALL {
                let t = tag_base(UUID.to_string(), arm, source);
                assert_eq!(t.len(), UUID.len());
                assert_eq!(t[..t.len() - 1], UUID[..UUID.len() - 1]);
                assert_eq!(base_tag(&t), Some((arm, source)), "{t}");
            }
        }
        assert_eq!(base_tag(UUID), None);
        assert_eq!(base_tag("d-9"), None);
        assert_eq!(base_tag(""), None);
        assert_eq!(tag_base(String::new(), Arm::Holdout, Source::Default), "8");
    }

    #[test]
    fn a_signed_id_verifies_and_says_what_it_was() {
        let k = keys();
        for arm in Arm::ALL {
            for source in Source::ALL {
                let b = tag_base(UUID.to_string(), arm, source);
                let c = claims(arm, source);
                let id = sign(&b, &c, &k);
                assert_eq!(id.len(), 36 + 1 + 13 + 1 + 32);
                assert!(crate::record::valid_decision_id(&id), "{id}");
                assert_eq!(base(&id), b);
                assert_eq!(verify(&id, &k), Ok(c));
            }
        }
        assert_eq!(base(UUID), UUID);
    }

    #[test]
    fn the_previous_key_still_verifies_and_others_do_not() {
        let b = tag_base(UUID.to_string(), Arm::Champion, Source::Model);
        let c = claims(Arm::Champion, Source::Model);
        let old = DecisionKeys::new(b"k0-0123456789abcdef", None).unwrap();
        let by_old = sign(&b, &c, &old);
        assert_eq!(verify(&by_old, &keys()), Ok(c));
        let other = DecisionKeys::new(b"kX-0123456789abcdef", None).unwrap();
        assert_eq!(verify(&sign(&b, &c, &other), &keys()), Err(IdError::Forged));
        // Rotated out: the old key alone no longer accepts ids of the new one.
        let by_new = sign(&b, &c, &keys());
        assert_eq!(verify(&by_new, &old), Err(IdError::Forged));
    }

    #[test]
    fn altered_or_invented_ids_are_refused() {
        let k = keys();
        let b = tag_base(UUID.to_string(), Arm::Challenger, Source::Model);
        let id = sign(&b, &claims(Arm::Challenger, Source::Model), &k);
        // Every single-character change is caught.
        for i in 0..id.len() {
            let mut bytes = id.clone().into_bytes();
            bytes[i] = if bytes[i] == b'0' { b'1' } else { b'0' };
            let altered = String::from_utf8(bytes).unwrap();
            assert!(verify(&altered, &k).is_err(), "{altered}");
        }
        assert_eq!(verify(UUID, &k), Err(IdError::Unsigned));
        assert_eq!(verify("", &k), Err(IdError::Unsigned));
        assert_eq!(
            verify(&format!("{b}.0000000000ad3"), &k),
            Err(IdError::Malformed("three parts separated by dots"))
        );
        assert_eq!(
            verify(&format!("{}.zz", &id[..id.len() - 35]), &k),
            Err(IdError::Malformed("a tag of 32 hex digits"))
        );
        assert_eq!(
            verify(&format!("{}X", &id[..id.len() - 1]), &k),
            Err(IdError::Malformed("a tag of 32 hex digits"))
        );
        // A forged tag of the right shape.
        let forged = format!("{}{}", &id[..id.len() - 32], "0".repeat(32));
        assert_eq!(verify(&forged, &k), Err(IdError::Forged));
        assert!(DecisionKeys::new(b"short", None).is_err());
        assert!(check_key(&[0; MIN_KEY_BYTES]).is_ok());
        assert!(format!("{k:?}").contains("previous: true"));
    }
}
