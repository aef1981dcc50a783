//! The host's limits against real misbehaving Wasm code: `plugins/test-recipes/misbehave`
//! (built by `cargo xtask build-wasm` into `test-recipes/`) loops forever, allocates without
//! bound, panics, traps or returns malformed output on request. Each run must fail with a
//! message a person can act on, and the same host must run the next recipe as if nothing
//! happened.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::{path::PathBuf, sync::Arc, time::Duration};

use nsight_analysis::{sandbox::CallFailure, Limits, RecipeHost, RecipeHostError, RecipeOutput};
use nsight_e2e::{wasm_artifact, TempDir};
use wasmtime::component::Component;

struct Fixture {
    host: RecipeHost,
    component: Arc<Component>,
    report: PathBuf,
    _dir: TempDir,
}

fn fixture(limits: Limits) -> Fixture {
    let host = RecipeHost::new(limits).unwrap();
    let component = host
        .load(&wasm_artifact("test-recipes/misbehave.wasm"))
        .unwrap();
    let dir = TempDir::new("recipe-limits");
    let report = dir.path().join("r.sqlite");
    rusqlite::Connection::open(&report)
        .unwrap()
        .execute_batch("CREATE TABLE StringIds (id INTEGER, value TEXT);")
        .unwrap();
    Fixture {
        host,
        component,
        report,
        _dir: dir,
    }
}

impl Fixture {
    fn run(&self, fault: &str) -> Result<RecipeOutput, RecipeHostError> {
        self.host.run(
            &self.component,
            &self.report,
            &[("fault".to_string(), fault.to_string())],
        )
    }

    /// The run of `fault` fails; returns the whole message (error and causes).
    fn fails(&self, fault: &str) -> (RecipeHostError, String) {
        let err = self.run(fault).unwrap_err();
        let mut text = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        // The host is unharmed: the next run succeeds.
        let ok = self.run("none").unwrap();
        assert_eq!(ok.tables[0].rows.len(), 1, "after {fault}");
        (err, text)
    }
}

fn small_limits() -> Limits {
    Limits {
        fuel: 200_000_000,
        memory_bytes: 64 << 20,
        ..Limits::default()
    }
}

#[test]
fn a_well_behaved_run_returns_its_table_and_figure() {
    let f = fixture(small_limits());
    let out = f.run("none").unwrap();
    assert_eq!(out.tables.len(), 1);
    assert_eq!(out.figures.len(), 1);
    assert!(out.figures[0].svg.starts_with("<svg"));
}

#[test]
fn a_recipe_that_loops_forever_is_stopped_by_its_fuel() {
    let f = fixture(small_limits());
    let (err, text) = f.fails("spin");
    assert!(
        matches!(
            err,
            RecipeHostError::Call {
                call: "run",
                source: CallFailure::OutOfFuel { fuel: 200_000_000 }
            }
        ),
        "{err:?}"
    );
    assert!(
        text.contains("it may loop forever") && text.contains("--fuel"),
        "{text}"
    );
}

#[test]
fn a_recipe_that_allocates_without_bound_is_stopped_by_the_memory_limit() {
    let f = fixture(small_limits());
    let (err, text) = f.fails("grow");
    assert!(
        matches!(
            err,
            RecipeHostError::Call {
                source: CallFailure::MemoryLimit { limit_mib: 64, .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        text.contains("limit of 64 MiB") && text.contains("--memory-mib"),
        "{text}"
    );
}

#[test]
fn a_panic_fails_the_run_with_the_recipe_s_message() {
    let f = fixture(small_limits());
    let (err, text) = f.fails("panic");
    assert!(
        matches!(
            err,
            RecipeHostError::Call {
                source: CallFailure::Trap { panic: Some(_), .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        text.contains("the recipe panicked at")
            && text.contains("fault injected: the recipe hit a bug"),
        "{text}"
    );
}

#[test]
fn a_trap_without_a_panic_names_the_trap() {
    let f = fixture(small_limits());
    let (err, text) = f.fails("trap");
    assert!(
        matches!(
            err,
            RecipeHostError::Call {
                source: CallFailure::Trap { panic: None, .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        text.contains("trapped") && text.contains("unreachable"),
        "{text}"
    );
}

#[test]
fn malformed_outputs_are_refused_with_what_is_wrong() {
    let f = fixture(small_limits());
    for (fault, want) in [
        (
            "ragged",
            "table misbehave: row 1 has 1 values for 2 columns",
        ),
        (
            "kind",
            "table misbehave: row 1, column `Count` is declared int but holds text",
        ),
        ("svg", "figure misbehave_square is not an SVG document"),
    ] {
        let (err, text) = f.fails(fault);
        assert!(
            matches!(err, RecipeHostError::Output(_)),
            "{fault}: {err:?}"
        );
        assert!(text.contains(want), "{fault}: {text}");
    }
}

#[test]
fn a_log_flood_is_cut_and_the_run_still_succeeds() {
    let f = fixture(Limits::default());
    let out = f.run("flood").unwrap();
    assert_eq!(out.log.len(), nsight_analysis::sandbox::MAX_LOG_LINES + 1);
    assert_eq!(
        out.log.last().unwrap().message,
        "98000 more log lines dropped (a call keeps at most 2000)"
    );
}

#[test]
fn a_spinning_recipe_is_cancelled_within_a_second() {
    let f = fixture(Limits::default());
    let cancel = f.host.cancel_handle();
    let args = [("fault".to_string(), "spin".to_string())];
    std::thread::scope(|s| {
        let run = s.spawn(|| {
            f.host
                .run_cancellable(&f.component, &f.report, &args, &cancel)
        });
        std::thread::sleep(Duration::from_millis(300));
        assert!(!run.is_finished(), "the spinning recipe ended by itself");
        let t = std::time::Instant::now();
        cancel.cancel();
        let err = run.join().unwrap().unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        assert!(matches!(err, RecipeHostError::Cancelled), "{err:?}");
    });
    assert!(f.run("none").is_ok());
}
