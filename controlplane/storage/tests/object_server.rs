//! The signed-URL object server over a real local directory store, fetched with a plain HTTP
//! client: whole and ranged GETs, HEAD, and refusals for unsigned, altered and expired URLs and
//! for keys the store refuses.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::{sync::Arc, time::Duration};

use nsight_e2e::{http, TempDir};
use nsight_storage::{object_server, signed_url::UrlSigner, LocalStore, ReportStore, Store};

async fn serve(dir: &std::path::Path) -> (std::net::SocketAddr, Arc<Store>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let signer = Arc::new(UrlSigner::new(&format!("http://{addr}"), [3; 32]));
    let store = Arc::new(Store::Local(
        LocalStore::open(dir)
            .unwrap()
            .with_url_signer(signer.clone()),
    ));
    let app = object_server::router(store.clone(), signer);
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, store)
}

fn path_of(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    rest[rest.find('/').unwrap()..].to_owned()
}

async fn blocking_get(
    addr: std::net::SocketAddr,
    path: String,
    headers: Vec<(&'static str, &'static str)>,
) -> http::Response {
    tokio::task::spawn_blocking(move || http::get(addr, &path, &headers).unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_urls_serve_whole_and_ranged_objects() {
    let dir = TempDir::new("object-server");
    let (addr, store) = serve(dir.path()).await;
    let key = "default/s1/1/python_default_pod_1.sqlite";
    store.put_bytes(key, b"0123456789").await.unwrap();
    let url = store
        .presign_get(key, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(url.starts_with(&format!("http://{addr}/storage/v1/objects/{key}?")));

    let whole = blocking_get(addr, path_of(&url), vec![]).await;
    assert_eq!((whole.status, whole.body.as_str()), (200, "0123456789"));
    assert_eq!(whole.header("accept-ranges"), Some("bytes"));

    let tail = blocking_get(addr, path_of(&url), vec![("Range", "bytes=4-")]).await;
    assert_eq!((tail.status, tail.body.as_str()), (206, "456789"));
    assert_eq!(tail.header("content-range"), Some("bytes 4-9/10"));

    let past = blocking_get(addr, path_of(&url), vec![("Range", "bytes=10-")]).await;
    assert_eq!(past.status, 416);
    assert_eq!(past.header("content-range"), Some("bytes */10"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_altered_and_missing_are_refused_with_reasons() {
    let dir = TempDir::new("object-server-refusals");
    let (addr, store) = serve(dir.path()).await;
    let key = "default/s1/1/a_default_p_1.sqlite";
    store.put_bytes(key, b"secret bytes").await.unwrap();
    store
        .put_bytes("default/s1/1/b_default_p_1.sqlite", b"other")
        .await
        .unwrap();
    let url = store
        .presign_get(key, Duration::from_secs(60))
        .await
        .unwrap();

    let unsigned = blocking_get(addr, format!("/storage/v1/objects/{key}"), vec![]).await;
    assert_eq!(unsigned.status, 401);
    assert!(
        unsigned.body.contains("ask the coordinator"),
        "{}",
        unsigned.body
    );

    // The same signature on another key.
    let swapped = path_of(&url).replace("/a_default_p_1", "/b_default_p_1");
    let altered = blocking_get(addr, swapped, vec![]).await;
    assert_eq!(altered.status, 403);
    assert!(altered.body.contains("does not match"), "{}", altered.body);

    let gone = store
        .presign_get("default/s1/1/none.sqlite", Duration::from_secs(60))
        .await
        .unwrap();
    let missing = blocking_get(addr, path_of(&gone), vec![]).await;
    assert_eq!(missing.status, 404);

    let expired = store.presign_get(key, Duration::ZERO).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let late = blocking_get(addr, path_of(&expired), vec![]).await;
    assert_eq!(late.status, 403);
    assert!(late.body.contains("expired"), "{}", late.body);

    // Signed with the server's own secret, but for a key the store refuses: the client's
    // mistake (400 with the reason), not an outage (it was 503 "storage is not answering").
    let signer = UrlSigner::new(&format!("http://{addr}"), [3; 32]);
    let staging = signer.sign(
        ".nsight-staging/x.part",
        Duration::from_secs(60),
        std::time::SystemTime::now(),
    );
    let refused = blocking_get(addr, path_of(&staging), vec![]).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("staging"), "{}", refused.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_store_without_signer_still_says_how_to_read_it() {
    let dir = TempDir::new("object-server-nosigner");
    let store = LocalStore::open(dir.path()).unwrap();
    let err = store
        .presign_get("a/b/c", Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(
        err.chain().contains("read the file under"),
        "{}",
        err.chain()
    );
}
