//! Local inputs given as Nsight Systems report files (`.nsys-rep`, or `.qdrep` from nsys 2021.3
//! and older) instead of their SQLite export. Recipes read only the export, so such an input is
//! exported first, as `nsys stats` does: with `nsys export --type sqlite` when an `nsys` is on
//! PATH, into `<report>.sqlite` beside the report (an existing export newer than the report is
//! used as it is). Without nsys the input is refused with the command that exports it. This
//! module only runs nsys; it never reads the report itself.
//!
//! ```text
//!  X.nsys-rep ──X.sqlite newer?──yes──> X.sqlite (a warning says so)
//!      │ no
//!      v
//!  nsys on PATH? ──yes──> nsys export --type sqlite --force-overwrite true --output X.sqlite X.nsys-rep
//!      │ no
//!      v
//!  LocalError::Input naming that command
//! ```

use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
    process::Command,
};

use crate::local::LocalError;

/// File extensions of Nsight Systems report files.
pub const REPORT_EXTENSIONS: [&str; 2] = ["nsys-rep", "qdrep"];

/// Whether `path` names a report file (by its extension) rather than an export.
pub fn is_report_file(path: &Path) -> bool {
    path.extension()
        .and_then(OsStr::to_str)
        .is_some_and(|e| REPORT_EXTENSIONS.contains(&e))
}

/// The first executable `nsys` in the directories of `path_var` (a `PATH` value).
pub fn find_nsys(path_var: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path_var?)
        .map(|dir| dir.join("nsys"))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The command that exports `report` to `sqlite`, as a user would type it.
pub fn export_command(report: &Path, sqlite: &Path) -> String {
    format!(
        "nsys export --type sqlite --output {} {}",
        sqlite.display(),
        report.display()
    )
}

/// An input as the recipes read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteInput {
    pub path: PathBuf,
    /// What was done to get it, for the user (`None` when the input was already an export).
    pub warning: Option<String>,
}

/// `input` itself when it is not a report file; else its SQLite export, made with `nsys` when
/// there is no export newer than the report beside it.
pub fn sqlite_input(input: &Path, nsys: Option<&Path>) -> Result<SqliteInput, LocalError> {
    if !is_report_file(input) {
        return Ok(SqliteInput {
            path: input.to_path_buf(),
            warning: None,
        });
    }
    let refuse = |reason: String| LocalError::Input {
        path: input.display().to_string(),
        reason,
    };
    let report_time = std::fs::metadata(input)
        .and_then(|m| m.modified())
        .map_err(|e| refuse(e.to_string()))?;
    let sqlite = input.with_extension("sqlite");
    let export_time = std::fs::metadata(&sqlite).and_then(|m| m.modified());
    if export_time.is_ok_and(|t| t >= report_time) {
        return Ok(SqliteInput {
            warning: Some(format!(
                "{}: using its export {}, which is newer than the report",
                input.display(),
                sqlite.display()
            )),
            path: sqlite,
        });
    }
    let command = export_command(input, &sqlite);
    let Some(nsys) = nsys else {
        return Err(refuse(format!(
            "an Nsight Systems report file, and recipes read its SQLite export; nsys is not on \
             PATH here to make it: run `{command}` where nsys is installed and give the .sqlite"
        )));
    };
    let out = Command::new(nsys)
        .args([
            "export",
            "--type",
            "sqlite",
            "--force-overwrite",
            "true",
            "--output",
        ])
        .arg(&sqlite)
        .arg(input)
        .output()
        .map_err(|e| refuse(format!("cannot run {}: {e}", nsys.display())))?;
    if !out.status.success() || !sqlite.is_file() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last: Vec<&str> = stderr.lines().rev().take(5).collect();
        let last: Vec<&str> = last.into_iter().rev().collect();
        return Err(refuse(format!(
            "`{command}` failed ({}): {}",
            out.status,
            last.join(" / ")
        )));
    }
    Ok(SqliteInput {
        warning: Some(format!(
            "{}: exported to {} with {}",
            input.display(),
            sqlite.display(),
            nsys.display()
        )),
        path: sqlite,
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("nsys-export-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// An executable `nsys` in `dir` that runs `body` (sh).
    fn fake_nsys(dir: &Path, body: &str) -> PathBuf {
        let nsys = dir.join("nsys");
        std::fs::write(&nsys, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&nsys, std::fs::Permissions::from_mode(0o755)).unwrap();
        nsys
    }

    #[test]
    fn exports_are_used_as_they_are() {
        let got = sqlite_input(Path::new("a/b.sqlite"), None).unwrap();
        assert_eq!(got.path, Path::new("a/b.sqlite"));
        assert_eq!(got.warning, None);
        assert!(is_report_file(Path::new("x.nsys-rep")));
        assert!(is_report_file(Path::new("x.qdrep")));
        assert!(!is_report_file(Path::new("x.sqlite")));
    }

    #[test]
    fn without_nsys_a_report_is_refused_with_the_export_command() {
        let dir = temp_dir("refused");
        let report = dir.join("run1.nsys-rep");
        std::fs::write(&report, b"not really a report").unwrap();
        let err = sqlite_input(&report, None).unwrap_err().to_string();
        let want = format!(
            "nsys export --type sqlite --output {} {}",
            dir.join("run1.sqlite").display(),
            report.display()
        );
        assert!(err.contains(&want), "{err}");
        assert!(err.contains("nsys is not on PATH"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn with_nsys_a_report_is_exported_beside_it() {
        let dir = temp_dir("exported");
        let log = dir.join("args.log");
        // Records its arguments and writes the file named after --output.
        let nsys = fake_nsys(
            &dir,
            &format!(
                "echo \"$@\" > {log}\nwhile [ \"$1\" != --output ]; do shift; done\necho db > \"$2\"",
                log = log.display()
            ),
        );
        let report = dir.join("run2.qdrep");
        std::fs::write(&report, b"report").unwrap();
        let got = sqlite_input(&report, Some(&nsys)).unwrap();
        let sqlite = dir.join("run2.sqlite");
        assert_eq!(got.path, sqlite);
        assert!(got.warning.unwrap().contains("exported to"));
        let args = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            args.trim(),
            format!(
                "export --type sqlite --force-overwrite true --output {} {}",
                sqlite.display(),
                report.display()
            )
        );
        // The export is now newer than the report: used without running nsys again.
        std::fs::remove_file(&log).unwrap();
        let again = sqlite_input(&report, Some(&nsys)).unwrap();
        assert!(again.warning.unwrap().contains("newer than the report"));
        assert!(!log.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_export_says_what_nsys_said() {
        let dir = temp_dir("failed");
        let nsys = fake_nsys(&dir, "echo 'cannot open the report' >&2\nexit 3");
        let report = dir.join("bad.nsys-rep");
        std::fs::write(&report, b"x").unwrap();
        let err = sqlite_input(&report, Some(&nsys)).unwrap_err().to_string();
        assert!(err.contains("cannot open the report"), "{err}");
        assert!(err.contains("failed"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn nsys_is_found_on_path() {
        let dir = temp_dir("path");
        let nsys = fake_nsys(&dir, "exit 0");
        let path = std::env::join_paths([Path::new("/nonexistent"), &dir]).unwrap();
        assert_eq!(find_nsys(Some(&path)), Some(nsys));
        assert_eq!(find_nsys(Some(OsStr::new("/nonexistent"))), None);
        assert_eq!(find_nsys(None), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
