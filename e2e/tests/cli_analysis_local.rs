//! `nsight-cloud analysis run <name> --input FILE.sqlite...`: the real binary runs recipes on
//! real exports from shared/testdata/nsys with no server and no configuration file, writes the
//! CSVs, SVG figures, a notebook (`nbformat` validates it) and an HTML page, reuses the
//! compiled component from its cache in the next process, and refuses bad input with a clear
//! message and exit code, never a panic.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use nsight_e2e::{bin, cli::Cli, required_path, testdata, wasm_artifact, TempDir};

fn recipes_dir() -> PathBuf {
    wasm_artifact("recipes/cuda_gpu_kern_sum.wasm")
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `analysis run <args> --recipes-dir R --cache-dir <dir>/cache` with a configuration file
/// that does not exist: (exit code, stdout, stderr).
fn local(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let config = dir.join("no-such.conf");
    let cache = dir.join("cache");
    let recipes = recipes_dir();
    let mut all = vec!["analysis", "run"];
    all.extend_from_slice(args);
    all.extend(["--recipes-dir", recipes.to_str().unwrap()]);
    all.extend(["--cache-dir", cache.to_str().unwrap()]);
    let (code, out, err) = Cli { config: &config }.run(&all);
    assert!(!err.contains("panicked"), "nsight-cloud panicked: {err}");
    (code, out, err)
}

fn sqlite3(db: &Path, sql: &str) -> String {
    let out = Command::new("sqlite3")
        .arg("-readonly")
        .arg(db)
        .arg(sql)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The CSV's column `header` summed (integers).
fn csv_sum(csv: &str, header: &str) -> i64 {
    let mut lines = csv.lines();
    let headers: Vec<&str> = lines.next().unwrap().split(',').collect();
    let i = headers.iter().position(|h| *h == header).unwrap();
    lines
        .map(|l| l.split(',').nth(i).unwrap().parse::<i64>().unwrap())
        .sum()
}

fn nbformat_validate(path: &Path) {
    let python = required_path("NSIGHT_CACHE_DIR", "cargo xtask setup").join("venv/bin/python");
    let out = Command::new(&python)
        .args([
            "-c",
            "import sys, nbformat; nb = nbformat.read(sys.argv[1], as_version=4); \
             nbformat.validate(nb)",
        ])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nbformat refused {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_recipe_runs_locally_writes_its_outputs_and_is_cached_for_the_next_process() {
    let dir = TempDir::new("cli-local");
    let report = testdata("gtls/report1.sqlite");
    let out_dir = dir.path().join("out");
    let (code, stdout, stderr) = local(
        dir.path(),
        &[
            "cuda_gpu_kern_sum",
            "--input",
            report.to_str().unwrap(),
            "--output",
            out_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stderr.contains("component compiled in"), "{stderr}");
    assert!(
        stdout.contains("Total Time (ns)") && stdout.contains("== report1"),
        "{stdout}"
    );
    assert!(stdout.contains("wrote 3 files to"), "{stdout}");

    // The numbers agree with SQLite on the same file.
    let csv = std::fs::read_to_string(out_dir.join("report1_cuda_gpu_kern_sum.csv")).unwrap();
    let total: i64 = sqlite3(
        &report,
        "SELECT sum(\"end\" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL",
    )
    .parse()
    .unwrap();
    let count: i64 = sqlite3(&report, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
        .parse()
        .unwrap();
    assert_eq!(csv_sum(&csv, "Total Time (ns)"), total);
    assert_eq!(csv_sum(&csv, "Instances"), count);
    nbformat_validate(&out_dir.join("notebook.ipynb"));
    let html = std::fs::read_to_string(out_dir.join("notebook.html")).unwrap();
    assert!(
        html.contains("<a href=\"report1_cuda_gpu_kern_sum.csv\">"),
        "links to the CSV beside it"
    );

    // A second process loads the compiled component from the cache, with the same result.
    let again = dir.path().join("again");
    let (code, stdout2, stderr) = local(
        dir.path(),
        &[
            "cuda_gpu_kern_sum",
            "--input",
            report.to_str().unwrap(),
            "--output",
            again.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("loaded from the compile cache"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(again.join("report1_cuda_gpu_kern_sum.csv")).unwrap(),
        csv
    );
    assert_eq!(stdout2.lines().count(), stdout.lines().count());

    // JSON, arguments before --input, and several inputs with one table each.
    let second = testdata("nsys-ai/mock.sqlite");
    let (code, stdout, stderr) = local(
        dir.path(),
        &[
            "cuda_gpu_kern_sum",
            "--timeunit",
            "usec",
            "--input",
            report.to_str().unwrap(),
            "--input",
            second.to_str().unwrap(),
            "--output",
            dir.path().join("two").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("Total Time (us)") && stdout.contains("== mock"),
        "{stdout}"
    );
    assert!(dir.path().join("two/mock_cuda_gpu_kern_sum.csv").is_file());
}

#[test]
fn diff_runs_locally_on_two_reports() {
    let dir = TempDir::new("cli-local-diff");
    let a = testdata("nsys-ai/mfu_2gpu_before.sqlite");
    let b = testdata("nsys-ai/mfu_2gpu_after.sqlite");
    let out_dir = dir.path().join("diff");
    let config = dir.path().join("no-such.conf");
    let recipes = recipes_dir();
    let cache = dir.path().join("cache");
    let answer = Cli { config: &config }.json(&[
        "analysis",
        "run",
        "diff",
        "--input",
        a.to_str().unwrap(),
        "--name",
        "base",
        "--input",
        b.to_str().unwrap(),
        "--output",
        out_dir.to_str().unwrap(),
        "--recipes-dir",
        recipes.to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
    ]);
    assert_eq!(answer["recipe"], "diff");
    assert_eq!(
        answer["reports"][0]["key"],
        "mfu_2gpu_before, mfu_2gpu_after"
    );
    assert_eq!(answer["reports"][0]["tables"][0]["file"], "diff.csv");
    let csv = std::fs::read_to_string(out_dir.join("diff.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(
        header.starts_with("Total Time A (ns),Total Time B (ns),Total Time Δ (ns)"),
        "{header}"
    );
    assert!(header.ends_with("In,Name"), "{header}");
    // Every kernel of both reports is listed once.
    let names = |db: &Path| -> i64 {
        sqlite3(
            db,
            "SELECT count(DISTINCT coalesce(s.value, d.value)) FROM CUPTI_ACTIVITY_KIND_KERNEL k \
             LEFT JOIN StringIds s ON s.id = k.shortName LEFT JOIN StringIds d ON d.id = k.demangledName",
        )
        .parse()
        .unwrap()
    };
    let rows = i64::try_from(csv.lines().count() - 1).unwrap();
    assert!(rows >= names(&a).max(names(&b)), "{rows} rows");
    nbformat_validate(&out_dir.join("notebook.ipynb"));

    let (code, _, stderr) = local(dir.path(), &["diff", "--input", a.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("exactly two reports") && stderr.contains("got 1"),
        "{stderr}"
    );
}

#[test]
fn the_default_output_directory_is_new_each_run() {
    let dir = TempDir::new("cli-local-default");
    let report = testdata("nsys-ai/mock.sqlite");
    for n in 1..=2 {
        let out = Command::new(bin("nsight-cloud"))
            .current_dir(dir.path())
            .env("NSIGHT_RECIPES_DIR", recipes_dir())
            .env("NSIGHT_RECIPE_CACHE_DIR", dir.path().join("cache"))
            .args([
                "--config",
                "none.conf",
                "analysis",
                "run",
                "nvtx_sum",
                "--input",
            ])
            .arg(&report)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let made = dir.path().join(format!("nvtx_sum-{n}"));
        assert!(
            made.join("notebook.html").is_file(),
            "{} made",
            made.display()
        );
    }
}

#[test]
fn bad_input_gets_a_clear_error_and_exit_code() {
    let dir = TempDir::new("cli-local-bad");
    let report = testdata("nsys-ai/mock.sqlite");
    let report = report.to_str().unwrap();

    let text = dir.path().join("notes.sqlite");
    std::fs::write(&text, "just some text, not a database\n".repeat(100)).unwrap();
    let plain = dir.path().join("plain.sqlite");
    assert!(Command::new("sqlite3")
        .arg(&plain)
        .arg("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        .status()
        .unwrap()
        .success());

    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec!["cuda_gpu_kern_sum", "--input", text.to_str().unwrap()],
            1,
            "not a SQLite database",
        ),
        (
            vec!["cuda_gpu_kern_sum", "--input", plain.to_str().unwrap()],
            1,
            "not an Nsight Systems SQLite export",
        ),
        (
            vec!["cuda_gpu_kern_sum", "--input", "/no/such/file.sqlite"],
            1,
            "no such file",
        ),
        (
            vec!["no_such_recipe", "--input", report],
            2,
            "unknown recipe `no_such_recipe`",
        ),
        (
            vec!["cuda_gpu_kern_sum", "--bogus", "1", "--input", report],
            2,
            "unknown argument `--bogus`",
        ),
        (
            vec!["cuda_gpu_kern_sum", "--input", report, "--wait"],
            2,
            "--wait are for jobs on the server",
        ),
        (
            vec![
                "cuda_gpu_kern_sum",
                "--timeunit",
                "weeks",
                "--input",
                report,
            ],
            1,
            "--timeunit weeks",
        ),
        (vec!["cuda_gpu_kern_sum", "--input"], 2, ""),
    ];
    for (args, want_code, want) in cases {
        let (code, stdout, stderr) = local(dir.path(), &args);
        assert_eq!(code, want_code, "{args:?}: {stdout}\n{stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        if !want.is_empty() {
            assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        }
    }

    // No recipes directory at all.
    let (code, _, stderr) = Cli {
        config: &dir.path().join("c.conf"),
    }
    .run(&[
        "analysis",
        "run",
        "nvtx_sum",
        "--input",
        report,
        "--recipes-dir",
        "/no/recipes",
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("cannot read the recipes directory /no/recipes"),
        "{stderr}"
    );
}

#[test]
fn a_recipe_s_figure_is_written_beside_its_csv_and_shown_in_the_page() {
    let dir = TempDir::new("cli-analysis-figure");
    let out_dir = dir.path().join("out");
    let report = testdata("extrap/con_kernel.sqlite");
    let (code, stdout, stderr) = local(
        dir.path(),
        &[
            "cuda_gpu_kern_hist",
            "--input",
            report.to_str().unwrap(),
            "--output",
            out_dir.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stdout.contains("wrote 4 files to"), "{stdout}");
    let svg = std::fs::read_to_string(out_dir.join("con_kernel_cuda_gpu_kern_hist.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    let html = std::fs::read_to_string(out_dir.join("notebook.html")).unwrap();
    assert!(
        html.contains("<a href=\"con_kernel_cuda_gpu_kern_hist.svg\">"),
        "{html}"
    );
    assert_eq!(html.matches("src=\"data:image/svg+xml;base64,").count(), 1);
    nbformat_validate(&out_dir.join("notebook.ipynb"));
}

/// `nsight-cloud --config <missing> <args>` with `PATH` set to `path`: (code, stdout, stderr).
fn with_path(dir: &Path, path: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin("nsight-cloud"))
        .arg("--config")
        .arg(dir.join("no-such.conf"))
        .args(args)
        .env("PATH", path)
        .env_remove("NSIGHT_API_KEY")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!err.contains("panicked"), "nsight-cloud panicked: {err}");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        err,
    )
}

#[test]
fn a_report_file_is_exported_by_nsys_on_path_or_refused_with_the_command() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = TempDir::new("cli-local-nsys-rep");
    let report = dir.path().join("run.nsys-rep");
    std::fs::write(&report, b"an nsys report").unwrap();
    let recipes = recipes_dir();
    let cache = dir.path().join("cache");
    let out_dir = dir.path().join("out");
    let args = [
        "analysis",
        "run",
        "cuda_gpu_kern_sum",
        "--input",
        report.to_str().unwrap(),
        "--recipes-dir",
        recipes.to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
        "--output",
        out_dir.to_str().unwrap(),
    ];
    // No nsys: refused with the command that exports the report.
    let (code, _, err) = with_path(dir.path(), "/usr/bin:/bin", &args);
    assert_eq!(code, 1, "{err}");
    let sqlite = dir.path().join("run.sqlite");
    let command = format!(
        "nsys export --type sqlite --output {} {}",
        sqlite.display(),
        report.display()
    );
    assert!(err.contains(&command), "{err}");

    // An nsys on PATH (a stand-in that "exports" a real export): the recipe runs on its output.
    let bin_dir = dir.path().join("bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    let nsys = bin_dir.join("nsys");
    std::fs::write(
        &nsys,
        format!(
            "#!/bin/sh\nwhile [ \"$1\" != --output ]; do shift; done\ncp {} \"$2\"\n",
            testdata("nsys-ai/mock.sqlite").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&nsys, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:/usr/bin:/bin", bin_dir.display());
    let (code, out, err) = with_path(dir.path(), &path, &args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("exported to"), "{err}");
    assert!(sqlite.is_file());
    let csv = std::fs::read_to_string(dir.path().join("out/run_cuda_gpu_kern_sum.csv")).unwrap();
    let kernels: i64 = sqlite3(&sqlite, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
        .parse()
        .unwrap();
    assert_eq!(csv_sum(&csv, "Instances"), kernels);
}

#[test]
fn list_and_info_describe_the_local_recipes_with_no_server() {
    let dir = TempDir::new("cli-local-catalog");
    let config = dir.path().join("no-such.conf");
    let cli = Cli { config: &config };
    let recipes = recipes_dir();
    let cache = dir.path().join("cache");
    let local = ["--recipes-dir", recipes.to_str().unwrap()];
    let cache = ["--cache-dir", cache.to_str().unwrap()];

    let mut args = vec!["analysis", "list"];
    args.extend(local);
    args.extend(cache);
    let list = cli.json(&args);
    let names: Vec<&str> = list["recipes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(&recipes)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(names, files);

    // No configuration file: `info` answers from the local directory without --local.
    let (code, out, err) = with_path(
        dir.path(),
        &std::env::var("PATH").unwrap_or_default(),
        &["analysis", "info", "cuda_api_sum", cache[0], cache[1]],
    );
    // With neither --recipes-dir nor NSIGHT_RECIPES_DIR/NSIGHT_WASM_DIR the directory is
    // recipes/ beside the binary; the tests' environment names NSIGHT_WASM_DIR.
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("cuda_api_sum (CUDA API Summary)"), "{out}");
    assert!(out.contains("--timeunit"), "{out}");

    let mut args = vec!["analysis", "info", "no_such_recipe"];
    args.extend(local);
    let (code, _, err) = cli.run(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown recipe `no_such_recipe`"), "{err}");
    assert!(err.contains("cuda_gpu_kern_sum"), "{err}");
}
