//! The HTTPS shell: a real rustls server on loopback with an rcgen certificate; real
//! AdmissionReview JSON posted to /mutate, /healthz, and a malformed body answered with 400.
#![allow(clippy::unwrap_used, reason = "tests")]

use std::sync::Arc;

use nsight_operator::{
    admission::StaticWorld,
    server::{self, Webhook},
    settings::Settings,
};

struct Served {
    url: String,
    ca_pem: String,
    _dir: tempdir::Dir,
}

mod tempdir {
    /// A temp directory removed on drop.
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

async fn start() -> Served {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let dir = std::env::temp_dir().join(format!("nsight-webhook-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let tls = server::tls_config(&cert_path, &key_path).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let webhook = Webhook {
        world: Arc::new(StaticWorld::default()),
        settings: Arc::new(Settings::default()),
    };
    tokio::spawn(server::serve(
        listener,
        Arc::new(tls),
        server::router(webhook),
    ));
    Served {
        url: format!("https://localhost:{port}"),
        ca_pem: cert.pem(),
        _dir: tempdir::Dir(dir),
    }
}

fn client(ca_pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .build()
        .unwrap()
}

#[tokio::test]
async fn mutate_and_healthz_over_tls() {
    let served = start().await;
    let http = client(&served.ca_pem);
    let health = http
        .get(format!("{}/healthz", served.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.unwrap(), "ok");

    let body = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/review-labelled.json"),
    )
    .unwrap();
    let resp = http
        .post(format!("{}/mutate", served.url))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let answer: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["response"]["allowed"], true);
    assert_eq!(answer["response"]["patchType"], "JSONPatch");

    let resp = http
        .post(format!("{}/mutate", served.url))
        .body("{\"truncated\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert!(resp
        .text()
        .await
        .unwrap()
        .contains("not an admission.k8s.io/v1 AdmissionReview"));
}

/// A client trusting every certificate of a PEM bundle, with no pooled connection.
fn trusting(bundle: &str) -> reqwest::Client {
    let mut builder = reqwest::Client::builder().pool_max_idle_per_host(0);
    for cert in reqwest::Certificate::from_pem_bundle(bundle.as_bytes()).unwrap() {
        builder = builder.add_root_certificate(cert);
    }
    builder.build().unwrap()
}

async fn healthy(client: &reqwest::Client, url: &str) -> bool {
    client
        .get(format!("{url}/healthz"))
        .send()
        .await
        .is_ok_and(|r| r.status() == 200)
}

/// The webhook's own certificate is renewed under a new CA while it serves: the next handshake
/// gets the new certificate, which a client trusting the bundle (new + old CA) accepts, and one
/// trusting only the old CA refuses; during the overlap the bundle also accepts the old one.
#[tokio::test]
async fn a_renewed_certificate_is_served_without_a_restart() {
    use nsight_operator::certs::{
        self,
        rotation::{self, Reason},
        CA_KEY, SERVER_CERT_KEY, SERVER_KEY_KEY,
    };
    let wanted = certs::serving_wanted("webhook", vec!["localhost".into()]);
    let now = certs::now();
    let first = certs::issue(&wanted, now).unwrap();
    let renewed = rotation::renew(
        &first,
        &wanted,
        &[Reason::CaExpiring { days_left: 300 }],
        now,
    )
    .unwrap();
    assert_ne!(renewed[CA_KEY], first[CA_KEY]);

    let (tls, swappable) =
        server::tls_config_swappable(&first[SERVER_CERT_KEY], &first[SERVER_KEY_KEY]).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://localhost:{}",
        listener.local_addr().unwrap().port()
    );
    let webhook = Webhook {
        world: Arc::new(StaticWorld::default()),
        settings: Arc::new(Settings::default()),
    };
    tokio::spawn(server::serve(
        listener,
        Arc::new(tls),
        server::router(webhook),
    ));

    let old_trust = trusting(&first[CA_KEY]);
    let bundle_trust = trusting(&renewed[CA_KEY]);
    assert!(healthy(&old_trust, &url).await);
    assert!(
        healthy(&bundle_trust, &url).await,
        "the bundle trusts the old CA"
    );

    swappable
        .set(&renewed[SERVER_CERT_KEY], &renewed[SERVER_KEY_KEY])
        .unwrap();
    // New clients: one that connected before may resume its TLS session, and no certificate
    // is presented then.
    assert!(healthy(&trusting(&renewed[CA_KEY]), &url).await);
    assert!(
        !healthy(&trusting(&first[CA_KEY]), &url).await,
        "still the old certificate"
    );

    // A certificate that does not match its key is refused; the current one stays.
    assert!(swappable
        .set(&first[SERVER_CERT_KEY], &renewed[SERVER_KEY_KEY])
        .is_err());
    assert!(healthy(&trusting(&renewed[CA_KEY]), &url).await);
}
