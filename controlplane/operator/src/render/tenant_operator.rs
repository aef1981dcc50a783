//! NsightTenantOperator -> ServiceAccount (with an API token: it calls the API server), a Role
//! and RoleBinding in its own namespace, Service (`http` 8080) and the `nsight-tenant-operator`
//! Deployment.
//!
//! Least privilege: the Role lets it list, read, create, annotate (patch) and delete the
//! NsightStreamers of its namespace; nothing else, nowhere else. Pure.

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use nsight_api::NsightTenantOperator;

use super::{
    gateway_token,
    workload::{self, Main, Port},
    Component, Desired, Object, Owner, RenderError, RenderSettings,
};

/// The image (and container) name.
pub const NAME: &str = "nsight-tenant-operator";
pub const HTTP: Port = Port {
    name: "http",
    port: 8080,
};
/// Concurrent streamers unless `streamerLaunch.maxActive` says otherwise (the documented default).
pub const DEFAULT_MAX_ACTIVE: u32 = 10;

/// The rules of the tenant operator's Role: what its API (controlplane/tenant) does with the
/// streamers of its namespace, nothing more. `list` counts them against the cap, `get` reads one,
/// `create` launches, `patch` records activity (an annotation), `delete` removes one or reaps an
/// idle one. No `watch`, no `update`, no `status` subresource (a streamer's status comes with the
/// object), no other kind.
pub fn rules() -> Vec<PolicyRule> {
    vec![PolicyRule {
        api_groups: Some(vec![nsight_api::GROUP.into()]),
        resources: Some(vec!["nsightstreamers".into()]),
        verbs: ["get", "list", "create", "patch", "delete"]
            .map(String::from)
            .to_vec(),
        ..PolicyRule::default()
    }]
}

pub fn render(
    cr: &NsightTenantOperator,
    settings: &RenderSettings,
) -> Result<Desired, RenderError> {
    let owner = Owner::of(cr, Component::TenantOperator)?;
    let ports = vec![HTTP];
    let max_active = cr
        .spec
        .streamer_launch
        .as_ref()
        .and_then(|s| s.max_active)
        .unwrap_or(DEFAULT_MAX_ACTIVE);
    let mut args = vec![
        "--http".into(),
        format!("0.0.0.0:{}", HTTP.port),
        "--namespace".into(),
        owner.namespace.clone(),
        "--max-active".into(),
        max_active.to_string(),
    ];
    // The CRD's pattern admits only what the binary's `--idle-timeout` parses.
    let launch = cr.spec.streamer_launch.clone().unwrap_or_default();
    for (flag, value) in [
        ("--idle-timeout", launch.idle_timeout),
        ("--streamer-image", launch.image),
        ("--streamer-runtime-class", launch.runtime_class_name),
    ] {
        if let Some(value) = value {
            args.extend([flag.into(), value]);
        }
    }
    if !launch.media.is_empty() {
        launch
            .media
            .check("spec.streamerLaunch")
            .map_err(RenderError::Invalid)?;
        let media = serde_json::to_string(&launch.media)
            .map_err(|e| RenderError::Invalid(format!("spec.streamerLaunch: {e}")))?;
        args.extend(["--streamer-media".into(), media]);
    }
    let mut main = Main {
        image: settings.image(NAME),
        args,
        ports: ports.clone(),
        health_path: Some("/healthz"),
        ..Main::default()
    };
    // The identity header is trusted because only the gateway can reach the API.
    gateway_token::mount(&mut main, &owner);
    let mut service_account = workload::service_account(&owner);
    service_account.automount_service_account_token = Some(true);
    let mut deployment = workload::deployment(&owner, &cr.spec.workload, main);
    if let Some(pod) = deployment
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
    {
        pod.automount_service_account_token = Some(true);
    }
    let role = Role {
        metadata: owner.meta(owner.name.clone()),
        rules: Some(rules()),
    };
    let binding = RoleBinding {
        metadata: owner.meta(owner.name.clone()),
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: owner.name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: owner.name.clone(),
            namespace: Some(owner.namespace.clone()),
            ..Subject::default()
        }]),
    };
    Ok(Desired {
        objects: vec![
            Object::ServiceAccount(service_account),
            Object::Role(role),
            Object::RoleBinding(binding),
            Object::Service(Box::new(workload::service(
                &owner,
                cr.spec.workload.service.as_ref(),
                &ports,
            ))),
            Object::Deployment(Box::new(deployment)),
            Object::NetworkPolicy(Box::new(workload::network_policy(&owner, &[HTTP], &[]))),
        ],
    })
}
