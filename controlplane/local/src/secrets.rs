//! The local platform's secrets, the API key, the gateway token and the OAuth2 cookie key: each
//! generated once (256 random bits, hex), kept in a file readable only by its owner, reused on
//! every start so configured CLIs keep working; and the user's own (the OAuth2 client secret),
//! read only from a file nobody else can read. Never logged.

use std::{
    io::Write as _,
    os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _},
    path::Path,
};

/// Why the key file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read or write the secret file {0}")]
    Io(String, #[source] std::io::Error),
    #[error("the secret file {0} is readable by other users (mode {1:o}); run: chmod 600 {0}")]
    TooOpen(String, u32),
    #[error("the secret in {0} is shorter than 16 characters (one this platform made: delete the file to get a new one)")]
    TooShort(String),
}

/// The secret in `path`, trimmed, from a file only its owner can read; at least 16 characters.
pub fn read_private(path: &Path) -> Result<String, KeyError> {
    let shown = path.display().to_string();
    let io = |e| KeyError::Io(shown.clone(), e);
    let text = std::fs::read_to_string(path).map_err(io)?;
    let mode = std::fs::metadata(path).map_err(io)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(KeyError::TooOpen(shown, mode));
    }
    let key = text.trim().to_owned();
    if key.len() < 16 {
        return Err(KeyError::TooShort(shown));
    }
    Ok(key)
}

/// The key in `path`, creating the file (mode 0600) with a fresh key when it does not exist.
pub fn load_or_create(path: &Path) -> Result<String, KeyError> {
    let shown = path.display().to_string();
    let io = |e| KeyError::Io(shown.clone(), e);
    match std::fs::metadata(path) {
        Ok(_) => read_private(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(io)?;
            }
            let key = generate();
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(io)?;
            file.write_all(format!("{key}\n").as_bytes()).map_err(io)?;
            Ok(key)
        }
        Err(e) => Err(io(e)),
    }
}

/// `nsk_` and 64 hex digits from the OS's random source (through UUID v4: 2 x 122 bits).
fn generate() -> String {
    let a = uuid::Uuid::new_v4();
    let b = uuid::Uuid::new_v4();
    format!(
        "nsk_{}{}",
        hex::encode(a.as_bytes()),
        hex::encode(b.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("nsight-local-{name}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_key_is_created_private_and_reused() {
        let dir = temp("key");
        let path = dir.join("sub/api-key");
        let first = load_or_create(&path).unwrap();
        assert!(first.starts_with("nsk_") && first.len() == 68, "{first}");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(load_or_create(&path).unwrap(), first);
        assert_ne!(generate(), generate());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_exposed_or_short_key_is_refused_with_the_fix() {
        let dir = temp("key-open");
        let path = dir.join("api-key");
        std::fs::write(&path, "0123456789abcdef0123\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = load_or_create(&path).unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::write(&path, "short\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = load_or_create(&path).unwrap_err().to_string();
        assert!(err.contains("delete the file"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
