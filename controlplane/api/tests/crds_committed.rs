//! The CRDs committed in `charts/nsight-operator/crds/` are exactly what the types generate,
//! and the generated CRDs carry what the API server needs (status subresource, printer
//! columns, the OAuth2-needs-TLS CEL rule).
#![allow(clippy::unwrap_used, reason = "tests")]

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
};

use nsight_api::crds;

fn chart_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(crds::CHART_CRDS_DIR)
}

#[test]
fn committed_crds_are_up_to_date() {
    let want: BTreeMap<String, String> = crds::files().unwrap().into_iter().collect();
    let dir = chart_dir();
    let mut have = BTreeMap::new();
    for entry in std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}; run `cargo xtask codegen`", dir.display()))
    {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            have.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
    let stale: BTreeSet<&String> = want
        .keys()
        .chain(have.keys())
        .filter(|k| want.get(*k) != have.get(*k))
        .collect();
    assert!(
        stale.is_empty(),
        "stale or extra CRD files in {}: {stale:?}; run `cargo xtask codegen`",
        dir.display()
    );
}

#[test]
fn every_crd_has_status_subresource_and_ready_column() {
    let all = crds::all();
    assert_eq!(all.len(), 10);
    for crd in all {
        assert_eq!(crd.spec.group, "nvidia.com");
        let name = crd.metadata.name.clone().unwrap();
        for version in &crd.spec.versions {
            let sub = version.subresources.as_ref().unwrap();
            assert!(sub.status.is_some(), "{name}: no status subresource");
            let columns = version.additional_printer_columns.as_ref().unwrap();
            assert!(columns.iter().any(|c| c.name == "Age"), "{name}");
            let schema = serde_json::to_value(&version.schema).unwrap();
            let status = &schema["openAPIV3Schema"]["properties"]["status"]["properties"];
            assert!(status["conditions"].is_object(), "{name}: no conditions");
            assert!(status["observedGeneration"].is_object(), "{name}");
        }
    }
}

#[test]
fn versions_match_the_documented_api() {
    let versions: BTreeMap<String, String> = crds::all()
        .into_iter()
        .map(|c| (c.spec.names.kind.clone(), c.spec.versions[0].name.clone()))
        .collect();
    assert_eq!(versions["NsightOperatorProfileConfig"], "v1");
    for kind in [
        "NsightGateway",
        "NsightCoordinator",
        "NsightCloudStorageConfig",
        "OTLPProxyConfig",
    ] {
        assert_eq!(versions[kind], "v1alpha1", "{kind}");
    }
}

#[test]
fn gateway_rejects_oauth2_without_tls_by_cel() {
    let gateway = crds::all()
        .into_iter()
        .find(|c| c.spec.names.kind == "NsightGateway")
        .unwrap();
    let schema = serde_json::to_value(&gateway.spec.versions[0].schema).unwrap();
    let rules = &schema["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"];
    let rule = rules[0]["rule"].as_str().unwrap();
    assert!(
        rule.contains("oauth2") && rule.contains("tlsSecretRef"),
        "{rule}"
    );
    assert!(rules[0]["message"].as_str().unwrap().contains("TLS"));
}
