//! Golden tests of every render: `tests/data/render/<case>.yaml` (the custom resource, then the
//! objects it references) -> `<case>.out.yaml` (the desired objects, one YAML document each).
//! `NSIGHT_UPDATE_GOLDEN=1 cargo test -p nsight-operator --test render_golden` rewrites them;
//! review the diff.
//!
//! Besides the goldens, invariants every render keeps: owner reference, common labels,
//! selectors that match the Pod template, Service target ports that exist, the binaries the
//! local platform runs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::{Path, PathBuf};

use nsight_api::{
    NsightAnalysis, NsightCloudStorageConfig, NsightCloudUI, NsightCoordinator, NsightGateway,
};
use nsight_operator::render::{
    self, analysis, coordinator, Desired, Object, RenderError, RenderSettings, LABEL_MANAGED_BY,
    LABEL_OWNER_KIND,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/render")
}

fn settings() -> RenderSettings {
    RenderSettings {
        image_repository: "registry.test/nsight/".into(),
        image_tag: "1.2.3".into(),
        envoy_image: "registry.test/envoy:v1.36.2".into(),
        xds_host: "nsight-operator-xds.nsight.svc".into(),
        xds_port: 18000,
        ..RenderSettings::default()
    }
}

/// The documents of an input file.
fn docs(case: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(dir().join(format!("{case}.yaml"))).unwrap();
    text.split("\n---\n")
        .map(|doc| serde_norway::from_str(doc).unwrap())
        .collect()
}

fn parse<T: DeserializeOwned>(doc: &Value) -> T {
    serde_json::from_value(doc.clone()).unwrap()
}

fn render_case(case: &str) -> (Value, Desired) {
    let docs = docs(case);
    let cr = docs[0].clone();
    let s = settings();
    let desired = match cr["kind"].as_str().unwrap() {
        "NsightCoordinator" => {
            let storage = docs.get(1).map(parse::<NsightCloudStorageConfig>);
            // The controller passes `certs::fingerprint` of the agent-channel Secret.
            coordinator::render(
                &parse::<NsightCoordinator>(&cr),
                storage.as_ref(),
                Some("0123456789abcdef"),
                &[],
                &s,
            )
        }
        "NsightAnalysis" => {
            let storage = docs.get(1).map(parse::<NsightCloudStorageConfig>);
            analysis::render(&parse::<NsightAnalysis>(&cr), storage.as_ref(), &s)
        }
        "NsightCloudUI" => render::cloud_ui::render(&parse::<NsightCloudUI>(&cr), &s),
        "NsightGateway" => render::gateway::render(&parse::<NsightGateway>(&cr), &s),
        other => panic!("no render for {other}"),
    }
    .unwrap();
    (cr, desired)
}

fn to_yaml(desired: &Desired) -> String {
    desired
        .objects
        .iter()
        .map(|o| serde_norway::to_string(o).unwrap())
        .collect::<Vec<_>>()
        .join("---\n")
}

fn check_golden(case: &str) {
    let (_, desired) = render_case(case);
    let got = to_yaml(&desired);
    let golden: &Path = &dir().join(format!("{case}.out.yaml"));
    if std::env::var_os("NSIGHT_UPDATE_GOLDEN").is_some() {
        std::fs::write(golden, &got).unwrap();
    }
    let want = std::fs::read_to_string(golden).unwrap_or_default();
    assert_eq!(
        got,
        want,
        "render of {case} differs from {}; review and rerun with NSIGHT_UPDATE_GOLDEN=1",
        golden.display()
    );
}

const CASES: [&str; 8] = [
    "coordinator",
    "coordinator-tls",
    "coordinator-storage",
    "analysis-s3",
    "analysis-minio",
    "analysis-local",
    "cloud-ui",
    "gateway",
];

#[test]
fn renders_match_goldens() {
    for case in CASES {
        check_golden(case);
    }
}

#[test]
fn every_object_is_owned_labelled_and_selectable() {
    for case in CASES {
        let (cr, desired) = render_case(case);
        let kind = cr["kind"].as_str().unwrap();
        let name = cr["metadata"]["name"].as_str().unwrap();
        assert!(!desired.objects.is_empty());
        for object in &desired.objects {
            let v = serde_json::to_value(object).unwrap();
            let what = format!("{case}: {} {}", v["kind"], v["metadata"]["name"]);
            assert_eq!(
                v["metadata"]["namespace"], cr["metadata"]["namespace"],
                "{what}"
            );
            let owner = &v["metadata"]["ownerReferences"][0];
            assert_eq!(owner["kind"], kind, "{what}");
            assert_eq!(owner["name"], name, "{what}");
            assert_eq!(owner["uid"], cr["metadata"]["uid"], "{what}");
            assert_eq!(owner["controller"], true, "{what}");
            let labels = &v["metadata"]["labels"];
            assert_eq!(labels[LABEL_MANAGED_BY], "nsight-operator", "{what}");
            assert_eq!(labels[LABEL_OWNER_KIND], kind, "{what}");
            assert_eq!(labels["app.kubernetes.io/instance"], name, "{what}");
        }
        let deployment = serde_json::to_value(desired.deployment(name).unwrap()).unwrap();
        let selector = deployment["spec"]["selector"]["matchLabels"]
            .as_object()
            .unwrap();
        let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
        for (k, v) in selector {
            assert_eq!(
                &pod_labels[k], v,
                "{case}: selector {k} not on the Pod template"
            );
        }
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let port_names: Vec<&Value> = container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| &p["name"])
            .collect();
        let service = desired
            .objects
            .iter()
            .find_map(|o| match o {
                Object::Service(s) => Some(serde_json::to_value(s).unwrap()),
                _ => None,
            })
            .unwrap();
        assert_eq!(
            &service["spec"]["selector"],
            &Value::Object(selector.clone())
        );
        for port in service["spec"]["ports"].as_array().unwrap() {
            assert!(
                port_names.contains(&&port["targetPort"]),
                "{case}: Service targets {} which the container does not name",
                port["targetPort"]
            );
        }
    }
}

#[test]
fn commands_are_the_binaries_the_local_platform_runs() {
    let local = nsight_local::plan::Plan::new(&nsight_local::plan::Settings {
        state_dir: "/s".into(),
        address: "127.0.0.1".parse().unwrap(),
        ports: nsight_local::plan::Ports::default(),
        wasm_dir: "/w".into(),
        bin_dir: "/b".into(),
        envoy_bin: "/e/envoy".into(),
        storage_config: None,
        tls: None,
        oauth2: None,
    })
    .unwrap();
    let shipped: Vec<&str> = local.children.iter().map(|c| c.name).collect();
    assert!(shipped.contains(&coordinator::BINARY), "{shipped:?}");
    assert!(shipped.contains(&analysis::BINARY), "{shipped:?}");
    for (case, binary) in [
        ("coordinator", coordinator::BINARY),
        ("analysis-local", analysis::BINARY),
    ] {
        let (cr, desired) = render_case(case);
        let d = desired
            .deployment(cr["metadata"]["name"].as_str().unwrap())
            .unwrap();
        let container = &d
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0];
        assert_eq!(
            container.command.as_deref(),
            Some(&[binary.to_string()][..])
        );
        // Every flag the render passes is one the local platform passes too (same binary, same
        // command line shape).
        let local_args = &local
            .children
            .iter()
            .find(|c| c.name == binary)
            .unwrap()
            .args;
        for flag in container
            .args
            .iter()
            .flatten()
            .filter(|a| a.starts_with("--"))
        {
            let known = local_args.contains(flag)
                || [
                    "--insecure-agent-channel",
                    "--max-concurrent-jobs",
                    "--storage-config",
                ]
                .contains(&flag.as_str());
            assert!(
                known,
                "{binary}: flag {flag} is not one the binary is run with"
            );
        }
    }
}

#[test]
fn the_image_repository_setting_names_the_images() {
    let (_, desired) = render_case("analysis-local");
    let d = desired.deployment("analysis").unwrap();
    let image = d
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .image
        .clone();
    assert_eq!(
        image.as_deref(),
        Some("registry.test/nsight/nsight-analysis:1.2.3")
    );
}

/// The gateway's Envoy has the filters where its xDS configuration says (`--auth-wasm-path`):
/// the init container installs the operator image's `/plugins/*.wasm` into the volume Envoy
/// mounts read-only there.
#[test]
fn the_gateway_pod_has_the_filters_where_xds_points() {
    let (_, desired) = render_case("gateway");
    let d = desired.deployment("nsight-operator-gateway").unwrap();
    let pod = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let wasm_path = nsight_operator::xds::translate::XdsSettings::default().wasm_path;
    let wasm_dir = wasm_path.parent().unwrap().to_str().unwrap();
    assert_eq!(settings().wasm_dir, wasm_dir);
    let init = &pod.init_containers.as_ref().unwrap()[0];
    assert_eq!(init.name, render::gateway::PLUGINS_INIT_CONTAINER);
    assert_eq!(
        init.image.as_deref(),
        Some("registry.test/nsight/nsight-operator:1.2.3")
    );
    assert_eq!(
        init.command.as_deref().unwrap(),
        [
            "nsight-operator".to_string(),
            "install-plugins".into(),
            "--from=/plugins".into(),
            format!("--to={wasm_dir}"),
        ]
    );
    let init_mount = &init.volume_mounts.as_ref().unwrap()[0];
    assert_eq!(
        (init_mount.mount_path.as_str(), init_mount.read_only),
        (wasm_dir, None)
    );
    let envoy = &pod.containers[0];
    let mount = envoy
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == init_mount.name)
        .expect("Envoy does not mount the filters");
    assert_eq!(mount.mount_path, wasm_dir);
    assert_eq!(mount.read_only, Some(true));
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == init_mount.name)
        .unwrap();
    assert!(volume.empty_dir.is_some());
    // No mount inside another mount (a ConfigMap volume cannot hold a mount point).
    let paths: Vec<&str> = envoy
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.as_str())
        .collect();
    for a in &paths {
        for b in &paths {
            assert!(
                a == b || !b.starts_with(&format!("{a}/")),
                "{b} is inside {a}"
            );
        }
    }

    // Another plugins image when asked.
    let s = RenderSettings {
        plugins_image: Some("registry.test/filters:7".into()),
        ..settings()
    };
    let cr = docs("gateway").remove(0);
    let desired = render::gateway::render(&parse::<NsightGateway>(&cr), &s).unwrap();
    let d = desired.deployment("nsight-operator-gateway").unwrap();
    let pod = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(
        pod.init_containers.as_ref().unwrap()[0].image.as_deref(),
        Some("registry.test/filters:7")
    );
}

#[test]
fn a_resource_not_read_from_the_server_is_refused() {
    let cr = NsightCloudUI::new("ui", Default::default());
    assert_eq!(
        render::cloud_ui::render(&cr, &settings()),
        Err(RenderError::MissingMetadata("namespace"))
    );
}

#[test]
fn a_name_too_long_for_the_instance_label_is_refused() {
    let mut cr: NsightCloudUI = parse(&docs("cloud-ui")[0]);
    let long = "n".repeat(64);
    cr.metadata.name = Some(long.clone());
    let err = render::cloud_ui::render(&cr, &settings()).unwrap_err();
    assert_eq!(err, RenderError::NameTooLong(long));
    assert!(err.to_string().contains("use a shorter name"));
    cr.metadata.name = Some("n".repeat(63));
    assert!(render::cloud_ui::render(&cr, &settings()).is_ok());
}
