//! The S3 backend against a real S3 server (s3s-fs on loopback): put, list, head, get (whole and
//! ranged), delete, presigned GET fetched with a plain HTTP client, multipart upload of a large
//! file (64 MiB; 1 GiB with `NSIGHT_BIG_TESTS=1`) and a resumed ranged download of it.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

mod common;

use std::time::Duration;

use common::{big_size, fixture, sha256_file, write_random, MIB};
use nsight_e2e::http;
use nsight_storage::{download::download_to_file, ByteRange, Cause, PutOptions, ReportStore};
use tokio::io::AsyncReadExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_list_get_range_delete() {
    let f = fixture("s3-basic").await;
    let s = &f.store;
    let body: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
    let out = s
        .put_bytes("train/s1/c1/a_train_p_1.nsys-rep", &body)
        .await
        .unwrap();
    assert_eq!(out.size, body.len() as u64);
    assert_eq!(out.parts, 0);
    s.put_bytes("train/s1/session.json", b"{}").await.unwrap();
    s.put_bytes("train/s2/c1/b_train_p_1.sqlite", b"sqlite")
        .await
        .unwrap();
    s.put_bytes("other/x", b"x").await.unwrap();

    let keys =
        |l: Vec<nsight_storage::ObjectInfo>| l.into_iter().map(|o| o.key).collect::<Vec<_>>();
    assert_eq!(
        keys(s.list("train/").await.unwrap()),
        vec![
            "train/s1/c1/a_train_p_1.nsys-rep",
            "train/s1/session.json",
            "train/s2/c1/b_train_p_1.sqlite"
        ]
    );
    assert_eq!(keys(s.list("train/s1/").await.unwrap()).len(), 2);
    assert_eq!(keys(s.list("").await.unwrap()).len(), 4);
    let listed = s.list("train/s1/c1/").await.unwrap();
    assert_eq!(listed[0].size, body.len() as u64);
    // s3s-fs lists no ETag (AWS does); HEAD has it.
    assert!(listed[0].last_modified.is_some());

    // s3s-fs keeps the SHA-256 we sent with a single PUT and reports it on HEAD.
    let head = s.head("train/s1/c1/a_train_p_1.nsys-rep").await.unwrap();
    assert_eq!(head.size, body.len() as u64);
    assert!(head.etag.is_some());
    let checksum = head
        .checksum_sha256
        .clone()
        .expect("the server reports the checksum");
    assert!(out.checksum_matches(&checksum), "{checksum}");

    let whole = s
        .get("train/s1/c1/a_train_p_1.nsys-rep", None)
        .await
        .unwrap();
    assert_eq!(
        (whole.offset, whole.len, whole.total_size),
        (0, 200_000, 200_000)
    );
    assert_eq!(whole.read_to_vec().await.unwrap(), body);

    let r = s
        .get(
            "train/s1/c1/a_train_p_1.nsys-rep",
            ByteRange::new(1000, 1100),
        )
        .await
        .unwrap();
    assert_eq!((r.offset, r.len, r.total_size), (1000, 100, 200_000));
    assert_eq!(r.read_to_vec().await.unwrap(), &body[1000..1100]);
    let tail = s
        .get(
            "train/s1/c1/a_train_p_1.nsys-rep",
            Some(ByteRange::from_offset(199_990)),
        )
        .await
        .unwrap();
    assert_eq!(tail.offset, 199_990);
    assert_eq!(tail.read_to_vec().await.unwrap(), &body[199_990..]);
    let e = s
        .get(
            "train/s1/c1/a_train_p_1.nsys-rep",
            Some(ByteRange::from_offset(200_000)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(e.cause(), Cause::InvalidRange { size: 200_000, .. }),
        "{}",
        e.chain()
    );

    s.delete("train/s2/c1/b_train_p_1.sqlite").await.unwrap();
    s.delete("train/s2/c1/b_train_p_1.sqlite").await.unwrap();
    assert_eq!(keys(s.list("train/").await.unwrap()).len(), 2);
    let e = s.head("train/s2/c1/b_train_p_1.sqlite").await.unwrap_err();
    assert!(matches!(e.cause(), Cause::NotFound), "{}", e.chain());
    let e = s.get("train/nope", None).await.unwrap_err();
    assert!(matches!(e.cause(), Cause::NotFound), "{}", e.chain());

    let e = s.put_bytes("../escape", b"x").await.unwrap_err();
    assert!(matches!(e.cause(), Cause::InvalidKey { .. }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presigned_get_works_with_a_plain_http_client() {
    let f = fixture("s3-presign").await;
    f.store
        .put_bytes("t/s/c/report.txt", b"hello from s3")
        .await
        .unwrap();
    let url = f
        .store
        .presign_get("t/s/c/report.txt", Duration::from_secs(300))
        .await
        .unwrap();
    let prefix = format!("{}/", f.server.endpoint());
    let path = url.strip_prefix(&prefix[..prefix.len() - 1]).unwrap();
    assert!(path.starts_with("/reports/t/s/c/report.txt?"), "{url}");
    assert!(url.contains("X-Amz-Signature="), "{url}");
    let r = http::get(f.server.addr, path, &[]).unwrap();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, "hello from s3");

    // A tampered signature is refused by the server.
    let sig_at = path.find("X-Amz-Signature=").unwrap() + "X-Amz-Signature=".len();
    let flipped = if &path[sig_at..=sig_at] == "0" {
        "1"
    } else {
        "0"
    };
    let tampered = format!("{}{flipped}{}", &path[..sig_at], &path[sig_at + 1..]);
    assert_eq!(
        http::get(f.server.addr, &tampered, &[]).unwrap().status,
        403
    );
    // More than S3's 7 days is refused before any request.
    let e = f
        .store
        .presign_get("t/s/c/report.txt", Duration::from_secs(8 * 24 * 3600))
        .await
        .unwrap_err();
    assert!(
        matches!(e.cause(), Cause::InvalidArgument(_)),
        "{}",
        e.chain()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_file_goes_up_in_parts_and_comes_back_resumably() {
    let f = fixture("s3-multipart").await;
    let size = big_size();
    let src = f.dir.path().join("big.nsys-rep");
    let sha = write_random(&src, size, 42);
    let key = "train/s1/c1/big_train_p_1.nsys-rep";

    let out = f
        .store
        .put_file_with(key, &src, &PutOptions::with_sha256(&sha))
        .await
        .unwrap();
    assert_eq!(out.size, size);
    assert_eq!(out.sha256, sha);
    let part_size = f.store.settings().part_size;
    assert_eq!(part_size, 8 * MIB);
    assert_eq!(
        u64::from(out.parts),
        size.div_ceil(part_size),
        "8 MiB parts"
    );
    let listed = f.store.list("train/").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].size, size);
    let head = f.store.head(key).await.unwrap();
    if let Some(c) = &head.checksum_sha256 {
        assert!(out.checksum_matches(c), "{c}");
    }
    // The digest given to the put is stored with the object (s3s-fs keeps no multipart checksum).
    assert_eq!(head.sha256.as_deref(), Some(sha.as_str()));

    // Resume: a download interrupted after 10 MiB fetches only the rest with ranged GETs.
    let dest = f.dir.path().join("out/big.nsys-rep");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let mut first = f.store.get(key, ByteRange::new(0, 10 * MIB)).await.unwrap();
    let mut partial = Vec::new();
    first.read_to_end(&mut partial).await.unwrap();
    std::fs::write(dest.with_extension("nsys-rep.part"), &partial).unwrap();
    std::fs::write(
        dest.with_extension("nsys-rep.part.state"),
        format!("{}\n{size}\n{}\n", head.etag.clone().unwrap(), 10 * MIB),
    )
    .unwrap();
    let fetched = download_to_file(&f.store, key, &dest).await.unwrap();
    assert_eq!(fetched, size - 10 * MIB);
    assert_eq!(sha256_file(&dest), sha);
    assert!(!dest.with_extension("nsys-rep.part").exists());
    assert!(!dest.with_extension("nsys-rep.part.state").exists());

    // A state naming another version of the object (other etag) is not trusted: start over.
    let stale = f.dir.path().join("out/stale.nsys-rep");
    std::fs::write(stale.with_extension("nsys-rep.part"), vec![0u8; 4096]).unwrap();
    std::fs::write(
        stale.with_extension("nsys-rep.part.state"),
        format!("other-etag\n{size}\n4096\n"),
    )
    .unwrap();
    assert_eq!(download_to_file(&f.store, key, &stale).await.unwrap(), size);
    assert_eq!(sha256_file(&stale), sha);

    // A fresh download of the whole object.
    let again = f.dir.path().join("out/again.nsys-rep");
    assert_eq!(download_to_file(&f.store, key, &again).await.unwrap(), size);
    assert_eq!(sha256_file(&again), sha);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_from_the_documented_config_works() {
    let f = fixture("s3-config").await;
    let yaml = format!(
        "storage_type: s3\nbucket_name: reports\naws_access_key_id: {}\n\
         aws_secret_access_key: {}\nregion_name: us-east-1\nendpoint_url: {}\n",
        nsight_e2e::s3::ACCESS_KEY,
        nsight_e2e::s3::SECRET_KEY,
        f.server.endpoint()
    );
    let loaded = nsight_storage::StorageConfig::from_yaml(&yaml, "inline").unwrap();
    let store = nsight_storage::Store::from_config(&loaded.config).unwrap();
    store.put_bytes("t/s/session.json", b"{}").await.unwrap();
    assert_eq!(f.store.list("t/").await.unwrap().len(), 1);
    assert!(!format!("{store:?}").contains(nsight_e2e::s3::SECRET_KEY));
}
