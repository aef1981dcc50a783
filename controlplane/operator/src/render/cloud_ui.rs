//! NsightCloudUI -> ServiceAccount, Service (`http` 8080) and the UI Deployment.
//!
//! The UI is a static single-page app (Leptos compiled to Wasm); its image's entrypoint serves
//! it on 8080, so no command is set. The gateway routes `/` to this Service.

use nsight_api::NsightCloudUI;

use super::{
    workload::{self, Main, Port},
    Component, Desired, Object, Owner, RenderError, RenderSettings,
};

/// The image name.
pub const IMAGE: &str = "nsight-cloud-ui";
pub const HTTP: Port = Port {
    name: "http",
    port: 8080,
};

pub fn render(cr: &NsightCloudUI, settings: &RenderSettings) -> Result<Desired, RenderError> {
    let owner = Owner::of(cr, Component::CloudUi)?;
    let ports = vec![HTTP];
    let (tmp, tmp_mount) = workload::scratch("tmp", "/tmp");
    let main = Main {
        image: settings.image(IMAGE),
        ports: ports.clone(),
        volumes: vec![tmp],
        mounts: vec![tmp_mount],
        health_path: Some("/"),
        ..Main::default()
    };
    Ok(Desired {
        objects: vec![
            Object::ServiceAccount(workload::service_account(&owner)),
            Object::Service(Box::new(workload::service(
                &owner,
                cr.spec.workload.service.as_ref(),
                &ports,
            ))),
            Object::Deployment(Box::new(workload::deployment(
                &owner,
                &cr.spec.workload,
                main,
            ))),
        ],
    })
}
