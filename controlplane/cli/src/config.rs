//! The CLI's configuration file (`~/.nsight-cloud.conf`): its format, validation of what
//! `configure` is given, and loading/saving it. Owns the file's permissions (always 0600: it may
//! hold an API key) and atomic rewrites. Knows nothing about HTTP or the command line.
//!
//! ```text
//! configure flags --> ConfigureRequest::validate --> Config --> save (tmp 0600 + rename)
//!                                                    Config <-- load  <-- file (JSON)
//! ```
//!
//! The file is JSON, e.g.
//! `{"version":1,"gateway":"https://gw:8888","auth":{"type":"apiKey","key":"..."}}`;
//! `auth` is `{"type":"none"}`, `{"type":"apiKey","key":..}` or
//! `{"type":"oauth2","issuer":..,"clientId":..,"flow":"code"|"device"|"clientCredentials",
//! "authorizationEndpoint":..,"tokenEndpoint":..,"scope":"openid offline_access",
//! "token":{"accessToken":..,"refreshToken":..,"expiresAt":<unix s>}}` (`token` written by
//! `login`, see login.rs).

use std::ffi::OsString;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use reqwest::Url;

use crate::trust::CaCert;
use serde::{Deserialize, Serialize};

/// The config file's name in the home directory.
pub const DEFAULT_FILE_NAME: &str = ".nsight-cloud.conf";
/// The config file's permissions: readable and writable by its owner only.
pub const FILE_MODE: u32 = 0o600;
/// The format version written by this CLI.
pub const FORMAT_VERSION: u32 = 1;

/// Why a configuration could not be built, read or written. Messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot find the home directory ($HOME is not set); pass --config PATH or set NSIGHT_CLOUD_CONFIG")]
    NoHome,
    #[error("no configuration at {}", path.display())]
    NotFound { path: PathBuf },
    #[error("cannot read the configuration {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{} is not a valid nsight-cloud configuration; rewrite it with `nsight-cloud configure`", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot write the configuration {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{option} {value:?} is not usable: {reason}")]
    InvalidUrl {
        option: &'static str,
        value: String,
        reason: String,
    },
    #[error("the API key is not usable: {reason}")]
    InvalidApiKey { reason: &'static str },
    #[error("--apikey cannot be combined with OAuth2 options (--issuer, --clientid, ...): choose one way to authenticate")]
    ApiKeyWithOAuth,
    #[error("--clientid requires --issuer (the OIDC issuer URL)")]
    ClientIdWithoutIssuer,
    #[error("--issuer requires --clientid (the OAuth2 client ID)")]
    IssuerWithoutClientId,
    #[error("{option} is an OAuth2 option and requires --issuer and --clientid")]
    OAuthOptionWithoutIssuer { option: &'static str },
    #[error("--clientid is empty")]
    EmptyClientId,
}

/// A validated `http://` or `https://` URL with a host and no query, fragment or credentials.
/// Stored as given, less trailing slashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HttpUrl(String);

impl HttpUrl {
    /// Validates `value`, naming `option` in the error.
    pub fn parse(option: &'static str, value: &str) -> Result<HttpUrl, ConfigError> {
        let invalid = |reason: &str| ConfigError::InvalidUrl {
            option,
            value: value.to_owned(),
            reason: reason.to_owned(),
        };
        let trimmed = value.trim_end_matches('/');
        let url = Url::parse(trimmed).map_err(|e| invalid(&format!("{e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(
                "only http:// and https:// URLs are supported (e.g. https://gateway.example.com:8888)",
            ));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(invalid("the URL has no host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid(
                "credentials in the URL are not supported; use --apikey or OAuth2 options",
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(invalid(
                "the URL must not have a query (?...) or fragment (#...)",
            ));
        }
        Ok(HttpUrl(trimmed.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for HttpUrl {
    type Error = String;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        HttpUrl::parse("URL", &value).map_err(|e| e.to_string())
    }
}

impl From<HttpUrl> for String {
    fn from(url: HttpUrl) -> String {
        url.0
    }
}

/// An API key: 1 to 4096 visible ASCII characters (it travels in an HTTP header). Its `Debug`
/// never shows the key; only [`ApiKey::expose`] does, for the `Authorization` header.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ApiKey(String);

impl ApiKey {
    const MAX_LEN: usize = 4096;

    pub fn parse(value: &str) -> Result<ApiKey, ConfigError> {
        if value.is_empty() {
            return Err(ConfigError::InvalidApiKey {
                reason: "it is empty",
            });
        }
        if value.len() > Self::MAX_LEN {
            return Err(ConfigError::InvalidApiKey {
                reason: "it is longer than 4096 characters",
            });
        }
        if !value.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ConfigError::InvalidApiKey {
                reason: "it may only contain visible ASCII characters (no spaces or newlines)",
            });
        }
        Ok(ApiKey(value.to_owned()))
    }

    /// The secret itself; only for the `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl TryFrom<String> for ApiKey {
    type Error = String;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        ApiKey::parse(&value).map_err(|e| e.to_string())
    }
}

impl From<ApiKey> for String {
    fn from(key: ApiKey) -> String {
        key.0
    }
}

/// Which OAuth2 login flow `login` uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OAuthFlow {
    /// Authorization Code flow in a browser.
    #[default]
    Code,
    /// Device Authorization Grant: a URL and code shown in the terminal.
    Device,
    /// Client Credentials grant, for machines: the secret comes from
    /// `NSIGHT_OAUTH_CLIENT_SECRET` at login and refresh (never stored).
    ClientCredentials,
}

impl OAuthFlow {
    pub fn as_str(self) -> &'static str {
        match self {
            OAuthFlow::Code => "code",
            OAuthFlow::Device => "device",
            OAuthFlow::ClientCredentials => "client-credentials",
        }
    }
}

/// OAuth2/OIDC settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OAuth2 {
    pub issuer: HttpUrl,
    pub client_id: String,
    #[serde(default)]
    pub flow: OAuthFlow,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_endpoint: Option<HttpUrl>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<HttpUrl>,
    /// Space-separated scopes requested at login; `None`: `openid offline_access` for the
    /// interactive flows, none for client credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The token from the last `login` (or refresh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<StoredToken>,
}

/// Tokens from the issuer. `Debug` never shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StoredToken {
    /// Sent as `Authorization: Bearer <access token>`.
    pub access_token: ApiKey,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<ApiKey>,
    /// When the access token expires (seconds since the Unix epoch).
    pub expires_at: u64,
}

/// How the CLI authenticates to the gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Auth {
    /// The gateway does not check callers.
    #[default]
    None,
    /// `Authorization: Bearer <key>` on every request.
    ApiKey { key: ApiKey },
    /// OAuth2/OIDC: `login` stores a token, sent as a bearer token and refreshed when expired.
    #[serde(rename = "oauth2")]
    OAuth2(OAuth2),
}

/// The whole configuration file. Invariant: every field is valid (URLs and keys are checked on
/// construction and on load).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    pub version: u32,
    pub gateway: HttpUrl,
    #[serde(default)]
    pub auth: Auth,
    /// A CA to trust for the gateway's certificate, besides the built-in roots (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<CaCert>,
    /// The port-forward `autoconfigure` set up for a ClusterIP gateway (see autoconfigure/).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_forward: Option<PortForward>,
}

/// Loopback ports forwarded to a ClusterIP gateway's Service by a helper process of the CLI
/// (`nsight-cloud port-forward run`), started by `autoconfigure` and restarted by any later
/// command that finds it gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PortForward {
    pub namespace: String,
    pub service: String,
    /// The kubeconfig context of `autoconfigure` (`None`: the current one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// `$KUBECONFIG` at `autoconfigure` (`None`: kube's defaults), so a helper started again
    /// by a later command reaches the same cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    /// `127.0.0.1:<local>` -> the Service's `<remote>` port.
    pub ports: Vec<ForwardedPort>,
    /// The helper's process ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForwardedPort {
    pub local: u16,
    pub remote: u16,
}

impl Config {
    /// The API key, when the configuration uses one.
    pub fn api_key(&self) -> Option<&ApiKey> {
        match &self.auth {
            Auth::ApiKey { key } => Some(key),
            Auth::None | Auth::OAuth2(_) => None,
        }
    }
}

/// What `configure` was given, unvalidated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigureRequest {
    pub gateway: String,
    pub api_key: Option<String>,
    pub issuer: Option<String>,
    pub client_id: Option<String>,
    pub flow: Option<OAuthFlow>,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: Option<String>,
    pub scope: Option<String>,
    /// `--ca-cert`, already read and checked.
    pub ca_cert: Option<CaCert>,
}

impl ConfigureRequest {
    /// Checks the combination and every value, and builds the configuration to store.
    pub fn validate(self) -> Result<Config, ConfigError> {
        let gateway = HttpUrl::parse("--gw", &self.gateway)?;
        let any_oauth = self.issuer.is_some()
            || self.client_id.is_some()
            || self.flow.is_some()
            || self.authorization_endpoint.is_some()
            || self.token_endpoint.is_some()
            || self.scope.is_some();
        if self.api_key.is_some() && any_oauth {
            return Err(ConfigError::ApiKeyWithOAuth);
        }
        let auth = if let Some(key) = &self.api_key {
            Auth::ApiKey {
                key: ApiKey::parse(key)?,
            }
        } else if any_oauth {
            let issuer = match (&self.issuer, &self.client_id) {
                (Some(issuer), Some(_)) => HttpUrl::parse("--issuer", issuer)?,
                (None, Some(_)) => return Err(ConfigError::ClientIdWithoutIssuer),
                (Some(_), None) => return Err(ConfigError::IssuerWithoutClientId),
                (None, None) => {
                    let option = if self.flow.is_some() {
                        "--oauth-flow-type"
                    } else if self.authorization_endpoint.is_some() {
                        "--authorization-endpoint"
                    } else if self.token_endpoint.is_some() {
                        "--token-endpoint"
                    } else {
                        "--scope"
                    };
                    return Err(ConfigError::OAuthOptionWithoutIssuer { option });
                }
            };
            let client_id = self.client_id.unwrap_or_default();
            if client_id.trim().is_empty() {
                return Err(ConfigError::EmptyClientId);
            }
            Auth::OAuth2(OAuth2 {
                issuer,
                client_id,
                flow: self.flow.unwrap_or_default(),
                authorization_endpoint: self
                    .authorization_endpoint
                    .map(|u| HttpUrl::parse("--authorization-endpoint", &u))
                    .transpose()?,
                token_endpoint: self
                    .token_endpoint
                    .map(|u| HttpUrl::parse("--token-endpoint", &u))
                    .transpose()?,
                scope: self.scope.filter(|s| !s.trim().is_empty()),
                token: None,
            })
        } else {
            Auth::None
        };
        Ok(Config {
            version: FORMAT_VERSION,
            gateway,
            auth,
            ca_cert: self.ca_cert,
            port_forward: None,
        })
    }
}

/// `$HOME/.nsight-cloud.conf`, from the value of `$HOME`.
pub fn default_path(home: Option<OsString>) -> Result<PathBuf, ConfigError> {
    match home {
        Some(home) if !home.is_empty() => Ok(PathBuf::from(home).join(DEFAULT_FILE_NAME)),
        _ => Err(ConfigError::NoHome),
    }
}

/// Reads and validates the configuration at `path`.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = fs::read_to_string(path).map_err(|source| {
        if source.kind() == io::ErrorKind::NotFound {
            ConfigError::NotFound {
                path: path.to_owned(),
            }
        } else {
            ConfigError::Read {
                path: path.to_owned(),
                source,
            }
        }
    })?;
    serde_json::from_str(&text).map_err(|source| ConfigError::Parse {
        path: path.to_owned(),
        source,
    })
}

/// Whether a file with these permission bits can be read or written by others than its owner.
pub fn mode_too_open(mode: u32) -> bool {
    mode & 0o077 != 0
}

/// The permission bits of `path`, if it can be inspected.
pub fn file_mode(path: &Path) -> Option<u32> {
    fs::metadata(path)
        .ok()
        .map(|m| m.permissions().mode() & 0o777)
}

/// Writes `config` to `path` atomically: a temporary file in the same directory, created with
/// mode 0600 (and chmod'ed to 0600 in case the umask took owner bits away), synced, then renamed
/// over `path`. A reader sees the old or the new file, never a partial one.
pub fn save(path: &Path, config: &Config) -> Result<(), ConfigError> {
    let write_err = |source: io::Error| ConfigError::Write {
        path: path.to_owned(),
        source,
    };
    let mut text = serde_json::to_string_pretty(config)
        .map_err(|e| write_err(io::Error::new(io::ErrorKind::InvalidData, e)))?;
    text.push('\n');
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    let file_name = path
        .file_name()
        .ok_or_else(|| {
            write_err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the path has no file name",
            ))
        })?
        .to_string_lossy()
        .into_owned();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = dir.join(format!(".{file_name}.tmp.{}.{nanos}", std::process::id()));
    let result = write_new_private(&tmp, text.as_bytes()).and_then(|()| fs::rename(&tmp, path));
    if let Err(source) = result {
        let _ = fs::remove_file(&tmp);
        return Err(write_err(source));
    }
    // Make the rename durable; failing to sync the directory loses nothing already written.
    if let Ok(d) = fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn write_new_private(tmp: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(tmp)?;
    file.set_permissions(fs::Permissions::from_mode(FILE_MODE))?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn temp_dir() -> PathBuf {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "nsight-cli-config-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn request(gw: &str) -> ConfigureRequest {
        ConfigureRequest {
            gateway: gw.to_owned(),
            ..ConfigureRequest::default()
        }
    }

    #[test]
    fn gateway_must_be_an_http_url() {
        for ok in [
            "http://localhost:8888",
            "https://gw.example.com/",
            "https://10.0.0.1:8443/prefix",
        ] {
            let config = request(ok).validate().unwrap();
            assert!(!config.gateway.as_str().ends_with('/'), "{ok}");
            assert_eq!(config.auth, Auth::None);
        }
        for bad in [
            "",
            "gw.example.com:8888",
            "ftp://gw.example.com",
            "http://",
            "https://user:pw@gw.example.com",
            "https://gw.example.com/?x=1",
            "https://gw.example.com/#frag",
        ] {
            let err = request(bad).validate().unwrap_err();
            assert!(
                matches!(err, ConfigError::InvalidUrl { option: "--gw", .. }),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn api_key_excludes_oauth() {
        let err = ConfigureRequest {
            api_key: Some("k".into()),
            issuer: Some("https://idp".into()),
            client_id: Some("c".into()),
            ..request("https://gw")
        }
        .validate()
        .unwrap_err();
        assert!(matches!(err, ConfigError::ApiKeyWithOAuth));
        let err = ConfigureRequest {
            api_key: Some("k".into()),
            flow: Some(OAuthFlow::Device),
            ..request("https://gw")
        }
        .validate()
        .unwrap_err();
        assert!(matches!(err, ConfigError::ApiKeyWithOAuth));
    }

    #[test]
    fn oauth_options_need_issuer_and_client_id() {
        let err = ConfigureRequest {
            client_id: Some("c".into()),
            ..request("https://gw")
        }
        .validate()
        .unwrap_err();
        assert!(matches!(err, ConfigError::ClientIdWithoutIssuer));
        let err = ConfigureRequest {
            issuer: Some("https://idp".into()),
            ..request("https://gw")
        }
        .validate()
        .unwrap_err();
        assert!(matches!(err, ConfigError::IssuerWithoutClientId));
        let err = ConfigureRequest {
            token_endpoint: Some("https://idp/token".into()),
            ..request("https://gw")
        }
        .validate()
        .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::OAuthOptionWithoutIssuer {
                option: "--token-endpoint"
            }
        ));
        let err = ConfigureRequest {
            issuer: Some("https://idp".into()),
            client_id: Some("c".into()),
            authorization_endpoint: Some("idp/auth".into()),
            ..request("https://gw")
        }
        .validate()
        .unwrap_err();
        assert!(matches!(
            err,
            ConfigError::InvalidUrl {
                option: "--authorization-endpoint",
                ..
            }
        ));
    }

    #[test]
    fn oauth_config_is_built() {
        let config = ConfigureRequest {
            issuer: Some("https://idp.example.com/realms/x".into()),
            client_id: Some("nsight".into()),
            flow: Some(OAuthFlow::Device),
            token_endpoint: Some("https://idp.example.com/token".into()),
            ..request("https://gw")
        }
        .validate()
        .unwrap();
        let Auth::OAuth2(oauth) = &config.auth else {
            panic!("not oauth: {config:?}")
        };
        assert_eq!(oauth.flow, OAuthFlow::Device);
        assert_eq!(oauth.client_id, "nsight");
        assert_eq!(oauth.authorization_endpoint, None);
        assert!(config.api_key().is_none());
    }

    #[test]
    fn api_key_is_checked_and_never_debug_printed() {
        for bad in ["", "has space", "new\nline"] {
            let err = ConfigureRequest {
                api_key: Some(bad.into()),
                ..request("https://gw")
            }
            .validate()
            .unwrap_err();
            assert!(matches!(err, ConfigError::InvalidApiKey { .. }), "{bad:?}");
        }
        let config = ConfigureRequest {
            api_key: Some("s3cr3t-key".into()),
            ..request("https://gw")
        }
        .validate()
        .unwrap();
        assert_eq!(config.api_key().unwrap().expose(), "s3cr3t-key");
        assert!(!format!("{config:?}").contains("s3cr3t"));
    }

    #[test]
    fn round_trip_with_mode_0600() {
        let dir = temp_dir();
        let path = dir.join("conf");
        let config = ConfigureRequest {
            api_key: Some("k1".into()),
            ..request("https://gw.example.com:8888/")
        }
        .validate()
        .unwrap();
        save(&path, &config).unwrap();
        assert_eq!(load(&path).unwrap(), config);
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let text = fs::read_to_string(&path).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "version": 1,
                "gateway": "https://gw.example.com:8888",
                "auth": {"type": "apiKey", "key": "k1"}
            })
        );
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn rewriting_an_open_file_makes_it_0600() {
        let dir = temp_dir();
        let path = dir.join("conf");
        fs::write(&path, "{}").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(mode_too_open(file_mode(&path).unwrap()));
        let config = request("http://localhost:8888").validate().unwrap();
        save(&path, &config).unwrap();
        assert_eq!(file_mode(&path), Some(0o600));
        assert!(!mode_too_open(0o600));
        assert_eq!(load(&path).unwrap(), config);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn load_errors_are_distinguished() {
        let dir = temp_dir();
        let missing = dir.join("missing");
        assert!(matches!(load(&missing), Err(ConfigError::NotFound { .. })));
        let bad = dir.join("bad");
        fs::write(&bad, "not json").unwrap();
        assert!(matches!(load(&bad), Err(ConfigError::Parse { .. })));
        let bad_url = dir.join("bad-url");
        fs::write(
            &bad_url,
            r#"{"version":1,"gateway":"ftp://x","auth":{"type":"none"}}"#,
        )
        .unwrap();
        let err = load(&bad_url).unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn default_path_is_in_home() {
        assert_eq!(
            default_path(Some("/home/u".into())).unwrap(),
            PathBuf::from("/home/u/.nsight-cloud.conf")
        );
        assert!(matches!(default_path(None), Err(ConfigError::NoHome)));
        assert!(matches!(
            default_path(Some("".into())),
            Err(ConfigError::NoHome)
        ));
    }
}
