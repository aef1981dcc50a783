//! Object keys both backends accept: relative `/`-separated paths that can never name anything
//! outside the store's root when mapped onto a directory.
//!
//! Owns only the validation rule; the report layout (which keys the platform writes) lives in
//! [`crate::layout`]. Both backends apply the same rule so that a key that works on S3 also works
//! on a local directory.

use crate::error::Cause;

/// Longest key accepted (S3's limit is 1024 bytes).
pub const MAX_KEY_LEN: usize = 1024;

/// The first component reserved by the local store for its half-written files.
pub(crate) const RESERVED_STAGING_DIR: &str = ".nsight-staging";

/// Checks that `key` is a safe object key: non-empty, relative, `/`-separated, without empty,
/// `.` or `..` components, backslashes, NUL or other control characters, and not inside the
/// local store's staging directory.
pub fn validate_key(key: &str) -> Result<(), Cause> {
    let bad = |reason| Err(Cause::InvalidKey { reason });
    if key.is_empty() {
        return bad("the key is empty");
    }
    if key.len() > MAX_KEY_LEN {
        return bad("the key is longer than 1024 bytes");
    }
    if key.starts_with('/') {
        return bad("the key is an absolute path (starts with `/`)");
    }
    if key.contains('\\') {
        return bad("the key contains a backslash");
    }
    if key.contains('\0') {
        return bad("the key contains a NUL byte");
    }
    if key.chars().any(char::is_control) {
        return bad("the key contains a control character");
    }
    for (i, component) in key.split('/').enumerate() {
        match component {
            "" => return bad("the key has an empty path component (`//` or a trailing `/`)"),
            "." | ".." => return bad("the key has a `.` or `..` path component"),
            RESERVED_STAGING_DIR if i == 0 => {
                return bad("the key is inside the reserved `.nsight-staging/` directory")
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks a listing prefix: empty (everything), or a key-like string that may end in `/`.
pub fn validate_prefix(prefix: &str) -> Result<(), Cause> {
    if prefix.is_empty() {
        return Ok(());
    }
    let trimmed = prefix.strip_suffix('/').unwrap_or(prefix);
    validate_key(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_report_keys() {
        for key in [
            "default/5f1c/0a2b/train_default_pod-1_a.nsys-rep",
            "a",
            "a/b/c.sqlite",
            "tag/session/session.json",
            "a/.hidden",
            "a/..b/c..",
        ] {
            assert!(validate_key(key).is_ok(), "{key}");
        }
    }

    #[test]
    fn rejects_keys_that_escape_or_confuse() {
        for key in [
            "",
            "/etc/passwd",
            "..",
            "../x",
            "a/../../x",
            "a/./b",
            "a//b",
            "a/",
            "a\\..\\b",
            "..\\x",
            "a\0b",
            "a\nb",
            ".nsight-staging/x",
            ".",
        ] {
            assert!(validate_key(key).is_err(), "{key:?} must be rejected");
        }
        assert!(validate_key(&"a".repeat(1025)).is_err());
    }

    #[test]
    fn prefixes_may_end_with_a_slash() {
        assert!(validate_prefix("").is_ok());
        assert!(validate_prefix("tag/").is_ok());
        assert!(validate_prefix("tag/session").is_ok());
        assert!(validate_prefix("../").is_err());
        assert!(validate_prefix("/").is_err());
    }
}
