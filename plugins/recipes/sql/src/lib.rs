//! The `sql` recipe: runs one read-only SQL statement on the report and returns its result as
//! a table, for looking into a report by hand. The host refuses anything that is not
//! read-only; the refusal comes back as this recipe's error.

use nsight_recipe_sdk::{Args, Column, ColumnKind, Output, Report, Table, Value};

nsight_recipe_sdk::recipe_component!(Sql);

use component::{log, Argument, Guest, Level, Output as WitOutput, RecipeInfo};

const DEFAULT_LIMIT: usize = 10_000;

struct Sql;

impl Guest for Sql {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "sql: describe");
        RecipeInfo {
            name: "sql".into(),
            display_name: "SQL Query".into(),
            description: "Runs one read-only SQL statement on the report's SQLite export and \
                          returns the result as a table."
                .into(),
            arguments: vec![
                Argument {
                    name: "query".into(),
                    description: "The statement (SELECT or a read-only PRAGMA).".into(),
                    default_value: None,
                },
                Argument {
                    name: "limit".into(),
                    description: "Most rows to return.".into(),
                    default_value: Some(DEFAULT_LIMIT.to_string()),
                },
            ],
        }
    }

    fn run(args: Vec<(String, String)>) -> Result<WitOutput, String> {
        wit_run(args, sql)
    }
}

fn sql(report: &dyn Report, args: &[(String, String)]) -> Result<Output, String> {
    let args = Args::parse(args, &["query", "limit"])?;
    let query = args.get("query").ok_or("--query is required")?;
    let limit = match args.get("limit") {
        Some(l) => l
            .parse::<usize>()
            .map_err(|_| format!("--limit {l}: expected a number of rows"))?,
        None => DEFAULT_LIMIT,
    };
    let mut rows: Vec<Vec<Value>> = Vec::new();
    let mut cut = false;
    let names = report.query(query, &[], &mut |row| {
        if rows.len() < limit {
            rows.push(row.to_vec());
        } else {
            cut = true;
        }
        Ok(())
    })?;
    let columns = names
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            // SQLite types values, not columns: the kind that holds every value of the column.
            let kind = rows.iter().fold(None, |kind, r| match (kind, r.get(i)) {
                (k, None | Some(Value::Null)) => k,
                (None | Some(ColumnKind::Int), Some(Value::Int(_))) => Some(ColumnKind::Int),
                (
                    None | Some(ColumnKind::Int | ColumnKind::Real),
                    Some(Value::Int(_) | Value::Real(_)),
                ) => Some(ColumnKind::Real),
                _ => Some(ColumnKind::Text),
            });
            let kind = kind.unwrap_or(ColumnKind::Text);
            Column::new(name, kind, None)
        })
        .collect();
    let mut out = Output::default();
    if cut {
        out.note(format!("the result is cut at --limit {limit} rows"));
    }
    out.tables.push(Table {
        name: "sql".into(),
        columns,
        rows,
    });
    Ok(out)
}
