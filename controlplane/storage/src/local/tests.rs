//! Unit tests of the local directory store: atomic puts, listing, ranges, deletes, and keys
//! that try to escape the root.

use super::*;
use crate::digest::sha256_hex;

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let nanos = SystemTimeNanos::now();
        let p = std::env::temp_dir().join(format!(
            "nsight-local-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct SystemTimeNanos;

impl SystemTimeNanos {
    fn now() -> u128 {
        std::time::SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    }
}

async fn read(store: &LocalStore, key: &str, range: Option<ByteRange>) -> Vec<u8> {
    store
        .get(key, range)
        .await
        .unwrap()
        .read_to_vec()
        .await
        .unwrap()
}

#[tokio::test]
async fn put_list_get_range_delete() {
    let dir = Dir::new("basic");
    let store = LocalStore::open(&dir.0.join("root")).unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let out = store.put_bytes("t/s/c/a.nsys-rep", &data).await.unwrap();
    assert_eq!(out.size, data.len() as u64);
    assert_eq!(out.sha256, sha256_hex(&data));
    store.put_bytes("t/s/session.json", b"{}").await.unwrap();
    store.put_bytes("t/s2/c/b.sqlite", b"x").await.unwrap();
    store.put_bytes("u/x", b"y").await.unwrap();

    let keys = |l: Vec<ObjectInfo>| l.into_iter().map(|o| o.key).collect::<Vec<_>>();
    assert_eq!(
        keys(store.list("t/").await.unwrap()),
        vec!["t/s/c/a.nsys-rep", "t/s/session.json", "t/s2/c/b.sqlite"]
    );
    assert_eq!(keys(store.list("t/s").await.unwrap()).len(), 3);
    assert_eq!(keys(store.list("t/s/").await.unwrap()).len(), 2);
    assert_eq!(keys(store.list("").await.unwrap()).len(), 4);
    assert!(store.list("nothing/").await.unwrap().is_empty());

    let head = store.head("t/s/c/a.nsys-rep").await.unwrap();
    assert_eq!(head.size, data.len() as u64);
    assert!(head.etag.is_some() && head.last_modified.is_some());

    assert_eq!(read(&store, "t/s/c/a.nsys-rep", None).await, data);
    let r = store
        .get("t/s/c/a.nsys-rep", ByteRange::new(10, 20))
        .await
        .unwrap();
    assert_eq!((r.offset, r.len, r.total_size), (10, 10, data.len() as u64));
    assert_eq!(r.read_to_vec().await.unwrap(), &data[10..20]);
    assert_eq!(
        read(
            &store,
            "t/s/c/a.nsys-rep",
            Some(ByteRange::from_offset(99_990))
        )
        .await,
        &data[99_990..]
    );
    let e = store
        .get("t/s/c/a.nsys-rep", Some(ByteRange::from_offset(100_000)))
        .await
        .unwrap_err();
    assert!(matches!(e.cause(), Cause::InvalidRange { .. }), "{e:?}");

    store.delete("t/s2/c/b.sqlite").await.unwrap();
    store.delete("t/s2/c/b.sqlite").await.unwrap(); // idempotent
    assert!(
        !dir.0.join("root/t/s2").exists(),
        "emptied directories are pruned"
    );
    let e = store.head("t/s2/c/b.sqlite").await.unwrap_err();
    assert!(matches!(e.cause(), Cause::NotFound));
    assert!(e.to_string().contains("t/s2/c/b.sqlite"));
    let e = store.get("missing", None).await.unwrap_err();
    assert!(matches!(e.cause(), Cause::NotFound));
}

#[tokio::test]
async fn overwrite_replaces_and_staging_is_never_listed() {
    let dir = Dir::new("overwrite");
    let store = LocalStore::open(&dir.0).unwrap();
    store.put_bytes("k", b"one").await.unwrap();
    store.put_bytes("k", b"two!").await.unwrap();
    assert_eq!(read(&store, "k", None).await, b"two!");
    // A half-written file in staging (a crash mid-put) is invisible.
    std::fs::write(dir.0.join(RESERVED_STAGING_DIR).join("x.part"), b"half").unwrap();
    let listed = store.list("").await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].size, 4);
}

/// A reader that fails after some bytes: the put must fail and leave nothing behind.
struct Failing(usize);

impl AsyncRead for Failing {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        if self.0 == 0 {
            return std::task::Poll::Ready(Err(io::Error::other("source died")));
        }
        let n = self.0.min(buf.remaining()).min(1000);
        buf.put_slice(&vec![1u8; n]);
        self.0 -= n;
        std::task::Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn a_failed_put_leaves_nothing_listed() {
    let dir = Dir::new("failing");
    let store = LocalStore::open(&dir.0).unwrap();
    let e = store.put("a/b", Failing(5000)).await.unwrap_err();
    assert!(matches!(e.cause(), Cause::Source(_)), "{e:?}");
    assert!(e.chain().contains("source died"), "{}", e.chain());
    assert!(store.list("").await.unwrap().is_empty());
    let staging = std::fs::read_dir(dir.0.join(RESERVED_STAGING_DIR))
        .unwrap()
        .count();
    assert_eq!(staging, 0, "the temp file is removed");
}

#[tokio::test]
async fn keys_cannot_escape_the_root() {
    let dir = Dir::new("escape");
    let root = dir.0.join("root");
    let store = LocalStore::open(&root).unwrap();
    std::fs::write(dir.0.join("secret"), b"outside").unwrap();
    for key in [
        "../secret",
        "a/../../secret",
        "/etc/passwd",
        "a\\..\\..\\secret",
        "a\0b",
        "",
        ".nsight-staging/x",
        "a//b",
    ] {
        let e = store.put_bytes(key, b"x").await.unwrap_err();
        assert!(
            matches!(e.cause(), Cause::InvalidKey { .. }),
            "{key:?}: {e:?}"
        );
        let e = store.get(key, None).await.unwrap_err();
        assert!(
            matches!(e.cause(), Cause::InvalidKey { .. }),
            "{key:?}: {e:?}"
        );
        assert!(store.delete(key).await.is_err(), "{key:?}");
        assert!(store.head(key).await.is_err(), "{key:?}");
    }
    assert!(store.list("../").await.is_err());
    // A symlink inside the root leads nowhere.
    std::os::unix::fs::symlink(&dir.0, root.join("link")).unwrap();
    let e = store.put_bytes("link/planted", b"x").await.unwrap_err();
    assert!(matches!(e.cause(), Cause::InvalidKey { .. }), "{e:?}");
    assert!(!dir.0.join("planted").exists());
    std::os::unix::fs::symlink(dir.0.join("secret"), root.join("file-link")).unwrap();
    assert!(store.get("file-link", None).await.is_err());
    assert_eq!(std::fs::read(dir.0.join("secret")).unwrap(), b"outside");
}

#[tokio::test]
async fn presigning_is_refused_with_a_reason() {
    let dir = Dir::new("presign");
    let store = LocalStore::open(&dir.0).unwrap();
    let e = store
        .presign_get("k", Duration::from_secs(60))
        .await
        .unwrap_err();
    assert!(e.chain().contains("no presigned URLs"), "{}", e.chain());
}

#[tokio::test]
async fn empty_objects_work() {
    let dir = Dir::new("empty");
    let store = LocalStore::open(&dir.0).unwrap();
    let out = store.put_bytes("e", b"").await.unwrap();
    assert_eq!(out.size, 0);
    assert_eq!(read(&store, "e", None).await, b"");
    assert_eq!(
        read(&store, "e", Some(ByteRange::from_offset(0))).await,
        b""
    );
}

/// Reports are user data: the object 0600, the directories the store makes 0700, whatever the
/// umask (issue 22, item 10: they were 0644 and 0755).
#[tokio::test]
async fn stored_reports_are_for_their_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = Dir::new("modes");
    let root = dir.0.join("reports");
    let store = LocalStore::open(&root).unwrap();
    store
        .put_bytes("default/s1/1/app.sqlite", b"report")
        .await
        .unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&root.join("default/s1/1/app.sqlite")), 0o600);
    for d in [
        "",
        "default",
        "default/s1",
        "default/s1/1",
        RESERVED_STAGING_DIR,
    ] {
        assert_eq!(mode(&root.join(d)), 0o700, "{d:?}");
    }
}
