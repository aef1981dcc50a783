//! The on-disk cache of compiled recipe components, so that a new process (the CLI's local
//! form, a restarted service) does not compile a component again.
//!
//! ```text
//!  key = sha256(component bytes ‖ engine compatibility hash)      (wasmtime version + Config)
//!  <dir>/<key>.cwasm   Component::serialize output
//!  <dir>/<key>.sum     hex sha256 of the .cwasm, written after it
//!  load: .sum present and equal to the .cwasm's digest ──> Component::deserialize_file
//!        otherwise (missing, torn, corrupt, refused by wasmtime) ──> compile and write again
//! ```
//!
//! Entries are written to temporary files and renamed into place, so readers never see a half
//! entry; two processes storing the same entry write identical bytes. The checksum is what
//! stops a corrupt or truncated file from reaching `deserialize_file` (which must only be given
//! wasmtime's own output); the directory itself is trusted like the binary is (it is the
//! user's cache or the service's state directory).

use std::{
    fs,
    hash::{Hash, Hasher},
    io::{self, Read, Write},
    path::{Path, PathBuf},
};

use sha2::{Digest, Sha256};
use wasmtime::{component::Component, Engine};

/// Where a loaded component came from (observable for tests and timings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadSource {
    /// Already compiled in this process.
    Memory,
    /// Deserialized from the disk cache.
    Disk,
    /// Compiled now (no disk cache, or no entry yet); stored if there is a cache.
    Compiled,
    /// The disk entry was unusable (the reason) and the component was compiled again.
    Recompiled(String),
}

/// A directory of compiled components for one engine configuration.
#[derive(Debug, Clone)]
pub struct DiskCache {
    dir: PathBuf,
    /// Hex digest of the engine's compatibility hash (wasmtime version and `Config`).
    engine_tag: String,
}

/// A hasher that feeds SHA-256, so the engine's `Hash` gives the same bytes in every process
/// (std's `DefaultHasher` keys are fixed too, but not promised across Rust versions).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        let d = self.0.clone().finalize();
        u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

impl DiskCache {
    /// A cache in `dir` (created if needed) for components compiled by `engine`.
    pub fn new(dir: &Path, engine: &Engine) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let mut h = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut h);
        Ok(Self {
            dir: dir.to_path_buf(),
            engine_tag: hex(&h.0.finalize()),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry's key for a component's bytes.
    pub fn key(&self, component: &[u8]) -> String {
        let mut h = Sha256::new();
        h.update(component);
        h.update(self.engine_tag.as_bytes());
        hex(&h.finalize())
    }

    /// The path of the compiled code of entry `key`.
    pub fn entry_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.cwasm"))
    }

    fn sum_path(&self, key: &str) -> PathBuf {
        self.dir.join(format!("{key}.sum"))
    }

    /// The component of entry `key`: `Ok(None)` when there is none, `Err(reason)` when the
    /// entry is there but unusable.
    pub fn get(&self, engine: &Engine, key: &str) -> Result<Option<Component>, String> {
        let path = self.entry_path(key);
        let expected = match fs::read_to_string(self.sum_path(key)) {
            Ok(s) => s.trim().to_owned(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return if path.exists() {
                    Err("the entry has no checksum (a write was cut short)".into())
                } else {
                    Ok(None)
                };
            }
            Err(e) => return Err(format!("cannot read the entry's checksum: {e}")),
        };
        let actual = file_digest(&path).map_err(|e| format!("cannot read the entry: {e}"))?;
        if actual != expected {
            return Err(format!(
                "the entry's checksum does not match (sha256 {actual}, expected {expected})"
            ));
        }
        // SAFETY: the file's SHA-256 equals the one written next to it right after
        // `Component::serialize` wrote it for an engine with this very compatibility hash (part
        // of the key), so it is wasmtime's own output; wasmtime checks version and config again.
        #[allow(
            unsafe_code,
            reason = "deserialize_file requires wasmtime's own output, checked by checksum above"
        )]
        let component = unsafe { Component::deserialize_file(engine, &path) };
        component
            .map(Some)
            .map_err(|e| format!("wasmtime refused the entry: {e:#}"))
    }

    /// Stores `component` as entry `key` (best effort: a failure is returned for a warning).
    pub fn put(&self, key: &str, component: &Component) -> io::Result<()> {
        let bytes = component.serialize().map_err(io::Error::other)?;
        let sum = hex(&Sha256::digest(&bytes));
        // Remove a stale checksum first, so a crash between the renames leaves no valid pair.
        match fs::remove_file(self.sum_path(key)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        self.write_atomic(&self.entry_path(key), &bytes)?;
        self.write_atomic(&self.sum_path(key), sum.as_bytes())
    }

    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = self.dir.join(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let result = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }
}

fn file_digest(path: &Path) -> io::Result<String> {
    let mut f = fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_depend_on_bytes_and_engine_config() {
        let dir = std::env::temp_dir().join(format!("nsight-cc-{}", uuid::Uuid::new_v4()));
        let plain = Engine::default();
        let mut config = wasmtime::Config::new();
        config.consume_fuel(true);
        let fuel = Engine::new(&config).unwrap();
        let a = DiskCache::new(&dir, &plain).unwrap();
        let b = DiskCache::new(&dir, &fuel).unwrap();
        assert_eq!(a.key(b"x"), DiskCache::new(&dir, &plain).unwrap().key(b"x"));
        assert_ne!(a.key(b"x"), a.key(b"y"));
        assert_ne!(a.key(b"x"), b.key(b"x"));
        assert_eq!(a.key(b"x").len(), 64);
        assert!(matches!(a.get(&plain, &a.key(b"x")), Ok(None)));
        fs::remove_dir_all(&dir).unwrap();
    }
}
