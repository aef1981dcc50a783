//! `nsight-cloud analysis run NAME --session A[:C] --session B[:D] --wait`: the real CLI
//! against the real analysis service (`nsight-analysis` over a local directory store seeded
//! with real exports from shared/testdata/nsys), for a recipe over several sessions (`diff`):
//! the job's inputs in order, its CSV equal to the local form's on the same two files, two
//! collections of one session, and flags that do not go together refused before any job
//! exists, with exit code 2 and a message saying what to write.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::path::Path;

use nsight_e2e::{
    bin, cli::Cli, free_port, platform::AnalysisProcess, testdata, wasm_artifact, TempDir,
};
use serde_json::{json, Value};

const A: &str = "6f1a4a3c-2b7e-4c55-9d0e-1a2b3c4d5e01";
const B: &str = "6f1a4a3c-2b7e-4c55-9d0e-1a2b3c4d5e02";
/// A session with no reports.
const EMPTY: &str = "6f1a4a3c-2b7e-4c55-9d0e-1a2b3c4d5e03";

fn seed(store: &Path, key: &str, source: &Path) {
    let dest = store.join(key);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::copy(source, dest).unwrap();
}

fn jobs(cli: &Cli<'_>) -> usize {
    cli.json(&["analysis", "reports", "list"])["jobs"]
        .as_array()
        .unwrap()
        .len()
}

#[test]
fn a_job_over_several_sessions_runs_on_the_service_in_order() {
    let dir = TempDir::new("cli-analysis-sessions");
    let store = dir.path().join("store");
    let before = testdata("nsys-ai/mfu_2gpu_before.sqlite");
    let after = testdata("nsys-ai/mfu_2gpu_after.sqlite");
    let key_a = format!("default/{A}/1/app_default_0_a.sqlite");
    let key_b1 = format!("default/{B}/1/app_default_0_b.sqlite");
    let key_b2 = format!("default/{B}/2/app_default_0_c.sqlite");
    seed(&store, &key_a, &before);
    seed(&store, &key_b1, &after);
    seed(&store, &key_b2, &before);
    let service = AnalysisProcess::start(
        &bin("nsight-analysis"),
        free_port(),
        (&store, None),
        &[],
        &dir.path().join("analysis.log"),
    );
    let config = dir.path().join("nsight-cloud.conf");
    let cli = Cli { config: &config };
    cli.ok(&["configure", "--gw", &format!("http://{}", service.http)]);

    // A then B's collection 1: the table a user reads.
    let b1 = format!("{B}:1");
    let out = cli.ok(&[
        "analysis",
        "run",
        "diff",
        "--session",
        A,
        "--session",
        &b1,
        "--wait",
    ]);
    assert!(
        out.contains(&format!("on sessions {A}, {B}:1: succeeded")) && out.contains("diff.csv"),
        "{out}"
    );

    // The same with --output json, this command's flags after the recipe's own argument: the
    // recipe gets only its argument; the job names both inputs and reports, in order.
    let job = cli.json(&[
        "analysis",
        "run",
        "diff",
        "--timeunit",
        "nsec",
        "--session",
        A,
        "--wait",
        "--session",
        &b1,
    ]);
    assert_eq!(job["status"], "succeeded", "{job:#}");
    assert_eq!(job["args"], json!(["--timeunit", "nsec"]), "{job:#}");
    assert_eq!(
        job["inputs"],
        json!([{ "session": A }, { "session": B, "collection": "1" }])
    );
    assert_eq!(job["reports"], json!([key_a, key_b1]));
    let notes = job["notes"].to_string();
    assert!(
        notes.contains(&format!("A is {key_a}, B is {key_b1}")),
        "{notes}"
    );

    // Its diff.csv is what the local form computes on the same two files.
    let id = job["id"].as_str().unwrap();
    let downloads = dir.path().join("downloads");
    cli.ok(&[
        "analysis",
        "reports",
        "download",
        id,
        "-o",
        downloads.to_str().unwrap(),
    ]);
    let served = std::fs::read_to_string(downloads.join(id).join("diff.csv")).unwrap();
    let local_dir = dir.path().join("local");
    let recipes = wasm_artifact("recipes");
    cli.ok(&[
        "analysis",
        "run",
        "diff",
        "--input",
        before.to_str().unwrap(),
        "--input",
        after.to_str().unwrap(),
        "--output",
        local_dir.to_str().unwrap(),
        "--recipes-dir",
        recipes.to_str().unwrap(),
        "--cache-dir",
        dir.path().join("cache").to_str().unwrap(),
    ]);
    let local = std::fs::read_to_string(local_dir.join("diff.csv")).unwrap();
    assert!(served.lines().count() > 2, "{served}");
    assert_eq!(served, local);

    // Two collections of one session.
    let b2 = format!("{B}:2");
    let job = cli.json(&[
        "analysis",
        "run",
        "diff",
        "--session",
        &b2,
        "--session",
        &b1,
        "--wait",
    ]);
    assert_eq!(job["status"], "succeeded", "{job:#}");
    assert_eq!(job["reports"], json!([key_b2, key_b1]));

    // One --session with a collection is the single form, as --collection is.
    let job = cli.json(&["analysis", "run", "nvtx_sum", "--session", &b1, "--wait"]);
    assert_eq!(job["status"], "succeeded", "{job:#}");
    assert_eq!(job["reports"], json!([key_b1]));
    assert_eq!(job["inputs"], json!([{ "session": B, "collection": "1" }]));

    // An input without reports fails the job, named.
    let (code, out, _) = cli.run(&[
        "analysis",
        "run",
        "diff",
        "--session",
        A,
        "--session",
        EMPTY,
        "--wait",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("session default/{EMPTY} has no .sqlite report")),
        "{out}"
    );

    // Flags that do not go together: exit 2, what to write, and no job.
    let made = jobs(&cli);
    let refused = |args: &[&str], want: &str| {
        let mut all = vec!["analysis", "run", "diff"];
        all.extend_from_slice(args);
        let (code, out, err) = cli.run(&all);
        assert_eq!(code, 2, "{all:?}: {out}{err}");
        assert!(err.contains(want), "{all:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    refused(
        &["--session", A, "--session", B, "--collection", "1"],
        "give each its own as --session UUID:COLLECTION",
    );
    refused(
        &["--session", &b1, "--collection", "2"],
        "the collection is given twice",
    );
    refused(&["--session", "latest"], "is not a session ID");
    refused(
        &["--session", &format!("{A}:")],
        "the collection after `:` is empty",
    );
    let many: Vec<&str> = std::iter::repeat_n(["--session", A], 17)
        .flatten()
        .collect();
    refused(&many, "at most 16");
    assert_eq!(jobs(&cli), made, "a refused command creates no job");
    let listed: Value = cli.json(&["analysis", "reports", "list"]);
    assert!(
        listed["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["inputs"].as_array().is_some_and(|i| i.len() == 2)),
        "{listed:#}"
    );
}
