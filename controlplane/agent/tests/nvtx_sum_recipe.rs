//! The nvtx_sum recipe (the real Wasm component, run by the analysis host) on a report written
//! by this agent: the recipe runs unchanged and sums ranges as the program recorded them.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use nsight_agent::report::{self, ReportMeta};
use nsight_analysis::{Limits, RecipeHost, Value};
use nsight_nvtx::dump::{Dump, Event, EventKind, RegisteredString, Window};

fn range(start: u64, end: u64, text: Option<&str>, text_id: Option<u64>, domain: u64) -> Event {
    Event {
        kind: EventKind::PushPop,
        start,
        end: Some(end),
        tid: 11,
        end_tid: None,
        domain,
        category: 0,
        color: None,
        text: text.map(str::to_owned),
        text_id,
        payload: None,
        range_id: None,
    }
}

#[test]
fn nvtx_sum_summarises_an_agent_report() {
    let mut domain = range(0, 0, Some("trainer"), None, 5);
    domain.kind = EventKind::DomainCreate;
    domain.end = None;
    let mut se = range(100, 400, Some("io"), None, 0);
    se.kind = EventKind::StartEnd;
    let dump = Dump {
        cuda: None,
        pid: 10,
        process_name: "app".into(),
        window: Window {
            start_ns: 0,
            end_ns: 1_000,
            utc_start_ns: 1,
        },
        strings: vec![RegisteredString {
            id: 3,
            domain: 5,
            value: "step".into(),
        }],
        thread_names: vec![],
        events: vec![
            domain,
            range(10, 110, None, Some(3), 5),
            range(200, 500, None, Some(3), 5),
            range(0, 900, Some("outer"), None, 0),
            se,
        ],
    };
    let dir = std::env::temp_dir().join(format!("nvtx-sum-agent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("r.sqlite");
    let meta = ReportMeta {
        export_time_utc: String::new(),
        host: String::new(),
        output_file: "r.sqlite".into(),
    };
    report::write_file(&dump, &meta, &db).unwrap();

    let host = RecipeHost::new(Limits::default()).unwrap();
    let recipe = host
        .load(&nsight_e2e::wasm_artifact("recipes/nvtx_sum.wasm"))
        .unwrap();
    let out = host.run(&recipe, &db, &[]).unwrap();
    let table = out
        .tables
        .iter()
        .find(|t| t.name == "nvtx_sum")
        .unwrap_or_else(|| panic!("{out:?}"));
    let col = |name: &str| {
        table
            .columns
            .iter()
            .position(|c| c.name == name)
            .unwrap_or_else(|| panic!("{:?}", table.columns))
    };
    let (range_col, n_col, total_col) = (col("Range"), col("Instances"), col("Total Time (ns)"));
    let rows: Vec<(String, i64, i64)> = table
        .rows
        .iter()
        .map(|r| {
            let text = match &r[range_col] {
                Value::Text(t) => t.clone(),
                v => panic!("{v:?}"),
            };
            let int = |v: &Value| match v {
                Value::Int(i) => *i,
                v => panic!("{v:?}"),
            };
            (text, int(&r[n_col]), int(&r[total_col]))
        })
        .collect();
    assert_eq!(
        rows,
        [
            (":outer".to_string(), 1, 900),
            ("trainer:step".to_string(), 2, 400),
            (":io".to_string(), 1, 300),
        ],
        "notes: {:?}",
        out.notes
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
