//! SHA-256 helpers shared by the backends and the uploader: hex and base64 forms, the composite
//! checksum S3 reports for multipart uploads, and hashing a file or stream without loading it.

use std::path::Path;

use base64::{engine::general_purpose::STANDARD, Engine as _};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Read buffer for hashing streams.
const CHUNK: usize = 256 * 1024;

#[cfg(test)]
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Base64 (standard, padded) of raw digest bytes, the form of `x-amz-checksum-sha256`.
pub(crate) fn base64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// Hex digest to the base64 header form; `None` if `hex` is not hex.
pub(crate) fn hex_to_base64(hex_digest: &str) -> Option<String> {
    hex::decode(hex_digest).ok().map(|raw| base64(&raw))
}

/// S3's composite checksum of a multipart upload: the SHA-256 of the concatenated raw part
/// digests, base64, then `-<number of parts>`.
pub(crate) fn composite(part_digests: &[[u8; 32]]) -> String {
    let mut h = Sha256::new();
    for d in part_digests {
        h.update(d);
    }
    format!("{}-{}", base64(&h.finalize()), part_digests.len())
}

/// Size and hex SHA-256 of everything `reader` yields.
pub(crate) async fn hash_reader<R: AsyncRead + Unpin>(
    mut reader: R,
) -> std::io::Result<(u64, String)> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut size = 0u64;
    loop {
        let n = reader.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        size += n as u64;
    }
    Ok((size, hex::encode(h.finalize())))
}

/// Size and hex SHA-256 of a file.
pub(crate) async fn hash_file(path: &Path) -> std::io::Result<(u64, String)> {
    hash_reader(tokio::fs::File::open(path).await?).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex_to_base64(&sha256_hex(b"abc")).as_deref(),
            Some("ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=")
        );
        assert_eq!(hex_to_base64("zz"), None);
    }

    #[test]
    fn composite_is_the_digest_of_digests_with_the_part_count() {
        let a: [u8; 32] = Sha256::digest(b"a").into();
        let b: [u8; 32] = Sha256::digest(b"b").into();
        let mut both = a.to_vec();
        both.extend_from_slice(&b);
        let expected = format!("{}-2", base64(&Sha256::digest(&both)));
        assert_eq!(composite(&[a, b]), expected);
    }

    #[tokio::test]
    async fn hashing_a_stream_matches_hashing_memory() {
        let data = vec![7u8; 3 * CHUNK + 17];
        let (size, hex) = hash_reader(&data[..]).await.unwrap();
        assert_eq!(size, data.len() as u64);
        assert_eq!(hex, sha256_hex(&data));
    }
}
