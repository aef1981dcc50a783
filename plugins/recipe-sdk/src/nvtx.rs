//! NVTX in a report, shared by `nvtx_sum` and `--filter-nvtx`: which event types are ranges,
//! the SQL for a range's text, and domain names.
//!
//! - Event type ids come from `ENUM_NSYS_EVENT_TYPE` when present (`NvtxPushPopRange` /
//!   `NvtxtPushPopRange` -> push/pop, `NvtxStartEndRange` / `NvtxtStartEndRange` ->
//!   start/end, `NvtxDomainCreate`), else the ids of current exports: 59/70, 60/71, 75.
//! - A range's text is `StringIds[textId]`, else `text`.
//! - A domain's name is the text of the earliest `NvtxDomainCreate` with the same `domainId`
//!   in the same process; the default domain (and a domain without a create event) has the
//!   empty name, so ranges print as `<domain>:<text>`, e.g. `:Matrix Multiplication`.

use std::collections::HashMap;

use crate::{Report, Schema, Value};

pub const NVTX_TABLE: &str = "NVTX_EVENTS";

/// NVTX event type ids for the two range styles and for domain creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTypes {
    pub push_pop: Vec<i64>,
    pub start_end: Vec<i64>,
    pub domain_create: Vec<i64>,
}

impl EventTypes {
    /// Reads the ids from `ENUM_NSYS_EVENT_TYPE` when the report has it, else the ids of
    /// current exports.
    pub fn read(schema: &Schema<'_>) -> Result<Self, String> {
        let mut t = Self {
            push_pop: Vec::new(),
            start_end: Vec::new(),
            domain_create: Vec::new(),
        };
        if schema.has_table("ENUM_NSYS_EVENT_TYPE") {
            schema.report().query(
                "SELECT id, name FROM ENUM_NSYS_EVENT_TYPE",
                &[],
                &mut |row| {
                    if let [Value::Int(id), Value::Text(name)] = row {
                        match name.as_str() {
                            "NvtxPushPopRange" | "NvtxtPushPopRange" => t.push_pop.push(*id),
                            "NvtxStartEndRange" | "NvtxtStartEndRange" => t.start_end.push(*id),
                            "NvtxDomainCreate" => t.domain_create.push(*id),
                            _ => {}
                        }
                    }
                    Ok(())
                },
            )?;
        }
        if t.push_pop.is_empty() && t.start_end.is_empty() {
            t = Self {
                push_pop: vec![59, 70],
                start_end: vec![60, 71],
                domain_create: vec![75],
            };
        }
        Ok(t)
    }

    /// The range ids (both styles) as an SQL list, e.g. `59,70,60,71`.
    pub fn range_list(&self) -> String {
        id_list(self.push_pop.iter().chain(&self.start_end))
    }
}

fn id_list<'a>(ids: impl Iterator<Item = &'a i64>) -> String {
    let list: Vec<String> = ids.map(i64::to_string).collect();
    list.join(",")
}

/// PID of a `globalTid` (or `globalPid`).
pub fn pid(global_tid: i64) -> i64 {
    global_tid / 0x100_0000 % 0x100_0000
}

/// SQL fragments over `NVTX_EVENTS AS e` for the columns this report has.
#[derive(Debug, Clone, Copy)]
pub struct NvtxSql {
    /// The range's text.
    pub text: &'static str,
    /// The join that `text` needs (may be empty).
    pub join: &'static str,
    pub domain: &'static str,
    pub tid: &'static str,
}

impl NvtxSql {
    /// For `NVTX_EVENTS` with `columns`; `strings` says whether `StringIds` exists.
    pub fn new(columns: &[String], strings: bool) -> Self {
        let has = |c: &str| columns.iter().any(|have| have == c);
        let ids = has("textId") && strings;
        Self {
            text: match (ids, has("text")) {
                (true, true) => "coalesce(s.value, e.text)",
                (true, false) => "s.value",
                (false, true) => "e.text",
                (false, false) => "NULL",
            },
            join: if ids {
                "LEFT JOIN StringIds AS s ON s.id = e.textId"
            } else {
                ""
            },
            domain: if has("domainId") { "e.domainId" } else { "0" },
            tid: if has("globalTid") { "e.globalTid" } else { "0" },
        }
    }
}

/// Domain names by (domainId, PID).
#[derive(Debug, Clone, Default)]
pub struct Domains {
    /// (domainId, PID) -> (start, name) of the earliest creation.
    created: HashMap<(i64, i64), (i64, String)>,
}

impl Domains {
    /// Reads every domain creation event.
    pub fn read(report: &dyn Report, types: &EventTypes, sql: &NvtxSql) -> Result<Self, String> {
        let mut created: HashMap<(i64, i64), (i64, String)> = HashMap::new();
        if types.domain_create.is_empty() {
            return Ok(Self { created });
        }
        let q = format!(
            "SELECT {}, {}, e.start, {} FROM {NVTX_TABLE} AS e {} WHERE e.eventType IN ({})",
            sql.domain,
            sql.tid,
            sql.text,
            sql.join,
            id_list(types.domain_create.iter())
        );
        report.query(&q, &[], &mut |row| {
            if let [d, t, Value::Int(start), name] = row {
                let key = (d.as_int().unwrap_or(0), pid(t.as_int().unwrap_or(0)));
                let name = name.as_text().unwrap_or_default().to_owned();
                let e = created.entry(key).or_insert((*start, name.clone()));
                if *start < e.0 {
                    *e = (*start, name);
                }
            }
            Ok(())
        })?;
        Ok(Self { created })
    }

    /// The name of `domain_id` in the process of `global_tid`; `None` when it was never
    /// created there (the default domain, id 0, never is).
    pub fn name(&self, domain_id: i64, global_tid: i64) -> Option<&str> {
        self.created
            .get(&(domain_id, pid(global_tid)))
            .map(|(_, n)| n.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_of_a_global_tid() {
        assert_eq!(pid(0x0100_0000_0200_0003), 2);
        assert_eq!(pid(0x1234_5600_0007), 0x12_3456);
    }

    #[test]
    fn sql_follows_the_columns() {
        let cols = |c: &[&str]| c.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let full = NvtxSql::new(&cols(&["text", "textId", "domainId", "globalTid"]), true);
        assert_eq!(full.text, "coalesce(s.value, e.text)");
        assert!(!full.join.is_empty());
        let bare = NvtxSql::new(&cols(&["textId"]), false);
        assert_eq!((bare.text, bare.join, bare.domain), ("NULL", "", "0"));
    }
}
