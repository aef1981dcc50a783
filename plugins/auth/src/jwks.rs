//! The trusted signing keys: an inline JWKS (RFC 7517) parsed and checked once, at configure
//! time, into verification keys. Owns which key types and algorithms are accepted; it never
//! sees a token.
//!
//! Accepted: RSA (`kty: RSA`, 2048 to 8192 bits) for RS256, P-256 (`kty: EC`, `crv: P-256`) for
//! ES256, Ed25519 (`kty: OKP`, `crv: Ed25519`) for EdDSA. Refused, with the key's index: symmetric
//! keys (`kty: oct`), keys carrying private material (`d`, `p`, `q`, ...), encryption keys
//! (`use: enc`), other curves and algorithms, duplicate `kid`s, and a key without `kid` in a set
//! of more than one (a token could not say which key it needs).

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;

/// Smallest RSA modulus accepted, in bits.
pub const MIN_RSA_BITS: usize = 2048;
/// Largest RSA modulus accepted, in bits (bounds the cost of one verification).
pub const MAX_RSA_BITS: usize = 8192;
/// Most keys in one JWKS.
pub const MAX_KEYS: usize = 32;

/// A public key a token may be signed with. Invariant: `alg` is RS256, ES256 or EdDSA and
/// matches the key's type.
#[derive(Clone)]
pub struct VerifyKey {
    pub kid: Option<String>,
    pub alg: Algorithm,
    pub key: DecodingKey,
    /// SHA-256 of the key's public material (`kty`, `crv`, `n`, `e`, `x`, `y`) and `alg`: binds
    /// a cached verification (`jwt::verified`) to this exact key.
    pub fingerprint: [u8; 32],
}

impl std::fmt::Debug for VerifyKey {
    /// Names the key, never prints its material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} key {:?}",
            self.alg,
            self.kid.as_deref().unwrap_or("-")
        )
    }
}

/// Why a JWKS was refused; the index is the key's position in `keys`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksError {
    /// Not `{"keys": [...]}` of JWK objects.
    Shape(String),
    NoKeys,
    TooManyKeys(usize),
    /// A key is not usable for signature verification; the text says why.
    Key {
        index: usize,
        why: String,
    },
    DuplicateKid(String),
    MissingKid(usize),
}

impl std::fmt::Display for JwksError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Shape(e) => write!(f, "`jwks` is not a JSON Web Key Set: {e}"),
            Self::NoKeys => f.write_str("`jwks` has no keys"),
            Self::TooManyKeys(n) => write!(f, "`jwks` has {n} keys; at most {MAX_KEYS}"),
            Self::Key { index, why } => write!(f, "jwks key #{index}: {why}"),
            Self::DuplicateKid(kid) => write!(f, "jwks: two keys have kid {kid:?}"),
            Self::MissingKid(index) => write!(
                f,
                "jwks key #{index} has no `kid`; every key needs one when there are several"
            ),
        }
    }
}

impl std::error::Error for JwksError {}

#[derive(Deserialize)]
struct RawJwks {
    keys: Vec<RawJwk>,
}

/// The members of a JWK we look at; others (`x5c`, `key_ops`, ...) are ignored.
#[derive(Deserialize)]
struct RawJwk {
    kty: String,
    kid: Option<String>,
    alg: Option<String>,
    #[serde(rename = "use")]
    use_: Option<String>,
    crv: Option<String>,
    n: Option<String>,
    e: Option<String>,
    x: Option<String>,
    y: Option<String>,
    // Private or symmetric material: present means refused.
    d: Option<serde_json::Value>,
    p: Option<serde_json::Value>,
    q: Option<serde_json::Value>,
    k: Option<serde_json::Value>,
}

/// Parses and checks a JWKS given as JSON.
pub fn parse_jwks(value: &serde_json::Value) -> Result<Vec<VerifyKey>, JwksError> {
    let raw = RawJwks::deserialize(value).map_err(|e| JwksError::Shape(e.to_string()))?;
    if raw.keys.is_empty() {
        return Err(JwksError::NoKeys);
    }
    if raw.keys.len() > MAX_KEYS {
        return Err(JwksError::TooManyKeys(raw.keys.len()));
    }
    let mut keys = Vec::with_capacity(raw.keys.len());
    for (index, jwk) in raw.keys.iter().enumerate() {
        let key = parse_key(jwk).map_err(|why| JwksError::Key { index, why })?;
        if let Some(kid) = &key.kid {
            if keys.iter().any(|k: &VerifyKey| k.kid.as_ref() == Some(kid)) {
                return Err(JwksError::DuplicateKid(kid.clone()));
            }
        }
        keys.push(key);
    }
    if keys.len() > 1 {
        if let Some(index) = keys.iter().position(|k| k.kid.is_none()) {
            return Err(JwksError::MissingKid(index));
        }
    }
    Ok(keys)
}

fn parse_key(jwk: &RawJwk) -> Result<VerifyKey, String> {
    if jwk.k.is_some() || jwk.kty == "oct" {
        return Err(
            "symmetric keys (kty \"oct\") are not accepted; publish RSA, EC P-256 or \
                    Ed25519 public keys"
                .into(),
        );
    }
    if jwk.d.is_some() || jwk.p.is_some() || jwk.q.is_some() {
        return Err("contains private key material; publish only the public key".into());
    }
    if let Some(use_) = jwk.use_.as_deref() {
        if use_ != "sig" {
            return Err(format!(
                "`use` is {use_:?}; only signature keys (\"sig\") are used"
            ));
        }
    }
    let (alg, key) = match jwk.kty.as_str() {
        "RSA" => (Algorithm::RS256, rsa_key(jwk)?),
        "EC" => (Algorithm::ES256, ec_key(jwk)?),
        "OKP" => (Algorithm::EdDSA, ed_key(jwk)?),
        other => {
            return Err(format!(
                "key type {other:?} is not supported (RSA, EC, OKP)"
            ))
        }
    };
    if let Some(declared) = jwk.alg.as_deref() {
        if declared != alg_name(alg) {
            return Err(format!(
                "`alg` is {declared:?}, but a {} key is only used with {}",
                jwk.kty,
                alg_name(alg)
            ));
        }
    }
    if jwk.kid.as_deref().is_some_and(str::is_empty) {
        return Err("`kid` is empty".into());
    }
    Ok(VerifyKey {
        kid: jwk.kid.clone(),
        alg,
        key,
        fingerprint: fingerprint(jwk, alg),
    })
}

/// SHA-256 over the public members, each length-prefixed (absent: a distinct marker).
fn fingerprint(jwk: &RawJwk, alg: Algorithm) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let members = [&jwk.crv, &jwk.n, &jwk.e, &jwk.x, &jwk.y];
    for value in [Some(jwk.kty.as_str()), Some(alg_name(alg))]
        .into_iter()
        .chain(members.iter().map(|m| m.as_deref()))
    {
        match value {
            Some(v) => {
                h.update((v.len() as u64).to_le_bytes());
                h.update(v.as_bytes());
            }
            None => h.update(u64::MAX.to_le_bytes()),
        }
    }
    h.finalize().into()
}

fn member<'a>(value: &'a Option<String>, name: &str) -> Result<&'a str, String> {
    value
        .as_deref()
        .ok_or_else(|| format!("missing member `{name}`"))
}

fn b64(value: &str, name: &str) -> Result<Vec<u8>, String> {
    URL_SAFE_NO_PAD
        .decode(value.trim_end_matches('='))
        .map_err(|_| format!("member `{name}` is not base64url"))
}

fn rsa_key(jwk: &RawJwk) -> Result<DecodingKey, String> {
    let n = member(&jwk.n, "n")?;
    let e = member(&jwk.e, "e")?;
    let modulus = b64(n, "n")?;
    let exponent = b64(e, "e")?;
    let modulus = strip_leading_zeros(&modulus);
    let bits = modulus
        .first()
        .map_or(0, |top| modulus.len() * 8 - top.leading_zeros() as usize);
    if !(MIN_RSA_BITS..=MAX_RSA_BITS).contains(&bits) {
        return Err(format!(
            "RSA modulus has {bits} bits; between {MIN_RSA_BITS} and {MAX_RSA_BITS} accepted"
        ));
    }
    let exponent = strip_leading_zeros(&exponent);
    // 3 ..= 2^32 - 1 and odd: what the `rsa` crate accepts, checked here so the message is ours.
    let odd = exponent.last().is_some_and(|b| b & 1 == 1);
    if exponent.is_empty() || exponent.len() > 4 || !odd || exponent == [1] {
        return Err("RSA exponent `e` is not a usable public exponent".into());
    }
    Ok(DecodingKey::from_rsa_raw_components(modulus, exponent))
}

fn strip_leading_zeros(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    bytes.get(start..).unwrap_or_default()
}

fn ec_key(jwk: &RawJwk) -> Result<DecodingKey, String> {
    let crv = member(&jwk.crv, "crv")?;
    if crv != "P-256" {
        return Err(format!(
            "curve {crv:?} is not supported; EC keys must be P-256"
        ));
    }
    let x = member(&jwk.x, "x")?;
    let y = member(&jwk.y, "y")?;
    if b64(x, "x")?.len() != 32 || b64(y, "y")?.len() != 32 {
        return Err("P-256 coordinates `x` and `y` must be 32 bytes each".into());
    }
    let key = DecodingKey::from_ec_components(x, y).map_err(|e| e.to_string())?;
    check_usable(&key, Algorithm::ES256)?;
    Ok(key)
}

fn ed_key(jwk: &RawJwk) -> Result<DecodingKey, String> {
    let crv = member(&jwk.crv, "crv")?;
    if crv != "Ed25519" {
        return Err(format!(
            "curve {crv:?} is not supported; OKP keys must be Ed25519"
        ));
    }
    let x = member(&jwk.x, "x")?;
    if b64(x, "x")?.len() != 32 {
        return Err("Ed25519 public key `x` must be 32 bytes".into());
    }
    let key = DecodingKey::from_ed_components(x).map_err(|e| e.to_string())?;
    check_usable(&key, Algorithm::EdDSA)?;
    Ok(key)
}

/// A point that is not on the curve is refused now rather than failing every token later: the
/// verifier parses the key before it looks at the (dummy) signature.
fn check_usable(key: &DecodingKey, alg: Algorithm) -> Result<(), String> {
    jsonwebtoken::crypto::verify("AA", b"probe", key, alg)
        .map(|_| ())
        .map_err(|_| "the public key is not a valid point on its curve".into())
}

/// The JOSE name of an accepted algorithm.
pub fn alg_name(alg: Algorithm) -> &'static str {
    match alg {
        Algorithm::RS256 => "RS256",
        Algorithm::ES256 => "ES256",
        Algorithm::EdDSA => "EdDSA",
        _ => "unsupported",
    }
}
