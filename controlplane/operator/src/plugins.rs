//! `nsight-operator install-plugins`: the gateway Pod's init container copies the proxy-wasm
//! filters shipped in the operator image (`/plugins/*.wasm`) into the emptyDir its Envoy reads
//! them from (`render::gateway`). Each file must be a Wasm module (the `\0asm` magic), and at
//! least one must be there, so a broken image fails the init container with a clear message
//! instead of a gateway whose Envoy rejects its listener.

use std::{
    fs,
    path::{Path, PathBuf},
};

/// The first bytes of every Wasm module.
const WASM_MAGIC: &[u8; 4] = b"\0asm";

/// Why the filters could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("cannot read the filters directory {dir}")]
    ReadDir {
        dir: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{dir} holds no .wasm file: this image does not carry the gateway's filters (`cargo xtask build-wasm` builds them into dist/)")]
    NoFilters { dir: String },
    #[error("{path} is not a Wasm module (no \\0asm header)")]
    NotWasm { path: String },
    #[error("cannot copy {from} to {to}")]
    Copy {
        from: String,
        to: String,
        #[source]
        source: std::io::Error,
    },
}

/// Copies every `*.wasm` of `from` into `to` (written under a temporary name, then renamed);
/// the files installed, sorted.
pub fn install(from: &Path, to: &Path) -> Result<Vec<PathBuf>, InstallError> {
    let read_dir = |source| InstallError::ReadDir {
        dir: from.display().to_string(),
        source,
    };
    let mut sources: Vec<PathBuf> = fs::read_dir(from)
        .map_err(read_dir)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read_dir)?
        .into_iter()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
        .collect();
    sources.sort();
    if sources.is_empty() {
        return Err(InstallError::NoFilters {
            dir: from.display().to_string(),
        });
    }
    let mut installed = Vec::with_capacity(sources.len());
    for source in sources {
        let copy_err = |to: &Path, e| InstallError::Copy {
            from: source.display().to_string(),
            to: to.display().to_string(),
            source: e,
        };
        let bytes = fs::read(&source).map_err(|e| copy_err(to, e))?;
        if !bytes.starts_with(WASM_MAGIC) {
            return Err(InstallError::NotWasm {
                path: source.display().to_string(),
            });
        }
        let Some(name) = source.file_name() else {
            continue;
        };
        let target = to.join(name);
        let partial = to.join(format!(".{}.part", name.to_string_lossy()));
        fs::write(&partial, &bytes).map_err(|e| copy_err(&partial, e))?;
        fs::rename(&partial, &target).map_err(|e| copy_err(&target, e))?;
        installed.push(target);
    }
    Ok(installed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("nsight-plugins-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn copies_the_wasm_modules_only() {
        let (from, to) = (temp("from"), temp("to"));
        fs::write(from.join("nsight_auth_filter.wasm"), b"\0asm\x01\0\0\0auth").unwrap();
        fs::write(
            from.join("nsight_routing_filter.wasm"),
            b"\0asm\x01\0\0\0route",
        )
        .unwrap();
        fs::write(from.join("README"), b"not a filter").unwrap();
        let installed = install(&from, &to).unwrap();
        assert_eq!(
            installed,
            [
                to.join("nsight_auth_filter.wasm"),
                to.join("nsight_routing_filter.wasm")
            ]
        );
        assert_eq!(
            fs::read(to.join("nsight_auth_filter.wasm")).unwrap(),
            b"\0asm\x01\0\0\0auth"
        );
        assert!(!to.join("README").exists());
        // Again (a restarted init container): the same result.
        assert_eq!(install(&from, &to).unwrap().len(), 2);
        let _ = (fs::remove_dir_all(&from), fs::remove_dir_all(&to));
    }

    #[test]
    fn an_image_without_filters_or_with_a_broken_one_is_refused() {
        let (from, to) = (temp("empty"), temp("to2"));
        let e = install(&from, &to).unwrap_err();
        assert!(e.to_string().contains("holds no .wasm"), "{e}");
        fs::write(from.join("bad.wasm"), b"<html>").unwrap();
        let e = install(&from, &to).unwrap_err();
        assert!(e.to_string().contains("not a Wasm module"), "{e}");
        let e = install(&from.join("missing"), &to).unwrap_err();
        assert!(
            e.to_string().contains("cannot read the filters directory"),
            "{e}"
        );
        let _ = (fs::remove_dir_all(&from), fs::remove_dir_all(&to));
    }
}
