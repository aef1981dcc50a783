//! The agent's promise to the workload: when profiling cannot work (no storage, a missing
//! nsys or injection library, a bad TLS directory...), the program runs anyway, unprofiled, in
//! place of the agent (same pid, arguments, environment, stdio), and the reason is printed on
//! its stderr and left in `NSIGHT_PROFILING_DISABLED` for the program and its children.
//!
//! ```text
//! hook: execve(prog) -> nsight-agent run -- prog args
//!   setup failed, target not started -> execvp(prog args)   NSIGHT_AGENT_ACTIVE=1 (never re-wrapped)
//!   target already started           -> its exit status, as always
//! ```

use std::{os::unix::process::CommandExt as _, process::Command};

use crate::run::ENV_AGENT_ACTIVE;

/// Set in the unprofiled program's environment: why it is not profiled.
pub const ENV_DISABLED_REASON: &str = "NSIGHT_PROFILING_DISABLED";

/// The line the agent prints before it runs `argv` unprofiled.
pub fn notice(program: &str, reason: &str) -> String {
    format!("nsight-agent: profiling disabled, running {program} unprofiled: {reason}")
}

/// Replaces this process with `argv` (searched on PATH like a shell does), marked so that the
/// exec hook does not wrap it again. Returns only when the exec failed.
pub fn exec(argv: &[String], reason: &str) -> std::io::Error {
    let Some((program, args)) = argv.split_first() else {
        return std::io::Error::new(std::io::ErrorKind::InvalidInput, "nothing to run");
    };
    Command::new(program)
        .args(args)
        .env(ENV_AGENT_ACTIVE, "1")
        .env(ENV_DISABLED_REASON, one_line(reason))
        .exec()
}

/// Installs a panic hook that keeps the promise even when the agent itself panics before the
/// program has started (a bug, or a library asserting on this container): the program is
/// exec'd unprofiled with the panic as the reason. After the start, the default hook runs.
pub fn on_panic_run_unprofiled(argv: Vec<String>) {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if crate::run::target_started() {
            default(info);
            return;
        }
        let reason = format!("the agent panicked: {info}");
        let program = argv.first().map(String::as_str).unwrap_or_default();
        eprintln!("{}", notice(program, &reason));
        let err = exec(&argv, &reason);
        eprintln!("nsight-agent: cannot start {program}: {err}");
        std::process::exit(127);
    }));
}

/// An environment value of one line, at most 1 KiB.
pub fn one_line(reason: &str) -> String {
    let flat: String = reason
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match flat.char_indices().nth(1024) {
        Some((cut, _)) => flat[..cut].to_owned(),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_in_the_environment_is_one_bounded_line() {
        assert_eq!(
            one_line("no storage:\n give --storage-config"),
            "no storage:  give --storage-config"
        );
        assert_eq!(one_line(&"x".repeat(5000)).len(), 1024);
    }

    #[test]
    fn an_empty_command_is_refused_not_panicked() {
        assert_eq!(exec(&[], "r").kind(), std::io::ErrorKind::InvalidInput);
    }
}
