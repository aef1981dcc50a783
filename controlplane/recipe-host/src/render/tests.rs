//! Notebook and HTML rendering: structure, escaping, row cut.

use super::*;
use crate::{Column, ColumnKind};

fn info() -> RecipeInfo {
    RecipeInfo {
        name: "nvtx_sum".into(),
        display_name: "NVTX <Range> Summary".into(),
        description: "ranges & more".into(),
        arguments: Vec::new(),
    }
}

fn table(rows: usize) -> Table {
    let col = |name: &str, kind| Column {
        name: name.into(),
        kind,
        unit: None,
    };
    Table {
        name: "nvtx_sum".into(),
        columns: vec![
            col("Time (%)", ColumnKind::Real),
            col("Instances", ColumnKind::Int),
            col("Range", ColumnKind::Text),
        ],
        rows: (0..rows)
            .map(|i| {
                vec![
                    Value::Real(12.5),
                    Value::Int(i as i64),
                    Value::Text("<script>alert(1)</script>".into()),
                ]
            })
            .collect(),
    }
}

fn results(rows: usize) -> Vec<ReportResult> {
    vec![ReportResult {
        key: "default/s/1/app_default_i_x.sqlite".into(),
        tables: vec![("1_app_default_i_x_nvtx-sum.csv".into(), table(rows))],
        figures: Vec::new(),
        notes: vec!["ranges without an end <left out>".into()],
    }]
}

const SVG: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\"><text>a<b</text></svg>";

fn with_figure() -> Vec<ReportResult> {
    let mut r = results(1);
    r[0].figures.push((
        "1_app_default_i_x_util.svg".into(),
        Figure {
            name: "util\"><script>".into(),
            svg: SVG.into(),
        },
    ));
    r
}

fn header<'a>(info: &'a RecipeInfo, args: &'a [String]) -> JobHeader<'a> {
    JobHeader {
        id: Uuid::nil(),
        recipe: info,
        args,
        tag: "default",
        session: "s",
        collection: Some("1"),
    }
}

#[test]
fn notebook_is_nbformat_4_5_with_a_pandas_cell_per_table() {
    let info = info();
    let args = vec!["--timeunit".to_string(), "usec".to_string()];
    let nb = notebook(&header(&info, &args), &results(2));
    assert_eq!(nb["nbformat"], 4);
    assert_eq!(nb["nbformat_minor"], 5);
    assert_eq!(nb["metadata"]["kernelspec"]["name"], "python3");
    let cells = nb["cells"].as_array().unwrap();
    let kinds: Vec<&str> = cells
        .iter()
        .map(|c| c["cell_type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["markdown", "code", "markdown", "code"]);
    let mut ids: Vec<&str> = cells.iter().map(|c| c["id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), cells.len(), "cell ids are unique");
    assert!(cells[0]["source"]
        .as_str()
        .unwrap()
        .contains("--timeunit usec"));
    let table_cell = &cells[3];
    assert_eq!(
        table_cell["source"],
        "df = pd.read_csv(\"1_app_default_i_x_nvtx-sum.csv\")\ndf"
    );
    let output = &table_cell["outputs"][0];
    assert_eq!(output["output_type"], "execute_result");
    assert_eq!(output["execution_count"], table_cell["execution_count"]);
    let html = output["data"]["text/html"].as_str().unwrap();
    assert!(html.contains("&lt;script&gt;"), "{html}");
    assert!(!html.contains("<script>"));
    let text = output["data"]["text/plain"].as_str().unwrap();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.starts_with("Time (%)  Instances"), "{text}");
    let md = cells[2]["source"].as_str().unwrap();
    assert!(md.contains("&lt;left out&gt;"), "{md}");
}

#[test]
fn html_page_escapes_and_links_the_csvs() {
    let info = info();
    let page = html(&header(&info, &[]), &results(1));
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("NVTX &lt;Range&gt; Summary"));
    assert!(page.contains("ranges &amp; more"));
    assert!(page.contains("href=\"files/1_app_default_i_x_nvtx-sum.csv\""));
    assert!(page.contains("<td class=\"num\">12.5</td>"));
    assert!(!page.contains("<script>"));
    assert!(page.contains("Arguments: <code>(none)</code>"));
}

#[test]
fn long_tables_are_cut_in_the_pages_only() {
    let t = table(SHOWN_ROWS + 3);
    let html = html_table(&t);
    assert_eq!(html.matches("<tr>").count(), SHOWN_ROWS + 1);
    assert!(html.contains(&format!("first {SHOWN_ROWS} of {} rows", SHOWN_ROWS + 3)));
    assert!(text_table(&t).ends_with("the CSV has them all)"));
}

#[test]
fn a_figure_is_a_notebook_cell_with_its_svg_as_saved_output() {
    let info = info();
    let nb = notebook(&header(&info, &[]), &with_figure());
    let cells = nb["cells"].as_array().unwrap();
    let figure = cells.last().unwrap();
    assert_eq!(
        figure["source"],
        "from IPython.display import SVG\nSVG(filename=\"1_app_default_i_x_util.svg\")"
    );
    assert_eq!(figure["outputs"][0]["data"]["image/svg+xml"], SVG);
}

#[test]
fn a_figure_is_an_image_in_the_page_never_inline_markup() {
    let info = info();
    let page = html(&header(&info, &[]), &with_figure());
    assert!(
        page.contains("href=\"files/1_app_default_i_x_util.svg\""),
        "{page}"
    );
    let b64 = BASE64.encode(SVG);
    assert!(
        page.contains(&format!("src=\"data:image/svg+xml;base64,{b64}\"")),
        "{page}"
    );
    assert!(!page.contains("<svg"), "the SVG is not inlined");
    assert!(!page.contains("<script>"), "the figure's name is escaped");
    assert!(
        page.contains("alt=\"util&quot;&gt;&lt;script&gt;\""),
        "{page}"
    );
}
