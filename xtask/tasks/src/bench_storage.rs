//! `cargo xtask bench storage [SIZE_MIB]`: our S3 upload and download (`nsight-storage-bench`,
//! release build, `S3Store`) against the aws CLI (`awscli` in the venv) on the same random file
//! and the same real s3s-fs server, in one run. Measures each process's wall time (start to
//! exit) and peak RSS (`/usr/bin/time -f %M`), and checks that every downloaded file's SHA-256
//! equals the original's. Our put is given the file's SHA-256 (as the agent's uploader, which
//! hashes at spool time) and our get verifies against it, so verification is in the timings.

use std::{
    fs::File,
    io::Read,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{bail, Context, Result};
use nsight_e2e::{
    s3::{S3Server, ACCESS_KEY, SECRET_KEY},
    TempDir,
};

use crate::{cmd, paths::Layout};

const BUCKET: &str = "bench";
const REGION: &str = "us-east-1";
const TIME: &str = "/usr/bin/time";
/// The bound on our peak RSS the benchmark reports against.
const RSS_LIMIT_MB: f64 = 64.0;

#[derive(Debug)]
struct Measured {
    tool: &'static str,
    op: &'static str,
    secs: f64,
    peak_mb: f64,
}

/// Runs `program args` under `/usr/bin/time` with the S3 credentials in its environment.
fn measure(
    dir: &Path,
    tool: &'static str,
    op: &'static str,
    program: &Path,
    args: &[&str],
) -> Result<Measured> {
    let rss_file = dir.join(format!("{}-{op}.rss", tool.replace(' ', "-")));
    let mut c = Command::new(TIME);
    c.arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&rss_file)
        .arg(program)
        .args(args)
        .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_DEFAULT_REGION", REGION)
        .env("RUST_LOG", "warn");
    let line = cmd::describe(&c);
    eprintln!("$ {line}");
    let start = Instant::now();
    let out = c
        .stdin(std::process::Stdio::null())
        .output()
        .with_context(|| format!("could not start `{line}`"))?;
    let secs = start.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "`{line}` failed with {}: {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let kb: f64 = std::fs::read_to_string(&rss_file)?
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .with_context(|| format!("no peak RSS in {}", rss_file.display()))?;
    Ok(Measured {
        tool,
        op,
        secs,
        peak_mb: kb / 1024.0,
    })
}

fn sha256(path: &Path) -> Result<String> {
    let out = Command::new("sha256sum").arg(path).output()?;
    if !out.status.success() {
        bail!("sha256sum {} failed", path.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned())
}

fn random_file(path: &Path, size_mib: u64) -> Result<()> {
    let mut src = File::open("/dev/urandom")?.take(size_mib * 1024 * 1024);
    let mut dst = File::create(path)?;
    std::io::copy(&mut src, &mut dst)?;
    dst.sync_all()?;
    Ok(())
}

pub fn storage(layout: &Layout, size_mib: u64) -> Result<()> {
    let aws = layout.aws();
    if !aws.exists() {
        bail!(
            "{} is missing: run `cargo xtask setup python`",
            aws.display()
        );
    }
    if !Path::new(TIME).exists() {
        bail!("{TIME} is missing: run `cargo xtask setup apt` (Debian package `time`)");
    }
    if std::env::var_os("NSIGHT_S3S_FS_BIN").is_none() {
        if !layout.s3s_fs().exists() {
            bail!("s3s-fs is missing: run `cargo xtask setup s3`");
        }
        std::env::set_var("NSIGHT_S3S_FS_BIN", layout.s3s_fs());
    }
    let ours: PathBuf = crate::bench::build_release(
        layout,
        &["-p", "nsight-storage", "--bin", "nsight-storage-bench"],
    )?
    .join("nsight-storage-bench");

    let dir = TempDir::new("bench-storage");
    let src = dir.path().join("src.bin");
    random_file(&src, size_mib)?;
    let want = sha256(&src)?;
    let server = S3Server::start(&dir.path().join("s3"));
    let endpoint = server.endpoint();
    let aws_args = |rest: &[&str]| -> Vec<String> {
        ["--endpoint-url", endpoint.as_str()]
            .iter()
            .chain(rest)
            .map(|s| (*s).to_owned())
            .collect()
    };
    let d = dir.path();
    let run_aws = |op: &'static str, rest: &[&str]| {
        let args = aws_args(rest);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        measure(d, "aws CLI", op, &aws, &args)
    };
    run_aws("mb", &["s3", "mb", &format!("s3://{BUCKET}")])?;

    let src_s = src.to_string_lossy().into_owned();
    let aws_down = d.join("aws-down.bin");
    let ours_down = d.join("ours-down.bin");
    let aws_down_s = aws_down.to_string_lossy().into_owned();
    let ours_down_s = ours_down.to_string_lossy().into_owned();
    let aws_url = format!("s3://{BUCKET}/aws.bin");
    // The put gets the file's digest, as the agent's uploader does (it hashes at spool time);
    // the object keeps it, so our get verifies the download against it.
    let ours_args = |op: &str, file: &str| -> Vec<String> {
        let digest: &[&str] = if op == "put" {
            &["--sha256", &want]
        } else {
            &[]
        };
        [op, "--endpoint", endpoint.as_str(), "--bucket", BUCKET]
            .into_iter()
            .chain(["--key", "ours.bin", "--file", file])
            .chain(digest.iter().copied())
            .map(str::to_owned)
            .collect()
    };
    let run_ours = |op: &'static str, file: &str| {
        let args = ours_args(op, file);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        measure(d, "ours", op, &ours, &args)
    };

    let results = vec![
        run_aws("put", &["s3", "cp", "--only-show-errors", &src_s, &aws_url])?,
        run_ours("put", &src_s)?,
        run_aws(
            "get",
            &["s3", "cp", "--only-show-errors", &aws_url, &aws_down_s],
        )?,
        run_ours("get", &ours_down_s)?,
    ];
    for f in [&aws_down, &ours_down] {
        let got = sha256(f)?;
        if got != want {
            bail!("{}: SHA-256 {got}, want {want}", f.display());
        }
    }
    drop(server);

    println!(
        "\nstorage benchmark: {size_mib} MiB random file, s3s-fs {} on loopback, 2 cores; \
         SHA-256 of both downloads verified",
        crate::paths::S3S_FS_VERSION
    );
    println!(
        "  {:<8} {:<4} {:>9} {:>8} {:>13}",
        "tool", "op", "seconds", "MiB/s", "peak RSS MB"
    );
    for m in &results {
        println!(
            "  {:<8} {:<4} {:>9.2} {:>8.1} {:>13.1}",
            m.tool,
            m.op,
            m.secs,
            size_mib as f64 / m.secs,
            m.peak_mb
        );
    }
    for op in ["put", "get"] {
        let pick = |tool: &str| results.iter().find(|m| m.tool == tool && m.op == op);
        if let (Some(a), Some(o)) = (pick("aws CLI"), pick("ours")) {
            println!(
                "  {op}: ours {:.1} MiB/s {} aws CLI {:.1} MiB/s; ours peak RSS {:.1} MB {} {RSS_LIMIT_MB:.0} MB",
                size_mib as f64 / o.secs,
                if o.secs <= a.secs { ">=" } else { "<" },
                size_mib as f64 / a.secs,
                o.peak_mb,
                if o.peak_mb < RSS_LIMIT_MB { "<" } else { ">=" },
            );
        }
    }
    Ok(())
}
