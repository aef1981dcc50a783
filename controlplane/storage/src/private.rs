//! Files holding user data (reports, spooled reports, service state) are for their owner only:
//! files 0600, directories 0700. Modes are given at creation (the process umask can only take
//! bits away), so there is no moment when another user could open them.

use std::{io, path::Path};

/// Mode of a file holding user data.
pub const FILE_MODE: u32 = 0o600;
/// Mode of a directory holding user data.
pub const DIR_MODE: u32 = 0o700;

/// `create_dir_all` where every directory it creates is 0700 (existing ones are left as they
/// are).
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(path)
}

/// [`create_dir_all`] for async code.
pub async fn create_dir_all_async(path: &Path) -> io::Result<()> {
    tokio::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(path)
        .await
}

/// A service's own state directory: created 0700, or made 0700 if it exists and this process
/// owns it. A directory owned by someone else (a Kubernetes volume's mount point, created by the
/// kubelet for a non-root service) is left as it is: its access is the volume's business, and
/// the service must still start.
pub fn state_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    create_dir_all(path)?;
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(DIR_MODE)) {
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => Ok(()),
        other => other,
    }
}

/// Creates (or truncates) `path` for writing with mode 0600.
pub async fn create_file(path: &Path) -> io::Result<tokio::fs::File> {
    tokio::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)
        .await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test")]
    use std::os::unix::fs::PermissionsExt as _;

    fn mode(path: &std::path::Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[tokio::test]
    async fn created_private_and_state_dirs_tightened() {
        let root = std::env::temp_dir().join(format!("nsight-private-{}", std::process::id()));
        super::create_dir_all(&root.join("a/b")).unwrap();
        assert_eq!(mode(&root.join("a")), 0o700);
        assert_eq!(mode(&root.join("a/b")), 0o700);
        drop(super::create_file(&root.join("a/b/f")).await.unwrap());
        assert_eq!(mode(&root.join("a/b/f")), 0o600);
        let open = root.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        super::state_dir(&open).unwrap();
        assert_eq!(mode(&open), 0o700);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
