//! `ls` and `download` when reports live in S3 (a real s3s-fs): the coordinator writes
//! session.json through the S3 API and hands out SigV4 presigned URLs that the CLI downloads
//! with no S3 credentials of its own.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use nsight_e2e::{
    cli::Cli,
    free_port,
    platform::CoordinatorProcess,
    s3::{S3Server, ACCESS_KEY, SECRET_KEY},
    TempDir,
};

#[test]
fn presigned_s3_urls_download_without_credentials() {
    let dir = TempDir::new("cli-reports-s3");
    let root = dir.path().join("s3");
    let s3 = S3Server::start(&root);
    // s3s-fs keeps a bucket as a directory of its root.
    let bucket = root.join("reports");
    std::fs::create_dir_all(&bucket).unwrap();
    let config = dir.path().join("storage-config.yaml");
    std::fs::write(
        &config,
        format!(
            "storage_type: s3\nbucket_name: reports\naws_access_key_id: {ACCESS_KEY}\n\
             aws_secret_access_key: {SECRET_KEY}\nendpoint_url: {}\n",
            s3.endpoint()
        ),
    )
    .unwrap();
    let http: std::net::SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let grpc: std::net::SocketAddr = ([127, 0, 0, 1], free_port()).into();
    let coordinator = CoordinatorProcess::start_with(
        http,
        grpc,
        &dir.path().join("state"),
        15_000,
        &["--storage-config", config.to_str().unwrap()],
    );
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
