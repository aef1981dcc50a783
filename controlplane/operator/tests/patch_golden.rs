//! Golden test of the injection patch: a real AdmissionReview (two containers, an existing
//! LD_PRELOAD, existing volumes) -> the decoded JSON patch in `tests/data/*.patch.json`.
//! `NSIGHT_UPDATE_GOLDEN=1 cargo test -p nsight-operator --test patch_golden` rewrites it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::path::PathBuf;

use base64::Engine;
use nsight_operator::{admission::StaticWorld, settings::Settings};
use serde_json::Value;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn settings() -> Settings {
    Settings {
        agent_image: "registry.local/nsight-agent:test".into(),
        coordinator_url: Some("https://nsight-coordinator.research.svc:8443".into()),
        tag: "training".into(),
        ..Settings::default()
    }
}

fn decoded_patch(answer: &Value) -> Value {
    let b64 = answer["response"]["patch"].as_str().expect("a patch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[test]
fn labelled_pod_patch_matches_golden() {
    let body = std::fs::read(data("review-labelled.json")).unwrap();
    let answer =
        nsight_operator::admission::review(&body, &StaticWorld::default(), &settings()).unwrap();
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(
        answer["response"]["uid"],
        "8c1a2b3d-0000-4000-8000-000000000001"
    );
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(answer["response"]["patchType"], "JSONPatch");
    let patch = decoded_patch(&answer);
    let golden = data("review-labelled.patch.json");
    let pretty = serde_json::to_string_pretty(&patch).unwrap() + "\n";
    if std::env::var_os("NSIGHT_UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &pretty).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_default();
    assert_eq!(
        pretty,
        want,
        "patch differs from {}; review and rerun with NSIGHT_UPDATE_GOLDEN=1",
        golden.display()
    );
}

#[test]
fn patch_sets_the_env_the_hook_and_agent_read() {
    let body = std::fs::read(data("review-labelled.json")).unwrap();
    let answer =
        nsight_operator::admission::review(&body, &StaticWorld::default(), &settings()).unwrap();
    let patch = decoded_patch(&answer);
    let ops = patch.as_array().unwrap();
    // The existing LD_PRELOAD keeps its library after the hook.
    assert!(ops.iter().any(|op| op["op"] == "replace"
        && op["path"] == "/spec/containers/0/env/0/value"
        && op["value"] == "/nsight-tools/libnsight_hook.so:/usr/lib/libjemalloc.so"));
    // The sidecar had no env: it gets the whole list, LD_PRELOAD first.
    let sidecar_env = ops
        .iter()
        .find(|op| op["path"] == "/spec/containers/1/env")
        .unwrap()["value"]
        .as_array()
        .unwrap()
        .clone();
    let names: Vec<&str> = sidecar_env
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for name in [
        "LD_PRELOAD",
        "NSIGHT_AGENT_BIN",
        "NSIGHT_INJECT_INCLUDE",
        "NSIGHT_AGENT_MODE",
        "NSIGHT_COORDINATOR_URL",
        "NSIGHT_TAG",
        "NSIGHT_POD_NAME",
        "NSIGHT_NAMESPACE",
        "NODE_NAME",
        "NSIGHT_CONTAINER_NAME",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let pod_name = sidecar_env
        .iter()
        .find(|e| e["name"] == "NSIGHT_POD_NAME")
        .unwrap();
    assert_eq!(
        pod_name["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    let tag = sidecar_env
        .iter()
        .find(|e| e["name"] == "NSIGHT_TAG")
        .unwrap();
    assert_eq!(tag["value"], "training");
}

#[test]
fn an_injected_pod_is_not_patched_again() {
    let body = std::fs::read(data("review-labelled.json")).unwrap();
    let mut review: Value = serde_json::from_slice(&body).unwrap();
    review["request"]["object"]["metadata"]["annotations"] =
        serde_json::json!({"nvidia.com/nsight-injected": "default"});
    let answer = nsight_operator::admission::review(
        &serde_json::to_vec(&review).unwrap(),
        &StaticWorld::default(),
        &settings(),
    )
    .unwrap();
    assert_eq!(answer["response"]["allowed"], true);
    assert!(answer["response"].get("patch").is_none(), "{answer}");
}
