//! The operator tests' start-up against the test's API server (`nsight_e2e::kube::Kube`): a
//! kube-rs client and a cluster with the CRDs installed, shared with
//! `#[path = "support/kube_client.rs"] mod kube_client;`.

// Each test uses part of this module.
#![allow(dead_code)]

use nsight_e2e::kube::Kube;

/// A client authenticated by the test cluster's kubeconfig.
pub fn client(rt: &tokio::runtime::Runtime, kube: &Kube) -> ::kube::Client {
    let kubeconfig = ::kube::config::Kubeconfig::read_from(kube.kubeconfig()).unwrap();
    rt.block_on(async {
        let config = ::kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        ::kube::Client::try_from(config).unwrap()
    })
}

/// A fresh API server with every CRD of `nsight-api` installed, and a two-worker runtime for the
/// kube-rs side of the test.
pub fn cluster_with_crds() -> (Kube, tokio::runtime::Runtime) {
    let kube = Kube::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    kube.install_crds(
        nsight_api::crds::all()
            .iter()
            .map(|crd| serde_json::to_value(crd).unwrap()),
    );
    (kube, rt)
}
