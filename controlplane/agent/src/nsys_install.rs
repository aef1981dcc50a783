//! Nsight Systems handed to the agent as a directory: `nsight-agent install-nsys` (the init
//! container the webhook adds when the cluster's nsys comes from an image) copies an
//! installation into the tools volume, and [`find_under`] finds the executable in a directory
//! (the copy, or a node's host path mounted read-only).
//!
//! ```text
//! install-nsys --from <image dir> --to <tools>/nsys
//!   copy the tree (files keep their modes, symlinks stay symlinks) to <to>.partial, rename
//!   failure: <to>/NSIGHT-INSTALL-FAILED.txt says why; exit 0 all the same
//! find_under(dir): <dir>[/<version>][/host]/target-linux-<this arch>/nsys, else .../bin/nsys;
//!   none: the failure file's text, or what was expected where
//! ```
//! A profiler never stops its workload: the copy's failure only means the agent later runs
//! the program unprofiled, with the reason from the failure file.

use std::{
    io,
    path::{Path, PathBuf},
};

use crate::nsys_run::is_executable;

/// Left in the target directory when the copy failed; [`find_under`] reports its text.
pub const FAILED_FILE: &str = "NSIGHT-INSTALL-FAILED.txt";

/// How deep under the given directory the executable is looked for
/// (`<dir>/<version>/host/target-linux-x64/nsys` is 4).
const SEARCH_DEPTH: usize = 4;

/// What a copy did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub files: u64,
    pub bytes: u64,
    /// The executable the agent will run.
    pub nsys: PathBuf,
}

/// Copies the installation at `from` to `to` (replacing a previous copy), then checks that it
/// holds an nsys executable. On error `to` holds only [`FAILED_FILE`] with the reason.
pub fn install(from: &Path, to: &Path) -> Result<Installed, String> {
    let result = copy_then_find(from, to);
    if let Err(reason) = &result {
        let _ = std::fs::remove_dir_all(to);
        let _ = std::fs::create_dir_all(to)
            .and_then(|()| std::fs::write(to.join(FAILED_FILE), format!("{reason}\n")));
    }
    result
}

fn copy_then_find(from: &Path, to: &Path) -> Result<Installed, String> {
    if !from.is_dir() {
        return Err(format!(
            "the nsys image has no directory {} (chart value nsight-injector.nsys.imageDir)",
            from.display()
        ));
    }
    let partial = to.with_extension("partial");
    for stale in [&partial, &to.to_path_buf()] {
        if stale.exists() {
            std::fs::remove_dir_all(stale)
                .map_err(|e| format!("cannot remove {}: {e}", stale.display()))?;
        }
    }
    let mut counts = (0, 0);
    copy_tree(from, &partial, &mut counts).map_err(|e| {
        let _ = std::fs::remove_dir_all(&partial);
        format!(
            "copying Nsight Systems from {} to {} failed: {e} (is the Pod's tools volume \
             large enough? it needs about the installation's size)",
            from.display(),
            to.display()
        )
    })?;
    std::fs::rename(&partial, to).map_err(|e| {
        format!(
            "cannot rename {} to {}: {e}",
            partial.display(),
            to.display()
        )
    })?;
    let nsys = find_under(to).map_err(|e| format!("the nsys image's {}: {e}", from.display()))?;
    Ok(Installed {
        files: counts.0,
        bytes: counts.1,
        nsys,
    })
}

/// Copies the tree at `from` to `to`: directories, files with their permission bits, and
/// symlinks as symlinks. Counts files and bytes into `counts`.
fn copy_tree(from: &Path, to: &Path, counts: &mut (u64, u64)) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src)?, &dst)?;
        } else if kind.is_dir() {
            copy_tree(&src, &dst, counts)?;
        } else if kind.is_file() {
            counts.1 += std::fs::copy(&src, &dst)?;
            counts.0 += 1;
        }
        // Sockets, fifos and devices have no place in an installation: skipped.
    }
    Ok(())
}

/// The nsys executable under `dir`: the architecture's `target-linux-*/nsys` (an ELF binary,
/// which needs no shell in the image) before a `bin/nsys` wrapper, at most [`SEARCH_DEPTH`]
/// levels down; of several versions, the last in name order.
pub fn find_under(dir: &Path) -> Result<PathBuf, String> {
    let mut found = Vec::new();
    collect(dir, SEARCH_DEPTH, &mut found);
    found.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| b.cmp(a)));
    if let Some(best) = found.into_iter().next() {
        return Ok(best);
    }
    if let Ok(reason) = std::fs::read_to_string(dir.join(FAILED_FILE)) {
        return Err(reason.trim().to_owned());
    }
    let empty = std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_none());
    Err(format!(
        "no nsys executable under {}{}: expected target-linux-{}/nsys or bin/nsys in it or in \
         a version directory below it (e.g. {0}/2025.3.1/target-linux-{2}/nsys)",
        dir.display(),
        if empty {
            " (it is empty or missing: is Nsight Systems installed at the node's host path?)"
        } else {
            ""
        },
        arch_suffix(),
    ))
}

/// The name of the directory `path` is in.
fn parent_name(path: &Path) -> &str {
    path.parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or_default()
}

/// Lower is better: 0 for this architecture's target directory, 1 for `bin`.
fn rank(path: &Path) -> u8 {
    u8::from(parent_name(path) == "bin")
}

fn collect(dir: &Path, depth: usize, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // Follows symlinks (an installation may link `current` to its version).
        if path.is_dir() && depth > 0 {
            collect(&path, depth - 1, found);
        } else if name == "nsys" && is_executable(&path) && wanted_parent(&path) {
            found.push(path);
        }
    }
}

fn wanted_parent(nsys: &Path) -> bool {
    let parent = parent_name(nsys);
    parent == "bin"
        || parent
            .strip_prefix("target-linux-")
            .is_some_and(|target| target.contains(arch_suffix()))
}

/// How Nsight Systems names this machine's architecture in `target-linux-*`.
fn arch_suffix() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "armv8",
        _ => "x64",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("nsys-install-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn executable(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn the_target_binary_of_the_last_version_is_preferred_to_the_wrapper() {
        let dir = temp("find");
        executable(&dir.join("2024.5.1/target-linux-x64/nsys"), "old");
        executable(&dir.join("2025.3.1/target-linux-x64/nsys"), "new");
        executable(&dir.join("2025.3.1/target-linux-sbsa-armv8/nsys"), "arm");
        executable(&dir.join("2025.3.1/bin/nsys"), "wrapper");
        let found = find_under(&dir).unwrap();
        assert_eq!(
            found,
            dir.join(format!("2025.3.1/target-linux-{}/nsys", arch_suffix()))
        );
        // A version directory given directly, with only the wrapper.
        let only_bin = temp("bin");
        executable(&only_bin.join("bin/nsys"), "wrapper");
        assert_eq!(find_under(&only_bin).unwrap(), only_bin.join("bin/nsys"));
        // The CUDA image's layout: <version>/host/target-linux-x64.
        let cuda = temp("cuda");
        executable(&cuda.join("2025.3.1/host/target-linux-x64/nsys"), "nsys");
        assert!(find_under(&cuda)
            .unwrap()
            .ends_with("host/target-linux-x64/nsys"));
    }

    #[test]
    fn an_empty_directory_says_what_was_expected_and_where() {
        let dir = temp("bare");
        let err = find_under(&dir).unwrap_err();
        assert!(err.contains("it is empty or missing"), "{err}");
        assert!(err.contains("2025.3.1/target-linux-"), "{err}");
        // Not executable, or not where nsys lives: not taken.
        std::fs::write(dir.join("nsys"), "x").unwrap();
        executable(&dir.join("docs/nsys"), "x");
        let err = find_under(&dir).unwrap_err();
        assert!(!err.contains("empty"), "{err}");
    }

    #[test]
    fn a_copy_keeps_modes_and_symlinks_and_replaces_an_earlier_one() {
        let (from, to) = (temp("from"), temp("to").join("nsys"));
        executable(&from.join("2025.3.1/target-linux-x64/nsys"), "#!/bin/sh\n");
        std::fs::write(from.join("2025.3.1/target-linux-x64/libx.so"), "lib").unwrap();
        std::os::unix::fs::symlink("2025.3.1", from.join("current")).unwrap();
        std::fs::create_dir_all(&to).unwrap();
        std::fs::write(to.join("stale"), "from an earlier start").unwrap();
        let installed = install(&from, &to).unwrap();
        assert_eq!((installed.files, installed.bytes), (2, 13));
        assert!(installed.nsys.starts_with(&to), "{installed:?}");
        assert!(is_executable(&installed.nsys));
        assert_eq!(
            std::fs::read_link(to.join("current")).unwrap(),
            Path::new("2025.3.1")
        );
        assert!(!to.join("stale").exists());
        assert!(!to.with_extension("partial").exists());
    }

    #[test]
    fn a_failed_copy_leaves_its_reason_for_the_agent() {
        let to = temp("failed").join("nsys");
        let err = install(Path::new("/nonexistent/nsight-systems"), &to).unwrap_err();
        assert!(err.contains("imageDir"), "{err}");
        assert_eq!(find_under(&to).unwrap_err(), err);
        // An installation without the executable.
        let from = temp("no-nsys");
        std::fs::write(from.join("README"), "docs only").unwrap();
        let err = install(&from, &to).unwrap_err();
        assert!(err.contains("no nsys executable"), "{err}");
        assert_eq!(find_under(&to).unwrap_err(), err);
    }
}
