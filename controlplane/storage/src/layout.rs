//! The key layout of reports in storage and the download tree rebuilt from a listing (pure: no
//! I/O, no clock).
//!
//! ```text
//! storage:   <tag>/<session>/<collection>/<process>_<tag>_<instance>_<stub>.nsys-rep  (+ .sqlite)
//!            <tag>/<session>/session.json      {tag, session, title, created, ended}
//! download:  <out>/<YYYYMMDDHHMMSS>-<title>/<collection>/<process>_<tag>_<instance>_<stub>.nsys-rep
//! ```
//!
//! Every key component is sanitised to `[A-Za-z0-9.-]` (so `_` separates the file name's four
//! fields unambiguously and no component can be `..` or hidden), titles to letters, digits, `-`,
//! `_` and `.`. Parsing accepts only keys whose components are already sanitised, so a key that
//! someone else put in the bucket can never place a file outside the output directory.

use std::{
    collections::BTreeMap,
    path::{Component, Path, PathBuf},
};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::ObjectInfo;

/// The per-session metadata object's file name.
pub const SESSION_META: &str = "session.json";
/// Longest sanitised key component: four of them plus separators and `.nsys-rep` stay under the
/// usual 255-byte file name limit.
pub const MAX_COMPONENT: usize = 60;
/// Longest sanitised title, in characters.
pub const MAX_TITLE: usize = 80;
/// What an empty component becomes.
const UNNAMED: &str = "unnamed";

/// The two files an agent uploads per collection (the REST contract's type: listings name it).
pub use nsight_contracts::coordinator::ReportKind;

/// The kind whose extension this is.
fn kind_of_extension(ext: &str) -> Option<ReportKind> {
    [ReportKind::NsysRep, ReportKind::Sqlite]
        .into_iter()
        .find(|k| k.extension() == ext)
}

/// Why a key is not part of the layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("`{key}` is not a report key: {reason}")]
    NotAReportKey { key: String, reason: &'static str },
    #[error("`{key}` holds session metadata that is not valid JSON")]
    SessionMeta { key: String },
}

/// Where one report lives. Every field is sanitised (see [`sanitize_component`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReportKey {
    pub tag: String,
    pub session: String,
    pub collection: String,
    pub process: String,
    pub instance: String,
    pub stub: String,
    pub kind: ReportKind,
}

impl ReportKey {
    /// A key from raw names; each is sanitised.
    pub fn new(
        tag: &str,
        session: &str,
        collection: &str,
        process: &str,
        instance: &str,
        stub: &str,
        kind: ReportKind,
    ) -> Self {
        Self {
            tag: sanitize_component(tag),
            session: sanitize_component(session),
            collection: sanitize_component(collection),
            process: sanitize_component(process),
            instance: sanitize_component(instance),
            stub: sanitize_component(stub),
            kind,
        }
    }

    /// The same report's other file (the `.sqlite` beside the `.nsys-rep`).
    pub fn with_kind(&self, kind: ReportKind) -> Self {
        Self {
            kind,
            ..self.clone()
        }
    }

    /// `<process>_<tag>_<instance>_<stub>.<ext>`.
    pub fn file_name(&self) -> String {
        format!(
            "{}_{}_{}_{}.{}",
            self.process,
            self.tag,
            self.instance,
            self.stub,
            self.kind.extension()
        )
    }

    /// The object key.
    pub fn to_key(&self) -> String {
        format!(
            "{}/{}/{}/{}",
            self.tag,
            self.session,
            self.collection,
            self.file_name()
        )
    }

    /// Parses an object key written by [`ReportKey::to_key`].
    pub fn parse(key: &str) -> Result<Self, LayoutError> {
        let bad = |reason| LayoutError::NotAReportKey {
            key: key.to_owned(),
            reason,
        };
        let parts: Vec<&str> = key.split('/').collect();
        let [tag, session, collection, file] = parts[..] else {
            return Err(bad("expected <tag>/<session>/<collection>/<file>"));
        };
        let (stem, ext) = file
            .rsplit_once('.')
            .ok_or_else(|| bad("the file has no extension"))?;
        let kind = kind_of_extension(ext)
            .ok_or_else(|| bad("the file is neither .nsys-rep nor .sqlite"))?;
        let fields: Vec<&str> = stem.split('_').collect();
        let [process, file_tag, instance, stub] = fields[..] else {
            return Err(bad(
                "the file name is not <process>_<tag>_<instance>_<stub>",
            ));
        };
        if file_tag != tag {
            return Err(bad(
                "the tag in the file name differs from the tag directory",
            ));
        }
        for c in [tag, session, collection, process, instance, stub] {
            if !is_sanitized(c) {
                return Err(bad("a component has characters outside [A-Za-z0-9.-]"));
            }
        }
        Ok(Self {
            tag: tag.to_owned(),
            session: session.to_owned(),
            collection: collection.to_owned(),
            process: process.to_owned(),
            instance: instance.to_owned(),
            stub: stub.to_owned(),
            kind,
        })
    }
}

/// `<tag>/`: everything of a tag.
pub fn tag_prefix(tag: &str) -> String {
    format!("{}/", sanitize_component(tag))
}

/// `<tag>/<session>/`: everything of a session.
pub fn session_prefix(tag: &str, session: &str) -> String {
    format!(
        "{}/{}/",
        sanitize_component(tag),
        sanitize_component(session)
    )
}

/// `<tag>/<session>/session.json`.
pub fn session_meta_key(tag: &str, session: &str) -> String {
    format!("{}{SESSION_META}", session_prefix(tag, session))
}

/// `(tag, session)` if `key` is a session metadata key.
pub fn parse_session_meta_key(key: &str) -> Option<(&str, &str)> {
    let rest = key.strip_suffix(SESSION_META)?.strip_suffix('/')?;
    let (tag, session) = rest.split_once('/')?;
    (is_sanitized(tag) && is_sanitized(session)).then_some((tag, session))
}

/// The small per-session object the coordinator writes at session begin and end, so that a
/// listing alone can name the download directories.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMeta {
    pub tag: String,
    pub session: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created: OffsetDateTime,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub ended: Option<OffsetDateTime>,
}

impl SessionMeta {
    pub fn key(&self) -> String {
        session_meta_key(&self.tag, &self.session)
    }

    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    pub fn from_json(key: &str, bytes: &[u8]) -> Result<Self, LayoutError> {
        serde_json::from_slice(bytes).map_err(|_| LayoutError::SessionMeta {
            key: key.to_owned(),
        })
    }

    /// `<YYYYMMDDHHMMSS>-<title>` (UTC), or `<YYYYMMDDHHMMSS>-<session>` without a title.
    pub fn dir_name(&self) -> String {
        let name = self
            .title
            .as_deref()
            .and_then(sanitize_title)
            .unwrap_or_else(|| sanitize_component(&self.session));
        format!("{}-{name}", compact_utc(self.created))
    }
}

/// `YYYYMMDDHHMMSS` in UTC.
pub fn compact_utc(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

/// A key component: `[A-Za-z0-9.-]` only (anything else becomes `-`), runs of `-` collapsed,
/// no leading or trailing `.`/`-`, at most [`MAX_COMPONENT`] bytes, never empty.
pub fn sanitize_component(raw: &str) -> String {
    let mapped = raw.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
            c
        } else {
            '-'
        }
    });
    finish(mapped, MAX_COMPONENT).unwrap_or_else(|| UNNAMED.to_owned())
}

fn is_sanitized(component: &str) -> bool {
    component == sanitize_component(component)
}

/// A title for a directory name: letters and digits of any script, `-`, `_`, `.`; anything else
/// (`/`, `\`, spaces, control and format characters) becomes `-`; runs of `-` collapsed; no
/// leading or trailing `.`/`-`; at most [`MAX_TITLE`] characters. `None` if nothing is left.
pub fn sanitize_title(raw: &str) -> Option<String> {
    let mapped = raw.chars().map(|c| {
        if c.is_alphanumeric() || c == '-' || c == '_' || c == '.' {
            c
        } else {
            '-'
        }
    });
    finish(mapped, MAX_TITLE)
}

fn finish(chars: impl Iterator<Item = char>, max: usize) -> Option<String> {
    let mut out = String::new();
    for c in chars {
        if c == '-' && out.ends_with('-') {
            continue;
        }
        out.push(c);
    }
    let trimmed: String = out
        .trim_matches(|c| c == '.' || c == '-')
        .chars()
        .take(max)
        .collect();
    let trimmed = trimmed.trim_end_matches(['.', '-']);
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

/// One file to download: the object and where it goes, relative to the output directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownloadItem {
    pub key: String,
    pub path: PathBuf,
    pub size: u64,
}

/// The download of a listing: the files, and the keys that were not reports (with why).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownloadPlan {
    pub items: Vec<DownloadItem>,
    pub skipped: Vec<LayoutError>,
}

/// Builds the documented download tree from a listing and the sessions' metadata (fetched from
/// the listing's `session.json` objects). A session without metadata is named after its oldest
/// object's time and its id. `flat` puts every file directly in the output directory as
/// `<session dir>_<collection>_<file>`.
pub fn plan_download(listing: &[ObjectInfo], metas: &[SessionMeta], flat: bool) -> DownloadPlan {
    let mut plan = DownloadPlan::default();
    let mut reports = Vec::new();
    for object in listing {
        if parse_session_meta_key(&object.key).is_some() {
            continue;
        }
        match ReportKey::parse(&object.key) {
            Ok(report) => reports.push((report, object)),
            Err(e) => plan.skipped.push(e),
        }
    }
    let mut dirs: BTreeMap<(&str, &str), String> = BTreeMap::new();
    for meta in metas {
        dirs.insert((&meta.tag, &meta.session), meta.dir_name());
    }
    // Sessions without metadata: the oldest object's time names them.
    let mut oldest: BTreeMap<(&str, &str), OffsetDateTime> = BTreeMap::new();
    for (report, object) in &reports {
        let t = object
            .last_modified
            .map(OffsetDateTime::from)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        let entry = oldest.entry((&report.tag, &report.session)).or_insert(t);
        *entry = (*entry).min(t);
    }
    for ((tag, session), created) in oldest {
        dirs.entry((tag, session)).or_insert_with(|| {
            SessionMeta {
                tag: tag.to_owned(),
                session: session.to_owned(),
                title: None,
                created,
                ended: None,
            }
            .dir_name()
        });
    }
    for (report, object) in &reports {
        let dir = dirs
            .get(&(report.tag.as_str(), report.session.as_str()))
            .cloned()
            .unwrap_or_else(|| report.session.clone());
        let path = if flat {
            PathBuf::from(format!(
                "{dir}_{}_{}",
                report.collection,
                report.file_name()
            ))
        } else {
            [
                dir.as_str(),
                report.collection.as_str(),
                &report.file_name(),
            ]
            .iter()
            .collect()
        };
        plan.items.push(DownloadItem {
            key: object.key.clone(),
            path,
            size: object.size,
        });
    }
    plan.items.sort_by(|a, b| a.path.cmp(&b.path));
    plan
}

/// `out.join(relative)` if `relative` has only plain components (no root, `.`, `..`).
pub fn join_under(out: &Path, relative: &Path) -> Option<PathBuf> {
    let plain = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_)));
    (plain && relative.components().next().is_some()).then(|| out.join(relative))
}

#[cfg(test)]
mod tests;
