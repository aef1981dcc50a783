//! A kube-rs client for the test's API server (`nsight_e2e::kube::Kube`), shared by the operator
//! tests with `#[path = "support/kube_client.rs"] mod kube_client;`.

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
