//! The timeline's REST routes (`nsight_contracts::timeline`): parse and check the query, get
//! the report's index from the cache, answer JSON or a binary tile. Tiles of one report version
//! never change: each carries an ETag, and a matching `If-None-Match` gets 304.

use std::collections::HashMap;

use axum::{
    extract::{Query, State},
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use nsight_contracts::timeline::{SearchAnswer, SearchHit, Timeline, SEARCH_MAX, TILE_BUCKETS};

use super::{jobs::Service, problem::Problem, timelines::Loaded};
use crate::timeline::{detail, flows, load, perfetto::Export, search};

pub fn routes() -> Router<Service> {
    Router::new()
        .route("/timeline", get(timeline))
        .route("/timeline/tiles", get(tile))
        .route("/timeline/event", get(event))
        .route("/timeline/range", get(range))
        .route("/timeline/search", get(search))
        .route("/timeline/perfetto", get(perfetto))
}

type Params = Query<HashMap<String, String>>;

fn required<'a>(q: &'a HashMap<String, String>, name: &str) -> Result<&'a str, Problem> {
    q.get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| Problem::bad_request(format!("the query parameter `{name}` is required")))
}

fn number<T: std::str::FromStr>(q: &HashMap<String, String>, name: &str) -> Result<T, Problem> {
    let raw = required(q, name)?;
    raw.parse()
        .map_err(|_| Problem::bad_request(format!("`{name}={raw}` is not a valid number")))
}

async fn loaded(
    svc: &Service,
    q: &HashMap<String, String>,
) -> Result<std::sync::Arc<Loaded>, Problem> {
    let key = required(q, "report")?;
    Ok(svc.0.timelines.get(&svc.0.store, key).await?)
}

fn check_track(l: &Loaded, track: u32) -> Result<(), Problem> {
    if (track as usize) < l.index.tracks.len() {
        Ok(())
    } else {
        Err(Problem::new(
            404,
            format!(
                "the report has no track {track} (it has {}; see GET timeline)",
                l.index.tracks.len()
            ),
        ))
    }
}

async fn timeline(State(svc): State<Service>, Query(q): Params) -> Result<Response, Problem> {
    let l = loaded(&svc, &q).await?;
    let i = &l.index;
    Ok(Json(Timeline {
        report: l.key.clone(),
        start_ns: i.start_ns,
        end_ns: i.end_ns,
        top_level: i.top_level,
        tile_buckets: TILE_BUCKETS,
        tracks: i.tracks.clone(),
        notes: i.notes.clone(),
    })
    .into_response())
}

async fn tile(
    State(svc): State<Service>,
    Query(q): Params,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let track: u32 = number(&q, "track")?;
    let level: u8 = number(&q, "level")?;
    let index: u64 = number(&q, "index")?;
    let l = loaded(&svc, &q).await?;
    check_track(&l, track)?;
    if level > l.index.top_level {
        return Err(Problem::bad_request(format!(
            "level {level} is above the report's top level {}",
            l.index.top_level
        )));
    }
    let span = nsight_contracts::timeline::tile_span_ns(level);
    let tiles = ((l.index.end_ns - l.index.start_ns) / span + 1) as u64;
    if index >= tiles {
        return Err(Problem::new(
            404,
            format!("level {level} has tiles 0 to {} only", tiles - 1),
        ));
    }
    let etag = format!("\"{}-{track}-{level}-{index}\"", l.etag.replace('"', ""));
    let cache = HeaderValue::from_static("private, max-age=86400");
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag))
    {
        let mut r = StatusCode::NOT_MODIFIED.into_response();
        r.headers_mut().insert(header::CACHE_CONTROL, cache);
        if let Ok(v) = HeaderValue::from_str(&etag) {
            r.headers_mut().insert(header::ETAG, v);
        }
        return Ok(r);
    }
    let bytes = l
        .index
        .tile(track, level, index)
        .map(|t| t.encode())
        .unwrap_or_default();
    let mut r = bytes.into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(header::CACHE_CONTROL, cache);
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    Ok(r)
}

async fn event(State(svc): State<Service>, Query(q): Params) -> Result<Response, Problem> {
    let track: u32 = number(&q, "track")?;
    let event: u32 = number(&q, "event")?;
    let l = loaded(&svc, &q).await?;
    check_track(&l, track)?;
    let found = tokio::task::spawn_blocking(move || {
        let conn = load::open(&l.path)?;
        detail::detail(&conn, &l.index, track, event)
    })
    .await
    .map_err(|e| Problem::new(503, format!("the query stopped: {e}")))?
    .map_err(|e| Problem::new(422, e.to_string()))?;
    match found {
        Some(d) => Ok(Json(d).into_response()),
        None => Err(Problem::new(
            404,
            format!("track {track} has no event {event}"),
        )),
    }
}

async fn range(State(svc): State<Service>, Query(q): Params) -> Result<Response, Problem> {
    let start: i64 = number(&q, "start")?;
    let end: i64 = number(&q, "end")?;
    // The report first: a missing one is a 404 whatever the range says.
    let l = loaded(&svc, &q).await?;
    if end <= start {
        return Err(Problem::bad_request(format!(
            "the range is empty: end ({end}) must be after start ({start})"
        )));
    }
    let tracks = match q.get("tracks").filter(|t| !t.is_empty()) {
        None => l.index.event_tracks(),
        Some(list) => {
            let mut out = Vec::new();
            for raw in list.split(',') {
                let t: u32 = raw.trim().parse().map_err(|_| {
                    Problem::bad_request(format!("`{raw}` in `tracks` is not a track id"))
                })?;
                check_track(&l, t)?;
                out.push(t);
            }
            out
        }
    };
    Ok(Json(l.index.range(start, end, &tracks)).into_response())
}

/// The next (or previous) event whose name contains `q` (`crate::timeline::search`).
async fn search(State(svc): State<Service>, Query(q): Params) -> Result<Response, Problem> {
    let text = required(&q, "q")?.to_lowercase();
    if text.chars().count() > SEARCH_MAX {
        return Err(Problem::bad_request(format!(
            "`q` is longer than {SEARCH_MAX} characters"
        )));
    }
    let backwards = match q.get("dir").map(String::as_str) {
        None | Some("" | "next") => false,
        Some("prev") => true,
        Some(other) => {
            return Err(Problem::bad_request(format!(
                "`dir={other}` is neither `next` nor `prev`"
            )))
        }
    };
    let from = match q.get("from").filter(|f| !f.is_empty()) {
        None => None,
        Some(raw) => {
            let parsed = raw
                .split_once('.')
                .and_then(|(t, e)| Some((t.parse::<u64>().ok()?, e.parse::<u64>().ok()?)));
            Some(parsed.ok_or_else(|| {
                Problem::bad_request(format!(
                    "`from={raw}` is not an event: give `<track>.<event>` (as the page's URL does), or leave it out to search from the report's start (its end with dir=prev)"
                ))
            })?)
        }
    };
    let l = loaded(&svc, &q).await?;
    let cursor = match from {
        None => None,
        Some((track, event)) => {
            // A number past u32 names no track or event: 404, as one past the last does.
            let track32 = u32::try_from(track).unwrap_or(u32::MAX);
            check_track(&l, track32)?;
            let start = u32::try_from(event)
                .ok()
                .and_then(|e| l.index.track(track32)?.1.start.get(e as usize).copied())
                .ok_or_else(|| Problem::new(404, format!("track {track} has no event {event}")))?;
            Some((start, track32, event as u32))
        }
    };
    let index = l.clone();
    let hit = tokio::task::spawn_blocking(move || {
        search::find(&index.index, &text, cursor, backwards).and_then(|(track, event)| {
            let (_, ev) = index.index.track(track)?;
            let i = event as usize;
            Some(SearchHit {
                track,
                event,
                name: index.index.name_of(ev.name[i]),
                start_ns: ev.start[i],
                end_ns: ev.end[i],
            })
        })
    })
    .await
    .map_err(|e| Problem::new(503, format!("the search stopped: {e}")))?;
    Ok(Json(SearchAnswer { hit }).into_response())
}

/// The report as a Perfetto trace, streamed as it is encoded (docs/timeline.md).
async fn perfetto(State(svc): State<Service>, Query(q): Params) -> Result<Response, Problem> {
    let l = loaded(&svc, &q).await?;
    let reading = l.clone();
    let flows = tokio::task::spawn_blocking(move || flows::read(&load::open(&reading.path)?))
        .await
        .map_err(|e| Problem::new(503, format!("the query stopped: {e}")))?
        .map_err(|e| Problem::new(422, e.to_string()))?;
    let (mut writer, reader) = tokio::io::duplex(crate::timeline::perfetto::CHUNK);
    let runtime = tokio::runtime::Handle::current();
    let name = trace_file_name(&l.key);
    tokio::task::spawn_blocking(move || {
        use tokio::io::AsyncWriteExt as _;
        for chunk in Export::new(&l.index, &flows) {
            // The client went away: stop encoding.
            if runtime.block_on(writer.write_all(&chunk)).is_err() {
                break;
            }
        }
    });
    let mut r =
        axum::body::Body::from_stream(tokio_util::io::ReaderStream::new(reader)).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(r)
}

/// `reports/s/1/report1.sqlite` -> `report1.perfetto-trace` (only safe characters kept).
fn trace_file_name(key: &str) -> String {
    let base = key.rsplit('/').next().unwrap_or(key);
    let stem = base.strip_suffix(".sqlite").unwrap_or(base);
    let safe: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!(
        "{}.perfetto-trace",
        if safe.is_empty() { "report" } else { &safe }
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn trace_file_names_are_safe() {
        assert_eq!(
            super::trace_file_name("s/1/report1.sqlite"),
            "report1.perfetto-trace"
        );
        assert_eq!(
            super::trace_file_name("a/we\"ird na;me.sqlite"),
            "we_ird_na_me.perfetto-trace"
        );
        assert_eq!(super::trace_file_name(""), "report.perfetto-trace");
    }
}
