//! The Nsight Systems CLI options a tool config's `nsightToolArgs` may hold, by the nsys
//! commands that accept them, and the split of one argument list into the part for
//! `nsys launch` and the part for `nsys start` (coordinator mode) or all of it for
//! `nsys profile` (launch mode).
//!
//! ```text
//!  nsightToolArgs ──(agent: nsys::split_tool_args)──> words ──split()──> Split { launch, start, profile }
//!     operator: check(words, coordinator) at reconcile -> condition + Event on the profile config
//!     agent:    launch words -> `nsys launch`, start words -> `nsys start`, all -> `nsys profile`
//! ```
//!
//! The table ([`OPTIONS`]) is written from NVIDIA's Nsight Systems User Guide, "CLI Launch
//! Command Switch Options", "CLI Start Command Switch Options" and "CLI Profile Command Switch
//! Options" (2023.x to 2025.x, the versions the product supports). nsys 2021.5 and later refuse
//! at `launch` what belongs to `start` ("ERROR: The --cpuctxsw switch is not supported by the
//! launch command after NVIDIA Nsight Systems v2021.5"), which is why the split exists.
//!
//! Lives in the contracts crate because both sides read it: the operator (which must not make
//! the agent depend on kube) refuses a config nsys would refuse, and the agent builds its
//! command lines from it. Pure: no I/O, no process.

use std::fmt;

/// The nsys commands a tool argument can go to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepts {
    /// `nsys launch` (coordinator mode: the application starts with collection deferred).
    pub launch: bool,
    /// `nsys start` (coordinator mode: each collection).
    pub start: bool,
    /// `nsys profile` (launch mode).
    pub profile: bool,
}

/// Application-launch options: trace selection, the launched process's environment.
const LAUNCH: Accepts = Accepts {
    launch: true,
    start: false,
    profile: true,
};
/// Collection options: sampling, context switches, capture ranges, output.
const START: Accepts = Accepts {
    launch: false,
    start: true,
    profile: true,
};
/// Options of `nsys profile` alone (the collection's length is the coordinator's in
/// coordinator mode).
const PROFILE: Accepts = Accepts {
    launch: false,
    start: false,
    profile: true,
};
/// Options both `launch` and `start` take (the session).
const BOTH: Accepts = Accepts {
    launch: true,
    start: true,
    profile: false,
};

/// One nsys option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NsysOption {
    /// Without the leading `--`.
    pub long: &'static str,
    pub short: Option<char>,
    pub accepts: Accepts,
    /// The agent sets it itself (where reports go, the session): a tool config may not.
    pub agent_owned: bool,
}

const fn opt(long: &'static str, short: Option<char>, accepts: Accepts) -> NsysOption {
    NsysOption {
        long,
        short,
        accepts,
        agent_owned: false,
    }
}

const fn owned(long: &'static str, short: Option<char>, accepts: Accepts) -> NsysOption {
    NsysOption {
        long,
        short,
        accepts,
        agent_owned: true,
    }
}

/// Every option a tool config may name (each takes one value: `--opt=value`, `--opt value`,
/// `-o value` or `-ovalue`).
pub const OPTIONS: &[NsysOption] = &[
    // launch + profile: what is traced and how the application is launched.
    opt("trace", Some('t'), LAUNCH),
    opt("cuda-memory-usage", None, LAUNCH),
    opt("cuda-um-cpu-page-faults", None, LAUNCH),
    opt("cuda-um-gpu-page-faults", None, LAUNCH),
    opt("cuda-graph-trace", None, LAUNCH),
    opt("cuda-flush-interval", None, LAUNCH),
    opt("cuda-event-trace", None, LAUNCH),
    opt("cuda-trace-scope", None, LAUNCH),
    opt("cudabacktrace", None, LAUNCH),
    opt("env-var", Some('e'), LAUNCH),
    opt("wait", None, LAUNCH),
    opt("show-output", Some('w'), LAUNCH),
    opt("inherit-environment", Some('n'), LAUNCH),
    opt("run-as", None, LAUNCH),
    opt("trace-fork-before-exec", None, LAUNCH),
    opt("nvtx-domain-include", None, LAUNCH),
    opt("nvtx-domain-exclude", None, LAUNCH),
    opt("osrt-threshold", None, LAUNCH),
    opt("osrt-backtrace-depth", None, LAUNCH),
    opt("osrt-backtrace-stack-size", None, LAUNCH),
    opt("osrt-backtrace-threshold", None, LAUNCH),
    opt("mpi-impl", None, LAUNCH),
    opt("opengl-gpu-workload", None, LAUNCH),
    opt("vulkan-gpu-workload", None, LAUNCH),
    opt("python-backtrace", None, LAUNCH),
    opt("python-sampling", None, LAUNCH),
    opt("python-sampling-frequency", None, LAUNCH),
    opt("python-functions-trace", None, LAUNCH),
    opt("pytorch", None, LAUNCH),
    opt("dask", None, LAUNCH),
    opt("xhv-trace", None, LAUNCH),
    opt("hotkey-capture", None, LAUNCH),
    // start + profile: what each collection samples, when it captures, where it writes.
    opt("sample", Some('s'), START),
    opt("sampling-period", None, START),
    opt("sampling-frequency", None, START),
    opt("sampling-trigger", None, START),
    opt("samples-per-backtrace", None, START),
    opt("cpuctxsw", None, START),
    opt("backtrace", Some('b'), START),
    opt("capture-range", Some('c'), START),
    opt("capture-range-end", None, START),
    opt("nvtx-capture", Some('p'), START),
    opt("cpu-core-events", None, START),
    opt("cpu-core-metrics", None, START),
    opt("cpu-socket-events", None, START),
    opt("cpu-socket-metrics", None, START),
    opt("cpu-cluster-events", None, START),
    opt("event-sample", None, START),
    opt("event-sampling-interval", None, START),
    opt("event-sampling-frequency", None, START),
    opt("os-events", None, START),
    opt("ftrace", None, START),
    opt("ftrace-keep-user-config", None, START),
    opt("gpu-metrics-device", None, START),
    opt("gpu-metrics-devices", None, START),
    opt("gpu-metrics-set", None, START),
    opt("gpu-metrics-frequency", None, START),
    opt("gpuctxsw", None, START),
    opt("gpu-video-device", None, START),
    opt("nic-metrics", None, START),
    opt("ib-switch-metrics-device", None, START),
    opt("process-scope", None, START),
    opt("resolve-symbols", None, START),
    opt("stats", None, START),
    opt("export", None, START),
    // The User Guide's interactive example: `nsys start --stop-on-exit=false`.
    opt("stop-on-exit", Some('x'), START),
    owned("output", Some('o'), START),
    owned("force-overwrite", Some('f'), START),
    // profile only.
    opt("duration", Some('d'), PROFILE),
    opt("delay", Some('y'), PROFILE),
    opt("kill", None, PROFILE),
    // The interactive session: the agent names it.
    owned("session", None, BOTH),
    owned("session-new", None, LAUNCH),
];

/// The option named `--long` (without the dashes), if nsys has it.
pub fn by_long(long: &str) -> Option<&'static NsysOption> {
    OPTIONS.iter().find(|o| o.long == long)
}

/// The option named `-c`, if nsys has it.
pub fn by_short(c: char) -> Option<&'static NsysOption> {
    OPTIONS.iter().find(|o| o.short == Some(c))
}

/// A tool argument list nsys would refuse, or the agent cannot pass on; the message says what
/// to change in `nsightToolArgs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgsError {
    /// Not an option of `nsys launch`, `start` or `profile`.
    Unknown { option: String },
    /// The option needs a value and none follows.
    MissingValue { option: String },
    /// A word that is not an option (nsys would take it for the application).
    NotAnOption { word: String },
    /// The agent sets this option itself.
    AgentOwned { option: String },
    /// Only `nsys profile` takes it: not usable in coordinator mode.
    ProfileOnly { option: String },
}

impl fmt::Display for ArgsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown { option } => write!(
                f,
                "{option} is not an option of nsys launch, start or profile: remove it from \
                 nsightToolArgs or correct its spelling (nsys profile --help lists them)"
            ),
            Self::MissingValue { option } => write!(
                f,
                "{option} needs a value (e.g. {option}=VALUE) in nsightToolArgs"
            ),
            Self::NotAnOption { word } => write!(
                f,
                "`{word}` in nsightToolArgs is not an option (options start with - or --; the \
                 program to profile is chosen by the injection patterns, not here)"
            ),
            Self::AgentOwned { option } => write!(
                f,
                "{option} is set by the Nsight agent (report location and session): remove it \
                 from nsightToolArgs"
            ),
            Self::ProfileOnly { option } => write!(
                f,
                "{option} is accepted only by nsys profile (launch mode, `coordinator: false`); \
                 in coordinator mode the coordinator's START/STOP decide the collection: remove \
                 it or set `coordinator: false`"
            ),
        }
    }
}

impl std::error::Error for ArgsError {}

/// The words of one option, and where they go.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parsed<'a> {
    option: &'static NsysOption,
    /// As written: `--x=v`, or `--x v` / `-x v` (two words), or `-xv`.
    words: &'a [String],
}

/// Reads `args` into options (each with its words as written).
fn parse(args: &[String]) -> Result<Vec<Parsed<'_>>, ArgsError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        let (option, inline) = if let Some(long) = word.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let option = by_long(name).ok_or_else(|| ArgsError::Unknown {
                option: format!("--{name}"),
            })?;
            (option, value.is_some())
        } else if let Some(short) = word.strip_prefix('-') {
            let mut chars = short.chars();
            let Some(c) = chars.next() else {
                return Err(ArgsError::NotAnOption { word: word.clone() });
            };
            let option = by_short(c).ok_or_else(|| ArgsError::Unknown {
                option: format!("-{c}"),
            })?;
            (option, !chars.as_str().is_empty())
        } else {
            return Err(ArgsError::NotAnOption { word: word.clone() });
        };
        let end = if inline {
            i + 1
        } else if i + 1 < args.len() {
            i + 2
        } else {
            return Err(ArgsError::MissingValue {
                option: word.clone(),
            });
        };
        out.push(Parsed {
            option,
            words: &args[i..end],
        });
        i = end;
    }
    Ok(out)
}

/// A tool argument list divided by command, each part in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// For `nsys launch`.
    pub launch: Vec<String>,
    /// For `nsys start`.
    pub start: Vec<String>,
    /// For `nsys profile`: everything.
    pub profile: Vec<String>,
}

/// The name of an option as written (`--cpuctxsw`, `-s`), for messages.
fn name_of(p: &Parsed<'_>) -> String {
    let first = p.words.first().map(String::as_str).unwrap_or_default();
    match first.split_once('=') {
        Some((name, _)) if first.starts_with("--") => name.to_owned(),
        _ if first.starts_with("--") => first.to_owned(),
        _ => first.chars().take(2).collect(),
    }
}

/// Splits `args` (one word per element, as [`words`] gives them) by command. Refuses an
/// unknown option, a missing value, a stray word and an option the agent sets itself; a
/// `profile`-only option goes to `profile` alone (see [`check`] for coordinator mode).
pub fn split(args: &[String]) -> Result<Split, ArgsError> {
    check(args, false)
}

/// Whether the agent can run `args` in this mode, and their [`split`]: in coordinator mode
/// every option must also go to `launch` or `start`. The first problem, in argument order
/// (after those that stop the parse: unknown options, missing values, stray words), is the
/// error.
pub fn check(args: &[String], coordinator: bool) -> Result<Split, ArgsError> {
    let parsed = parse(args)?;
    let mut out = Split::default();
    for p in &parsed {
        let accepts = p.option.accepts;
        if p.option.agent_owned {
            return Err(ArgsError::AgentOwned { option: name_of(p) });
        }
        if coordinator && !accepts.launch && !accepts.start {
            return Err(ArgsError::ProfileOnly { option: name_of(p) });
        }
        if accepts.launch {
            out.launch.extend(p.words.iter().cloned());
        }
        if accepts.start {
            out.start.extend(p.words.iter().cloned());
        }
        if accepts.profile {
            out.profile.extend(p.words.iter().cloned());
        }
    }
    Ok(out)
}

/// Splits `nsightToolArgs` as given in the config (whitespace-separated; quotes group), the
/// way the agent does before [`split`].
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests;
