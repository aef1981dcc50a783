//! Unit tests of the storage config format: the documented example, defaults, and an error
//! naming the field for every way a field can be missing or wrong.

use super::*;

const DOC_EXAMPLE: &str = "\
storage_type: s3
bucket_name: my-profiling-results
aws_access_key_id: YOUR_ACCESS_KEY
aws_secret_access_key: YOUR_SECRET_KEY
region_name: us-west-2
local_cache_dir: /tmp/s3-cache
";

fn parse(text: &str) -> Result<StorageConfig, ConfigError> {
    StorageConfig::from_yaml(text, "test.yaml").map(|l| l.config)
}

fn err(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn the_user_guide_example_parses() {
    let StorageConfig::S3(s3) = parse(DOC_EXAMPLE).unwrap() else {
        panic!("expected s3")
    };
    assert_eq!(s3.bucket, "my-profiling-results");
    assert_eq!(s3.access_key_id, "YOUR_ACCESS_KEY");
    assert_eq!(s3.secret_access_key.expose(), "YOUR_SECRET_KEY");
    assert_eq!(s3.region, "us-west-2");
    assert_eq!(s3.endpoint_url, None);
    assert_eq!(
        s3.local_cache_dir.as_deref(),
        Some(Path::new("/tmp/s3-cache"))
    );
}

#[test]
fn endpoint_and_region_defaults() {
    let text = "storage_type: s3\nbucket_name: reports\naws_access_key_id: a\n\
                aws_secret_access_key: b\nendpoint_url: http://localhost:9000/\n";
    let StorageConfig::S3(s3) = parse(text).unwrap() else {
        panic!("expected s3")
    };
    assert_eq!(s3.region, DEFAULT_REGION);
    assert_eq!(s3.endpoint_url.as_deref(), Some("http://localhost:9000"));
}

#[test]
fn local_needs_a_directory() {
    let cfg = parse("storage_type: local\nlocal_cache_dir: /var/reports\n").unwrap();
    assert_eq!(
        cfg,
        StorageConfig::Local(LocalConfig {
            root: "/var/reports".into()
        })
    );
    let e = err("storage_type: local\n");
    assert!(
        e.contains("`local_cache_dir` is required when storage_type is local"),
        "{e}"
    );
}

#[test]
fn every_missing_s3_field_is_named() {
    for field in ["bucket_name", "aws_access_key_id", "aws_secret_access_key"] {
        let text: String = DOC_EXAMPLE
            .lines()
            .filter(|l| !l.starts_with(field))
            .map(|l| format!("{l}\n"))
            .collect();
        let e = err(&text);
        assert!(
            e.contains(&format!("`{field}` is required when storage_type is s3")),
            "{field}: {e}"
        );
        assert!(e.contains("test.yaml"), "{e}");
    }
    let e = err(&DOC_EXAMPLE.replace("bucket_name: my-profiling-results", "bucket_name: ''"));
    assert!(e.contains("`bucket_name` is required"), "{e}");
}

#[test]
fn invalid_values_are_explained() {
    let cases = [
        (
            "storage_type: s3\n",
            "storage_type: gcs\n",
            "`storage_type` is invalid",
        ),
        (
            "storage_type: s3\n",
            "",
            "`storage_type` is invalid: missing",
        ),
        (
            "bucket_name: my-profiling-results",
            "bucket_name: My_Bucket",
            "`bucket_name` is invalid",
        ),
        (
            "bucket_name: my-profiling-results",
            "bucket_name: ab",
            "3 to 63",
        ),
        (
            "region_name: us-west-2",
            "endpoint_url: localhost:9000",
            "`endpoint_url` is invalid: `localhost:9000` must start with http:// or https://",
        ),
        (
            "region_name: us-west-2",
            "endpoint_url: http://",
            "has no host",
        ),
        (
            "region_name: us-west-2",
            "endpoint_url: http://h:1/bucket",
            "must not have a path",
        ),
        (
            "region_name: us-west-2",
            "endpoint_url: http://u:p@h:1",
            "must not carry credentials",
        ),
    ];
    for (from, to, expected) in cases {
        let e = err(&DOC_EXAMPLE.replace(from, to));
        assert!(e.contains(expected), "{to}: {e}");
    }
}

#[test]
fn yaml_errors_name_the_file() {
    let e = parse("storage_type: [s3\n").unwrap_err();
    assert!(matches!(e, ConfigError::Parse { .. }), "{e:?}");
    assert!(e.to_string().contains("test.yaml"));
}

#[test]
fn storage_type_is_case_insensitive_and_unknown_fields_are_reported() {
    let loaded = StorageConfig::from_yaml(
        &DOC_EXAMPLE.replace("storage_type: s3", "storage_type: S3\nminio_console: true"),
        "x",
    )
    .unwrap();
    assert!(matches!(loaded.config, StorageConfig::S3(_)));
    assert_eq!(loaded.ignored_fields, vec!["minio_console".to_owned()]);
}

#[test]
fn debug_never_prints_the_secret() {
    let cfg = parse(&DOC_EXAMPLE.replace("YOUR_SECRET_KEY", "hunter2-secret")).unwrap();
    let debug = format!("{cfg:?} {:#?}", cfg);
    assert!(!debug.contains("hunter2-secret"), "{debug}");
    assert!(debug.contains("<redacted>"));
}

#[test]
fn loads_from_a_path_and_names_a_missing_file() {
    let dir = std::env::temp_dir().join(format!("nsight-storage-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("storage-config.yaml");
    std::fs::write(&path, DOC_EXAMPLE).unwrap();
    assert!(StorageConfig::from_path(&path).is_ok());
    let missing = dir.join("nope.yaml");
    let e = StorageConfig::from_path(&missing).unwrap_err().to_string();
    assert!(e.contains("nope.yaml"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
