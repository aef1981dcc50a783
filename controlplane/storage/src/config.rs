//! The `storage-config.yaml` format of the Nsight Operator's storage secret, loaded from a path
//! or from the file `NSIGHT_CLOUD_STORAGE_CONFIG_FILE` names, and validated into a typed
//! [`StorageConfig`] with errors that name the field to fix.
//!
//! ```yaml
//! storage_type: s3                 # s3 | local
//! bucket_name: my-profiling-results
//! aws_access_key_id: YOUR_ACCESS_KEY
//! aws_secret_access_key: YOUR_SECRET_KEY
//! region_name: us-west-2           # optional, default us-east-1
//! endpoint_url: http://localhost:9000   # optional; absent = AWS S3
//! local_cache_dir: /tmp/s3-cache   # s3: the agent's spool dir; local: the store's root
//! ```
//!
//! Owns parsing and validation only; it opens nothing. The secret key never appears in `Debug`
//! output or in an error message.

use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
};

use serde::Deserialize;

/// The variable the CLI and the agent read the config path from (as in the user guide).
pub const CONFIG_FILE_ENV: &str = "NSIGHT_CLOUD_STORAGE_CONFIG_FILE";
/// Region used when `region_name` is absent (S3-compatible servers mostly ignore it).
pub const DEFAULT_REGION: &str = "us-east-1";

/// A secret string: `Debug` and `Display` print `<redacted>`; [`Secret::expose`] gives the value.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A validated storage configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageConfig {
    S3(S3Config),
    Local(LocalConfig),
}

/// `storage_type: s3`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Config {
    pub bucket: String,
    pub access_key_id: String,
    pub secret_access_key: Secret,
    pub region: String,
    /// `None` means AWS S3 itself (virtual-hosted addressing); set for S3-compatible servers
    /// (path-style addressing).
    pub endpoint_url: Option<String>,
    pub local_cache_dir: Option<PathBuf>,
}

/// `storage_type: local`: reports in a directory (`local_cache_dir`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalConfig {
    pub root: PathBuf,
}

/// Why a storage config could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{CONFIG_FILE_ENV} is not set: point it at a storage-config.yaml")]
    EnvUnset,
    #[error("reading the storage config {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("parsing the storage config {origin} as YAML")]
    Parse {
        origin: String,
        #[source]
        source: serde_norway::Error,
    },
    #[error("storage config {origin}: `{field}` is required when storage_type is {storage_type}")]
    Missing {
        origin: String,
        field: &'static str,
        storage_type: &'static str,
    },
    #[error("storage config {origin}: `{field}` is invalid: {reason}")]
    Invalid {
        origin: String,
        field: &'static str,
        reason: String,
    },
}

/// The file as written, before validation. Unknown fields are kept to be reported, not refused:
/// secrets written for NVIDIA's operator may carry fields this implementation does not use.
#[derive(Deserialize)]
struct RawConfig {
    storage_type: Option<String>,
    bucket_name: Option<String>,
    aws_access_key_id: Option<String>,
    aws_secret_access_key: Option<Secret>,
    region_name: Option<String>,
    endpoint_url: Option<String>,
    local_cache_dir: Option<PathBuf>,
    #[serde(flatten)]
    other: BTreeMap<String, serde_norway::Value>,
}

/// A loaded config and the fields it had that this implementation ignores (to log a warning).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    pub config: StorageConfig,
    pub ignored_fields: Vec<String>,
}

impl StorageConfig {
    /// Loads the file `NSIGHT_CLOUD_STORAGE_CONFIG_FILE` names.
    pub fn from_env() -> Result<Loaded, ConfigError> {
        let path = std::env::var_os(CONFIG_FILE_ENV).ok_or(ConfigError::EnvUnset)?;
        Self::from_path(Path::new(&path))
    }

    /// Loads and validates a `storage-config.yaml`.
    pub fn from_path(path: &Path) -> Result<Loaded, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_yaml(&text, &path.display().to_string())
    }

    /// Parses and validates YAML text; `origin` names it in errors (a path, "the secret", ...).
    pub fn from_yaml(text: &str, origin: &str) -> Result<Loaded, ConfigError> {
        let raw: RawConfig = serde_norway::from_str(text).map_err(|source| ConfigError::Parse {
            origin: origin.to_owned(),
            source,
        })?;
        let ignored_fields = raw.other.keys().cloned().collect();
        let config = validate(raw, origin)?;
        Ok(Loaded {
            config,
            ignored_fields,
        })
    }

    /// Where the agent spools reports before upload, if the config says.
    pub fn local_cache_dir(&self) -> Option<&Path> {
        match self {
            Self::S3(s3) => s3.local_cache_dir.as_deref(),
            Self::Local(local) => Some(&local.root),
        }
    }
}

fn validate(raw: RawConfig, origin: &str) -> Result<StorageConfig, ConfigError> {
    let invalid = |field, reason: String| ConfigError::Invalid {
        origin: origin.to_owned(),
        field,
        reason,
    };
    let storage_type = raw
        .storage_type
        .as_deref()
        .map(str::trim)
        .ok_or_else(|| invalid("storage_type", "missing: set it to `s3` or `local`".into()))?;
    match storage_type.to_ascii_lowercase().as_str() {
        "s3" => {
            let missing = |field| ConfigError::Missing {
                origin: origin.to_owned(),
                field,
                storage_type: "s3",
            };
            let bucket = non_empty(raw.bucket_name).ok_or_else(|| missing("bucket_name"))?;
            check_bucket_name(&bucket).map_err(|r| invalid("bucket_name", r))?;
            let access_key_id =
                non_empty(raw.aws_access_key_id).ok_or_else(|| missing("aws_access_key_id"))?;
            let secret_access_key = raw
                .aws_secret_access_key
                .filter(|s| !s.expose().trim().is_empty())
                .ok_or_else(|| missing("aws_secret_access_key"))?;
            let region = non_empty(raw.region_name).unwrap_or_else(|| DEFAULT_REGION.to_owned());
            let endpoint_url = match non_empty(raw.endpoint_url) {
                Some(url) => Some(check_endpoint(&url).map_err(|r| invalid("endpoint_url", r))?),
                None => None,
            };
            Ok(StorageConfig::S3(S3Config {
                bucket,
                access_key_id,
                secret_access_key,
                region,
                endpoint_url,
                local_cache_dir: raw.local_cache_dir,
            }))
        }
        "local" => {
            let root = raw
                .local_cache_dir
                .filter(|p| !p.as_os_str().is_empty())
                .ok_or_else(|| ConfigError::Missing {
                    origin: origin.to_owned(),
                    field: "local_cache_dir",
                    storage_type: "local",
                })?;
            Ok(StorageConfig::Local(LocalConfig { root }))
        }
        other => Err(invalid(
            "storage_type",
            format!("`{other}` is not a storage type: use `s3` or `local`"),
        )),
    }
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

/// S3's bucket naming rules (the subset that matters for addressing).
fn check_bucket_name(name: &str) -> Result<(), String> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !(3..=63).contains(&name.len()) {
        return Err(format!("`{name}` must be 3 to 63 characters long"));
    }
    if !ok_chars || !ends_ok(name.chars().next()) || !ends_ok(name.chars().last()) {
        return Err(format!(
            "`{name}` may contain only lowercase letters, digits, `-` and `.`, and must start \
             and end with a letter or digit"
        ));
    }
    if name.contains("..") {
        return Err(format!("`{name}` must not contain `..`"));
    }
    Ok(())
}

/// An `http://` or `https://` URL with a host; returned without a trailing `/`.
fn check_endpoint(url: &str) -> Result<String, String> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or_else(|| format!("`{url}` must start with http:// or https://"))?;
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!("`{url}` has no host"));
    }
    if rest.contains('@') {
        return Err(format!(
            "`{url}` must not carry credentials: use aws_access_key_id / aws_secret_access_key"
        ));
    }
    if rest[host.len()..]
        .trim_matches('/')
        .contains(|c: char| c != '/')
    {
        return Err(format!(
            "`{url}` must not have a path: give only scheme, host and port"
        ));
    }
    Ok(url.trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests;
