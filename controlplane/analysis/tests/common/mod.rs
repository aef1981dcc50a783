//! Shared by the analysis integration tests: the real nsys exports under shared/testdata, one
//! `RecipeHost` with the built recipe components, and the sqlite3 CLI that runs the oracles.

#![allow(dead_code, reason = "each test binary uses a different part")]

pub mod oracle;
pub mod service;

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{Arc, OnceLock},
};

use nsight_analysis::{Limits, RecipeHost};
use nsight_e2e::wasm_artifact;
use wasmtime::component::Component;

/// The directory of real Nsight Systems SQLite exports (read-only inputs, read in place):
/// `NSIGHT_TESTDATA_DIR`, else `shared/testdata/nsys` beside the clone (where CI has it).
pub fn testdata_dir() -> PathBuf {
    std::env::var_os("NSIGHT_TESTDATA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/nsys")
        })
}

/// Every `.sqlite` file under the testdata directory, sorted.
pub fn reports() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| {
            panic!(
                "cannot read the nsys exports in {}: {e}; set NSIGHT_TESTDATA_DIR to a \
                     directory of Nsight Systems SQLite exports (docs/development.md)",
                dir.display()
            )
        });
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "sqlite") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&testdata_dir(), &mut out);
    out.sort();
    assert!(
        out.len() >= 10,
        "expected the nsys exports under {}, found {out:?}",
        testdata_dir().display()
    );
    out
}

/// A short name for messages: the path under the testdata directory.
pub fn short(path: &Path) -> String {
    path.strip_prefix(testdata_dir())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// One host for the whole test binary, so that each component is compiled once.
pub fn host() -> &'static RecipeHost {
    static HOST: OnceLock<RecipeHost> = OnceLock::new();
    HOST.get_or_init(|| RecipeHost::new(Limits::default()).unwrap())
}

/// The built component of `recipe` (e.g. `nvtx_sum`), compiled by the shared host.
pub fn recipe(name: &str) -> Arc<Component> {
    host()
        .load(&wasm_artifact(&format!("recipes/{name}.wasm")))
        .unwrap()
}

/// Runs `sql` with the sqlite3 CLI on `db`, read-only, and returns the rows as JSON objects.
pub fn sqlite3_json(db: &Path, sql: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
    // The SQL goes in on stdin: as an argument, a leading `--` comment reads as an option.
    let mut child = Command::new("sqlite3")
        .args(["-readonly", "-json", "-bail"])
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the sqlite3 CLI (Debian package sqlite3, installed by `cargo xtask setup`)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(sql.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "sqlite3 failed on {}: {}",
        db.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    if text.trim().is_empty() {
        return Vec::new();
    }
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    rows.into_iter()
        .map(|r| match r {
            serde_json::Value::Object(m) => m,
            other => panic!("unexpected sqlite3 JSON row {other}"),
        })
        .collect()
}

/// Whether `db` has `table`, asked of the sqlite3 CLI.
pub fn has_table(db: &Path, table: &str) -> bool {
    let rows = sqlite3_json(
        db,
        &format!(
            "SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = '{table}'"
        ),
    );
    rows[0]["n"].as_i64() == Some(1)
}

/// Whether `db` has `table` with `column`.
pub fn has_column(db: &Path, table: &str, column: &str) -> bool {
    let rows = sqlite3_json(
        db,
        &format!("SELECT count(*) AS n FROM pragma_table_info('{table}') WHERE name = '{column}'"),
    );
    rows[0]["n"].as_i64() == Some(1)
}
