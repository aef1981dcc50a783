//! Unit tests of the key layout: round trips, sanitising of hostile names, and the download
//! tree (never outside the output directory, whatever the bucket holds).

use std::time::{Duration, SystemTime};

use super::*;

fn t(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap()
}

fn object(key: &str, size: u64, unix: u64) -> ObjectInfo {
    ObjectInfo {
        key: key.into(),
        size,
        last_modified: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(unix)),
        etag: None,
        checksum_sha256: None,
        sha256: None,
    }
}

fn report(tag: &str, session: &str, collection: &str) -> ReportKey {
    ReportKey::new(
        tag,
        session,
        collection,
        "python3",
        "pod-0",
        "1",
        ReportKind::NsysRep,
    )
}

#[test]
fn keys_round_trip() {
    let key = ReportKey::new(
        "train",
        "0b6e2c8e-6a53-4b7e-9d7e-2f1f3f4a5b6c",
        "c1",
        "python3",
        "trainer-7d9f-0",
        "20250101.1",
        ReportKind::NsysRep,
    );
    let s = key.to_key();
    assert_eq!(
        s,
        "train/0b6e2c8e-6a53-4b7e-9d7e-2f1f3f4a5b6c/c1/python3_train_trainer-7d9f-0_20250101.1.nsys-rep"
    );
    assert_eq!(ReportKey::parse(&s).unwrap(), key);
    let sqlite = key.with_kind(ReportKind::Sqlite);
    assert!(sqlite.to_key().ends_with("_20250101.1.sqlite"));
    assert_eq!(ReportKey::parse(&sqlite.to_key()).unwrap(), sqlite);
}

#[test]
fn underscores_and_separators_in_names_cannot_break_parsing() {
    let key = ReportKey::new(
        "my_tag",
        "s/1",
        "../c",
        "my_app --flag",
        "a\\b",
        "x_y",
        ReportKind::Sqlite,
    );
    assert_eq!(key.tag, "my-tag");
    assert_eq!(key.session, "s-1");
    assert_eq!(key.collection, "c");
    assert_eq!(key.process, "my-app-flag");
    assert_eq!(key.instance, "a-b");
    assert_eq!(key.stub, "x-y");
    assert_eq!(ReportKey::parse(&key.to_key()).unwrap(), key);
}

#[test]
fn foreign_keys_are_rejected() {
    for key in [
        "a/b/c",
        "a/b/c/d/e.nsys-rep",
        "t/s/c/p_t_i.nsys-rep",
        "t/s/c/p_t_i_s_x.nsys-rep",
        "t/s/c/p_other_i_s.nsys-rep",
        "t/s/c/p_t_i_s.txt",
        "t/s/c/p_t_i_s",
        "t/../c/p_t_i_s.nsys-rep",
        "t/s/../p_t_i_s.nsys-rep",
        "t/.hidden/c/p_t_i_s.nsys-rep",
        "t/s/c/p_t_i_s .nsys-rep",
        "t/s/c/p_t_..._s.nsys-rep",
    ] {
        assert!(ReportKey::parse(key).is_err(), "{key} must not parse");
    }
}

#[test]
fn components_are_sanitised() {
    assert_eq!(sanitize_component("../../etc"), "etc");
    assert_eq!(sanitize_component(".."), "unnamed");
    assert_eq!(sanitize_component(""), "unnamed");
    assert_eq!(sanitize_component("/"), "unnamed");
    assert_eq!(sanitize_component(".hidden"), "hidden");
    assert_eq!(sanitize_component("a\0b\nc"), "a-b-c");
    assert_eq!(sanitize_component("héllo wörld"), "h-llo-w-rld");
    assert_eq!(sanitize_component(&"x".repeat(200)).len(), MAX_COMPONENT);
    assert_eq!(
        sanitize_component(&format!("{}.-y", "x".repeat(59))),
        "x".repeat(59)
    );
}

#[test]
fn titles_are_sanitised() {
    assert_eq!(sanitize_title("../../etc").as_deref(), Some("etc"));
    assert_eq!(sanitize_title("a/b\\c").as_deref(), Some("a-b-c"));
    assert_eq!(
        sanitize_title("baseline attention heads").as_deref(),
        Some("baseline-attention-heads")
    );
    assert_eq!(
        sanitize_title("résumé_v2.1").as_deref(),
        Some("résumé_v2.1")
    );
    assert_eq!(
        sanitize_title("evil\u{202e}txt.exe").as_deref(),
        Some("evil-txt.exe")
    );
    assert_eq!(sanitize_title("..."), None);
    assert_eq!(sanitize_title("/"), None);
    assert_eq!(
        sanitize_title(&"é".repeat(300)).map(|s| s.chars().count()),
        Some(MAX_TITLE)
    );
}

#[test]
fn session_meta_round_trips_and_names_the_directory() {
    let meta = SessionMeta {
        tag: "train".into(),
        session: "s1".into(),
        title: Some("baseline run".into()),
        created: t(1_735_689_600 + 3_661), // 2025-01-01 01:01:01 UTC
        ended: Some(t(1_735_689_600 + 7_200)),
    };
    assert_eq!(meta.key(), "train/s1/session.json");
    assert_eq!(parse_session_meta_key(&meta.key()), Some(("train", "s1")));
    assert_eq!(parse_session_meta_key("train/s1/c/session.json"), None);
    let json = meta.to_json();
    assert!(String::from_utf8_lossy(&json).contains("2025-01-01T01:01:01Z"));
    assert_eq!(SessionMeta::from_json("k", &json).unwrap(), meta);
    assert_eq!(meta.dir_name(), "20250101010101-baseline-run");
    let untitled = SessionMeta {
        title: None,
        ..meta.clone()
    };
    assert_eq!(untitled.dir_name(), "20250101010101-s1");
    let hostile = SessionMeta {
        title: Some("../..".into()),
        ..meta
    };
    assert_eq!(hostile.dir_name(), "20250101010101-s1");
    assert!(SessionMeta::from_json("k", b"{").is_err());
}

#[test]
fn offsets_are_converted_to_utc() {
    let local = t(0).to_offset(time::UtcOffset::from_hms(5, 30, 0).unwrap());
    assert_eq!(compact_utc(local), "19700101000000");
}

#[test]
fn a_listing_rebuilds_the_download_tree() {
    let a = report("train", "s1", "c1");
    let b = report("train", "s1", "c2");
    let orphan = report("train", "s2", "c1");
    let listing = vec![
        object("train/s1/session.json", 100, 10),
        object(&a.to_key(), 1000, 20),
        object(&a.with_kind(ReportKind::Sqlite).to_key(), 2000, 20),
        object(&b.to_key(), 3000, 30),
        object(&orphan.to_key(), 4000, 86_400 + 3_600),
        object("train/s1/notes.txt", 5, 40),
    ];
    let metas = vec![SessionMeta {
        tag: "train".into(),
        session: "s1".into(),
        title: Some("../../etc/passwd".into()),
        created: t(0),
        ended: None,
    }];
    let plan = plan_download(&listing, &metas, false);
    let paths: Vec<String> = plan
        .items
        .iter()
        .map(|i| i.path.display().to_string())
        .collect();
    assert_eq!(
        paths,
        vec![
            "19700101000000-etc-passwd/c1/python3_train_pod-0_1.nsys-rep",
            "19700101000000-etc-passwd/c1/python3_train_pod-0_1.sqlite",
            "19700101000000-etc-passwd/c2/python3_train_pod-0_1.nsys-rep",
            "19700102010000-s2/c1/python3_train_pod-0_1.nsys-rep",
        ]
    );
    assert_eq!(plan.items[1].size, 2000);
    assert_eq!(plan.skipped.len(), 1);

    let flat = plan_download(&listing, &metas, true);
    assert_eq!(
        flat.items[0].path,
        PathBuf::from("19700101000000-etc-passwd_c1_python3_train_pod-0_1.nsys-rep")
    );
}

#[test]
fn no_listing_can_escape_the_output_directory() {
    let hostile_keys = [
        "../../x/y/z/p_x_i_s.nsys-rep",
        "t/s/../../../../etc/p_t_i_s.nsys-rep",
        "/abs/s/c/p_abs_i_s.nsys-rep",
        "t/s/c/../../../p_t_i_s.nsys-rep",
        "t\\..\\..\\/s/c/p_t_i_s.nsys-rep",
        "t/s/c/..",
        "../session.json",
    ];
    let listing: Vec<ObjectInfo> = hostile_keys.iter().map(|k| object(k, 1, 0)).collect();
    let titles = [
        "../../etc",
        "/",
        "..",
        "a/../../b",
        "\\..\\..",
        "\0",
        "C:\\Windows",
    ];
    let out = Path::new("/tmp/out");
    for title in titles {
        let metas = vec![SessionMeta {
            tag: "t".into(),
            session: "s".into(),
            title: Some(title.into()),
            created: t(0),
            ended: None,
        }];
        let mut listing = listing.clone();
        listing.push(object(&report("t", "s", "c").to_key(), 1, 0));
        for flat in [false, true] {
            let plan = plan_download(&listing, &metas, flat);
            assert_eq!(plan.items.len(), 1, "{title}: {plan:?}");
            for item in &plan.items {
                let full = join_under(out, &item.path).expect("plain relative path");
                assert!(full.starts_with(out), "{}", full.display());
                assert!(item.path.components().all(
                    |c| matches!(c, Component::Normal(n) if !n.to_string_lossy().starts_with('.'))
                ));
            }
        }
    }
}

#[test]
fn join_under_refuses_anything_but_plain_components() {
    let out = Path::new("/out");
    assert_eq!(
        join_under(out, Path::new("a/b")),
        Some(PathBuf::from("/out/a/b"))
    );
    assert_eq!(join_under(out, Path::new("../a")), None);
    assert_eq!(join_under(out, Path::new("/etc")), None);
    assert_eq!(
        join_under(out, Path::new("a/./b")),
        Some(PathBuf::from("/out/a/b"))
    );
    assert_eq!(join_under(out, Path::new("")), None);
}
