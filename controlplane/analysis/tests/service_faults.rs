//! The real `nsight-analysis` binary running misbehaving recipe components
//! (`plugins/test-recipes/misbehave`, real Wasm code) next to the built-in recipes: a recipe
//! that loops forever, allocates without bound, panics, traps or returns malformed output fails
//! its job with a reason a person can act on, writes no files, and the service goes on serving
//! the other jobs. A well-behaved run's figure is stored as an SVG file, embedded in the page
//! and in the notebook (validated by `nbformat`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

mod common;

use std::path::{Path, PathBuf};

use common::service::{nbformat_validate, seed, testdata, Service};
use nsight_e2e::{wasm_artifact, TempDir};
use serde_json::{json, Value};

/// A recipes directory holding the built-in recipes and `misbehave`.
fn recipes_with_misbehave(root: &Path) -> PathBuf {
    let dir = root.join("recipes");
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(wasm_artifact("recipes")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    std::fs::copy(
        wasm_artifact("test-recipes/misbehave.wasm"),
        dir.join("misbehave.wasm"),
    )
    .unwrap();
    dir
}

fn start(dir: &TempDir) -> Service {
    seed(
        dir.path(),
        "default/ok/1/app_default_0_a.sqlite",
        &testdata("extrap/con_kernel.sqlite"),
    );
    let recipes = recipes_with_misbehave(dir.path());
    Service::start(
        dir.path(),
        None,
        &[
            "--recipes-dir",
            recipes.to_str().unwrap(),
            "--fuel",
            "200000000",
            "--memory-mib",
            "64",
        ],
    )
}

fn file_names(job: &Value) -> Vec<String> {
    job["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn misbehaving_recipes_fail_their_jobs_clearly_and_the_service_goes_on() {
    let dir = TempDir::new("analysis-svc-faults");
    let mut svc = start(&dir);
    let cases = [
        ("spin", "used up its fuel (200000000 units"),
        ("grow", "needed more memory than its limit of 64 MiB"),
        ("panic", "the recipe panicked at"),
        (
            "trap",
            "trapped (wasm trap: wasm `unreachable` instruction executed)",
        ),
        (
            "ragged",
            "malformed output: table misbehave: row 1 has 1 values for 2 columns",
        ),
        ("kind", "column `Count` is declared int but holds text"),
        ("svg", "figure misbehave_square is not an SVG document"),
    ];
    // Every fault job and a real recipe's job between each, all queued at once.
    let mut jobs = Vec::new();
    for (fault, want) in cases {
        let bad = svc.create(json!({
            "recipe": "misbehave", "session": "ok", "args": ["--fault", fault]
        }));
        let good = svc.create(json!({ "recipe": "cuda_gpu_kern_sum", "session": "ok" }));
        jobs.push((fault, want, bad, good));
    }
    for (fault, want, bad, good) in jobs {
        let job = svc.wait_finished(&bad);
        assert_eq!(job["status"], "failed", "{fault}: {job}");
        let reason = job["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("report default/ok/1/app_default_0_a.sqlite: "),
            "{fault}: {reason}"
        );
        assert!(reason.contains(want), "{fault}: {reason}");
        assert!(file_names(&job).is_empty(), "{fault}: {job}");
        let job = svc.wait_finished(&good);
        assert_eq!(job["status"], "succeeded", "after {fault}: {job}");
    }
    assert!(svc.process.is_running(), "{}", svc.process.log());

    // A recipe that floods the log succeeds; the job's log is cut, its outcome kept last.
    let flood = svc.create(json!({
        "recipe": "misbehave", "session": "ok", "args": ["--fault", "flood"]
    }));
    assert_eq!(svc.wait_finished(&flood)["status"], "succeeded");
    let (_, logs) = svc.get(&format!("/v1/jobs/{flood}/logs"));
    let lines: Vec<&str> = logs["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["message"].as_str().unwrap())
        .collect();
    assert_eq!(lines.len(), 2_000);
    assert!(
        lines[1_998].starts_with("log cut at 2000 lines: "),
        "{}",
        lines[1_998]
    );
    assert!(lines[1_999].starts_with("succeeded: "), "{}", lines[1_999]);
}

#[test]
fn a_figure_is_stored_as_svg_and_shown_in_the_page_and_the_notebook() {
    let dir = TempDir::new("analysis-svc-figure");
    let svc = start(&dir);
    let id = svc.create(json!({ "recipe": "misbehave", "session": "ok" }));
    let job = svc.wait_status(&id, "succeeded");
    let svg_name = "1_app_default_0_a_misbehave-square.svg";
    assert_eq!(
        file_names(&job),
        [
            "1_app_default_0_a_misbehave.csv",
            svg_name,
            "notebook.ipynb",
            "notebook.html"
        ]
    );
    let svg = svc.raw(&format!("/v1/jobs/{id}/files/{svg_name}"));
    assert_eq!(svg.status, 200);
    assert_eq!(svg.header("content-type"), Some("image/svg+xml"));
    assert!(svg.body.starts_with("<svg") && svg.body.contains("teal"));

    let page = svc.raw(&format!("/v1/jobs/{id}/notebook.html"));
    assert_eq!(
        page.header("content-security-policy"),
        Some("default-src 'none'; style-src 'unsafe-inline'; img-src data:")
    );
    assert!(
        page.body.contains("src=\"data:image/svg+xml;base64,"),
        "{}",
        page.body
    );
    assert!(page.body.contains(&format!("href=\"files/{svg_name}\"")));

    let notebook = svc.raw(&format!("/v1/jobs/{id}/files/notebook.ipynb"));
    let nb: Value = serde_json::from_str(&notebook.body).unwrap();
    let figure_cell = nb["cells"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        figure_cell["outputs"][0]["data"]["image/svg+xml"].as_str(),
        Some(svg.body.as_str())
    );
    nbformat_validate(dir.path(), &notebook.body);

    // A built-in recipe's chart goes the same way.
    let id = svc.create(json!({ "recipe": "gpu_time_util", "session": "ok" }));
    let job = svc.wait_status(&id, "succeeded");
    let svgs: Vec<String> = file_names(&job)
        .into_iter()
        .filter(|f| f.ends_with(".svg"))
        .collect();
    assert!(!svgs.is_empty(), "{job}");
    let page = svc.raw(&format!("/v1/jobs/{id}/notebook.html"));
    assert_eq!(
        page.body.matches("<img class=\"figure\"").count(),
        svgs.len(),
        "{}",
        page.body
    );
}
