//! `download`: fetches a session's reports from their download URLs into the documented tree,
//! in parallel ranged GETs (a few 8 MiB ranges at once, each streamed through a 256 KiB buffer
//! into positioned writes of a preallocated `<file>.part`), resuming an interrupted run, checking
//! size and SHA-256 before the file takes its final name, and never writing outside the output
//! directory whatever the server sent.
//!
//! ```text
//! GET Range: first chunk --> ETag, total size, x-amz-meta-sha256
//!   --> <file>.part.state (etag, size, done) + <file>.part (set to the full size)
//!   --> workers: next chunk -> GET Range -> write_at; contiguous prefix -> state (resume point)
//!   --> fsync --> SHA-256 == expected? rename : delete .part, error naming the file
//! ```
//!
//! The URLs carry their own authorization (S3 presigned, or signed by the coordinator), so no
//! API key is sent with them.

use std::{
    collections::BTreeSet,
    fs::{self, File, OpenOptions},
    io::{self, IsTerminal, Read, Write},
    os::unix::fs::FileExt,
    path::{Component, Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Mutex, PoisonError,
    },
    time::Duration,
};

use crate::trust::{self, CaCert};
use nsight_storage::resume::{advance, plan, State};
use reqwest::{
    blocking::{Client as Http, Response},
    header::{CONTENT_RANGE, ETAG, RANGE},
    StatusCode,
};
use sha2::{Digest, Sha256};

use nsight_contracts::coordinator::ReportEntry;

/// Bytes per ranged GET.
const CHUNK: u64 = 8 * 1024 * 1024;
/// Ranged GETs in flight per file.
const CONCURRENCY: usize = 4;
/// Read buffer of each transfer (the memory bound: one per worker).
const BUF: usize = 256 * 1024;
/// The user metadata our uploads store the report's SHA-256 under (S3 sends it with every GET).
const SHA256_HEADER: &str = "x-amz-meta-sha256";

/// How one file ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    Downloaded {
        path: PathBuf,
        bytes: u64,
        resumed_from: u64,
    },
    AlreadyThere {
        path: PathBuf,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("the server gave `{0}` as a download path: it would leave the output directory, so it was not written")]
    UnsafePath(String),
    #[error("{key}: the coordinator gave no download URL ({reason})")]
    NoUrl { key: String, reason: String },
    #[error("{key}: cannot reach storage at {url}")]
    Unreachable {
        key: String,
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{key}: storage answered HTTP {status}: {detail}")]
    Refused {
        key: String,
        status: StatusCode,
        detail: String,
    },
    #[error("{key}: received {got} bytes, the listing says {want}; the partial file is kept as {part} and the next run resumes it")]
    SizeMismatch {
        key: String,
        got: u64,
        want: u64,
        part: String,
    },
    #[error("{key}: asked storage for bytes {asked}, it answered `{answered}`; the partial file is kept as {part} and the next run resumes it")]
    BadRange {
        key: String,
        asked: String,
        answered: String,
        part: String,
    },
    #[error(
        "{path}: the downloaded bytes have SHA-256 {actual}, but the report's is {expected}; the \
         damaged download was deleted. Run the download again; if this repeats, the stored report \
         is damaged and must be uploaded again"
    )]
    ChecksumMismatch {
        path: String,
        expected: String,
        actual: String,
    },
    #[error("{path}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> DownloadError + '_ {
    move |source| DownloadError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// `out.join(relative)` when `relative` is made of plain components only.
pub fn safe_join(out: &Path, relative: &str) -> Result<PathBuf, DownloadError> {
    let rel = Path::new(relative);
    let plain = rel.components().all(|c| matches!(c, Component::Normal(_)))
        && rel.components().next().is_some()
        && !relative.contains('\\')
        && !relative.contains('\0');
    if plain {
        Ok(out.join(rel))
    } else {
        Err(DownloadError::UnsafePath(relative.to_owned()))
    }
}

/// The HTTP client for storage: no redirects, long timeout for big files, no credentials.
/// `ca` is trusted besides the built-in roots (the gateway's storage port shares its certificate).
pub fn storage_client(ca: Option<&CaCert>) -> Result<Http, reqwest::Error> {
    trust::with_ca(Http::builder(), ca)
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(6 * 3600))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("nsight-cloud/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// `(first byte, total size)` of a `Content-Range: bytes a-b/total` header.
fn content_range(response: &Response) -> Option<(u64, u64)> {
    let v = response.headers().get(CONTENT_RANGE)?.to_str().ok()?;
    let (span, total) = v.strip_prefix("bytes ")?.split_once('/')?;
    Some((span.split_once('-')?.0.parse().ok()?, total.parse().ok()?))
}

fn header_str(response: &Response, name: impl reqwest::header::AsHeaderName) -> Option<String> {
    Some(response.headers().get(name)?.to_str().ok()?.to_owned())
}

/// A hex SHA-256, lower-cased; `None` for anything else.
fn sha256_hex(s: &str) -> Option<String> {
    let s = s.trim();
    (s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())).then(|| s.to_ascii_lowercase())
}

/// Where one file comes from, and the partial file it goes to (for messages).
#[derive(Clone, Copy)]
struct Source<'a> {
    http: &'a Http,
    url: &'a str,
    key: &'a str,
    part: &'a Path,
}

/// One file's transfer: what the workers share.
struct Transfer<'a> {
    src: Source<'a>,
    state_path: &'a Path,
    file: &'a File,
    queue: Mutex<std::vec::IntoIter<(u64, u64)>>,
    progress: Mutex<(State, BTreeSet<(u64, u64)>)>,
    copied: AtomicU64,
    failed: AtomicBool,
    error: Mutex<Option<DownloadError>>,
}

impl Source<'_> {
    fn unreachable(&self, source: reqwest::Error) -> DownloadError {
        DownloadError::Unreachable {
            key: self.key.to_owned(),
            url: strip_query(self.url),
            source,
        }
    }

    /// GET of `[from, to)`; an answer that is not exactly that range is an error.
    fn get_range(&self, from: u64, to: u64) -> Result<Response, DownloadError> {
        let asked = format!("bytes={from}-{}", to - 1);
        let response = self
            .http
            .get(self.url)
            .header(RANGE, &asked)
            .send()
            .map_err(|e| self.unreachable(e))?;
        let status = response.status();
        if !status.is_success() {
            let detail = crate::api::error_body(response);
            return Err(DownloadError::Refused {
                key: self.key.to_owned(),
                status,
                detail: problem_detail(&detail),
            });
        }
        if status != StatusCode::PARTIAL_CONTENT
            || content_range(&response).map(|r| r.0) != Some(from)
        {
            return Err(DownloadError::BadRange {
                key: self.key.to_owned(),
                asked,
                answered: format!(
                    "{status}, Content-Range {}",
                    header_str(&response, CONTENT_RANGE).unwrap_or_else(|| "none".into())
                ),
                part: self.part.display().to_string(),
            });
        }
        Ok(response)
    }
}

impl Transfer<'_> {
    /// Streams `body` into `[from, to)` of the file.
    fn write_range(&self, body: &mut impl Read, from: u64, to: u64) -> Result<(), DownloadError> {
        let mut buf = vec![0u8; BUF];
        let mut pos = from;
        while pos < to {
            if self.failed.load(Ordering::Relaxed) {
                return Ok(());
            }
            let want = usize::try_from(to - pos).map_or(BUF, |n| n.min(BUF));
            let n = match body.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(DownloadError::Io {
                        path: strip_query(self.src.url),
                        source,
                    })
                }
            };
            self.file
                .write_all_at(&buf[..n], pos)
                .map_err(io_err(self.src.part))?;
            pos += n as u64;
            self.copied.fetch_add(n as u64, Ordering::Relaxed);
        }
        if pos != to {
            return Err(DownloadError::SizeMismatch {
                key: self.src.key.to_owned(),
                got: pos - from,
                want: to - from,
                part: self.src.part.display().to_string(),
            });
        }
        Ok(())
    }

    /// Marks `[from, to)` done and saves the resume point when the contiguous prefix moves.
    fn finished(&self, from: u64, to: u64) -> Result<(), DownloadError> {
        let mut guard = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        let (state, finished) = &mut *guard;
        finished.insert((from, to));
        let prefix = advance(state.done, finished);
        if prefix != state.done {
            state.done = prefix;
            fs::write(self.state_path, state.render()).map_err(io_err(self.state_path))?;
        }
        Ok(())
    }

    /// One worker: `first` (an answer already received for a range), then ranges from the
    /// queue until it is empty or another worker failed.
    fn work(&self, mut first: Option<(Response, u64, u64)>) {
        loop {
            if self.failed.load(Ordering::Relaxed) {
                return;
            }
            // A range cut short because another worker failed is not finished.
            let finished = |from, to| {
                if self.failed.load(Ordering::Relaxed) {
                    Ok(())
                } else {
                    self.finished(from, to)
                }
            };
            let result = match first.take() {
                Some((mut response, from, to)) => self
                    .write_range(&mut response, from, to)
                    .and_then(|()| finished(from, to)),
                None => {
                    let next = self
                        .queue
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .next();
                    let Some((from, to)) = next else { return };
                    self.src
                        .get_range(from, to)
                        .and_then(|mut r| self.write_range(&mut r, from, to))
                        .and_then(|()| finished(from, to))
                }
            };
            if let Err(e) = result {
                self.failed.store(true, Ordering::Relaxed);
                let mut slot = self.error.lock().unwrap_or_else(PoisonError::into_inner);
                slot.get_or_insert(e);
                return;
            }
        }
    }
}

/// Downloads one report to `out/<path or flat path>`.
pub fn fetch(
    http: &Http,
    out: &Path,
    entry: &ReportEntry,
    flat: bool,
    url_error: Option<&str>,
    progress: bool,
) -> Result<Fetched, DownloadError> {
    let target = safe_join(out, if flat { &entry.flat_path } else { &entry.path })?;
    if fs::metadata(&target).is_ok_and(|m| m.is_file() && m.len() == entry.size) {
        return Ok(Fetched::AlreadyThere { path: target });
    }
    let url = entry.url.as_deref().ok_or_else(|| DownloadError::NoUrl {
        key: entry.key.clone(),
        reason: url_error.unwrap_or("none given").to_owned(),
    })?;
    if let Some(dir) = target.parent() {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
    }
    let part = with_suffix(&target, ".part");
    let state_path = with_suffix(&target, ".part.state");
    if entry.size == 0 {
        return fetch_whole(http, url, entry, &target, &part, progress);
    }
    let part_len = fs::metadata(&part).map_or(0, |m| m.len());
    let saved = fs::read_to_string(&state_path)
        .ok()
        .and_then(|t| State::parse(&t))
        .filter(|s| s.size == entry.size);
    // A `.part` without state was written front to back (by an earlier version): its length is
    // what is done. This version writes the state before it creates the `.part`.
    let mut resume_from = match &saved {
        Some(s) => s.done.min(part_len),
        None if part_len < entry.size => part_len,
        None => 0,
    };
    if resume_from >= entry.size {
        // Everything was written but not yet checked and renamed: fetch the last chunk again
        // (its answer brings the headers the check needs).
        resume_from = (entry.size - 1) / CHUNK * CHUNK;
    }
    let first_end = |from: u64| entry.size.min(from.saturating_add(CHUNK));
    let src = Source {
        http,
        url,
        key: &entry.key,
        part: &part,
    };
    let mut first = match src.get_range(resume_from, first_end(resume_from)) {
        Ok(r) => r,
        // A server that ignores Range sends the whole object: take it front to back.
        Err(DownloadError::BadRange { .. }) if resume_from == 0 => {
            return fetch_whole(http, url, entry, &target, &part, progress)
        }
        Err(e) => return Err(e),
    };
    let mut etag = header_str(&first, ETAG).unwrap_or_default();
    if saved.as_ref().is_some_and(|s| s.etag != etag) && resume_from > 0 {
        // The object changed since the partial download: start over.
        resume_from = 0;
        first = src.get_range(0, first_end(0))?;
        etag = header_str(&first, ETAG).unwrap_or_default();
    }
    if content_range(&first).map(|r| r.1) != Some(entry.size) {
        return Err(DownloadError::SizeMismatch {
            key: entry.key.clone(),
            got: content_range(&first).map_or(0, |r| r.1),
            want: entry.size,
            part: part.display().to_string(),
        });
    }
    let expected = entry.sha256.as_deref().and_then(sha256_hex).or_else(|| {
        header_str(&first, SHA256_HEADER)
            .as_deref()
            .and_then(sha256_hex)
    });
    let state = State {
        etag,
        size: entry.size,
        done: resume_from,
    };
    fs::write(&state_path, state.render()).map_err(io_err(&state_path))?;
    let file = OpenOptions::new()
        .create(true)
        .truncate(resume_from == 0)
        .read(true)
        .write(true)
        .open(&part)
        .map_err(io_err(&part))?;
    file.set_len(entry.size).map_err(io_err(&part))?;

    let first_to = first_end(resume_from);
    let transfer = Transfer {
        src,
        state_path: &state_path,
        file: &file,
        queue: Mutex::new(plan(first_to, entry.size, CHUNK).into_iter()),
        progress: Mutex::new((state, BTreeSet::new())),
        copied: AtomicU64::new(0),
        failed: AtomicBool::new(false),
        error: Mutex::new(None),
    };
    let mut shown = u64::MAX;
    std::thread::scope(|scope| {
        let t = &transfer;
        let mut workers = vec![scope.spawn(move || t.work(Some((first, resume_from, first_to))))];
        for _ in 1..CONCURRENCY {
            workers.push(scope.spawn(move || t.work(None)));
        }
        while progress && !workers.iter().all(|w| w.is_finished()) {
            let done = resume_from + t.copied.load(Ordering::Relaxed);
            let percent = done.saturating_mul(100) / entry.size.max(1);
            if percent != shown {
                shown = percent;
                let _ = write!(
                    io::stderr().lock(),
                    "\r{}",
                    progress_line(&entry.key, done, entry.size)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    if progress {
        let _ = writeln!(
            io::stderr().lock(),
            "\r{}",
            progress_line(
                &entry.key,
                resume_from + transfer.copied.load(Ordering::Relaxed),
                entry.size
            )
        );
    }
    let copied = transfer.copied.load(Ordering::Relaxed);
    if let Some(e) = transfer
        .error
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner)
    {
        return Err(e);
    }
    file.sync_all().map_err(io_err(&part))?;
    drop(file);
    finish(&part, &target, expected.as_deref())?;
    let _ = fs::remove_file(&state_path);
    Ok(Fetched::Downloaded {
        path: target,
        bytes: copied,
        resumed_from: resume_from,
    })
}

/// Checks the SHA-256 (when known) and gives the file its final name; a mismatch deletes the
/// partial file and its state.
fn finish(part: &Path, target: &Path, expected: Option<&str>) -> Result<(), DownloadError> {
    if let Some(expected) = expected {
        let mut f = File::open(part).map_err(io_err(part))?;
        let mut h = Sha256::new();
        io::copy(&mut f, &mut h).map_err(io_err(part))?;
        let actual = hex::encode(h.finalize());
        if actual != expected {
            let _ = fs::remove_file(part);
            let _ = fs::remove_file(with_suffix(target, ".part.state"));
            return Err(DownloadError::ChecksumMismatch {
                path: target.display().to_string(),
                expected: expected.to_owned(),
                actual,
            });
        }
    }
    fs::rename(part, target).map_err(io_err(target))
}

/// The whole object in one GET, front to back (empty objects, servers that ignore `Range`).
fn fetch_whole(
    http: &Http,
    url: &str,
    entry: &ReportEntry,
    target: &Path,
    part: &Path,
    progress: bool,
) -> Result<Fetched, DownloadError> {
    let mut response = http
        .get(url)
        .send()
        .map_err(|source| DownloadError::Unreachable {
            key: entry.key.clone(),
            url: strip_query(url),
            source,
        })?;
    let status = response.status();
    if !status.is_success() {
        let detail = crate::api::error_body(response);
        return Err(DownloadError::Refused {
            key: entry.key.clone(),
            status,
            detail: problem_detail(&detail),
        });
    }
    let expected = entry.sha256.as_deref().and_then(sha256_hex).or_else(|| {
        header_str(&response, SHA256_HEADER)
            .as_deref()
            .and_then(sha256_hex)
    });
    let _ = fs::remove_file(with_suffix(target, ".part.state"));
    let mut file = File::create(part).map_err(io_err(part))?;
    let copied = copy_with_progress(
        &mut response,
        &mut file,
        0,
        entry.size,
        progress,
        &entry.key,
    )
    .map_err(|source| match source {
        CopyError::Read(source) => DownloadError::Io {
            path: strip_query(url),
            source,
        },
        CopyError::Write(source) => DownloadError::Io {
            path: part.display().to_string(),
            source,
        },
        CopyError::Longer(got) => DownloadError::SizeMismatch {
            key: entry.key.clone(),
            got,
            want: entry.size,
            part: part.display().to_string(),
        },
    })?;
    file.sync_all().map_err(io_err(part))?;
    drop(file);
    if copied != entry.size {
        return Err(DownloadError::SizeMismatch {
            key: entry.key.clone(),
            got: copied,
            want: entry.size,
            part: part.display().to_string(),
        });
    }
    finish(part, target, expected.as_deref())?;
    Ok(Fetched::Downloaded {
        path: target.to_path_buf(),
        bytes: copied,
        resumed_from: 0,
    })
}

enum CopyError {
    Read(io::Error),
    Write(io::Error),
    /// The body went on past the declared size (at least this many bytes); nothing past the
    /// size was written.
    Longer(u64),
}

fn copy_with_progress(
    from: &mut impl Read,
    to: &mut File,
    start: u64,
    total: u64,
    progress: bool,
    label: &str,
) -> Result<u64, CopyError> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut copied = 0u64;
    let mut shown = u64::MAX;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(CopyError::Read(e)),
        };
        // Never more than the listing declared: a server that sends more is not trusted with
        // the disk.
        if start + copied + n as u64 > total {
            return Err(CopyError::Longer(start + copied + n as u64));
        }
        to.write_all(&buf[..n]).map_err(CopyError::Write)?;
        copied += n as u64;
        if progress {
            let percent = (start + copied).saturating_mul(100) / total.max(1);
            if percent != shown {
                shown = percent;
                let _ = write!(
                    io::stderr().lock(),
                    "\r{}",
                    progress_line(label, start + copied, total)
                );
            }
        }
    }
    if progress {
        let _ = writeln!(io::stderr().lock());
    }
    Ok(copied)
}

/// `name [#########...........]  42% 12.0/28.6 MiB`.
pub fn progress_line(label: &str, done: u64, total: u64) -> String {
    const WIDTH: u64 = 24;
    let total = total.max(1);
    let filled = (done.min(total) * WIDTH / total) as usize;
    let name: String = label
        .rsplit('/')
        .next()
        .unwrap_or(label)
        .chars()
        .take(40)
        .collect();
    format!(
        "{name} [{}{}] {:>3}% {:.1}/{:.1} MiB",
        "#".repeat(filled),
        ".".repeat(WIDTH as usize - filled),
        done.min(total) * 100 / total,
        done as f64 / 1_048_576.0,
        total as f64 / 1_048_576.0
    )
}

/// Progress bars only on a terminal.
pub fn show_progress(json: bool) -> bool {
    !json && io::stderr().is_terminal()
}

fn with_suffix(target: &Path, suffix: &str) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    target.with_file_name(name)
}

/// A URL without its query (which holds the signature) for messages.
fn strip_query(url: &str) -> String {
    url.split('?').next().unwrap_or(url).to_owned()
}

fn problem_detail(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("detail").and_then(|d| d.as_str()).map(str::to_owned))
        .unwrap_or_else(|| body.chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_paths_are_joined() {
        let out = Path::new("/tmp/out");
        assert_eq!(
            safe_join(out, "20260101000000-run/1/a_t_p_s.sqlite").ok(),
            Some(PathBuf::from(
                "/tmp/out/20260101000000-run/1/a_t_p_s.sqlite"
            ))
        );
        for hostile in [
            "../x",
            "/etc/passwd",
            "a/../../x",
            "",
            ".",
            "a\\..\\b",
            "a\0b",
            "./a",
        ] {
            assert!(safe_join(out, hostile).is_err(), "{hostile:?} was accepted");
        }
    }

    /// A body longer than the listing declared fails, and nothing past the declared size is
    /// written to disk (issue 22, item 8).
    #[test]
    fn a_body_longer_than_declared_is_not_written_past_the_size() {
        #![allow(clippy::unwrap_used, reason = "test")]
        let path = std::env::temp_dir().join(format!("nsight-cli-longer-{}", std::process::id()));
        let mut file = File::create(&path).unwrap();
        let body = vec![7u8; 3 * 256 * 1024];
        let result = copy_with_progress(&mut body.as_slice(), &mut file, 0, 300_000, false, "k");
        assert!(matches!(result, Err(CopyError::Longer(n)) if n > 300_000));
        assert!(fs::metadata(&path).unwrap().len() <= 300_000);
        let exact = copy_with_progress(&mut &body[..1000], &mut file, 0, 1000, false, "k");
        assert!(matches!(exact, Ok(1000)));
        fs::remove_file(&path).unwrap();
    }

    #[test]
    fn progress_lines_show_share_and_sizes() {
        assert_eq!(
            progress_line("t/s/1/a.sqlite", 512 * 1024, 1024 * 1024),
            "a.sqlite [############............]  50% 0.5/1.0 MiB"
        );
        assert!(progress_line("x", 5, 0).contains("100%"));
    }

    #[test]
    fn ranges_state_and_digests() {
        assert_eq!(plan(0, 10, 4), vec![(0, 4), (4, 8), (8, 10)]);
        assert!(plan(10, 10, 4).is_empty());
        let mut finished = BTreeSet::from([(4, 8)]);
        assert_eq!(advance(0, &mut finished), 0);
        finished.insert((0, 4));
        assert_eq!(advance(0, &mut finished), 8);
        let s = State {
            etag: "\"e-2\"".into(),
            size: 9,
            done: 4,
        };
        assert_eq!(State::parse(&s.render()), Some(s));
        assert_eq!(State::parse("e\nx\n"), None);
        let hex = "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD";
        assert_eq!(sha256_hex(hex), Some(hex.to_ascii_lowercase()));
        assert_eq!(sha256_hex("abc"), None);
    }

    #[test]
    fn part_files_sit_beside_the_target_and_queries_are_hidden() {
        assert_eq!(
            with_suffix(Path::new("/o/a.sqlite"), ".part"),
            PathBuf::from("/o/a.sqlite.part")
        );
        assert_eq!(strip_query("http://h/k?signature=abc"), "http://h/k");
    }
}
