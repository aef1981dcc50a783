//! The `nsight-tenant-operator` binary accepts the arguments the operator renders into the
//! NsightTenantOperator's Deployment (`render::tenant_operator`): an unknown flag or a bad value
//! would crash-loop the Pod.
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use nsight_api::{NsightTenantOperator, StreamerLaunch};
use nsight_operator::render::{tenant_operator, Object, RenderSettings};

#[test]
fn the_binary_accepts_the_rendered_arguments() {
    let mut cr = NsightTenantOperator::new("tenant", Default::default());
    cr.metadata.namespace = Some("research".into());
    cr.metadata.uid = Some("6f1d2c3b-0000-4000-8000-000000000001".into());
    cr.spec.streamer_launch = Some(StreamerLaunch {
        max_active: Some(3),
        idle_timeout: Some("45m".into()),
        image: Some("registry.test/nsight-streamer-nsys:1".into()),
        runtime_class_name: Some("nvidia".into()),
        media: serde_json::from_value(serde_json::json!({
            "mediaPorts": [{"name": "webrtc", "port": 47998}],
            "turn": {"enabled": true, "urls": ["turn:relay:3478?transport=udp"], "credentialsSecret": "turn"},
            "env": [{"name": "WEB_USERNAME", "value": "nvidia"}],
        }))
        .unwrap(),
    });
    let desired = tenant_operator::render(&cr, &RenderSettings::default()).unwrap();
    let deployment = desired
        .objects
        .into_iter()
        .find_map(|o| match o {
            Object::Deployment(d) => Some(d),
            _ => None,
        })
        .expect("a Deployment");
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    let args = container.args.clone().unwrap();
    assert!(
        args.windows(2).any(|w| w == ["--max-active", "3"])
            && args
                .windows(2)
                .any(|w| w == ["--streamer-image", "registry.test/nsight-streamer-nsys:1"])
            && args
                .windows(2)
                .any(|w| w == ["--streamer-runtime-class", "nvidia"])
            && args.iter().any(|a| a == "--streamer-media"),
        "{args:?}"
    );
    // `--print-openapi` exits after parsing: the arguments were accepted.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nsight-tenant-operator"))
        .args(&args)
        .arg("--print-openapi")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nsight-tenant-operator rejects {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["info"]["title"], "Nsight Tenant API");
}

#[test]
fn the_binary_refuses_media_settings_that_cannot_work() {
    for (media, says) in [
        (
            r#"{"mediaPorts": [{"name": "http", "port": 9}]}"#,
            "--streamer-media.mediaPorts[0].name \"http\" is taken",
        ),
        (
            r#"{"mediaPorts": [{"name": "a", "port": 70000}]}"#,
            "not the media settings' JSON",
        ),
        ("{", "not the media settings' JSON"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_nsight-tenant-operator"))
            .args(["--streamer-media", media, "--print-openapi"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(says),
            "{media}: {stderr}"
        );
    }
}
