//! Minting JWTs for tests without a JWT library: base64url, the JOSE framing and the two
//! conversions a signer's raw output needs (an ECDSA DER signature to JOSE's `r || s`, an
//! RSAPublicKey DER to the JWK's `n` and `e`), and [`TestKeys`]: three signing key pairs
//! (rcgen/ring; the RSA one is the committed test-only key) with their JWKS.

use rcgen::{KeyPair, SigningKey, PKCS_ECDSA_P256_SHA256, PKCS_ED25519};
use serde_json::{json, Value};

/// An RS256, an ES256 and an EdDSA key pair. Test use only. (The RSA key is the same in every
/// instance; the EC and Ed25519 keys differ.)
#[allow(missing_debug_implementations, reason = "key pairs are not printed")]
pub struct TestKeys {
    pub rsa: KeyPair,
    pub ec: KeyPair,
    pub ed: KeyPair,
}

impl Default for TestKeys {
    fn default() -> Self {
        Self::new()
    }
}

impl TestKeys {
    /// The committed RSA test key; fresh P-256 and Ed25519 keys.
    pub fn new() -> Self {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../plugins/auth/tests/keys/rsa-test-only.pem"
        );
        let pem = std::fs::read_to_string(path).expect("read the RSA test key");
        Self {
            rsa: KeyPair::from_pem(&pem).expect("parse the RSA test key"),
            ec: KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).expect("generate P-256"),
            ed: KeyPair::generate_for(&PKCS_ED25519).expect("generate Ed25519"),
        }
    }

    /// The public JWK of the key for `alg` (RS256, ES256, EdDSA), named `kid`.
    pub fn jwk(&self, alg: &str, kid: &str) -> Value {
        match alg {
            "RS256" => {
                let (n, e) = rsa_public_key_jwk_members(self.rsa.public_key_raw())
                    .expect("RSA public key DER");
                json!({"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig", "n": n, "e": e})
            }
            "ES256" => {
                let point = self.ec.public_key_raw(); // 0x04 || x || y
                json!({"kty": "EC", "kid": kid, "crv": "P-256",
                       "x": b64url(&point[1..33]), "y": b64url(&point[33..65])})
            }
            "EdDSA" => {
                json!({"kty": "OKP", "kid": kid, "crv": "Ed25519",
                       "x": b64url(self.ed.public_key_raw())})
            }
            other => panic!("no test key for {other}"),
        }
    }

    /// The JWKS of the three keys, kids `rsa-1`, `ec-1`, `ed-1`.
    pub fn jwks(&self) -> Value {
        json!({"keys": [self.jwk("RS256", "rsa-1"), self.jwk("ES256", "ec-1"),
                        self.jwk("EdDSA", "ed-1")]})
    }

    /// A compact JWS of `claims` signed with the key for `alg`, header `kid`.
    pub fn sign(&self, alg: &str, kid: &str, claims: &Value) -> String {
        let input = signing_input(&json!({"alg": alg, "typ": "JWT", "kid": kid}), claims);
        let sig = match alg {
            "RS256" => self.rsa.sign(input.as_bytes()).expect("RSA sign"),
            "ES256" => ecdsa_der_to_jose(&self.ec.sign(input.as_bytes()).expect("EC sign"), 32)
                .expect("ECDSA DER"),
            "EdDSA" => self.ed.sign(input.as_bytes()).expect("Ed25519 sign"),
            other => panic!("no key for {other}"),
        };
        compact(&input, &sig)
    }
}

/// Base64url without padding (RFC 7515 section 2).
pub fn b64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// `header.payload`, the bytes a JWS signature covers.
pub fn signing_input(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}",
        b64url(header.to_string().as_bytes()),
        b64url(claims.to_string().as_bytes())
    )
}

/// A compact JWS from its signing input and raw (JOSE-form) signature.
pub fn compact(signing_input: &str, signature: &[u8]) -> String {
    format!("{signing_input}.{}", b64url(signature))
}

/// One DER element at the start of `der`: (tag, contents, rest).
fn der_element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        let (len_bytes, rest) = (rest.get(..n)?, rest.get(n..)?);
        (
            len_bytes
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b)),
            rest,
        )
    };
    Some((tag, rest.get(..len)?, rest.get(len..)?))
}

fn strip_zeros(int: &[u8]) -> &[u8] {
    let start = int.iter().position(|b| *b != 0).unwrap_or(int.len());
    &int[start..]
}

/// An ECDSA signature `SEQUENCE { r INTEGER, s INTEGER }` as JOSE's fixed-width `r || s`.
pub fn ecdsa_der_to_jose(der: &[u8], width: usize) -> Option<Vec<u8>> {
    let (0x30, seq, _) = der_element(der)? else {
        return None;
    };
    let (0x02, r, rest) = der_element(seq)? else {
        return None;
    };
    let (0x02, s, _) = der_element(rest)? else {
        return None;
    };
    let mut out = vec![0u8; 2 * width];
    for (i, int) in [strip_zeros(r), strip_zeros(s)].into_iter().enumerate() {
        let start = (i + 1) * width - int.len();
        out.get_mut(start..(i + 1) * width)?.copy_from_slice(int);
    }
    Some(out)
}

/// `RSAPublicKey ::= SEQUENCE { n INTEGER, e INTEGER }` as the JWK members `(n, e)`.
pub fn rsa_public_key_jwk_members(der: &[u8]) -> Option<(String, String)> {
    let (0x30, seq, _) = der_element(der)? else {
        return None;
    };
    let (0x02, n, rest) = der_element(seq)? else {
        return None;
    };
    let (0x02, e, _) = der_element(rest)? else {
        return None;
    };
    Some((b64url(strip_zeros(n)), b64url(strip_zeros(e))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b64url_matches_rfc_4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(b64url(plain.as_bytes()), encoded);
        }
        assert_eq!(b64url(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn ecdsa_der_becomes_fixed_width() {
        // r = 0x00ff (padded for the sign bit), s = 0x01.
        let der = [0x30, 0x07, 0x02, 0x02, 0x00, 0xff, 0x02, 0x01, 0x01];
        assert_eq!(ecdsa_der_to_jose(&der, 2), Some(vec![0, 0xff, 0, 1]));
        assert_eq!(ecdsa_der_to_jose(&[0x31, 0], 2), None);
    }
}
