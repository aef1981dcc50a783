//! Golden tests of the storage, collector, OTLP proxy, streamer, tenant operator and
//! perf_event_paranoid renders: `tests/data/render/<case>.yaml` (the custom resource, then what
//! it references; for `machine-config-*`, the manager's cluster-wide setting and namespace) ->
//! `<case>.out.yaml`. `NSIGHT_UPDATE_GOLDEN=1 cargo test -p nsight-operator
//! --test render_golden_more` rewrites them; review the diff.
//!
//! Besides the goldens: owner reference and labels on every object, selectors matching the Pod
//! templates, Service target ports that exist, the external Secret check, least-privilege RBAC,
//! the `machineConfig` default / set / `null` settings (one DaemonSet, no owner, common labels).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use k8s_openapi::{api::core::v1::Secret, ByteString};
use nsight_api::{
    NsightCloudStorageConfig, NsightOtelCollector, NsightStreamer, NsightTenantOperator,
    OTLPProxyConfig, SecretRef,
};
use nsight_operator::{
    render::{
        otel_collector, otlp_proxy, perf_event,
        storage::{self, Credentials},
        streamer, tenant_operator, Desired, Object, ObjectKind, RenderSettings, LABEL_MANAGED_BY,
        LABEL_OWNER_KIND,
    },
    settings::MachineConfig,
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
        ..RenderSettings::default()
    }
}

fn credentials() -> Credentials {
    Credentials {
        user: "nsight-user".into(),
        password: "not-a-real-password".into(),
    }
}

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
        "NsightCloudStorageConfig" => storage::render(&parse(&cr), &credentials(), &s),
        "NsightOtelCollector" => {
            let storage = docs.get(1).map(parse::<NsightCloudStorageConfig>);
            otel_collector::render(&parse(&cr), storage.as_ref(), &s)
        }
        "OTLPProxyConfig" => otlp_proxy::render(&parse(&cr), &s),
        "NsightStreamer" => {
            let storage = docs.get(1).map(parse::<NsightCloudStorageConfig>);
            streamer::render(&parse(&cr), storage.as_ref(), &s)
        }
        "NsightTenantOperator" => tenant_operator::render(&parse(&cr), &s),
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

/// The manager's setting (`machineConfig`, `namespace`) of a `machine-config-*` case.
fn machine_case(case: &str) -> (Option<MachineConfig>, String) {
    let doc = &docs(case)[0];
    (
        parse(&doc["machineConfig"]),
        doc["namespace"].as_str().unwrap().to_owned(),
    )
}

fn render_machine(case: &str) -> Desired {
    let (machine, namespace) = machine_case(case);
    perf_event::render(machine.as_ref(), &namespace)
}

const MACHINE_CASES: [&str; 3] = [
    "machine-config-default",
    "machine-config-gpu",
    "machine-config-null",
];

const CASES: [&str; 8] = [
    "storage-minio",
    "storage-minio-persistent",
    "storage-s3",
    "otel-collector",
    "otel-collector-converter",
    "otlp-proxy",
    "streamer",
    "tenant-operator",
];

#[test]
fn renders_match_goldens() {
    for case in CASES.into_iter().chain(MACHINE_CASES) {
        let desired = if case.starts_with("machine-config") {
            render_machine(case)
        } else {
            render_case(case).1
        };
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
}

/// The workload objects' `(selector, Pod template)`.
fn workloads(desired: &Desired) -> Vec<(Value, Value)> {
    desired
        .objects
        .iter()
        .filter(|o| {
            matches!(
                o.kind(),
                ObjectKind::Deployment | ObjectKind::StatefulSet | ObjectKind::DaemonSet
            )
        })
        .map(|o| {
            let v = serde_json::to_value(o).unwrap();
            (
                v["spec"]["selector"]["matchLabels"].clone(),
                v["spec"]["template"].clone(),
            )
        })
        .collect()
}

#[test]
fn every_object_is_owned_labelled_and_selectable() {
    for case in CASES {
        let (cr, desired) = render_case(case);
        let kind = cr["kind"].as_str().unwrap();
        let name = cr["metadata"]["name"].as_str().unwrap();
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
        let workloads = workloads(&desired);
        for (selector, template) in &workloads {
            for (k, v) in selector.as_object().unwrap() {
                assert_eq!(
                    &template["metadata"]["labels"][k], v,
                    "{case}: selector {k} not on the Pod template"
                );
            }
        }
        let services: Vec<Value> = desired
            .objects
            .iter()
            .filter(|o| o.kind() == ObjectKind::Service)
            .map(|o| serde_json::to_value(o).unwrap())
            .collect();
        for service in services {
            let (selector, template) = &workloads[0];
            assert_eq!(&service["spec"]["selector"], selector, "{case}");
            // Any container of the Pod may name the port (a sidecar's own).
            let names: Vec<&Value> = template["spec"]["containers"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|c| c["ports"].as_array().into_iter().flatten())
                .map(|p| &p["name"])
                .collect();
            for port in service["spec"]["ports"].as_array().unwrap() {
                assert!(
                    names.contains(&&port["targetPort"]),
                    "{case}: Service targets {} which the container does not name",
                    port["targetPort"]
                );
            }
        }
    }
}

#[test]
fn the_managed_server_gets_credentials_from_its_secret_and_a_volume() {
    let (_, desired) = render_case("storage-minio");
    let kinds: Vec<ObjectKind> = desired.objects.iter().map(Object::kind).collect();
    assert_eq!(
        kinds,
        [
            ObjectKind::ServiceAccount,
            ObjectKind::Secret,
            ObjectKind::Service,
            ObjectKind::StatefulSet
        ]
    );
    let v = to_yaml(&desired);
    assert!(v.contains("name: reports-credentials"), "{v}");
    assert!(
        v.contains("endpoint_url: http://reports.research.svc:9100"),
        "{v}"
    );
    let set = serde_json::to_value(&desired.objects[3]).unwrap();
    let pod = &set["spec"]["template"]["spec"];
    // Our S3 server image by default, with the Secret's credentials as its flags.
    let image = pod["containers"][0]["image"].as_str().unwrap();
    assert!(
        image.ends_with(&format!(
            "/{}:{}",
            storage::STORAGE_IMAGE,
            env!("CARGO_PKG_VERSION")
        )) || image.contains(&format!("/{}:", storage::STORAGE_IMAGE)),
        "{image}"
    );
    let args = pod["containers"][0]["args"].to_string();
    assert!(
        args.contains("$(MINIO_ROOT_USER)") && args.contains("$(MINIO_ROOT_PASSWORD)"),
        "{args}"
    );
    let volumes: Vec<&str> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert!(volumes.contains(&"data"), "ephemeral data: {volumes:?}");
    assert!(set["spec"]["volumeClaimTemplates"].is_null());
    // The password only ever sits in the Secret, never in the StatefulSet.
    assert!(!set.to_string().contains("not-a-real-password"));

    let (_, desired) = render_case("storage-minio-persistent");
    let set = serde_json::to_value(&desired.objects[3]).unwrap();
    let claim = &set["spec"]["volumeClaimTemplates"][0];
    assert_eq!(claim["metadata"]["name"], "data");
    assert_eq!(claim["spec"]["storageClassName"], "fast-ssd");
    assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "20Gi");
    // Pruning selects by managed-by + owner kind: a volume of reports must never match.
    assert!(claim["metadata"]["labels"][LABEL_MANAGED_BY].is_null());
    let pod = &set["spec"]["template"]["spec"];
    assert!(!pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["name"] == "data"));
    assert_eq!(pod["containers"][0]["image"], "registry.test/s3/minio:2025");

    let (_, desired) = render_case("storage-s3");
    assert!(desired.objects.is_empty());
}

fn storage_cr(yaml: &str) -> NsightCloudStorageConfig {
    let doc = format!("apiVersion: nvidia.com/v1alpha1\nkind: NsightCloudStorageConfig\nmetadata: {{name: st}}\n{yaml}");
    serde_norway::from_str(&doc).unwrap()
}

#[test]
fn the_backend_follows_storage_type_and_the_minio_switch() {
    use storage::Backend;
    let r = |n: &str| {
        Some(SecretRef {
            name: n.into(),
            key: None,
        })
    };
    assert_eq!(storage::backend(&storage_cr("spec: {}")), Backend::Managed);
    assert_eq!(
        storage::backend(&storage_cr(
            "spec: {storage_type: s3, secretRef: {name: s}}"
        )),
        Backend::External(r("s"))
    );
    assert_eq!(
        storage::backend(&storage_cr(
            "spec: {minio: {enabled: false}, secretRef: {name: s}}"
        )),
        Backend::External(r("s"))
    );
    assert_eq!(
        storage::backend(&storage_cr("spec: {storage_type: local}")),
        Backend::Local
    );
    assert_eq!(
        storage::backend(&storage_cr("spec: {enabled: false}")),
        Backend::Disabled
    );
    assert_eq!(
        storage::config_secret(&storage_cr("spec: {}")),
        Some(SecretRef {
            name: "st-credentials".into(),
            key: Some("storage-config.yaml".into())
        })
    );
    assert_eq!(
        storage::config_secret(&storage_cr("spec: {storage_type: local}")),
        None
    );
}

fn secret(key: &str, text: &str) -> Secret {
    Secret {
        data: Some(BTreeMap::from([(
            key.to_owned(),
            ByteString(text.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

#[test]
fn an_external_bucket_secret_is_checked_with_the_agents_parser() {
    let r = SecretRef {
        name: "team-s3-credentials".into(),
        key: None,
    };
    let good = "storage_type: s3\nbucket_name: my-profiling-results\naws_access_key_id: AKIA\n\
                aws_secret_access_key: TOP-SECRET-VALUE\nregion_name: us-west-2\n";
    let check = storage::check_secret(Some(&r), Some(&secret("storage-config.yaml", good)));
    assert!(check.valid, "{check:?}");
    assert_eq!(check.reason, "SecretValid");

    let check = storage::check_secret(None, None);
    assert_eq!((check.valid, check.reason), (false, "SecretRefMissing"));
    let check = storage::check_secret(Some(&r), None);
    assert_eq!((check.valid, check.reason), (false, "SecretMissing"));
    assert!(check.message.contains("team-s3-credentials"), "{check:?}");
    let check = storage::check_secret(Some(&r), Some(&secret("config.yaml", good)));
    assert_eq!((check.valid, check.reason), (false, "SecretKeyMissing"));
    assert!(check.message.contains("storage-config.yaml"), "{check:?}");
    // `secretRef.key` names another key.
    let keyed = SecretRef {
        key: Some("config.yaml".into()),
        ..r.clone()
    };
    assert!(storage::check_secret(Some(&keyed), Some(&secret("config.yaml", good))).valid);

    let no_bucket =
        "storage_type: s3\naws_access_key_id: AKIA\naws_secret_access_key: TOP-SECRET-VALUE\n";
    let check = storage::check_secret(Some(&r), Some(&secret("storage-config.yaml", no_bucket)));
    assert_eq!((check.valid, check.reason), (false, "SecretInvalid"));
    assert!(check.message.contains("bucket_name"), "{check:?}");
    assert!(!check.message.contains("TOP-SECRET-VALUE"), "{check:?}");
    let check = storage::check_secret(
        Some(&r),
        Some(&secret("storage-config.yaml", "[not, a, mapping")),
    );
    assert_eq!((check.valid, check.reason), (false, "SecretInvalid"));
}

#[test]
fn the_collector_config_exports_to_every_exporter_and_rolls_on_change() {
    let (cr, desired) = render_case("otel-collector");
    let mut cr: NsightOtelCollector = parse(&cr);
    let config = otel_collector::config(&cr);
    assert_eq!(
        config["service"]["pipelines"]["traces"]["exporters"],
        serde_json::json!(["debug", "otlp/jaeger"])
    );
    assert_eq!(
        config["exporters"]["otlp/jaeger"]["endpoint"],
        "jaeger-collector.observability.svc:4317"
    );
    let hash = |d: &Desired| {
        let v = serde_json::to_value(d.deployment("otel").unwrap()).unwrap();
        assert_eq!(v["spec"]["replicas"], 2);
        v["spec"]["template"]["metadata"]["annotations"][otel_collector::CONFIG_HASH_ANNOTATION]
            .clone()
    };
    let before = hash(&desired);
    cr.spec.exporters[0].endpoint = "jaeger-collector.observability.svc:14317".into();
    let after = hash(&otel_collector::render(&cr, None, &settings()).unwrap());
    assert_ne!(before, after, "a config change must roll the Pods");
}

#[test]
fn the_converter_runs_beside_the_collector_which_exports_to_it() {
    let (cr, desired) = render_case("otel-collector-converter");
    let collector: NsightOtelCollector = parse(&cr);
    let config = otel_collector::config(&collector);
    assert_eq!(
        config["service"]["pipelines"]["traces"]["exporters"],
        serde_json::json!(["debug", otel_collector::CONVERTER_EXPORTER])
    );
    assert_eq!(
        config["exporters"][otel_collector::CONVERTER_EXPORTER]["endpoint"],
        "127.0.0.1:14317"
    );
    let d = serde_json::to_value(desired.deployment("otel").unwrap()).unwrap();
    let pod = &d["spec"]["template"]["spec"];
    let converter = &pod["containers"][1];
    assert_eq!(converter["name"], otel_collector::CONVERTER);
    assert_eq!(converter["image"], "registry.test/nsight/nsight-otlp:1.2.3");
    let args: Vec<&str> = converter["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        args.windows(2).any(|w| w
            == [
                "--storage-config",
                "/etc/nsight/storage/storage-config.yaml"
            ]),
        "{args:?}"
    );
    assert!(
        args.windows(2)
            .any(|w| w == ["--grpc-listen", "127.0.0.1:14317"]),
        "{args:?}"
    );
    let volumes = pod["volumes"].to_string();
    assert!(
        volumes.contains("reports-credentials") && volumes.contains("converter-data"),
        "{volumes}"
    );
    let service = desired
        .objects
        .iter()
        .find_map(|o| match o {
            Object::Service(s) => Some(serde_json::to_value(s).unwrap()),
            _ => None,
        })
        .unwrap();
    assert!(
        service["spec"]["ports"]
            .to_string()
            .contains("\"port\":14318"),
        "{service}"
    );
    assert_eq!(
        otel_collector::converter_url("otel", "research"),
        "http://otel.research.svc:14318"
    );

    // Two replicas would split a collection's spans; no storage, nowhere to put reports.
    let mut two = collector.clone();
    two.spec.replicas = Some(2);
    let storage: NsightCloudStorageConfig = parse(&docs("otel-collector-converter")[1]);
    let err = otel_collector::render(&two, Some(&storage), &settings())
        .unwrap_err()
        .to_string();
    assert!(err.contains("spec.replicas 1"), "{err}");
    let err = otel_collector::render(&collector, None, &settings())
        .unwrap_err()
        .to_string();
    assert!(err.contains("cloudStorageRef"), "{err}");
}

#[test]
fn the_proxy_config_points_the_sidecar_at_the_collector() {
    let (cr, desired) = render_case("otlp-proxy");
    let v = serde_json::to_value(&desired.objects[0]).unwrap();
    assert_eq!(
        v["data"][otlp_proxy::ENDPOINT_KEY],
        "http://otel.research.svc:4318"
    );
    assert_eq!(v["data"][otlp_proxy::PORT_KEY], "4320");
    assert_eq!(v["data"][otlp_proxy::GRPC_PORT_KEY], "4317");
    // The sidecar itself is configured over ADS (xds::otlp_proxies): its IR listens on the
    // config's ports on loopback and forwards OTLP/gRPC to the collector's gRPC port over HTTP/2.
    let ir = nsight_operator::xds::otlp_proxies::desired(&parse(&cr)).unwrap();
    let listeners: Vec<(&str, u16)> = ir
        .listeners
        .iter()
        .map(|l| (l.address.as_str(), l.port))
        .collect();
    assert_eq!(listeners, [("127.0.0.1", 4320), ("127.0.0.1", 4317)]);
    let grpc = &ir.upstreams[1];
    assert_eq!(
        (
            grpc.endpoints[0].host.as_str(),
            grpc.endpoints[0].port,
            grpc.http2
        ),
        ("otel.research.svc", 4317, true)
    );
    // The HTTP port cannot be the gRPC one.
    let mut clash: OTLPProxyConfig = parse(&cr);
    clash.spec.port = Some(4317);
    let err = otlp_proxy::render(&clash, &settings())
        .unwrap_err()
        .to_string();
    assert!(err.contains("spec.port 4317"), "{err}");
    // Without a collector there is nothing to forward to: only the ports.
    let mut cr: OTLPProxyConfig = parse(&cr);
    cr.spec.collector_ref = None;
    let v =
        serde_json::to_value(&otlp_proxy::render(&cr, &settings()).unwrap().objects[0]).unwrap();
    assert_eq!(v["data"].as_object().unwrap().len(), 2, "{v}");
}

#[test]
fn the_streamer_mounts_its_storage_config_and_names_its_session() {
    let (_, desired) = render_case("streamer");
    let d = serde_json::to_value(desired.deployment("streamer-5f2c").unwrap()).unwrap();
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"][1]["secret"]["secretName"],
        "reports-credentials"
    );
    let env = &pod["containers"][0]["env"];
    let get = |name: &str| {
        env.as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].clone())
    };
    assert_eq!(
        get("NSIGHT_SESSION_ID"),
        Some("5f2c9a8e-1b7d-4c3e-9f00-0123456789ab".into())
    );
    assert_eq!(
        get("NSIGHT_CLOUD_STORAGE_CONFIG_FILE"),
        Some("/etc/nsight/storage/storage-config.yaml".into())
    );
    assert_eq!(get("NSIGHT_STREAMER_TURN"), Some("1".into()));
    assert_eq!(
        get("NSIGHT_STREAMER_TURN_URLS"),
        Some("turn:stunner.stunner.svc:3478?transport=udp,turns:turn.example.com:443".into())
    );
    assert_eq!(get("WEB_USERNAME"), Some("nvidia".into()));
    // The relay's credentials by reference: the values never enter the Deployment.
    let password = env
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "NSIGHT_STREAMER_TURN_PASSWORD")
        .unwrap();
    assert_eq!(
        password["valueFrom"]["secretKeyRef"],
        serde_json::json!({"name": "turn-credentials", "key": "password", "optional": false})
    );
    let ports = &pod["containers"][0]["ports"];
    assert_eq!(
        ports,
        &serde_json::json!([
            {"name": "http", "containerPort": 8080, "protocol": "TCP"},
            {"name": "webrtc", "containerPort": 47998, "protocol": "UDP"},
            {"name": "webrtc-tcp", "containerPort": 47998, "protocol": "TCP"},
        ])
    );
    let service = desired
        .objects
        .iter()
        .find(|o| o.kind() == ObjectKind::Service)
        .map(|o| serde_json::to_value(o).unwrap())
        .unwrap();
    assert_eq!(
        service["spec"]["ports"][1],
        serde_json::json!({"name": "webrtc", "port": 47998, "protocol": "UDP", "targetPort": "webrtc"})
    );
    assert_eq!(pod["runtimeClassName"], "nvidia");
    assert_eq!(
        pod["containers"][0]["image"],
        "registry.test/nsight/nsight-streamer:1.2.3"
    );
    let cr: NsightStreamer = parse(&docs("streamer")[0]);
    let alone = streamer::render(&cr, None, &settings()).unwrap();
    assert!(!to_yaml(&alone).contains("NSIGHT_CLOUD_STORAGE_CONFIG_FILE"));
    // Media settings that cannot work are the resource's error, naming the field.
    let mut clash = cr.clone();
    clash.spec.media.media_ports[1].port = 8080;
    let err = streamer::render(&clash, None, &settings())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("spec.mediaPorts[1]: 8080 TCP is taken"),
        "{err}"
    );
    let mut reserved = cr;
    reserved.spec.media.env[0].name = "NSIGHT_SESSION_ID".into();
    let err = streamer::render(&reserved, None, &settings())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("spec.env[0].name \"NSIGHT_SESSION_ID\""),
        "{err}"
    );
}

#[test]
fn the_tenant_operator_may_only_manage_streamers_of_its_namespace() {
    let (_, desired) = render_case("tenant-operator");
    let role = desired
        .objects
        .iter()
        .find(|o| o.kind() == ObjectKind::Role)
        .map(|o| serde_json::to_value(o).unwrap())
        .unwrap();
    assert_eq!(role["metadata"]["namespace"], "research");
    let rules = role["rules"].as_array().unwrap();
    for rule in rules {
        assert_eq!(rule["apiGroups"], serde_json::json!(["nvidia.com"]));
        for r in rule["resources"].as_array().unwrap() {
            assert!(r.as_str().unwrap().starts_with("nsightstreamers"), "{rule}");
        }
        assert!(!rule.to_string().contains('*'), "no wildcard: {rule}");
    }
    let binding = desired
        .objects
        .iter()
        .find(|o| o.kind() == ObjectKind::RoleBinding)
        .map(|o| serde_json::to_value(o).unwrap())
        .unwrap();
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(binding["subjects"][0]["name"], "tenant-operator");
    let d = serde_json::to_value(desired.deployment("tenant-operator").unwrap()).unwrap();
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], true);
    assert_eq!(pod["serviceAccountName"], "tenant-operator");
    let args = pod["containers"][0]["args"].to_string();
    assert!(args.contains(r#""--max-active","4""#), "{args}");
    assert!(args.contains(r#""--idle-timeout","45m""#), "{args}");
    // Every launched streamer's media settings, as one JSON argument the binary checks.
    let media = pod["containers"][0]["args"]
        .as_array()
        .unwrap()
        .windows(2)
        .find(|w| w[0] == "--streamer-media")
        .map(|w| serde_json::from_str::<Value>(w[1].as_str().unwrap()).unwrap())
        .expect("--streamer-media");
    assert_eq!(
        media,
        serde_json::json!({"mediaPorts": [{"name": "webrtc", "port": 47998, "protocol": "UDP"}],
                           "turn": {"enabled": true, "urls": ["turn:stunner.stunner.svc:3478"],
                                    "credentialsSecret": "turn-credentials"}})
    );
    let cr: NsightTenantOperator = parse(&docs("tenant-operator")[0]);
    let mut defaulted = cr.clone();
    defaulted.spec.streamer_launch = None;
    let d = tenant_operator::render(&defaulted, &settings()).unwrap();
    assert!(to_yaml(&d).contains("- '10'"), "default maxActive 10");
    assert!(
        !to_yaml(&d).contains("--idle-timeout"),
        "the binary's default idle time"
    );
}

fn init_args(desired: &Desired) -> Value {
    let v = serde_json::to_value(&desired.objects[0]).unwrap();
    assert_eq!(v["kind"], "DaemonSet");
    let init = &v["spec"]["template"]["spec"]["initContainers"][0];
    assert_eq!(init["securityContext"]["privileged"], true);
    let pause = &v["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(pause["securityContext"]["runAsNonRoot"], true);
    init["args"][0].clone()
}

#[test]
fn machine_config_default_writes_2_set_writes_its_value_null_writes_nothing() {
    let desired = render_machine("machine-config-default");
    let script = init_args(&desired);
    assert!(
        script
            .as_str()
            .unwrap()
            .starts_with("echo 2 > /proc/sys/kernel/perf_event_paranoid"),
        "{script}"
    );
    // One cluster-wide object: a fixed name in the operator's namespace, no owner (no custom
    // resource owns it), the common labels, a selector its Pod template matches.
    let v = serde_json::to_value(&desired.objects[0]).unwrap();
    assert_eq!(desired.objects.len(), 1);
    assert_eq!(v["metadata"]["name"], perf_event::DAEMON_SET_NAME);
    assert_eq!(v["metadata"]["namespace"], "nsight-operator");
    assert!(v["metadata"]["ownerReferences"].is_null(), "{v}");
    let labels = &v["metadata"]["labels"];
    assert_eq!(labels[LABEL_MANAGED_BY], "nsight-operator");
    assert_eq!(labels[LABEL_OWNER_KIND], perf_event::OWNER_KIND);
    for (selector, template) in workloads(&desired) {
        for (k, val) in selector.as_object().unwrap() {
            assert_eq!(&template["metadata"]["labels"][k], val, "selector {k}");
        }
    }
    let desired = render_machine("machine-config-gpu");
    let script = init_args(&desired);
    assert!(
        script.as_str().unwrap().starts_with("echo 1 > "),
        "{script}"
    );
    let v = serde_json::to_value(&desired.objects[0]).unwrap();
    assert_eq!(v["metadata"]["namespace"], "gpu-operators");
    let pod = &v["spec"]["template"]["spec"];
    assert_eq!(pod["nodeSelector"]["nvidia.com/gpu.present"], "true");
    assert_eq!(pod["tolerations"][0]["key"], "nvidia.com/gpu");
    assert_eq!(
        pod["initContainers"][0]["image"],
        "registry.test/library/busybox:1.37.0"
    );
    assert!(render_machine("machine-config-null").objects.is_empty());
    assert_eq!(machine_case("machine-config-null").0, None);
}

#[test]
fn the_machine_config_flag_parses_defaults_null_and_refuses_bad_values() {
    assert_eq!(
        MachineConfig::parse_setting(r#"{"perfEventParanoid":2}"#),
        Ok(Some(MachineConfig::default()))
    );
    assert_eq!(
        MachineConfig::parse_setting("{}")
            .unwrap()
            .unwrap()
            .perf_event_paranoid,
        2
    );
    assert_eq!(MachineConfig::parse_setting("null"), Ok(None));
    let out_of_range = MachineConfig::parse_setting(r#"{"perfEventParanoid":7}"#).unwrap_err();
    assert!(out_of_range.contains("out of range"), "{out_of_range}");
    let typo = MachineConfig::parse_setting(r#"{"perfEventParanoia":1}"#).unwrap_err();
    assert!(typo.contains("unknown field"), "{typo}");
    let not_json = MachineConfig::parse_setting("2").unwrap_err();
    assert!(not_json.contains("must be JSON"), "{not_json}");
}
