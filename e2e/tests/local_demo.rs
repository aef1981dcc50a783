//! The README's main command, as a test: the local platform (`nsight-controlplane local`: real
//! coordinator, analysis service, UI server, xDS server and Envoy gateway with API-key auth) and
//! the demo's session driven through the gateway with the CLI, on free ports. Checks what the
//! person is shown: the downloaded report, the nvtx_sum table of the sample's ranges, the UI and
//! the auth at the gateway.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::{path::PathBuf, time::Duration};

use nsight_e2e::{
    agent, bin,
    cli::Cli,
    demo::{run_session, DemoOptions, DemoPaths, LocalPlatform, NsysSample},
    envoy_bin, free_port, free_port_range, http, required_path, TempDir,
};

fn demo_paths() -> DemoPaths {
    DemoPaths {
        bin_dir: bin("nsight-controlplane").parent().unwrap().to_path_buf(),
        wasm_dir: required_path("NSIGHT_WASM_DIR", "cargo xtask build-wasm"),
        envoy_bin: envoy_bin(),
        python: agent::python(),
        sample: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../xtask/demo/nvtx_sample.py"),
        nsys: None,
    }
}

/// Free ports and fresh directories under `dir`.
fn demo_options(dir: &TempDir, collect_for: Duration, tls: bool) -> DemoOptions {
    DemoOptions {
        state_dir: dir.path().join("state"),
        gateway_port: free_port(),
        storage_port: free_port(),
        internal_ports_from: free_port_range(7),
        collect_for,
        out_dir: dir.path().join("out"),
        tls,
        extra_args: Vec::new(),
    }
}

#[test]
fn the_demo_profiles_a_python_program_end_to_end() {
    let dir = TempDir::new("local-demo");
    let paths = demo_paths();
    let options = demo_options(&dir, Duration::from_secs(2), false);
    let platform = LocalPlatform::start(&paths, &options).unwrap();

    // The gateway: the UI is public, the API needs the key.
    let ui = http::get(platform.gateway, "/", &[]).unwrap();
    assert_eq!(ui.status, 200);
    assert!(
        ui.body.contains("<html") || ui.body.contains("<!DOCTYPE"),
        "{}",
        ui.body
    );
    let denied = http::get(platform.gateway, "/coordinator/v1/status", &[]).unwrap();
    assert_eq!(denied.status, 401);
    // The storage port forwards only signed object paths.
    let storage = std::net::SocketAddr::from(([127, 0, 0, 1], options.storage_port));
    let api_on_storage = http::get(storage, "/v1/status", &[]).unwrap();
    assert_eq!(
        api_on_storage.status, 404,
        "the storage port must not expose the API"
    );

    // The control plane's own status: the gateway node took the configuration, no NACK.
    let status_addr = std::net::SocketAddr::from(([127, 0, 0, 1], options.internal_ports_from + 6));
    let xds = http::get(status_addr, "/xds/status", &[]).unwrap();
    assert_eq!(xds.status, 200);
    assert!(
        xds.body.contains("nsight-gateway/local/gateway"),
        "{}",
        xds.body
    );
    let metrics = http::get(status_addr, "/metrics", &[]).unwrap();
    assert!(
        metrics.body.contains("nsight_gateway_xds_acks_total"),
        "{}",
        metrics.body
    );
    assert!(
        !metrics.body.contains("nsight_gateway_xds_nacks_total{"),
        "{}",
        metrics.body
    );

    let outcome = run_session(&platform, &paths, &options).unwrap();

    assert_eq!(outcome.downloaded.len(), 1, "{:?}", outcome.downloaded);
    let report = &outcome.downloaded[0];
    assert!(
        report.extension().is_some_and(|e| e == "sqlite"),
        "{report:?}"
    );
    let dir_name = report
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .file_name()
        .unwrap();
    assert!(
        dir_name.to_string_lossy().ends_with("-nsight-demo"),
        "{dir_name:?}"
    );

    // The recipe's table has the sample's ranges, nested as the program nests them.
    let csv = &outcome.csv;
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| h.contains(name)).unwrap();
    let (range, instances, min) = (col("Range"), col("Instances"), col("Min"));
    let find = |name: &str| {
        rows.iter()
            .find(|r| r[range].trim_matches('"').ends_with(name))
            .unwrap_or_else(|| panic!("no {name} row in\n{csv}"))
    };
    let step: u64 = find("train_step")[instances].parse().unwrap();
    let forward: u64 = find("forward")[instances].parse().unwrap();
    assert!(step > 10, "2 s of collection holds many steps:\n{csv}");
    assert!(forward.abs_diff(step) <= 1, "one forward per step:\n{csv}");
    // The shortest instances: a loaded machine stretches sleeps, never shortens them.
    let min_forward: f64 = find("forward")[min].parse().unwrap();
    let min_backward: f64 = find("backward")[min].parse().unwrap();
    assert!(
        (3.9e6..20e6).contains(&min_forward) && min_backward > min_forward * 1.5,
        "forward works 4 ms, backward 8 ms:\n{csv}"
    );
    assert!(outcome
        .analysis_files
        .iter()
        .any(|f| f.ends_with("notebook.ipynb")));
    let printed: String = outcome
        .transcript
        .iter()
        .map(|(c, o)| format!("{c}\n{o}"))
        .collect();
    assert!(printed.contains("nsight-cloud ls"), "{printed}");
    assert!(printed.contains("1 file(s)"), "{printed}");
    platform.stop();
}

/// `local --tls`: HTTPS on the gateway with the local certificates; a CLI given their CA with
/// `configure --ca-cert` works, one without it is told what to do, plain HTTP gets nothing.
#[test]
fn the_local_gateway_serves_https_to_a_cli_that_trusts_its_ca() {
    let dir = TempDir::new("local-tls");
    let paths = demo_paths();
    let options = demo_options(&dir, Duration::from_secs(1), true);
    let platform = LocalPlatform::start(&paths, &options).unwrap();
    assert_eq!(
        platform.gateway_url,
        format!("https://localhost:{}", options.gateway_port)
    );
    let ca = platform.ca_cert().expect("local.json names the CA");

    let trusted_config = dir.path().join("trusted.conf");
    let trusted = Cli {
        config: &trusted_config,
    };
    trusted.ok(&[
        "configure",
        "--gw",
        &platform.gateway_url,
        "--apikey",
        &platform.api_key,
        "--ca-cert",
        &ca,
    ]);
    let status = trusted.json(&["status"]);
    assert_eq!(status["tag"], "default", "{status:#}");
    let session = trusted.json(&["session-begin", "--title", "over https"]);
    assert!(session["id"].is_string(), "{session:#}");

    let untrusted_config = dir.path().join("untrusted.conf");
    let untrusted = Cli {
        config: &untrusted_config,
    };
    untrusted.ok(&[
        "configure",
        "--gw",
        &platform.gateway_url,
        "--apikey",
        &platform.api_key,
    ]);
    let (code, _, err) = untrusted.run(&["status"]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("--ca-cert"),
        "the error says what to do: {err}"
    );

    let (code, _, err) = untrusted.run(&[
        "configure",
        "--gw",
        &platform.gateway_url,
        "--ca-cert",
        platform.description["apiKeyFile"].as_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("holds no PEM certificate"), "{err}");

    let plain = http::get(platform.gateway, "/coordinator/v1/status", &[]);
    assert!(
        !matches!(&plain, Ok(r) if r.status == 200),
        "plain HTTP must not be served: {plain:?}"
    );
    platform.stop();
}

/// With nsys on PATH the demo also profiles a program under the nsys backend and summarises its
/// kernels. No nsys exists on these machines: this runs the demo's nsys branch against the MOCK
/// nsys of `nsight_e2e::agent::mock_nsys`, whose export is a real nsys export with kernels.
#[test]
fn mock_nsys_the_demo_also_profiles_under_the_nsys_backend() {
    let dir = TempDir::new("local-demo-nsys");
    let mock_dir = dir.path().join("mock-nsys");
    std::fs::create_dir_all(&mock_dir).unwrap();
    let real_export = PathBuf::from("/work/shared/testdata/nsys/gtls/report1.sqlite");
    let nsys = agent::mock_nsys(&mock_dir, &real_export);
    let mut paths = demo_paths();
    paths.nsys = Some(NsysSample {
        nsys,
        argv: vec![
            agent::python().display().to_string(),
            paths.sample.display().to_string(),
            "600".into(),
        ],
    });
    let options = demo_options(&dir, Duration::from_secs(1), false);
    let platform = LocalPlatform::start(&paths, &options).unwrap();
    let outcome = run_session(&platform, &paths, &options).unwrap();
    platform.stop();

    let names: Vec<String> = outcome
        .downloaded
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(
        names
            .iter()
            .any(|n| n.contains("demo-nsys") && n.ends_with(".nsys-rep")),
        "{names:?}"
    );
    let kernels = outcome.kernels_csv.expect("a kernel summary");
    let header = kernels.lines().next().unwrap();
    assert!(
        header.contains("Instances") && header.contains("Name"),
        "{kernels}"
    );
    assert!(
        kernels.lines().count() > 2,
        "the real export's kernels:\n{kernels}"
    );
    let calls = agent::mock_nsys_calls(&mock_dir);
    assert!(
        calls.iter().any(|c| c[0] == "start") && calls.iter().any(|c| c[0] == "stop"),
        "profiler-start/stop reached nsys: {calls:?}"
    );
}
