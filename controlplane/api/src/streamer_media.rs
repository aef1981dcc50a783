//! How a streamer's WebRTC media reaches the browser: the media ports it listens on (on its
//! container and its Service), a TURN relay (e.g. a STUNner gateway) with credentials from a
//! Secret, and more environment for the image's own settings.
//!
//! One struct, [`StreamerMedia`], flattened into `NsightStreamer.spec` and into
//! `NsightTenantOperator.spec.streamerLaunch` (where it is given to every launched streamer).
//! The CRD schema admits each field's shape; [`StreamerMedia::check`] refuses what the schema
//! cannot see (duplicates, a port the streamer's HTTP uses, a TURN URL without `enabled`,
//! environment names the operator sets), with a message that names the field. Pure.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::EnvVar;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The streamer's HTTP port (its GUI and `/healthz`), which no media port may take.
pub const HTTP_PORT: u16 = 8080;
/// Environment names with this prefix are the operator's (`NSIGHT_SESSION_ID`, the TURN
/// settings, ...): `env` may not set them.
pub const RESERVED_ENV_PREFIX: &str = "NSIGHT_";

/// The media settings of a streamer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StreamerMedia {
    /// The WebRTC media ports the streamer image listens on, added to its container and its
    /// Service (set `service.type` to `NodePort` or `LoadBalancer` to reach them from outside
    /// the cluster, or use a TURN relay).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub media_ports: Vec<MediaPort>,
    /// The TURN relay (e.g. a STUNner gateway) for browsers outside the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<Turn>,
    /// More environment for the streamer container: the image's own settings (names starting
    /// with `NSIGHT_` are the operator's and are refused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub env: Vec<EnvVar>,
}

/// One media port.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MediaPort {
    /// The port's name on the container and the Service (an IANA service name: at most 15
    /// lowercase letters, digits and `-`).
    #[schemars(length(min = 1, max = 15), pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub name: String,
    #[schemars(range(min = 1))]
    pub port: u16,
    /// `UDP` (default) or `TCP`.
    #[serde(default)]
    pub protocol: MediaProtocol,
}

/// A media port's transport.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum MediaProtocol {
    #[default]
    #[serde(rename = "UDP")]
    Udp,
    #[serde(rename = "TCP")]
    Tcp,
}

impl MediaProtocol {
    /// The Kubernetes protocol name.
    pub fn as_str(self) -> &'static str {
        match self {
            MediaProtocol::Udp => "UDP",
            MediaProtocol::Tcp => "TCP",
        }
    }
}

/// The TURN relay a streamer hands to the browser.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    #[serde(default)]
    pub enabled: bool,
    /// ICE server URLs: `turn:`, `turns:`, `stun:` or `stuns:` and a host (e.g.
    /// `turn:stunner.stunner.svc:3478?transport=udp`); none: the image's own default.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 8),
        inner(length(min = 6, max = 512), pattern(r"^(turns?|stuns?):[^\s,]+$"))
    )]
    pub urls: Vec<String>,
    /// A Secret in the streamer's namespace with the keys `username` and `password` for the
    /// relay, given to the container from the Secret (never written into the Deployment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        pattern(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub credentials_secret: Option<String>,
}

impl StreamerMedia {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self == &StreamerMedia::default()
    }

    /// What the schema cannot refuse; `field` prefixes the messages (`spec` or
    /// `spec.streamerLaunch`).
    pub fn check(&self, field: &str) -> Result<(), String> {
        let mut names = BTreeSet::from(["http"]);
        let mut ports = BTreeSet::from([(HTTP_PORT, MediaProtocol::Tcp)]);
        for (i, p) in self.media_ports.iter().enumerate() {
            let at = format!("{field}.mediaPorts[{i}]");
            if !names.insert(p.name.as_str()) {
                return Err(format!(
                    "{at}.name {:?} is taken (\"http\" is the streamer's own port, and each name may appear once); choose another name",
                    p.name
                ));
            }
            if p.port == 0 {
                return Err(format!("{at}.port must be between 1 and 65535"));
            }
            if !ports.insert((p.port, p.protocol)) {
                return Err(format!(
                    "{at}: {} {} is taken ({HTTP_PORT}/TCP is the streamer's HTTP port, and each port and protocol may appear once); choose another port",
                    p.port,
                    p.protocol.as_str()
                ));
            }
        }
        if let Some(turn) = &self.turn {
            if !turn.enabled && (!turn.urls.is_empty() || turn.credentials_secret.is_some()) {
                return Err(format!(
                    "{field}.turn has urls or credentialsSecret but enabled is false; set {field}.turn.enabled: true to use the relay, or remove them"
                ));
            }
            if turn.credentials_secret.is_some() && turn.urls.is_empty() {
                return Err(format!(
                    "{field}.turn.credentialsSecret needs {field}.turn.urls: name the relay the credentials are for"
                ));
            }
        }
        let mut env = BTreeSet::new();
        for (i, var) in self.env.iter().enumerate() {
            let at = format!("{field}.env[{i}]");
            if !env_name_ok(&var.name) {
                return Err(format!(
                    "{at}.name {:?} is not an environment variable name (letters, digits, `_`, `-` and `.`, not starting with a digit)",
                    var.name
                ));
            }
            if var.name.starts_with(RESERVED_ENV_PREFIX) {
                return Err(format!(
                    "{at}.name {:?}: names starting with {RESERVED_ENV_PREFIX} are set by the operator (sessionId, turn, ...); use the field that sets it",
                    var.name
                ));
            }
            if !env.insert(var.name.as_str()) {
                return Err(format!("{at}.name {:?} appears twice", var.name));
            }
        }
        Ok(())
    }
}

/// Kubernetes' rule for an environment variable name (`validation.IsEnvVarName`).
fn env_name_ok(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'-' || b == b'.')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn media(json: serde_json::Value) -> StreamerMedia {
        serde_json::from_value(json).expect("media settings")
    }

    #[test]
    fn a_full_setting_passes_and_protocol_defaults_to_udp() {
        let m = media(serde_json::json!({
            "mediaPorts": [{"name": "webrtc", "port": 47998}, {"name": "webrtc-tcp", "port": 47998, "protocol": "TCP"}],
            "turn": {"enabled": true, "urls": ["turn:stunner.stunner.svc:3478?transport=udp"], "credentialsSecret": "turn-credentials"},
            "env": [{"name": "WEB_USERNAME", "value": "nvidia"}],
        }));
        assert_eq!(m.media_ports[0].protocol, MediaProtocol::Udp);
        assert_eq!(m.check("spec"), Ok(()));
        assert!(StreamerMedia::default().is_empty());
        assert!(!m.is_empty());
    }

    #[test]
    fn what_the_schema_cannot_see_is_refused_naming_the_field() {
        let cases = [
            (
                serde_json::json!({"mediaPorts": [{"name": "http", "port": 1}]}),
                "spec.mediaPorts[0].name \"http\" is taken",
            ),
            (
                serde_json::json!({"mediaPorts": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]}),
                "spec.mediaPorts[1].name \"a\" is taken",
            ),
            (
                serde_json::json!({"mediaPorts": [{"name": "a", "port": 8080, "protocol": "TCP"}]}),
                "spec.mediaPorts[0]: 8080 TCP is taken",
            ),
            (
                serde_json::json!({"mediaPorts": [{"name": "a", "port": 9}, {"name": "b", "port": 9}]}),
                "spec.mediaPorts[1]: 9 UDP is taken",
            ),
            (
                serde_json::json!({"mediaPorts": [{"name": "a", "port": 0}]}),
                "spec.mediaPorts[0].port must be between 1 and 65535",
            ),
            (
                serde_json::json!({"turn": {"urls": ["turn:relay:3478"]}}),
                "spec.turn has urls or credentialsSecret but enabled is false",
            ),
            (
                serde_json::json!({"turn": {"enabled": true, "credentialsSecret": "s"}}),
                "spec.turn.credentialsSecret needs spec.turn.urls",
            ),
            (
                serde_json::json!({"env": [{"name": "NSIGHT_SESSION_ID", "value": "x"}]}),
                "spec.env[0].name \"NSIGHT_SESSION_ID\": names starting with NSIGHT_",
            ),
            (
                serde_json::json!({"env": [{"name": "9LIVES"}]}),
                "spec.env[0].name \"9LIVES\" is not an environment variable name",
            ),
            (
                serde_json::json!({"env": [{"name": "A"}, {"name": "A"}]}),
                "spec.env[1].name \"A\" appears twice",
            ),
        ];
        for (json, wanted) in cases {
            let err = media(json.clone())
                .check("spec")
                .expect_err(&json.to_string());
            assert!(err.starts_with(wanted), "{json}: {err}");
        }
        // 8080 over UDP is not the HTTP port; the same number on TCP and UDP is two ports.
        let ok = media(serde_json::json!({"mediaPorts": [{"name": "a", "port": 8080}]}));
        assert_eq!(ok.check("spec"), Ok(()));
    }
}
