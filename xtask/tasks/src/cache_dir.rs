//! Where the cache lives, shared by the `cargo xtask` launcher (`xtask/src/main.rs`, which
//! includes this file) and the tasks: both must agree without depending on each other.

use std::{
    env,
    path::{Path, PathBuf},
};

/// Set by the launcher: the clone's root, for the tasks binary.
pub const ROOT_ENV: &str = "NSIGHT_XTASK_ROOT";

/// `NSIGHT_CACHE_DIR`, or `/var/cache/nsight-operator` as root, else `$XDG_CACHE_HOME/nsight-operator`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = env::var_os("NSIGHT_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if is_root() {
        return PathBuf::from("/var/cache/nsight-operator");
    }
    let base = env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    base.join("nsight-operator")
}

pub fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}
