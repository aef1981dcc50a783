//! Two operator lifecycles against a real kube-apiserver + etcd (no kubelet: a StatefulSet's
//! readiness is written to its status subresource by the test, as the StatefulSet controller
//! would):
//!
//! - a managed NsightCloudStorageConfig's bucket: `BucketReady=False ServerNotReady` until the
//!   StatefulSet is ready, then the manager creates the bucket on a real S3 server (s3s-fs,
//!   reached through `managed_storage_endpoint`, with the credentials of the generated
//!   Secret) and says `BucketReady=True`; a bucket lost with the server's volume comes back
//!   when the new Pod is ready; asking again when it exists is fine (idempotent).
//! - a deleted NsightGateway's xDS snapshot is removed from the manager's ADS server (no
//!   finalizer), another gateway's stays, and a gateway created again under the same name
//!   starts over.
//!
//! Needs `cargo xtask setup kube` and `cargo xtask setup s3`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::{sync::Arc, time::Duration};

use nsight_e2e::{
    kube::Kube,
    s3::{S3Server, ACCESS_KEY, SECRET_KEY},
    wait_for, TempDir,
};
use nsight_gateway::{cache::node_id, server::XdsServer};
use nsight_operator::{
    manager::{self, Health},
    render::RenderSettings,
    xds::translate::XdsSettings,
};
use serde_json::{json, Value};

#[path = "support/kube_client.rs"]
mod kube_client;
use kube_client::client;

const NS: &str = "research";
const WAIT: Duration = Duration::from_secs(40);

fn cluster() -> Kube {
    let kube = Kube::start();
    kube.install_crds(
        nsight_api::crds::all()
            .iter()
            .map(|crd| serde_json::to_value(crd).unwrap()),
    );
    kube.create(
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    );
    kube
}

fn condition(cr: &Value, type_: &str) -> Option<Value> {
    cr["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

/// Waits for the `BucketReady` condition with `reason`; the condition.
fn wait_bucket(kube: &Kube, path: &str, reason: &str) -> Value {
    let mut last = None;
    wait_for(WAIT, || {
        let cr = kube.get(path)?;
        let c = condition(&cr, "BucketReady");
        last.clone_from(&c);
        c.filter(|c| c["reason"] == reason)
    })
    .unwrap_or_else(|| panic!("BucketReady never became {reason}; last: {last:?}"))
}

fn set_ready_replicas(kube: &Kube, n: i32) {
    kube.merge_patch(
        &format!("/apis/apps/v1/namespaces/{NS}/statefulsets/reports/status"),
        &json!({"status": {"replicas": 1, "readyReplicas": n, "availableReplicas": n}}),
    );
}

#[test]
fn the_managed_servers_bucket_is_created_once_it_is_ready() {
    let kube = cluster();
    let tmp = TempDir::new("nsight-bucket");
    let s3 = S3Server::start(&tmp.path().join("s3"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let config = manager::Config {
        settings: RenderSettings {
            managed_storage_endpoint: Some(s3.endpoint()),
            ..RenderSettings::default()
        },
        namespace: Some(NS.into()),
    };
    rt.spawn(manager::run(
        client(&rt, &kube),
        config,
        Health::default(),
        None,
    ));
    // The server's credentials as the operator would generate them, but the keys s3s-fs
    // accepts (an existing credentials Secret is never overwritten).
    let storage_config = format!(
        "storage_type: s3\nbucket_name: nsight-reports\naws_access_key_id: {ACCESS_KEY}\n\
         aws_secret_access_key: {SECRET_KEY}\nregion_name: us-east-1\n\
         endpoint_url: http://reports.{NS}.svc:9000\n"
    );
    kube.create(
        &format!("/api/v1/namespaces/{NS}/secrets"),
        &json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "reports-credentials"},
                "stringData": {"rootUser": ACCESS_KEY, "rootPassword": SECRET_KEY,
                               "storage-config.yaml": storage_config}}),
    );
    let path = format!("/apis/nvidia.com/v1alpha1/namespaces/{NS}/nsightcloudstorageconfigs");
    kube.create(
        &path,
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightCloudStorageConfig",
                "metadata": {"name": "reports"}, "spec": {}}),
    );
    let cr_path = format!("{path}/reports");
    let bucket_dir = tmp.path().join("s3").join("nsight-reports");

    let c = wait_bucket(&kube, &cr_path, "ServerNotReady");
    assert_eq!(c["status"], "False");
    assert!(!bucket_dir.exists(), "no bucket before the server is ready");

    // The StatefulSet becomes ready: the bucket is created.
    wait_for(WAIT, || {
        kube.get(&format!(
            "/apis/apps/v1/namespaces/{NS}/statefulsets/reports"
        ))
    })
    .expect("no StatefulSet");
    set_ready_replicas(&kube, 1);
    let c = wait_bucket(&kube, &cr_path, "BucketExists");
    assert_eq!(c["status"], "True");
    assert!(
        c["message"].as_str().unwrap().contains(&s3.endpoint()),
        "{c}"
    );
    assert!(bucket_dir.is_dir(), "s3s-fs has no bucket directory");
    std::fs::write(bucket_dir.join("keep.txt"), b"a report").unwrap();

    // Asked again while it exists (a spec change reconciles): still True, contents kept.
    kube.merge_patch(
        &cr_path,
        &json!({"spec": {"minio": {"image": "registry.local/minio:v2"}}}),
    );
    wait_for(WAIT, || {
        let cr = kube.get(&cr_path)?;
        (cr["status"]["observedGeneration"] == 2).then_some(())
    })
    .expect("generation 2 not reconciled");
    let cr = kube.get(&cr_path).unwrap();
    assert_eq!(condition(&cr, "BucketReady").unwrap()["status"], "True");
    assert!(
        bucket_dir.join("keep.txt").exists(),
        "the bucket was replaced"
    );

    // The Pod restarts with an empty volume: not ready, then ready without the bucket.
    std::fs::remove_dir_all(&bucket_dir).unwrap();
    set_ready_replicas(&kube, 0);
    wait_bucket(&kube, &cr_path, "ServerNotReady");
    set_ready_replicas(&kube, 1);
    wait_bucket(&kube, &cr_path, "BucketExists");
    assert!(bucket_dir.is_dir(), "the lost bucket was not created again");

    // A server that refuses the credentials: a clear condition, retried.
    drop(s3);
    set_ready_replicas(&kube, 0);
    wait_bucket(&kube, &cr_path, "ServerNotReady");
    set_ready_replicas(&kube, 1);
    let c = wait_bucket(&kube, &cr_path, "CreateBucketFailed");
    assert_eq!(c["status"], "False");
    assert!(
        c["message"].as_str().unwrap().contains("nsight-reports"),
        "{c}"
    );
    drop(rt);
}

#[test]
fn a_deleted_gateways_snapshot_is_removed() {
    let kube = cluster();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let xds = Arc::new(
        rt.block_on(XdsServer::serve(([127, 0, 0, 1], 0).into()))
            .unwrap(),
    );
    let config = manager::Config {
        settings: RenderSettings::default(),
        namespace: Some(NS.into()),
    };
    rt.spawn(manager::run_with_xds(
        client(&rt, &kube),
        config,
        Health::default(),
        None,
        Some((xds.clone(), XdsSettings::default())),
    ));
    // An upstream for the gateways' routes.
    kube.create(
        &format!("/api/v1/namespaces/{NS}/services"),
        &json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "coord", "labels": {
                    "app.kubernetes.io/managed-by": "nsight-operator",
                    "app.kubernetes.io/component": "coordinator"}},
                "spec": {"type": "ExternalName", "externalName": "localhost",
                         "ports": [{"name": "http", "port": 8080}]}}),
    );
    let gateways = format!("/apis/nvidia.com/v1alpha1/namespaces/{NS}/nsightgateways");
    for name in ["gone", "kept"] {
        kube.create(
            &gateways,
            &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightGateway",
                    "metadata": {"name": name}, "spec": {}}),
        );
    }
    let (gone, kept) = (node_id::gateway(NS, "gone"), node_id::gateway(NS, "kept"));
    wait_for(WAIT, || {
        (xds.snapshot(&gone).is_some() && xds.snapshot(&kept).is_some()).then_some(())
    })
    .expect("the gateways were not published");
    let (status, _) = kube.request("DELETE", &format!("{gateways}/gone"), None);
    assert!(status < 300, "DELETE answered {status}");
    wait_for(WAIT, || xds.snapshot(&gone).is_none().then_some(()))
        .expect("the deleted gateway's snapshot is still served");
    assert!(!xds.nodes().contains(&gone), "{:?}", xds.nodes());
    assert!(xds.node_status(&gone).is_none());
    assert!(
        xds.snapshot(&kept).is_some(),
        "the other gateway lost its snapshot"
    );
    // Stays removed (the sweep is periodic; nothing brings it back).
    std::thread::sleep(Duration::from_secs(3));
    assert!(xds.snapshot(&gone).is_none());

    // The same name again: published anew, from version 1.
    kube.create(
        &gateways,
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightGateway",
                "metadata": {"name": "gone"}, "spec": {}}),
    );
    let snapshot = wait_for(WAIT, || xds.snapshot(&gone)).expect("not published again");
    assert_eq!(snapshot.version(), 1);
    drop(rt);
}
