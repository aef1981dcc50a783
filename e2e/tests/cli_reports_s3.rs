//! `ls` and `download` when reports live in S3 (a real s3s-fs): the coordinator writes
//! session.json through the S3 API and hands out SigV4 presigned URLs that the CLI downloads
//! with no S3 credentials of its own; a multipart report uploaded with its digest comes down in
//! parallel ranges, resumes from the saved state, and, once damaged inside the server's store,
//! fails verification with its file named and nothing left behind.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::{os::unix::fs::FileExt, path::Path};

use nsight_e2e::{
    cli::Cli,
    free_port,
    gateway::LocalGateway,
    platform::CoordinatorProcess,
    s3::{S3Server, ACCESS_KEY, SECRET_KEY},
    TempDir,
};
use nsight_gateway::{bootstrap::AdsFlavor, cache::node_id, ir::GatewayIr};
use nsight_storage::{PutOptions, ReportStore, S3Settings, S3Store, Secret};

/// A coordinator whose reports are in bucket `reports` of `s3` (the bucket is created here).
fn coordinator_on(dir: &Path, s3: &S3Server) -> CoordinatorProcess {
    coordinator_with(dir, s3, &[])
}

/// [`coordinator_on`] with more command-line arguments.
fn coordinator_with(dir: &Path, s3: &S3Server, extra: &[&str]) -> CoordinatorProcess {
    let config = s3.storage_config("reports", &dir.join("storage-config.yaml"));
    let http: std::net::SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let grpc: std::net::SocketAddr = ([127, 0, 0, 1], free_port()).into();
    CoordinatorProcess::start_with(
        http,
        grpc,
        &dir.join("state"),
        15_000,
        &[&["--storage-config", config.to_str().unwrap()], extra].concat(),
    )
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[test]
fn a_report_uploaded_with_its_digest_is_verified_resumed_and_refused_when_damaged() {
    let dir = TempDir::new("cli-reports-s3-verify");
    let s3 = S3Server::start(&dir.path().join("s3"));
    let coordinator = coordinator_on(dir.path(), &s3);
    let cli_config = dir.path().join("nsight-cloud.conf");
    let cli = Cli {
        config: &cli_config,
    };
    cli.ok(&["configure", "--gw", &format!("http://{}", coordinator.http)]);
    let session = cli.json(&["--tag", "gpu", "session-begin", "--title", "verify"])["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // As the agent's uploader stores it: multipart (20 MiB in 8 MiB parts) with its SHA-256.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let body: Vec<u8> = (0..20 * 1024 * 1024 / 8)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()
        })
        .collect();
    let sha = sha256_hex(&body);
    let key = format!("gpu/{session}/1/python_gpu_pod-a_r1.nsys-rep");
    let store = S3Store::new(S3Settings::new(
        "reports",
        Some(&s3.endpoint()),
        ACCESS_KEY,
        Secret::new(SECRET_KEY),
    ))
    .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etag = runtime.block_on(async {
        let put = store
            .put_with(&key, &body[..], &PutOptions::with_sha256(&sha))
            .await
            .unwrap();
        assert_eq!(put.parts, 3);
        store.head(&key).await.unwrap().etag.unwrap()
    });

    let out = dir.path().join("out");
    let download = || {
        cli.run(&[
            "--tag",
            "gpu",
            "--output",
            "json",
            "download",
            "-o",
            out.to_str().unwrap(),
        ])
    };
    let (code, stdout, err) = download();
    assert_eq!(code, 0, "{stdout}{err}");
    let listing = cli.json(&["--tag", "gpu", "ls"]);
    assert_eq!(
        listing["reports"][0]["sha256"], sha,
        "the listing names the digest stored at upload: {listing:#}"
    );
    let target = out
        .join(listing["directory"].as_str().unwrap())
        .join("1/python_gpu_pod-a_r1.nsys-rep");
    assert_eq!(std::fs::read(&target).unwrap(), body);

    // Interrupted after the first 8 MiB (the state a killed run leaves): only the rest comes.
    let with = |suffix: &str| {
        let mut p = target.clone().into_os_string();
        p.push(suffix);
        std::path::PathBuf::from(p)
    };
    std::fs::remove_file(&target).unwrap();
    let mut partial = body[..8 * 1024 * 1024].to_vec();
    partial.resize(body.len(), 0);
    std::fs::write(with(".part"), &partial).unwrap();
    std::fs::write(
        with(".part.state"),
        format!("\"{etag}\"\n{}\n{}\n", body.len(), 8 * 1024 * 1024),
    )
    .unwrap();
    let (code, stdout, err) = download();
    assert_eq!(code, 0, "{stdout}{err}");
    let resumed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        resumed["files"][0]["resumedFrom"],
        8 * 1024 * 1024,
        "{resumed:#}"
    );
    assert_eq!(std::fs::read(&target).unwrap(), body);
    assert!(!with(".part.state").exists());

    // Damaged inside the server's store (same size, one byte flipped): refused, named, removed.
    std::fs::remove_file(&target).unwrap();
    let object = s3.bucket_dir("reports").join(&key);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&object)
        .unwrap();
    file.write_all_at(&[body[13_000_000] ^ 0x55], 13_000_000)
        .unwrap();
    drop(file);
    let (code, stdout, err) = download();
    assert_eq!(code, 1, "{stdout}{err}");
    assert!(err.contains(&target.display().to_string()), "{err}");
    assert!(err.contains(&format!("the report's is {sha}")), "{err}");
    assert!(err.contains("damaged download was deleted"), "{err}");
    assert!(
        !target.exists(),
        "a damaged report must not take its final name"
    );
    assert!(!with(".part").exists() && !with(".part.state").exists());
}

#[test]
fn presigned_s3_urls_download_without_credentials() {
    let dir = TempDir::new("cli-reports-s3");
    let s3 = S3Server::start(&dir.path().join("s3"));
    let bucket = s3.bucket_dir("reports");
    let coordinator = coordinator_on(dir.path(), &s3);
    let cli_config = dir.path().join("nsight-cloud.conf");
    let cli = Cli {
        config: &cli_config,
    };
    cli.ok(&["configure", "--gw", &format!("http://{}", coordinator.http)]);
    let session = cli.json(&["--tag", "gpu", "session-begin", "--title", "s3 run"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let meta = bucket.join(format!("gpu/{session}/session.json"));
    assert!(
        meta.exists(),
        "session.json through the S3 API; coordinator log:\n{}",
        coordinator.process.log()
    );

    // What an agent's upload leaves in the bucket.
    let body: Vec<u8> = (0..700_000u32).map(|i| (i % 241) as u8).collect();
    let key = format!("gpu/{session}/1/python_gpu_pod-a_r1.sqlite");
    let path = bucket.join(&key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &body).unwrap();

    let listing = cli.json(&["--tag", "gpu", "ls"]);
    let url = listing["reports"][0]["url"].as_str().unwrap();
    assert!(
        url.contains("X-Amz-Signature="),
        "a SigV4 presigned URL: {url}"
    );
    assert!(url.starts_with(&s3.endpoint()), "{url}");
    let out = dir.path().join("out");
    cli.ok(&["--tag", "gpu", "download", "-o", out.to_str().unwrap()]);
    let dir_name = listing["directory"].as_str().unwrap();
    let got = std::fs::read(out.join(dir_name).join("1/python_gpu_pod-a_r1.sqlite")).unwrap();
    assert_eq!(got, body);
}

/// In a cluster users reach storage through the gateway's storage port (9000): the coordinator
/// signs URLs for that address, Envoy forwards them with the Host header intact, and the S3
/// server accepts the signature. The CLI downloads through Envoy and verifies the digest.
#[test]
fn presigned_urls_for_the_gateway_download_through_its_storage_port() {
    let dir = TempDir::new("cli-reports-s3-gateway");
    let s3 = S3Server::start(&dir.path().join("s3"));
    let (gateway_port, storage_port) = (free_port(), free_port());
    let storage_url = format!("http://127.0.0.1:{storage_port}");
    let coordinator = coordinator_with(
        dir.path(),
        &s3,
        &["--storage-public-url", storage_url.as_str()],
    );
    let node = node_id::gateway("test", "storage-proxy");
    let gateway = LocalGateway::start(&node, AdsFlavor::Sotw);
    let ir: GatewayIr = GatewayIr::local()
        .listen("127.0.0.1", gateway_port, storage_port)
        .coordinator(coordinator.http)
        .storage(([127, 0, 0, 1], s3.port()).into())
        .build()
        .unwrap();
    gateway.xds().set_ir(&node, &ir).unwrap();
    gateway.wait_ready();

    let cli_config = dir.path().join("nsight-cloud.conf");
    let cli = Cli {
        config: &cli_config,
    };
    cli.ok(&[
        "configure",
        "--gw",
        &format!("http://127.0.0.1:{gateway_port}"),
    ]);
    let session = cli.json(&["--tag", "gpu", "session-begin", "--title", "via gateway"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let sha = sha256_hex(&body);
    let key = format!("gpu/{session}/1/python_gpu_pod-a_r1.nsys-rep");
    let store = S3Store::new(S3Settings::new(
        "reports",
        Some(&s3.endpoint()),
        ACCESS_KEY,
        Secret::new(SECRET_KEY),
    ))
    .unwrap();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(store.put_with(&key, &body[..], &PutOptions::with_sha256(&sha)))
        .unwrap();

    let listing = cli.json(&["--tag", "gpu", "ls"]);
    let url = listing["reports"][0]["url"].as_str().unwrap();
    assert!(
        url.starts_with(&storage_url),
        "signed for the gateway: {url}"
    );
    assert_eq!(listing["reports"][0]["sha256"], sha, "{listing:#}");
    let out = dir.path().join("out");
    let (code, stdout, err) = cli.run(&["--tag", "gpu", "download", "-o", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}{err}\nEnvoy:\n{}", gateway.envoy_log());
    let dir_name = listing["directory"].as_str().unwrap();
    let got = std::fs::read(out.join(dir_name).join("1/python_gpu_pod-a_r1.nsys-rep")).unwrap();
    assert_eq!(got, body);

    // A URL altered on the way is refused by the S3 server, through the proxy as well.
    let at = url.find("X-Amz-Signature=").unwrap() + "X-Amz-Signature=".len();
    let flipped = if &url[at..=at] == "0" { "1" } else { "0" };
    let tampered = format!("{}{flipped}{}", &url[..at], &url[at + 1..]);
    let path = &tampered[storage_url.len()..];
    let r = nsight_e2e::http::get(([127, 0, 0, 1], storage_port).into(), path, &[]).unwrap();
    assert_eq!(r.status, 403, "{}", r.body);
}
