//! The injection decision, as a pure function: a program is wrapped when its command line
//! (`<executable path> <arg1> <arg2> ...`) matches an include pattern and no exclude pattern
//! (the user's merged with [`DEFAULT_EXCLUDES`]), the agent is known, and the environment the
//! program gets does not carry the agent's marker (no recursion).

use regex::Regex;

/// Set by the agent in its target's environment; a program with it is never wrapped.
pub const ENV_AGENT_ACTIVE: &str = "NSIGHT_AGENT_ACTIVE";
/// Include patterns, one regex per line.
pub const ENV_INCLUDE: &str = "NSIGHT_INJECT_INCLUDE";
/// Extra exclude patterns, one regex per line (merged with the defaults).
pub const ENV_EXCLUDE: &str = "NSIGHT_INJECT_EXCLUDE";
/// Absolute path of `nsight-agent`.
pub const ENV_AGENT_BIN: &str = "NSIGHT_AGENT_BIN";

/// Shells and utilities that are never profiled: helper processes of a container.
pub const DEFAULT_EXCLUDES: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ash",
    "ksh",
    "mksh",
    "csh",
    "tcsh",
    "fish",
    "busybox",
    "env",
    "ls",
    "cat",
    "sleep",
    "grep",
    "egrep",
    "fgrep",
    "sed",
    "awk",
    "gawk",
    "mawk",
    "head",
    "tail",
    "cut",
    "tr",
    "sort",
    "uniq",
    "wc",
    "xargs",
    "find",
    "mkdir",
    "rm",
    "rmdir",
    "cp",
    "mv",
    "ln",
    "chmod",
    "chown",
    "touch",
    "echo",
    "printf",
    "test",
    "[",
    "true",
    "false",
    "date",
    "id",
    "whoami",
    "uname",
    "hostname",
    "basename",
    "dirname",
    "readlink",
    "realpath",
    "tee",
    "nohup",
    "timeout",
    "stat",
    "ps",
    "kill",
    "which",
    "tar",
    "gzip",
    "nproc",
    "stty",
    "tput",
    "clear",
    "less",
    "more",
    "ldconfig",
    "nsys",
    "nsight-agent",
];

/// The regex that matches a command line whose executable's base name is `name`.
fn basename_pattern(name: &str) -> String {
    format!(r"^(\S*/)?{}(\s|$)", regex::escape(name))
}

/// Compiled include and exclude patterns.
#[derive(Debug, Clone)]
pub struct Patterns {
    include: Vec<Regex>,
    exclude: Vec<Regex>,
}

impl Patterns {
    /// Compiles one regex per non-empty line; the defaults are added to the excludes. A bad
    /// pattern is an error naming it (the hook then wraps nothing).
    pub fn new(include: &str, exclude: &str) -> Result<Self, String> {
        let compile = |p: &str| Regex::new(p).map_err(|e| format!("bad pattern `{p}`: {e}"));
        let lines = |text: &str| -> Vec<String> {
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let include = lines(include)
            .iter()
            .map(|p| compile(p))
            .collect::<Result<_, _>>()?;
        let mut excludes = lines(exclude);
        excludes.extend(DEFAULT_EXCLUDES.iter().map(|n| basename_pattern(n)));
        let exclude = excludes
            .iter()
            .map(|p| compile(p))
            .collect::<Result<_, _>>()?;
        Ok(Self { include, exclude })
    }

    /// Whether `command_line` is to be profiled.
    pub fn matches(&self, command_line: &str) -> bool {
        self.include.iter().any(|r| r.is_match(command_line))
            && !self.exclude.iter().any(|r| r.is_match(command_line))
    }
}

/// `<path> <arg1> <arg2> ...` (argv[0] is replaced by the executable's path).
pub fn command_line(path: &str, argv: &[String]) -> String {
    let mut line = path.to_owned();
    for a in argv.iter().skip(1) {
        line.push(' ');
        line.push_str(a);
    }
    line
}

/// What the hook sees at one exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecRequest {
    /// The executable (resolved through PATH for the `p` variants when possible).
    pub path: String,
    pub argv: Vec<String>,
    /// Whether the new program's environment has [`ENV_AGENT_ACTIVE`].
    pub agent_active: bool,
}

/// The hook's configuration, from its own environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookConfig {
    pub include: String,
    pub exclude: String,
    pub agent_bin: Option<String>,
}

/// The argv to execute instead, or `None` to run the program untouched.
pub fn decide(config: &HookConfig, request: &ExecRequest) -> Option<Vec<String>> {
    if request.agent_active {
        return None;
    }
    let agent = config.agent_bin.as_deref().filter(|a| a.starts_with('/'))?;
    // The agent itself runs with the hook loaded too: it is never wrapped.
    if request.path == agent {
        return None;
    }
    let patterns = Patterns::new(&config.include, &config.exclude).ok()?;
    if !patterns.matches(&command_line(&request.path, &request.argv)) {
        return None;
    }
    let mut argv = vec![agent.to_owned(), "run".to_owned(), "--".to_owned()];
    argv.push(request.path.clone());
    argv.extend(request.argv.iter().skip(1).cloned());
    Some(argv)
}

/// The argv of a process as `/proc/self/cmdline` holds it (NUL-separated, NUL-terminated).
pub fn cmdline_argv(bytes: &[u8]) -> Option<Vec<String>> {
    let body = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if body.is_empty() {
        return None;
    }
    body.split(|b| *b == 0)
        .map(|a| std::str::from_utf8(a).ok().map(str::to_owned))
        .collect()
}

/// Resolves `file` like `execvp` does: a name with a `/` as is, else the first executable in
/// `path_var` (default `/bin:/usr/bin`); the name itself when nothing is found.
pub fn resolve(file: &str, path_var: Option<&str>) -> String {
    if file.contains('/') {
        return file.to_owned();
    }
    use std::os::unix::fs::PermissionsExt as _;
    path_var
        .unwrap_or("/bin:/usr/bin")
        .split(':')
        .map(|dir| {
            if dir.is_empty() {
                file.to_owned()
            } else {
                format!("{dir}/{file}")
            }
        })
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| file.to_owned())
}

#[cfg(test)]
mod tests;
