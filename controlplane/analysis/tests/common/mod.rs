//! Shared by the analysis integration tests: the real nsys exports under shared/testdata, one
//! `RecipeHost` with the built recipe components, and the SQLite (rusqlite's, current) that
//! runs the oracles.

#![allow(dead_code, reason = "each test binary uses a different part")]

pub mod oracle;
pub mod service;

use std::{
    path::{Path, PathBuf},
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

/// Runs an oracle script on `db`, read-only, in the SQLite that rusqlite bundles (3.54: the
/// `round()` of current SQLite and current nsys, which rounds the double itself, not the
/// 16-digit text older SQLite CLIs use), and returns the last statement's rows as JSON
/// objects. The script is SQL as the sqlite3 CLI would take it: leading `.parameter set :name
/// INTEGER` lines bind parameters, and leading `ATTACH ...;` statements run first.
pub fn sqlite3_json(db: &Path, script: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
    use rusqlite::{
        functions::FunctionFlags,
        types::{Value as SqlValue, ValueRef},
        Connection, OpenFlags,
    };
    let mut params: Vec<(String, SqlValue)> = Vec::new();
    let mut sql = String::new();
    for line in script.lines() {
        match line.trim_start().strip_prefix(".parameter set ") {
            Some(rest) => {
                let (name, value) = rest
                    .trim()
                    .split_once(' ')
                    .expect(".parameter set NAME VALUE");
                let value = value.trim();
                let value = match (value.parse::<i64>(), value.parse::<f64>()) {
                    (Ok(i), _) => SqlValue::Integer(i),
                    (_, Ok(x)) => SqlValue::Real(x),
                    _ => SqlValue::Text(value.trim_matches('\'').to_owned()),
                };
                params.push((name.to_owned(), value));
            }
            None => {
                sql.push_str(line);
                sql.push('\n');
            }
        }
    }
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", db.display()));
    // The bundled SQLite has no math functions; sqrt() is the one the oracles use.
    conn.create_scalar_function("sqrt", 1, FunctionFlags::SQLITE_DETERMINISTIC, |ctx| {
        Ok(ctx.get::<Option<f64>>(0)?.map(f64::sqrt))
    })
    .unwrap();
    let mut rest = sql.trim_start();
    while rest
        .get(..6)
        .is_some_and(|s| s.eq_ignore_ascii_case("ATTACH"))
    {
        let (attach, tail) = rest.split_once(';').expect("ATTACH ...;");
        conn.execute_batch(attach)
            .unwrap_or_else(|e| panic!("{attach} on {}: {e}", db.display()));
        rest = tail.trim_start();
    }
    let mut stmt = conn
        .prepare(rest)
        .unwrap_or_else(|e| panic!("oracle SQL on {}: {e}\n{rest}", db.display()));
    for (name, value) in &params {
        if let Some(i) = stmt.parameter_index(name).unwrap() {
            stmt.raw_bind_parameter(i, value).unwrap();
        }
    }
    let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows
        .next()
        .unwrap_or_else(|e| panic!("oracle SQL on {}: {e}", db.display()))
    {
        let mut map = serde_json::Map::new();
        for (i, name) in names.iter().enumerate() {
            let value = match row.get_ref(i).unwrap() {
                ValueRef::Null => serde_json::Value::Null,
                ValueRef::Integer(v) => v.into(),
                ValueRef::Real(v) => serde_json::Number::from_f64(v)
                    .map_or(serde_json::Value::Null, serde_json::Value::Number),
                ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned().into(),
                ValueRef::Blob(b) => b
                    .iter()
                    .map(|x| format!("{x:02x}"))
                    .collect::<String>()
                    .into(),
            };
            map.insert(name.clone(), value);
        }
        out.push(map);
    }
    out
}

/// Whether `db` has `table`.
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

/// Per kernel name, the kernels that overlap `[start, end)`: `(name, count, total duration
/// clipped to the range)` (the timeline's range aggregates, by SQL).
pub fn kernels_in_range(
    db: &rusqlite::Connection,
    start: i64,
    end: i64,
) -> Vec<(String, i64, i64)> {
    let mut stmt = db
        .prepare(
            "SELECT s.value, count(*), sum(min(k.end, ?2) - max(k.start, ?1)) \
             FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName \
             WHERE k.start < ?2 AND k.end > ?1 GROUP BY s.value",
        )
        .unwrap();
    stmt.query_map([start, end], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The bars of a figure drawn by the SDK's `svg::bar_chart`: each `<title>label: value</title>`,
/// the label unescaped.
pub fn figure_bars(svg: &str) -> Vec<(String, f64)> {
    svg.split("<title>")
        .skip(1)
        .map(|t| {
            let title = t.split("</title>").next().unwrap_or_default();
            let (label, value) = title.rsplit_once(": ").expect("label: value");
            let label = label
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&apos;", "'")
                .replace("&amp;", "&");
            (label, value.parse().expect("a number"))
        })
        .collect()
}
