//! `nsight-cloud ls` and `download` against a real coordinator whose reports live in a local
//! directory: session.json written by the coordinator, the documented download tree and
//! `--flat`, byte-identical files, resume of an interrupted download, a hostile title kept inside
//! the output directory, and a tampered URL refused with a reason.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::path::Path;

use nsight_e2e::{cli::Cli, http, platform::CoordinatorProcess, TempDir};
use serde_json::Value;

/// What an agent's upload leaves in a local store (same layout as `LocalStore`).
fn put_report(storage: &Path, key: &str, bytes: &[u8]) {
    let path = storage.join(key);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn ls_and_download_build_the_documented_tree() {
    let dir = TempDir::new("cli-reports");
    let storage = dir.path().join("reports");
    let coordinator = CoordinatorProcess::start_with_storage(&dir.path().join("state"), &storage);
    let config = dir.path().join("nsight-cloud.conf");
    let cli = Cli { config: &config };
    cli.ok(&["configure", "--gw", &format!("http://{}", coordinator.http)]);

    let begun = cli.json(&[
        "--tag",
        "train",
        "session-begin",
        "--title",
        ".. baseline: run*?",
    ]);
    let session = begun["id"].as_str().unwrap().to_owned();
    let meta: Value = serde_json::from_slice(
        &std::fs::read(storage.join(format!("train/{session}/session.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(meta["title"], ".. baseline: run*?");

    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    put_report(
        &storage,
        &format!("train/{session}/1/python_train_pod-0_r1.sqlite"),
        b"sqlite-1",
    );
    put_report(
        &storage,
        &format!("train/{session}/1/python_train_pod-0_r1.nsys-rep"),
        &big,
    );
    put_report(
        &storage,
        &format!("train/{session}/2/python_train_pod-1_r2.sqlite"),
        b"sqlite-2",
    );
    // Not a report: listed by storage, skipped by ls/download.
    put_report(&storage, &format!("train/{session}/2/notes.txt"), b"x");

    let listing = cli.json(&["--tag", "train", "ls"]);
    let reports = listing["reports"].as_array().unwrap();
    assert_eq!(reports.len(), 3, "{listing:#}");
    let table = cli.ok(&["--tag", "train", "ls"]);
    assert!(table.contains("python_train_pod-0_r1.nsys-rep"), "{table}");
    assert!(table.contains("2.9 MiB"), "{table}");
    assert!(table.contains("3 file(s)"), "{table}");

    let out = dir.path().join("out");
    let downloaded = cli.json(&["--tag", "train", "download", "-o", out.to_str().unwrap()]);
    assert_eq!(downloaded["files"].as_array().unwrap().len(), 3);
    let files = files_under(&out);
    assert_eq!(files.len(), 3, "{files:?}");
    let dir_name = files[0].split('/').next().unwrap().to_owned();
    let (stamp, title) = dir_name.split_at(14);
    assert!(stamp.chars().all(|c| c.is_ascii_digit()), "{dir_name}");
    assert!(
        title.starts_with('-')
            && title.contains("baseline")
            && !title.contains(['*', '?', ':', ' ']),
        "the title is sanitised into one directory name: {dir_name}"
    );
    assert_eq!(
        std::fs::read(out.join(&dir_name).join("1/python_train_pod-0_r1.nsys-rep")).unwrap(),
        big
    );
    assert_eq!(
        std::fs::read(out.join(&dir_name).join("2/python_train_pod-1_r2.sqlite")).unwrap(),
        b"sqlite-2"
    );

    // Again: nothing to transfer.
    let again = cli.ok(&["--tag", "train", "download", "-o", out.to_str().unwrap()]);
    assert!(again.contains("up to date"), "{again}");

    // Interrupted download: a partial file is resumed with a ranged GET.
    let target = out.join(&dir_name).join("1/python_train_pod-0_r1.nsys-rep");
    std::fs::remove_file(&target).unwrap();
    let mut part = target.clone().into_os_string();
    part.push(".part");
    std::fs::write(&part, &big[..1_000_000]).unwrap();
    let resumed = cli.json(&["--tag", "train", "download", "-o", out.to_str().unwrap()]);
    let entry = resumed["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["state"] == "downloaded")
        .unwrap()
        .clone();
    assert_eq!(entry["resumedFrom"], 1_000_000, "{resumed:#}");
    assert_eq!(std::fs::read(&target).unwrap(), big);

    // --flat.
    let flat = dir.path().join("flat");
    cli.ok(&[
        "--tag",
        "train",
        "download",
        "--flat",
        "-o",
        flat.to_str().unwrap(),
    ]);
    let flat_files = files_under(&flat);
    assert_eq!(flat_files.len(), 3);
    assert!(
        flat_files.iter().all(|f| !f.contains('/')),
        "{flat_files:?}"
    );
    assert!(flat_files
        .iter()
        .any(|f| f.ends_with("_1_python_train_pod-0_r1.nsys-rep")));
}

#[test]
fn tampered_urls_and_sessionless_tags_get_clear_errors() {
    let dir = TempDir::new("cli-reports-errors");
    let storage = dir.path().join("reports");
    let coordinator = CoordinatorProcess::start_with_storage(&dir.path().join("state"), &storage);
    let config = dir.path().join("nsight-cloud.conf");
    let cli = Cli { config: &config };
    cli.ok(&["configure", "--gw", &format!("http://{}", coordinator.http)]);

    let (code, _, err) = cli.run(&["--tag", "empty", "ls"]);
    assert_eq!(code, 1);
    assert!(err.contains("has no session yet"), "{err}");

    let session = cli.json(&["--tag", "t", "session-begin"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    put_report(
        &storage,
        &format!("t/{session}/1/app_t_p_s.sqlite"),
        b"data",
    );
    let listing = cli.json(&["--tag", "t", "ls"]);
    let url = listing["reports"][0]["url"].as_str().unwrap().to_owned();
    let path = &url[url.find("/storage/").unwrap()..];
    let ok = http::get(coordinator.http, path, &[]).unwrap();
    assert_eq!((ok.status, ok.body.as_str()), (200, "data"));
    let tampered = path.replace("signature=", "signature=0");
    let refused = http::get(coordinator.http, &tampered, &[]).unwrap();
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("does not match"), "{}", refused.body);
}
