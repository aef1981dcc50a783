//! A job's readable outputs (pure): the Jupyter notebook (nbformat 4.5 JSON) and the HTML page,
//! both built from the recipe's tables. The CSVs themselves come from [`crate::table_to_csv`].
//!
//! ```text
//!  notebook: markdown (recipe, args, job, session) · code `import pandas as pd`
//!            per report: markdown (report key, notes) · per table: code `pd.read_csv(<csv>)`
//!                        with the table as its saved output (text/html + text/plain)
//!                        · per figure: code `SVG(filename=<svg>)` with the figure as its
//!                        saved output (image/svg+xml)
//!  html:     the same headings, notes, tables and figures, with links to the CSVs and SVGs
//! ```
//!
//! Every string from a recipe or a report is escaped; tables show at most [`SHOWN_ROWS`] rows
//! (the CSV has them all). A figure (checked to be one `<svg>` document by
//! [`crate::output_check`]) is shown in the page as an `<img>` with a `data:` URI, never
//! inlined: an SVG image runs no script and cannot reach the page, and the page's CSP
//! ([`HTML_CSP`]) allows images from `data:` only.

use std::fmt::Write as _;

use base64::{engine::general_purpose::STANDARD as BASE64, Engine as _};
use serde_json::{json, Value as Json};
use uuid::Uuid;

use crate::{csv::real, Figure, RecipeInfo, Table, Value};

/// Rows shown per table in the notebook's saved outputs and the HTML page.
pub const SHOWN_ROWS: usize = 500;

/// The `Content-Security-Policy` of the HTML page: no scripts, nothing from elsewhere, inline
/// styles, figures as `data:` images.
pub const HTML_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:";

/// What the pages say about the job.
#[derive(Debug, Clone, Copy)]
pub struct JobHeader<'a> {
    pub id: Uuid,
    pub recipe: &'a RecipeInfo,
    pub args: &'a [String],
    pub tag: &'a str,
    pub session: &'a str,
    pub collection: Option<&'a str>,
}

/// One report's results: its key, its tables with their CSV file names, its figures with
/// their SVG file names, its notes.
#[derive(Debug, Clone)]
pub struct ReportResult {
    pub key: String,
    pub tables: Vec<(String, Table)>,
    pub figures: Vec<(String, Figure)>,
    pub notes: Vec<String>,
}

fn cell_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Int(i) => i.to_string(),
        Value::Real(r) => real(*r),
        Value::Text(s) => s.clone(),
        Value::Blob(b) => format!("<{} bytes>", b.len()),
    }
}

/// `<`, `>`, `&`, `"` and `'` as entities.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Inline code in markdown: backticks cannot close it early, HTML is escaped.
fn md_code(s: &str) -> String {
    format!("<code>{}</code>", escape_html(s))
}

fn args_text(args: &[String]) -> String {
    if args.is_empty() {
        "(none)".into()
    } else {
        args.join(" ")
    }
}

fn shown(table: &Table) -> (&[Vec<Value>], Option<String>) {
    let rows = &table.rows[..table.rows.len().min(SHOWN_ROWS)];
    let cut = (table.rows.len() > SHOWN_ROWS).then(|| {
        format!(
            "first {SHOWN_ROWS} of {} rows shown; the CSV has them all",
            table.rows.len()
        )
    });
    (rows, cut)
}

/// The table as an HTML `<table>` (first [`SHOWN_ROWS`] rows).
pub fn html_table(table: &Table) -> String {
    let (rows, cut) = shown(table);
    let mut out = String::from("<table>\n<thead><tr>");
    for c in &table.columns {
        let _ = write!(out, "<th>{}</th>", escape_html(&c.name));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        out.push_str("<tr>");
        for v in row {
            let class = match v {
                Value::Int(_) | Value::Real(_) => " class=\"num\"",
                _ => "",
            };
            let _ = write!(out, "<td{class}>{}</td>", escape_html(&cell_text(v)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    if let Some(cut) = cut {
        let _ = writeln!(out, "<p class=\"cut\">{}</p>", escape_html(&cut));
    }
    out
}

/// The figure as an `<img>` whose source is the SVG as a `data:` URI.
pub fn html_figure(figure: &Figure) -> String {
    format!(
        "<p><img class=\"figure\" alt=\"{}\" src=\"data:image/svg+xml;base64,{}\"></p>",
        escape_html(&figure.name),
        BASE64.encode(figure.svg.as_bytes())
    )
}

/// The table as aligned plain text (what a notebook shows without HTML).
pub fn text_table(table: &Table) -> String {
    let (rows, cut) = shown(table);
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(cell_text).collect())
        .collect();
    let widths: Vec<usize> = table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            cells
                .iter()
                .map(|r| r.get(i).map_or(0, |s| s.chars().count()))
                .chain([c.name.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |fields: Vec<&str>| {
        let padded: Vec<String> = fields
            .iter()
            .zip(&widths)
            .map(|(f, w)| format!("{f:>w$}"))
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut out = vec![line(
        table.columns.iter().map(|c| c.name.as_str()).collect(),
    )];
    out.extend(
        cells
            .iter()
            .map(|r| line(r.iter().map(String::as_str).collect())),
    );
    if let Some(cut) = cut {
        out.push(format!("({cut})"));
    }
    out.join("\n")
}

struct Cells {
    cells: Vec<Json>,
    executed: u32,
}

impl Cells {
    fn id(&self) -> String {
        format!("cell-{}", self.cells.len())
    }

    fn markdown(&mut self, source: String) {
        let id = self.id();
        self.cells.push(json!({
            "cell_type": "markdown", "id": id, "metadata": {}, "source": source
        }));
    }

    /// A code cell whose saved outputs are `execute_result`s with these `data` bundles.
    fn code(&mut self, source: String, outputs: Vec<Json>) {
        self.executed += 1;
        let id = self.id();
        let n = self.executed;
        let outputs: Vec<Json> = outputs
            .into_iter()
            .map(|data| {
                json!({ "output_type": "execute_result", "execution_count": n, "data": data, "metadata": {} })
            })
            .collect();
        self.cells.push(json!({
            "cell_type": "code", "id": id, "metadata": {}, "execution_count": n,
            "source": source, "outputs": outputs
        }));
    }
}

fn notes_markdown(notes: &[String]) -> String {
    if notes.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n\nNotes:\n");
    for n in notes {
        let _ = write!(out, "\n- {}", escape_html(n));
    }
    out
}

/// The job's notebook: nbformat 4.5, Python 3 kernel, saved outputs.
pub fn notebook(job: &JobHeader<'_>, reports: &[ReportResult]) -> Json {
    let mut cells = Cells {
        cells: Vec::new(),
        executed: 0,
    };
    let scope = match job.collection {
        Some(c) => format!("{}/{} collection {}", job.tag, job.session, c),
        None => format!("{}/{}", job.tag, job.session),
    };
    cells.markdown(format!(
        "# {} ({})\n\n{}\n\n- Job: {}\n- Session: {}\n- Arguments: {}\n- Reports: {}",
        escape_html(&job.recipe.display_name),
        md_code(&job.recipe.name),
        escape_html(&job.recipe.description),
        md_code(&job.id.to_string()),
        md_code(&scope),
        md_code(&args_text(job.args)),
        reports.len()
    ));
    cells.code("import pandas as pd".into(), Vec::new());
    for report in reports {
        cells.markdown(format!(
            "## Report {}{}",
            md_code(&report.key),
            notes_markdown(&report.notes)
        ));
        for (file, table) in &report.tables {
            // File names are plain ([A-Za-z0-9._-]), so the literal needs no escaping.
            cells.code(
                format!("df = pd.read_csv(\"{file}\")\ndf"),
                vec![json!({
                    "text/html": html_table(table),
                    "text/plain": text_table(table),
                })],
            );
        }
        for (file, figure) in &report.figures {
            cells.code(
                format!("from IPython.display import SVG\nSVG(filename=\"{file}\")"),
                vec![json!({
                    "image/svg+xml": figure.svg,
                    "text/plain": "<IPython.core.display.SVG object>",
                })],
            );
        }
    }
    json!({
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": { "name": "python3", "display_name": "Python 3", "language": "python" },
            "language_info": { "name": "python" },
            "nsight": { "job": job.id.to_string(), "recipe": job.recipe.name, "args": job.args }
        },
        "cells": cells.cells
    })
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:0.5em 0 1.5em}\
th,td{border:1px solid #ccc;padding:2px 8px;text-align:left}\
td.num{text-align:right;font-variant-numeric:tabular-nums}th{background:#f2f2f2}\
code{background:#f4f4f4;padding:0 3px}.cut,.notes{color:#555}img.figure{max-width:100%}";

/// The job's HTML page (served at `jobs/{id}/notebook.html` with a restrictive CSP).
pub fn html(job: &JobHeader<'_>, reports: &[ReportResult]) -> String {
    let title = format!("{} — job {}", job.recipe.display_name, job.id);
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        escape_html(&title)
    );
    let _ = writeln!(
        out,
        "<h1>{} (<code>{}</code>)</h1>\n<p>{}</p>",
        escape_html(&job.recipe.display_name),
        escape_html(&job.recipe.name),
        escape_html(&job.recipe.description)
    );
    let _ = writeln!(
        out,
        "<ul>\n<li>Job: <code>{}</code></li>\n<li>Session: <code>{}/{}</code>{}</li>\n\
         <li>Arguments: <code>{}</code></li>\n</ul>",
        job.id,
        escape_html(job.tag),
        escape_html(job.session),
        job.collection
            .map(|c| format!(", collection <code>{}</code>", escape_html(c)))
            .unwrap_or_default(),
        escape_html(&args_text(job.args))
    );
    for report in reports {
        let _ = writeln!(
            out,
            "<h2>Report <code>{}</code></h2>",
            escape_html(&report.key)
        );
        if !report.notes.is_empty() {
            out.push_str("<ul class=\"notes\">\n");
            for n in &report.notes {
                let _ = writeln!(out, "<li>{}</li>", escape_html(n));
            }
            out.push_str("</ul>\n");
        }
        for (file, table) in &report.tables {
            let _ = writeln!(
                out,
                "<h3>{} (<a href=\"files/{}\">{}</a>)</h3>",
                escape_html(&table.name),
                escape_html(file),
                escape_html(file)
            );
            out.push_str(&html_table(table));
        }
        for (file, figure) in &report.figures {
            let _ = writeln!(
                out,
                "<h3>{} (<a href=\"files/{}\">{}</a>)</h3>\n{}",
                escape_html(&figure.name),
                escape_html(file),
                escape_html(file),
                html_figure(figure)
            );
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests;
