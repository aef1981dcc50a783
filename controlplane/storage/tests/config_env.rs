//! `NSIGHT_CLOUD_STORAGE_CONFIG_FILE` names the storage config (as in the user guide's download
//! instructions). One test in its own binary, since it changes the process environment.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use nsight_e2e::TempDir;
use nsight_storage::{config::CONFIG_FILE_ENV, ConfigError, StorageConfig};

#[test]
fn the_variable_names_the_file() {
    std::env::remove_var(CONFIG_FILE_ENV);
    let e = StorageConfig::from_env().unwrap_err();
    assert!(matches!(e, ConfigError::EnvUnset));
    assert!(e.to_string().contains(CONFIG_FILE_ENV));

    let dir = TempDir::new("storage-config-env");
    let path = dir.path().join("storage-config.yaml");
    std::fs::write(
        &path,
        "storage_type: local\nlocal_cache_dir: /var/lib/nsight/reports\n",
    )
    .unwrap();
    std::env::set_var(CONFIG_FILE_ENV, &path);
    let loaded = StorageConfig::from_env().unwrap();
    assert_eq!(
        loaded.config.local_cache_dir(),
        Some(std::path::Path::new("/var/lib/nsight/reports"))
    );

    std::env::set_var(CONFIG_FILE_ENV, dir.path().join("missing.yaml"));
    let e = StorageConfig::from_env().unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }));
    assert!(e.to_string().contains("missing.yaml"), "{e}");
    std::env::remove_var(CONFIG_FILE_ENV);
}
