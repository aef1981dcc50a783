//! A launched streamer through the operator, against a real kube-apiserver + etcd: the tenant
//! API (as the tenant operator's ServiceAccount) creates the NsightStreamer, the operator's
//! manager renders its Deployment and Service; once the Deployment is available (no kubelet
//! here: the test writes the Deployment's status as the controller-manager would) the streamer
//! is Ready with `status.url`, and the tenant API serves it as `ready` with that URL. When the
//! Deployment is no longer available the URL goes. The CRD refuses an idle time the tenant
//! binary would not parse.
//!
//! Needs `cargo xtask setup kube` (`eval "$(cargo xtask env)"`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::time::Duration;

use nsight_api::NsightTenantOperator;
use nsight_e2e::{kube::Kube, wait_for};
use nsight_operator::{
    manager::{self, Health},
    render::{tenant_operator, Object, RenderSettings},
};
use nsight_tenant::{core::StreamerTemplate, Config};
use serde_json::{json, Value};

const NS: &str = "research";
const SESSION: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";
const WAIT: Duration = Duration::from_secs(30);

fn client(rt: &tokio::runtime::Runtime, kube: &Kube, impersonate: Option<&str>) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(kube.kubeconfig()).unwrap();
    rt.block_on(async {
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        config.auth_info.impersonate = impersonate.map(Into::into);
        kube::Client::try_from(config).unwrap()
    })
}

#[test]
fn a_launched_streamer_becomes_ready_with_its_url() {
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
    // The tenant operator's RBAC as rendered (no NsightTenantOperator: the manager would
    // otherwise run its Deployment, which is not what this test is about).
    let mut cr = NsightTenantOperator::new("tenant", Default::default());
    cr.metadata.namespace = Some(NS.into());
    cr.metadata.uid = Some("6f1d2c3b-0000-4000-8000-000000000001".into());
    for object in tenant_operator::render(&cr, &RenderSettings::default())
        .unwrap()
        .objects
    {
        let mut doc = match object {
            Object::ServiceAccount(o) => serde_json::to_value(o).unwrap(),
            Object::Role(o) => serde_json::to_value(o).unwrap(),
            Object::RoleBinding(o) => serde_json::to_value(o).unwrap(),
            _ => continue,
        };
        doc["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
        kube.create(&kube.collection(&doc), &doc);
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let config = manager::Config {
        settings: RenderSettings {
            image_repository: "registry.local/nsight".into(),
            image_tag: "e2e".into(),
            ..RenderSettings::default()
        },
        namespace: Some(NS.into()),
    };
    rt.spawn(manager::run(
        client(&rt, &kube, None),
        config,
        Health::default(),
        None,
    ));
    let as_tenant = client(
        &rt,
        &kube,
        Some(&format!("system:serviceaccount:{NS}:tenant")),
    );
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let base = format!("http://{}/tenant/v1", listener.local_addr().unwrap());
    rt.spawn(async move {
        nsight_tenant::run(
            listener,
            as_tenant,
            NS,
            Config {
                max_active: 10,
                idle: Duration::from_secs(3600),
                template: StreamerTemplate::default(),
                gateway_token: None,
            },
        )
        .await
    });

    let http = reqwest::blocking::Client::new();
    let get = |name: &str| -> Value {
        let resp = http
            .get(format!("{base}/streamers/{name}"))
            .header("x-nsight-auth-identity", "alice")
            .send()
            .unwrap();
        assert_eq!(resp.status(), 200);
        resp.json().unwrap()
    };
    let launched: Value = wait_for(Duration::from_secs(10), || {
        http.post(format!("{base}/streamers"))
            .header("x-nsight-auth-identity", "alice")
            .json(&json!({"sessionId": SESSION}))
            .send()
            .ok()
            .filter(|r| r.status() == 201)
            .and_then(|r| r.json().ok())
    })
    .expect("the launch did not succeed");
    let name = launched["name"].as_str().unwrap().to_owned();
    assert_eq!(launched["phase"], "pending");
    assert!(launched.get("url").is_none(), "{launched}");

    // The operator renders the streamer's Deployment and Service.
    let deployment = format!("/apis/apps/v1/namespaces/{NS}/deployments/{name}");
    let d = wait_for(WAIT, || kube.get(&deployment)).expect("no streamer Deployment");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.local/nsight/nsight-streamer:e2e"
    );
    assert!(wait_for(WAIT, || kube
        .get(&format!("/api/v1/namespaces/{NS}/services/{name}")))
    .is_some());
    assert_eq!(get(&name)["phase"], "pending");

    // Available (as the Deployment controller would report it) -> Ready with the URL.
    kube.merge_patch(
        &format!("{deployment}/status"),
        &json!({"status": {"replicas": 1, "readyReplicas": 1, "availableReplicas": 1,
                           "updatedReplicas": 1, "observedGeneration": d["metadata"]["generation"]}}),
    );
    let url = format!("http://{name}.{NS}.svc:8080/");
    let streamer = format!("/apis/nvidia.com/v1alpha1/namespaces/{NS}/nsightstreamers/{name}");
    let cr = wait_for(WAIT, || {
        let cr = kube.get(&streamer)?;
        (cr["status"]["url"] == url.as_str()).then_some(cr)
    })
    .unwrap_or_else(|| panic!("no status.url: {:?}", kube.get(&streamer)));
    let ready = cr["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap();
    assert_eq!(ready["status"], "True", "{cr}");
    let view = get(&name);
    assert_eq!(
        (view["phase"].as_str(), view["url"].as_str()),
        (Some("ready"), Some(url.as_str())),
        "{view}"
    );

    // No longer available -> not Ready, no URL.
    kube.merge_patch(
        &format!("{deployment}/status"),
        &json!({"status": {"readyReplicas": 0, "availableReplicas": 0}}),
    );
    wait_for(WAIT, || {
        let cr = kube.get(&streamer)?;
        cr["status"].get("url").is_none().then_some(())
    })
    .unwrap_or_else(|| panic!("the URL stayed: {:?}", kube.get(&streamer)));
    let view = get(&name);
    assert_eq!(view["phase"], "pending", "{view}");
    assert!(view.get("url").is_none(), "{view}");

    // The API server refuses an idle time the tenant binary would not parse.
    for idle in ["0s", "30", "1d", "1.5h", "-1m"] {
        let (status, out) = kube.request(
            "POST",
            &format!("/apis/nvidia.com/v1alpha1/namespaces/{NS}/nsighttenantoperators"),
            Some(
                &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightTenantOperator",
                         "metadata": {"name": "idle"},
                         "spec": {"streamerLaunch": {"idleTimeout": idle}}}),
            ),
        );
        assert_eq!(status, 422, "{idle}: {out}");
    }
}
