//! Pure functions turning coordinator answers (and the stored configuration) into what the CLI
//! prints: human-readable lines for `--output table`, and the server's JSON re-indented but
//! otherwise unchanged for `--output json`. No I/O and no clock: callers pass `now`.
//!
//! ```text
//! api::Started / Stopped / Ended / TagStatus --render::*--> Rendered { out (stdout), warnings (stderr) }
//! raw JSON body --pretty_json--> indented JSON (same keys, same order)
//! ```
//!
//! Strings that come from agents (pod names, diagnostics, failure reasons) are shown with
//! control characters replaced, so they cannot drive the user's terminal.

use std::{collections::BTreeMap, fmt::Write as _, path::Path};

use serde_json::json;

use crate::config::{Auth, Config};
use crate::download::Fetched;
use nsight_contracts::coordinator::{
    CollectionState, CollectionSummary, Ended, ReportListing, SessionSummary, Started, Stopped,
    TagStatus,
};

/// Text for stdout and warnings for stderr (each printed as `warning: <line>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    pub out: String,
    pub warnings: Vec<String>,
}

impl Rendered {
    fn line(&mut self, text: impl AsRef<str>) {
        self.out.push_str(text.as_ref());
        self.out.push('\n');
    }
}

/// `session-begin`.
pub fn session_begun(session: &SessionSummary) -> Rendered {
    let mut r = Rendered::default();
    let title = session
        .title
        .as_ref()
        .map(|t| t.as_str())
        .map(|t| format!(" {:?}", clean(t)))
        .unwrap_or_default();
    r.line(format!(
        "Opened session {}{title} on tag {}",
        session.id,
        clean(session.tag.as_str())
    ));
    r
}

/// `ls`: one line per file, grouped by collection.
pub fn reports(listing: &ReportListing) -> Rendered {
    let mut r = Rendered::default();
    if listing.reports.is_empty() {
        r.line(format!(
            "Session {} has no reports yet (they appear once agents upload after profiler-stop)",
            clean(&listing.session)
        ));
        return r;
    }
    let rows: Vec<[String; 4]> = listing
        .reports
        .iter()
        .map(|e| {
            [
                clean(e.path.rsplit('/').next().unwrap_or(&e.path)),
                human_size(e.size),
                clean(&e.collection),
                format!("{}/{}", clean(&e.process), clean(&e.instance)),
            ]
        })
        .collect();
    let header = ["FILE", "SIZE", "COLLECTION", "AGENT"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let fmt_row = |cells: [&str; 4]| {
        format!(
            "{:<w0$}  {:>w1$}  {:<w2$}  {}",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        )
        .trim_end()
        .to_owned()
    };
    r.line(fmt_row(header));
    for row in &rows {
        r.line(fmt_row([&row[0], &row[1], &row[2], &row[3]]));
    }
    let total: u64 = listing.reports.iter().map(|e| e.size).sum();
    r.line(format!(
        "{} file(s), {} in session {}",
        rows.len(),
        human_size(total),
        clean(&listing.session)
    ));
    if let Some(e) = &listing.url_error {
        r.warnings
            .push(format!("downloads will fail: {}", clean(e)));
    }
    r
}

/// `download`, human-readable.
pub fn downloaded(listing: &ReportListing, fetched: &[Fetched], out: &Path) -> Rendered {
    let mut r = Rendered::default();
    let mut bytes = 0;
    for f in fetched {
        match f {
            Fetched::Downloaded {
                path,
                bytes: b,
                resumed_from,
            } => {
                bytes += b;
                let resumed = if *resumed_from > 0 {
                    format!(", resumed at {}", human_size(*resumed_from))
                } else {
                    String::new()
                };
                r.line(format!(
                    "downloaded {} ({}{resumed})",
                    path.display(),
                    human_size(*b)
                ));
            }
            Fetched::AlreadyThere { path } => {
                r.line(format!("up to date {}", path.display()));
            }
        }
    }
    r.line(format!(
        "{} of {} file(s) in {}, {} transferred",
        fetched.len(),
        listing.reports.len(),
        out.display(),
        human_size(bytes)
    ));
    r
}

/// `download --output json`.
pub fn downloaded_json(listing: &ReportListing, fetched: &[Fetched]) -> serde_json::Value {
    let files: Vec<serde_json::Value> = fetched
        .iter()
        .map(|f| match f {
            Fetched::Downloaded {
                path,
                bytes,
                resumed_from,
            } => json!({"path": path, "state": "downloaded", "bytes": bytes, "resumedFrom": resumed_from}),
            Fetched::AlreadyThere { path } => json!({"path": path, "state": "up-to-date"}),
        })
        .collect();
    json!({"session": listing.session, "tag": listing.tag, "files": files})
}

/// `1.5 MiB`, `512 B`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `profiler-start`. Warns when no agent was told to start.
pub fn started(tag: &str, started: &Started) -> Rendered {
    let mut r = Rendered::default();
    if started.session_created {
        r.line(format!(
            "Opened session {} on tag {}",
            started.session,
            clean(tag)
        ));
    }
    r.line(format!(
        "Started collection {} in session {} ({})",
        started.collection,
        started.session,
        count(started.agents as u64, "agent")
    ));
    if started.agents == 0 {
        r.warnings.push(format!(
            "no agents are connected on tag {:?}: nothing will be profiled (check with `nsight-cloud --tag {} status`)",
            clean(tag),
            clean(tag)
        ));
    }
    r
}

/// `profiler-stop`.
pub fn stopped(stopped: &Stopped) -> Rendered {
    let mut r = Rendered::default();
    r.line(format!(
        "Stopped collection {} in session {} ({})",
        stopped.collection,
        stopped.session,
        stop_details(stopped)
    ));
    r
}

/// `session-end`.
pub fn ended(ended: &Ended) -> Rendered {
    let mut r = Rendered::default();
    if let Some(stopped) = &ended.stopped {
        r.line(format!(
            "Stopped collection {} that was still collecting ({})",
            stopped.collection,
            stop_details(stopped)
        ));
    }
    r.line(format!("Ended session {}", ended.session));
    r
}

fn stop_details(stopped: &Stopped) -> String {
    let told = if stopped.agents == 1 { "was" } else { "were" };
    format!(
        "{} {told} told to stop; collection is {}",
        count(stopped.agents as u64, "agent"),
        stopped.state.as_str()
    )
}

/// `status`: the tag, its active session and collection, and a table of its agents.
/// `now` (unix milliseconds) is used for "last seen ... ago".
pub fn status(status: &TagStatus, now: u64) -> Rendered {
    let mut r = Rendered::default();
    r.line(format!("Tag:         {}", clean(status.tag.as_str())));
    match &status.active_session {
        Some(s) => {
            let title = s
                .title
                .as_ref()
                .map(|t| t.as_str())
                .map(|t| format!(" {:?}", clean(t)))
                .unwrap_or_default();
            r.line(format!(
                "Session:     {}{title} ({}, {}, created {})",
                s.id,
                s.state.as_str(),
                count(s.collections as u64, "collection"),
                utc(s.created_at.0)
            ));
        }
        None => r.line("Session:     none (profiler-start or session-begin opens one)"),
    }
    match &status.active_collection {
        Some(c) => collection_lines(&mut r, c, status.active_session.as_ref()),
        None => r.line("Collection:  none"),
    }
    let (known, connected) = (status.agent_counts.known, status.agent_counts.connected);
    if known == 0 {
        r.line("Agents:      none on this tag; profiler-start would profile nothing");
        return r;
    }
    r.line(format!("Agents:      {known} known, {connected} connected"));
    if status.agents.len() < known {
        r.line(format!(
            "             (listing the first {} of {known})",
            status.agents.len()
        ));
    }
    if connected == 0 {
        r.line("             (none connected: profiler-start would profile nothing)");
    }
    r.line("");
    let headers = [
        "NAMESPACE/POD/CONTAINER",
        "PROCESS",
        "PID",
        "BACKEND",
        "CONNECTED",
        "LAST SEEN",
    ];
    let mut rows = Vec::new();
    for agent in &status.agents {
        let id = &agent.info.identity;
        rows.push(Row::Cells(vec![
            format!(
                "{}/{}/{}",
                clean(&id.namespace),
                clean(&id.pod),
                clean(&id.container)
            ),
            clean(&id.process_name),
            id.pid.to_string(),
            agent.info.backend.as_str().to_owned(),
            if agent.connected { "yes" } else { "no" }.to_owned(),
            ago(now, agent.last_seen.0),
        ]));
        for d in &agent.info.diagnostics {
            rows.push(Row::Note(format!("    diagnostic: {}", clean(d))));
        }
        if let Some(m) = &agent.mirroring {
            let mut note = format!(
                "    OTLP mirroring: {} spans sent, {} dropped, {} records not mirrored",
                m.sent, m.dropped, m.not_mirrored
            );
            if let Some(e) = m.last_error.as_deref().filter(|_| m.dropped > 0) {
                note.push_str(&format!(" (last error: {})", clean(e)));
            }
            rows.push(Row::Note(note));
        }
    }
    r.out.push_str(&table(&headers, &rows));
    r
}

fn collection_lines(r: &mut Rendered, c: &CollectionSummary, session: Option<&SessionSummary>) {
    let in_session = if session.is_some_and(|s| s.id == c.session) {
        String::new()
    } else {
        format!(" in session {}", c.session)
    };
    let since = match c.stop_requested_at {
        Some(at) if c.state != CollectionState::Collecting => {
            format!("stop requested {}", utc(at.0))
        }
        _ => format!("started {}", utc(c.started_at.0)),
    };
    r.line(format!(
        "Collection:  {}{in_session} {} ({since}; {})",
        c.id,
        c.state.as_str(),
        outcome_counts(c)
    ));
    for (key, outcome) in &c.agents {
        if let Some(reason) = outcome.reason() {
            r.line(format!(
                "             {}: {}: {}",
                outcome.state_name(),
                clean(key.as_str()),
                clean(reason)
            ));
        }
    }
}

/// "3 agents: 2 started, 1 pending" in a fixed order of states.
fn outcome_counts(c: &CollectionSummary) -> String {
    const ORDER: [&str; 7] = [
        "pending", "started", "stopSent", "uploaded", "failed", "timedOut", "lost",
    ];
    // The server's counts cover every agent (`agents` may list only some).
    let counts: &BTreeMap<String, usize> = &c.outcome_counts;
    let all: usize = counts.values().sum();
    let total = count(c.agents_total as u64, "agent");
    if all == 0 {
        return total;
    }
    let mut parts: Vec<String> = ORDER
        .iter()
        .filter_map(|state| {
            let n = counts.get(*state).copied().unwrap_or(0);
            (n > 0).then(|| format!("{n} {state}"))
        })
        .collect();
    let others: usize = counts
        .iter()
        .filter(|(state, _)| !ORDER.contains(&state.as_str()))
        .map(|(_, n)| n)
        .sum();
    if others > 0 {
        parts.push(format!("{others} other"));
    }
    format!("{total}: {}", parts.join(", "))
}

/// `configure` in table mode. Never shows the API key.
pub fn configured(path: &Path, config: &Config) -> Rendered {
    let mut r = Rendered::default();
    r.line(format!("Wrote {}", path.display()));
    r.line(format!("gateway: {}", config.gateway));
    if config.ca_cert.is_some() {
        r.line("ca-cert: stored (trusted for the gateway's certificate)");
    }
    match &config.auth {
        Auth::None => r.line("auth: none"),
        Auth::ApiKey { .. } => r.line("apikey: set"),
        Auth::OAuth2(o) => {
            r.line(format!("issuer: {}", o.issuer));
            r.line(format!("clientid: {}", o.client_id));
            r.line(format!("oauth-flow-type: {}", o.flow.as_str()));
            r.line(format!(
                "authorization-endpoint: {}",
                o.authorization_endpoint
                    .as_ref()
                    .map_or("(from the issuer's discovery document)", |u| u.as_str())
            ));
            r.line(format!(
                "token-endpoint: {}",
                o.token_endpoint
                    .as_ref()
                    .map_or("(from the issuer's discovery document)", |u| u.as_str())
            ));
            r.warnings.push(
                "run `nsight-cloud login` to obtain a token before other commands".to_owned(),
            );
        }
    }
    r
}

/// `configure` in JSON mode. Never shows the API key.
pub fn configured_json(path: &Path, config: &Config) -> serde_json::Value {
    let auth = match &config.auth {
        Auth::None => json!({"type": "none"}),
        Auth::ApiKey { .. } => json!({"type": "apiKey", "apikey": "set"}),
        Auth::OAuth2(o) => json!({
            "type": "oauth2",
            "issuer": o.issuer.as_str(),
            "clientId": o.client_id,
            "flow": o.flow.as_str(),
            "authorizationEndpoint": o.authorization_endpoint.as_ref().map(|u| u.as_str()),
            "tokenEndpoint": o.token_endpoint.as_ref().map(|u| u.as_str()),
        }),
    };
    json!({
        "config": path.display().to_string(),
        "gateway": config.gateway.as_str(),
        "auth": auth,
        "caCert": config.ca_cert.is_some(),
    })
}

/// Re-indents a JSON text (2 spaces, like `serde_json::to_string_pretty`) keeping its keys,
/// order and number spelling. Text that is not JSON is returned unchanged.
pub fn pretty_json(raw: &str) -> String {
    if serde_json::from_str::<serde::de::IgnoredAny>(raw).is_err() {
        return raw.to_owned();
    }
    let chars: Vec<char> = raw.chars().collect();
    let mut out = String::with_capacity(raw.len() * 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut i = 0;
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                let mut j = i;
                while j < chars.len() && chars[j].is_ascii_whitespace() {
                    j += 1;
                }
                if j < chars.len() && matches!(chars[j], '}' | ']') {
                    out.push(chars[j]);
                    i = j + 1;
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_ascii_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m as u32, d as u32)
}

/// How long before `now` `then` was, coarsely: `12s ago`, `5m ago`, `3h ago`, `2d ago`.
pub fn ago(now: u64, then: u64) -> String {
    if then == 0 {
        return "never".to_owned();
    }
    let secs = now.saturating_sub(then) / 1000;
    match secs {
        0 => "just now".to_owned(),
        s if s < 120 => format!("{s}s ago"),
        s if s < 7200 => format!("{}m ago", s / 60),
        s if s < 172_800 => format!("{}h ago", s / 3600),
        s => format!("{}d ago", s / 86_400),
    }
}

fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `text` with control characters (ESC, newlines, ...) replaced by `?`.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// A table row: aligned cells, or a free line under the previous row.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Row {
    Cells(Vec<String>),
    Note(String),
}

/// Left-aligned columns separated by two spaces; no trailing spaces.
fn table(headers: &[&str], rows: &[Row]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        if let Row::Cells(cells) = row {
            for (w, cell) in widths.iter_mut().zip(cells) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let write_cells = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let mut line = String::new();
        for (cell, w) in cells.zip(&widths) {
            let _ = write!(line, "{cell:<w$}  ");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    };
    write_cells(&mut out, &mut headers.iter().copied());
    for row in rows {
        match row {
            Row::Cells(cells) => write_cells(&mut out, &mut cells.iter().map(String::as_str)),
            Row::Note(note) => {
                out.push_str(note);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigureRequest;

    const SID: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";
    /// 2024-05-01 12:00:00 UTC.
    const T0: u64 = 1_714_564_800_000;

    fn status_json() -> String {
        format!(
            r#"{{
  "tag": "default",
  "agents": [
    {{"key": "ml/trainer-0/main/python3/42",
      "info": {{"identity": {{"namespace": "ml", "pod": "trainer-0", "container": "main",
                             "processName": "python3", "pid": 42}},
               "tag": "default", "node": "n1", "backend": "nsys",
               "diagnostics": ["nsys 2024.5 found", "bad\u001b[31m"]}},
      "connected": true, "lastSeen": {seen0},
      "mirroring": {{"sent": 4000, "dropped": 12, "notMirrored": 3,
                     "lastError": "Unavailable: no healthy upstream"}}}},
    {{"key": "ml/trainer-1/main/python3/7",
      "info": {{"identity": {{"namespace": "ml", "pod": "trainer-1", "container": "main",
                             "processName": "python3", "pid": 7}},
               "tag": "default", "node": "n2", "backend": "nvtx", "diagnostics": []}},
      "connected": false, "lastSeen": {seen1}}}
  ],
  "agentCounts": {{"known": 2, "connected": 1}},
  "activeSession": {{"id": "{SID}", "tag": "default", "title": "baseline", "state": "open",
                     "createdAt": {T0}, "endedAt": null, "collections": 2}},
  "activeCollection": {{"session": "{SID}", "id": 2, "state": "collecting",
                        "startedAt": {started}, "stopRequestedAt": null, "completedAt": null,
                        "outcomeCounts": {{"started": 1, "failed": 1}}, "agentsTotal": 2,
                        "agents": {{"ml/trainer-0/main/python3/42": {{"state": "started"}},
                                   "ml/trainer-1/main/python3/7": {{"state": "failed", "reason": "nsys crashed"}}}}}}
}}"#,
            seen0 = T0 + 597_000,
            seen1 = T0 - 300_000,
            started = T0 + 60_000,
        )
    }

    #[test]
    fn status_table() {
        let st: TagStatus = serde_json::from_str(&status_json()).unwrap();
        let r = status(&st, T0 + 600_000);
        let expected = format!(
            "\
Tag:         default
Session:     {SID} \"baseline\" (open, 2 collections, created 2024-05-01 12:00:00 UTC)
Collection:  2 collecting (started 2024-05-01 12:01:00 UTC; 2 agents: 1 started, 1 failed)
             failed: ml/trainer-1/main/python3/7: nsys crashed
Agents:      2 known, 1 connected

NAMESPACE/POD/CONTAINER  PROCESS  PID  BACKEND  CONNECTED  LAST SEEN
ml/trainer-0/main        python3  42   nsys     yes        3s ago
    diagnostic: nsys 2024.5 found
    diagnostic: bad?[31m
    OTLP mirroring: 4000 spans sent, 12 dropped, 3 records not mirrored (last error: Unavailable: no healthy upstream)
ml/trainer-1/main        python3  7    nvtx     no         15m ago
"
        );
        assert_eq!(r.out, expected);
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn status_without_session_or_agents() {
        let st: TagStatus = serde_json::from_str(
            r#"{"tag":"t1","agents":[],"activeSession":null,"activeCollection":null}"#,
        )
        .unwrap();
        let r = status(&st, T0);
        assert_eq!(
            r.out,
            "Tag:         t1\n\
             Session:     none (profiler-start or session-begin opens one)\n\
             Collection:  none\n\
             Agents:      none on this tag; profiler-start would profile nothing\n"
        );
    }

    #[test]
    fn stopping_collection_of_an_ended_session_names_its_session() {
        let st: TagStatus = serde_json::from_str(&format!(
            r#"{{"tag":"t","agents":[],"activeSession":null,"activeCollection":
                {{"session":"{SID}","id":4,"state":"stopping","startedAt":{T0},
                  "stopRequestedAt":{T0},"completedAt":null,"agents":{{}}}}}}"#
        ))
        .unwrap();
        let r = status(&st, T0);
        assert!(r.out.contains(&format!(
            "Collection:  4 in session {SID} stopping (stop requested 2024-05-01 12:00:00 UTC; 0 agents)"
        )));
    }

    #[test]
    fn started_lines_and_zero_agent_warning() {
        let s: Started = serde_json::from_str(&format!(
            r#"{{"session":"{SID}","collection":2,"sessionCreated":false,"agents":3}}"#
        ))
        .unwrap();
        let r = started("default", &s);
        assert_eq!(
            r.out,
            format!("Started collection 2 in session {SID} (3 agents)\n")
        );
        assert!(r.warnings.is_empty());

        let s: Started = serde_json::from_str(&format!(
            r#"{{"session":"{SID}","collection":1,"sessionCreated":true,"agents":0}}"#
        ))
        .unwrap();
        let r = started("gpu", &s);
        assert_eq!(
            r.out,
            format!(
                "Opened session {SID} on tag gpu\nStarted collection 1 in session {SID} (0 agents)\n"
            )
        );
        assert_eq!(r.warnings.len(), 1);
        assert!(r.warnings[0].contains("nothing will be profiled"));
    }

    #[test]
    fn stop_end_and_begin_lines() {
        let s: Stopped = serde_json::from_str(&format!(
            r#"{{"session":"{SID}","collection":2,"agents":1,"state":"stopping"}}"#
        ))
        .unwrap();
        assert_eq!(
            stopped(&s).out,
            format!(
                "Stopped collection 2 in session {SID} (1 agent was told to stop; collection is stopping)\n"
            )
        );
        let e: Ended = serde_json::from_str(&format!(
            r#"{{"session":"{SID}","stopped":{{"session":"{SID}","collection":3,"agents":0,"state":"completed"}}}}"#
        ))
        .unwrap();
        assert_eq!(
            ended(&e).out,
            format!(
                "Stopped collection 3 that was still collecting (0 agents were told to stop; collection is completed)\nEnded session {SID}\n"
            )
        );
        let e: Ended =
            serde_json::from_str(&format!(r#"{{"session":"{SID}","stopped":null}}"#)).unwrap();
        assert_eq!(ended(&e).out, format!("Ended session {SID}\n"));
        let b: SessionSummary = serde_json::from_str(&format!(
            r#"{{"id":"{SID}","tag":"default","title":"my run","state":"open","createdAt":1,"endedAt":null,"collections":0}}"#
        ))
        .unwrap();
        assert_eq!(
            session_begun(&b).out,
            format!("Opened session {SID} \"my run\" on tag default\n")
        );
    }

    #[test]
    fn configured_never_shows_the_key() {
        let config = ConfigureRequest {
            gateway: "https://gw:8888".into(),
            api_key: Some("topsecret".into()),
            ..ConfigureRequest::default()
        }
        .validate()
        .unwrap();
        let path = Path::new("/home/u/.nsight-cloud.conf");
        let r = configured(path, &config);
        assert_eq!(
            r.out,
            "Wrote /home/u/.nsight-cloud.conf\ngateway: https://gw:8888\napikey: set\n"
        );
        let j = configured_json(path, &config);
        assert!(!j.to_string().contains("topsecret"));
        assert_eq!(j["auth"]["apikey"], "set");
    }

    #[test]
    fn pretty_json_keeps_order_and_text() {
        let raw = r#"{"zeta":1,"alpha":{"s":"a,b:{c}\"]","e":[],"o":{ }},"n":[1.50,2]}"#;
        assert_eq!(
            pretty_json(raw),
            "{\n  \"zeta\": 1,\n  \"alpha\": {\n    \"s\": \"a,b:{c}\\\"]\",\n    \"e\": [],\n    \"o\": {}\n  },\n  \"n\": [\n    1.50,\n    2\n  ]\n}"
        );
        let v: serde_json::Value = serde_json::from_str(&pretty_json(raw)).unwrap();
        assert_eq!(v, serde_json::from_str::<serde_json::Value>(raw).unwrap());
        assert_eq!(pretty_json("not json"), "not json");
        assert_eq!(pretty_json("{}"), "{}");
    }

    #[test]
    fn times() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(T0), "2024-05-01 12:00:00 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(ago(10_000, 0), "never");
        assert_eq!(ago(10_000, 10_000), "just now");
        assert_eq!(ago(10_000, 20_000), "just now");
        assert_eq!(ago(70_000, 10_000), "60s ago");
        assert_eq!(ago(T0 + 3 * 3_600_000, T0), "3h ago");
        assert_eq!(ago(T0 + 3 * 86_400_000, T0), "3d ago");
    }
}
