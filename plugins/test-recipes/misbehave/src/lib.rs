//! `misbehave`: a recipe component that breaks the rules on request, so that the analysis host's
//! tests exercise its limits with real Wasm code instead of a stand-in. `--fault` picks what it
//! does; `cargo xtask build-wasm` puts it in `dist/test-recipes/`, never among the recipes a
//! service or the CLI installs.
//!
//! | `--fault` | what the run does | what the host must do |
//! |---|---|---|
//! | `none` | one small valid table and a figure | succeed |
//! | `spin` | loops forever | stop it when its fuel runs out (or on cancel) |
//! | `grow` | allocates and touches memory without bound | stop it at the memory limit |
//! | `panic` | panics with a message | fail with that message |
//! | `trap` | executes `unreachable` | fail, naming the trap |
//! | `ragged` | a row shorter than the columns | refuse the output |
//! | `kind` | text in an `int` column | refuse the output |
//! | `svg` | a figure that is HTML with a script, not SVG | refuse the output |
//! | `flood` | 100,000 log lines, then a valid table | keep a bounded log, succeed |

use nsight_recipe_sdk::{Args, Column, ColumnKind, Figure, Output, Report, Table, Value};

nsight_recipe_sdk::recipe_component!(Misbehave);

use component::{log, Argument, Guest, Level, Output as WitOutput, RecipeInfo};

struct Misbehave;

impl Guest for Misbehave {
    fn describe() -> RecipeInfo {
        RecipeInfo {
            name: "misbehave".into(),
            display_name: "Misbehaving Recipe (tests only)".into(),
            description: "Breaks the recipe rules on request, to test the host's limits.".into(),
            arguments: vec![Argument {
                name: "fault".into(),
                description: "none, spin, grow, panic, trap, ragged, kind, svg or flood.".into(),
                default_value: Some("none".into()),
            }],
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, misbehave)
    }
}

fn valid() -> Output {
    let mut out = Output::default();
    out.tables.push(Table {
        name: "misbehave".into(),
        columns: vec![
            Column::new("Fault", ColumnKind::Text, None),
            Column::new("Count", ColumnKind::Int, None),
        ],
        rows: vec![vec![Value::Text("none".into()), Value::Int(1)]],
    });
    out.figures.push(Figure {
        name: "misbehave_square".into(),
        svg: "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"20\" height=\"20\">\
              <rect width=\"20\" height=\"20\" fill=\"teal\"/></svg>"
            .into(),
    });
    out
}

fn misbehave(_report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["fault"])?;
    let fault = args.get("fault").unwrap_or("none");
    let mut out = valid();
    match fault {
        "none" => {}
        "spin" => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        "grow" => {
            let mut held: Vec<Vec<u8>> = Vec::new();
            loop {
                held.push(vec![1u8; 16 << 20]);
                std::hint::black_box(&held);
            }
        }
        #[allow(clippy::panic, reason = "panicking is this fault's whole point")]
        "panic" => panic!("fault injected: the recipe hit a bug"),
        "trap" => std::process::abort(),
        "ragged" => out.tables[0].rows.push(vec![Value::Text("short".into())]),
        "kind" => out.tables[0].rows.push(vec![
            Value::Text("kind".into()),
            Value::Text("not a number".into()),
        ]),
        "svg" => out.figures[0].svg = "<script>alert(document.cookie)</script>".into(),
        "flood" => {
            for i in 0..100_000 {
                log(Level::Info, &format!("flood line {i}"));
            }
        }
        other => {
            return Err(format!(
                "unknown --fault {other:?}: one of none, spin, grow, panic, trap, ragged, kind, \
                 svg, flood"
            ))
        }
    }
    Ok(out)
}
