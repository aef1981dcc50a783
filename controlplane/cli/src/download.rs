//! `download`: fetches a session's reports from their download URLs into the documented tree,
//! streaming (bounded memory), resuming a `<file>.part` left by an interrupted run with a ranged
//! GET, checking the size before the file takes its final name, and never writing outside the
//! output directory whatever the server sent.
//!
//! The URLs carry their own authorization (S3 presigned, or signed by the coordinator), so no
//! API key is sent with them.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, IsTerminal, Read, Write},
    path::{Component, Path, PathBuf},
    time::Duration,
};

use reqwest::{
    blocking::Client as Http,
    header::{CONTENT_RANGE, RANGE},
    StatusCode,
};

use crate::api::ReportEntry;

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
pub fn storage_client() -> Result<Http, reqwest::Error> {
    Http::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(6 * 3600))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("nsight-cloud/", env!("CARGO_PKG_VERSION")))
        .build()
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
    let part = part_path(&target);
    let have = fs::metadata(&part).map_or(0, |m| m.len());
    let resume_from = if have > 0 && have < entry.size {
        have
    } else {
        0
    };
    let mut request = http.get(url);
    if resume_from > 0 {
        request = request.header(RANGE, format!("bytes={resume_from}-"));
    }
    let unreachable = |source| DownloadError::Unreachable {
        key: entry.key.clone(),
        url: strip_query(url),
        source,
    };
    let mut response = request.send().map_err(unreachable)?;
    let status = response.status();
    // A server that ignores Range sends the whole object: start over.
    let resumed = status == StatusCode::PARTIAL_CONTENT
        && response
            .headers()
            .get(CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with(&format!("bytes {resume_from}-")));
    if !status.is_success() {
        let detail = response.text().unwrap_or_default();
        return Err(DownloadError::Refused {
            key: entry.key.clone(),
            status,
            detail: problem_detail(&detail),
        });
    }
    let start = if resumed { resume_from } else { 0 };
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .append(resumed)
        .truncate(!resumed)
        .open(&part)
        .map_err(io_err(&part))?;
    let copied = copy_with_progress(
        &mut response,
        &mut file,
        start,
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
    })?;
    file.sync_all().map_err(io_err(&part))?;
    drop(file);
    let got = fs::metadata(&part).map_err(io_err(&part))?.len();
    if got != entry.size {
        return Err(DownloadError::SizeMismatch {
            key: entry.key.clone(),
            got,
            want: entry.size,
            part: part.display().to_string(),
        });
    }
    fs::rename(&part, &target).map_err(io_err(&target))?;
    Ok(Fetched::Downloaded {
        path: target,
        bytes: copied,
        resumed_from: start,
    })
}

enum CopyError {
    Read(io::Error),
    Write(io::Error),
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

fn part_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
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

    #[test]
    fn progress_lines_show_share_and_sizes() {
        assert_eq!(
            progress_line("t/s/1/a.sqlite", 512 * 1024, 1024 * 1024),
            "a.sqlite [############............]  50% 0.5/1.0 MiB"
        );
        assert!(progress_line("x", 5, 0).contains("100%"));
    }

    #[test]
    fn part_files_sit_beside_the_target_and_queries_are_hidden() {
        assert_eq!(
            part_path(Path::new("/o/a.sqlite")),
            PathBuf::from("/o/a.sqlite.part")
        );
        assert_eq!(strip_query("http://h/k?signature=abc"), "http://h/k");
    }
}
