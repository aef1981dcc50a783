//! `cargo xtask <task>`: a launcher with no dependencies.
//!
//! Owns one thing: building `nsight-tasks` (xtask/tasks, where every task lives) into the cache's
//! target dir and running it with the same arguments. cargo's alias builds this launcher into the
//! clone's own `target/`; were the tasks built there too, their dependencies (tokio, kube, tonic,
//! reqwest, ...) would compile a second time on a fresh machine, once for the tasks and once for
//! the workspace build in the cache's target dir.

#[path = "../tasks/src/cache_dir.rs"]
mod cache_dir;

use std::{env, os::unix::process::CommandExt as _, path::PathBuf, process::Command};

fn main() {
    // `cargo run` sets CARGO_MANIFEST_DIR for the launcher too: prefer it to the path baked in
    // at build time, which names another clone when a shared CARGO_TARGET_DIR holds a launcher
    // that clone built (cargo does not relink a fresh binary for a new path).
    let manifest_dir = env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let root = manifest_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let target = env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir::cache_dir().join("target"));
    let tasks = target.join("debug").join("nsight-tasks");
    // `env` only prints paths: with a tasks binary already there it must not wait for the target
    // dir's lock while another build or test run holds it (`eval "$(cargo xtask env)"`).
    let print_env_only = env::args().nth(1).as_deref() == Some("env") && tasks.is_file();
    if !print_env_only {
        build_tasks(&root, &target);
    }
    let err = Command::new(&tasks)
        .args(env::args_os().skip(1))
        .env("CARGO_TARGET_DIR", &target)
        .env(cache_dir::ROOT_ENV, &root)
        .exec();
    eprintln!("xtask: cannot run {}: {err}", tasks.display());
    std::process::exit(1);
}

/// `cargo build -p nsight-tasks` into `target`; exits the launcher if that fails.
fn build_tasks(root: &std::path::Path, target: &std::path::Path) {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let built = Command::new(&cargo)
        .current_dir(root)
        .env("CARGO_TARGET_DIR", target)
        .args(["build", "--package", "nsight-tasks"])
        .status();
    match built {
        Ok(status) if status.success() => {}
        Ok(status) => {
            eprintln!("xtask: building the tasks (xtask/tasks) failed: {status}");
            std::process::exit(status.code().unwrap_or(1));
        }
        Err(e) => {
            eprintln!(
                "xtask: cannot run cargo ({}): {e}",
                PathBuf::from(&cargo).display()
            );
            std::process::exit(1);
        }
    }
}
