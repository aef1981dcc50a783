//! `kubectl port-forward` in kube-rs: a loopback listener whose every connection is carried to
//! a port of a Pod through the API server (`pods/portforward`, WebSocket). What a user on a
//! laptop does to reach a ClusterIP Service such as the gateway's; the node tests use it so the
//! CLI talks to the gateway exactly as such a user's would.
//!
//! ```text
//!  CLI ──tcp──> 127.0.0.1:<local> ──kube-rs portforward──> API server ──> Pod:<port>
//! ```
//!
//! Shared with `#[path = "support/port_forward.rs"] mod port_forward;`.

// Each test uses part of this module.
#![allow(dead_code)]

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Client};
use tokio::{io::copy_bidirectional, net::TcpListener, runtime::Runtime};

/// A forward that lives as long as the runtime it was started on.
pub struct Forward {
    pub local: SocketAddr,
}

/// A kube-rs client from a kubeconfig file.
pub fn client(rt: &Runtime, kubeconfig: &std::path::Path) -> Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    rt.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("kubeconfig");
        Client::try_from(config).expect("client")
    })
}

/// A loopback listener on an ephemeral port, bound before the Pod exists (its address can go
/// into configuration the Pod is created with).
pub fn bind_local() -> std::net::TcpListener {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind a loopback port");
    l.set_nonblocking(true).expect("non-blocking listener");
    l
}

/// Forwards each connection `listener` accepts to `port` of the Pod `namespace/pod`.
pub fn start(
    rt: &Runtime,
    client: Client,
    namespace: &str,
    pod: &str,
    port: u16,
    listener: std::net::TcpListener,
) -> Forward {
    let local = listener.local_addr().expect("local address");
    let listener = {
        let _entered = rt.enter();
        TcpListener::from_std(listener).expect("a tokio listener")
    };
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    let pod = pod.to_owned();
    rt.spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let pods = pods.clone();
            let pod = pod.clone();
            tokio::spawn(async move {
                let mut forwarder = match pods.portforward(&pod, &[port]).await {
                    Ok(f) => f,
                    Err(e) => {
                        eprintln!("port-forward to {pod}:{port}: {e}");
                        return;
                    }
                };
                let Some(mut upstream) = forwarder.take_stream(port) else {
                    return;
                };
                if let Err(e) = copy_bidirectional(&mut socket, &mut upstream).await {
                    eprintln!("port-forward to {pod}:{port} ended: {e}");
                }
                drop(upstream);
                let _ = forwarder.join().await;
            });
        }
    });
    Forward { local }
}
