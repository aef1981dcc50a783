//! The gateway token of a service the gateway fronts (coordinator, analysis service, tenant
//! API): a Secret `<name>-gateway-token` the operator creates once per custom resource (256
//! random bits, never overwritten, garbage-collected with its owner), mounted read-only into the
//! service's Pod as `--gateway-token-file`, and read by the xDS controller, which has the
//! gateway set it on every request it forwards to that Service
//! (`nsight_contracts::gateway_only`). A client that reaches the Service's port directly, from
//! any Pod on the network, gets 403: the gateway's authentication cannot be skipped.
//!
//! ```text
//!  Secret <name>-gateway-token {token}  ──mount──>  Deployment <name> --gateway-token-file
//!                                       ──xDS────>  gateway route: x-nsight-gateway-token
//! ```
//!
//! Pure; the controller draws the token ([`generate`]) and creates the Secret before the
//! Deployment, so a Pod never waits for it.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{Secret, SecretVolumeSource, Volume},
    ByteString,
};
use kube::Resource;
use nsight_contracts::gateway_only::GatewayToken;

use super::{
    coordinator::key_items,
    workload::{self, Main},
    Component, Owner, RenderError,
};

/// The Secret's key holding the token.
pub const KEY: &str = "token";
/// Where the Pod sees the Secret.
const DIR: &str = "/etc/nsight/gateway-token";
const VOLUME: &str = "gateway-token";
const SUFFIX: &str = "-gateway-token";

/// The Secret holding the token of the custom resource `instance`.
pub fn secret_name(instance: &str) -> String {
    format!("{instance}{SUFFIX}")
}

/// Whether a Secret's name is one a gateway token lives under (what the xDS controller's
/// watch reacts to).
pub fn is_token_secret(name: &str) -> bool {
    name.len() > SUFFIX.len() && name.ends_with(SUFFIX)
}

/// A fresh token: `ngt_` and 64 hex digits from the OS's random source (UUID v4: 2 x 122 bits).
pub fn generate() -> GatewayToken {
    let text = format!(
        "ngt_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    #[allow(
        clippy::expect_used,
        reason = "68 visible ASCII characters always parse"
    )]
    GatewayToken::parse(&text).expect("a generated token is valid")
}

/// The Secret of `cr` holding `token` (created once: `apply::create_once`).
pub fn secret<K: Resource<DynamicType = ()>>(
    cr: &K,
    component: Component,
    token: &GatewayToken,
) -> Result<Secret, RenderError> {
    let owner = Owner::of(cr, component)?;
    Ok(Secret {
        metadata: owner.meta(secret_name(&owner.name)),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            KEY.into(),
            ByteString(token.expose().as_bytes().to_vec()),
        )])),
        ..Secret::default()
    })
}

/// Mounts the owner's token Secret read-only in `main` and passes it as `--gateway-token-file`.
pub(crate) fn mount(main: &mut Main, owner: &Owner) {
    main.volumes.push(Volume {
        name: VOLUME.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret_name(&owner.name)),
            items: Some(key_items(&[KEY])),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    });
    main.mounts.push(workload::read_only(VOLUME, DIR));
    main.args
        .extend(["--gateway-token-file".into(), format!("{DIR}/{KEY}")]);
}

/// The token a Secret holds, when it holds a valid one.
pub fn read(secret: &Secret) -> Option<GatewayToken> {
    let bytes = secret.data.as_ref()?.get(KEY)?;
    GatewayToken::parse(std::str::from_utf8(&bytes.0).ok()?).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn a_generated_token_round_trips_through_its_secret() {
        let cr: nsight_api::NsightAnalysis = serde_json::from_value(serde_json::json!({
            "apiVersion": "nvidia.com/v1alpha1", "kind": "NsightAnalysis",
            "metadata": {"name": "a", "namespace": "team", "uid": "u1"}, "spec": {}
        }))
        .unwrap();
        let token = generate();
        assert_eq!(token.expose().len(), 68);
        assert_ne!(generate(), token, "each token is drawn anew");
        let secret = secret(&cr, Component::Analysis, &token).unwrap();
        assert_eq!(secret.metadata.name.as_deref(), Some("a-gateway-token"));
        assert_eq!(read(&secret), Some(token));
        assert!(is_token_secret("a-gateway-token"));
        assert!(!is_token_secret("-gateway-token") && !is_token_secret("a-agent-tls"));
    }
}
