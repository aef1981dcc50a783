//! The `nsys` backend, as plain data: the exact command lines (launch with a named session,
//! `nsys start`/`nsys stop` per collection, `nsys profile` in launch mode, `nsys export --type
//! sqlite` beside each `.nsys-rep`) and the per-collection state machine. Running the commands
//! is the caller's job ([`crate::run`]); nothing here spawns a process.
//!
//! The tool config's arguments are divided by the nsys command that accepts them
//! ([`nsight_contracts::nsys_args`], the table the operator checks configs with): trace and
//! launch options go to `nsys launch`, sampling/capture options to each `nsys start`, all of
//! them to `nsys profile`. The application is launched through the agent's `exec-marked`
//! trampoline ([`crate::started`]), so that the agent knows whether it ever started.
//!
//! ```text
//!  Idle --START(c)--> Collecting(c) --STOP(c)--> Idle (last = c, keys)
//!        START(c) again: no-op        STOP(c) again after it finished: the same keys
//! ```

use std::path::{Path, PathBuf};

pub use nsight_contracts::nsys_args::{ArgsError, Split};

use crate::channel::CollectionRef;

/// How to call nsys for one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsysCommands {
    /// The nsys executable.
    pub nsys: String,
    /// The interactive session's name (unique per agent).
    pub session: String,
    /// `nsightToolArgs` from the profile config (e.g. `-t cuda,nvtx --sample=none`), divided
    /// by command: `launch` words to `nsys launch`, `start` words to `nsys start`, `profile`
    /// (all of them) to `nsys profile`.
    pub tool_args: Split,
    /// Put before the application's argv (the agent's `exec-marked <marker> --`); empty: the
    /// application directly.
    pub wrapper: Vec<String>,
}

fn s(v: &str) -> String {
    v.to_owned()
}

impl NsysCommands {
    /// The commands for `tool_args` (the tool config's words) in this mode; refuses what nsys
    /// would refuse (an unknown option, one only `nsys profile` takes in coordinator mode, one
    /// the agent sets itself), with a message naming the option.
    pub fn new(
        nsys: String,
        session: String,
        tool_args: &[String],
        coordinator: bool,
    ) -> Result<Self, ArgsError> {
        Ok(Self {
            nsys,
            session,
            tool_args: nsight_contracts::nsys_args::check(tool_args, coordinator)?,
            wrapper: Vec::new(),
        })
    }

    /// Coordinator mode: start the application under nsys with collection deferred.
    pub fn launch(&self, app: &[String]) -> Vec<String> {
        let mut cmd = vec![
            self.nsys.clone(),
            s("launch"),
            format!("--session-new={}", self.session),
        ];
        cmd.extend(self.tool_args.launch.iter().cloned());
        cmd.push(s("--"));
        cmd.extend(self.wrapper.iter().cloned());
        cmd.extend(app.iter().cloned());
        cmd
    }

    /// Coordinator mode: begin one collection into `output` (a `.nsys-rep` path).
    pub fn start(&self, output: &Path) -> Vec<String> {
        let mut cmd = vec![
            self.nsys.clone(),
            s("start"),
            format!("--session={}", self.session),
            format!("--output={}", output.display()),
            s("--force-overwrite=true"),
        ];
        cmd.extend(self.tool_args.start.iter().cloned());
        cmd
    }

    /// Coordinator mode: end the current collection (nsys writes the report).
    pub fn stop(&self) -> Vec<String> {
        vec![
            self.nsys.clone(),
            s("stop"),
            format!("--session={}", self.session),
        ]
    }

    /// Launch mode: profile from start to exit, or for `duration_s` seconds.
    pub fn profile(&self, app: &[String], output: &Path, duration_s: Option<u64>) -> Vec<String> {
        let mut cmd = vec![
            self.nsys.clone(),
            s("profile"),
            format!("--output={}", output.display()),
            s("--force-overwrite=true"),
        ];
        if let Some(d) = duration_s {
            cmd.push(format!("--duration={d}"));
        }
        cmd.extend(self.tool_args.profile.iter().cloned());
        cmd.push(s("--"));
        cmd.extend(self.wrapper.iter().cloned());
        cmd.extend(app.iter().cloned());
        cmd
    }

    /// The SQLite export beside a report: `x.nsys-rep` -> `x.sqlite`.
    pub fn export(&self, report: &Path) -> (Vec<String>, PathBuf) {
        let sqlite = report.with_extension("sqlite");
        let cmd = vec![
            self.nsys.clone(),
            s("export"),
            s("--type"),
            s("sqlite"),
            s("--force-overwrite"),
            s("true"),
            s("--output"),
            sqlite.display().to_string(),
            report.display().to_string(),
        ];
        (cmd, sqlite)
    }
}

/// The collection length `args` asks for, as nsys reads it: `--duration=N`, `--duration N`,
/// `-d N` or `-dN` (seconds). The built-in (NVTX) backend honours it in launch mode, so one
/// profile config means the same with either backend.
pub fn duration_of(args: &[String]) -> Option<u64> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = if let Some(v) = a.strip_prefix("--duration=") {
            Some(v.to_owned())
        } else if a == "--duration" || a == "-d" {
            it.next().cloned()
        } else {
            a.strip_prefix("-d")
                .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()))
                .map(str::to_owned)
        };
        if let Some(v) = value {
            return v.trim().parse().ok();
        }
    }
    None
}

/// Splits `nsightToolArgs` as given in the config (whitespace-separated; quotes group).
pub fn split_tool_args(text: &str) -> Vec<String> {
    nsight_contracts::nsys_args::words(text)
}

/// Where a collection's report goes: `<dir>/<session>-<collection>.nsys-rep`.
pub fn report_path(dir: &Path, at: &CollectionRef) -> PathBuf {
    dir.join(format!("{}-{}.nsys-rep", at.session, at.collection))
}

/// What to do for a command from the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run these commands in order.
    Run(Vec<Vec<String>>),
    /// Nothing to run: answer again (a repeated command after a reconnect).
    Repeat,
    /// Nothing to run: answer with these keys again.
    Answer(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Idle,
    Collecting(CollectionRef),
}

/// The per-collection state of the nsys backend.
#[derive(Debug, Clone)]
pub struct NsysState {
    commands: NsysCommands,
    dir: PathBuf,
    phase: Phase,
    last: Option<(CollectionRef, Vec<String>)>,
}

impl NsysState {
    pub fn new(commands: NsysCommands, dir: PathBuf) -> Self {
        Self {
            commands,
            dir,
            phase: Phase::Idle,
            last: None,
        }
    }

    /// START for `at`.
    pub fn on_start(&mut self, at: &CollectionRef) -> Result<Action, String> {
        match &self.phase {
            Phase::Collecting(current) if current == at => Ok(Action::Repeat),
            Phase::Collecting(current) => Err(format!(
                "already collecting {}/{}: stop it first",
                current.session, current.collection
            )),
            Phase::Idle => {
                self.phase = Phase::Collecting(at.clone());
                Ok(Action::Run(vec![self
                    .commands
                    .start(&report_path(&self.dir, at))]))
            }
        }
    }

    /// STOP for `at`: stop, then export beside the report. Call [`NsysState::finished`] with the
    /// stored keys once they are uploaded.
    pub fn on_stop(&mut self, at: &CollectionRef) -> Result<Action, String> {
        match &self.phase {
            Phase::Collecting(current) if current == at => {
                let (export, _) = self.commands.export(&report_path(&self.dir, at));
                Ok(Action::Run(vec![self.commands.stop(), export]))
            }
            _ => match &self.last {
                Some((done, keys)) if done == at => Ok(Action::Answer(keys.clone())),
                _ => Err(format!(
                    "not collecting {}/{}: nothing to stop",
                    at.session, at.collection
                )),
            },
        }
    }

    /// The collection's reports are stored (or it failed): back to idle.
    pub fn finished(&mut self, at: &CollectionRef, keys: Vec<String>) {
        self.phase = Phase::Idle;
        self.last = Some((at.clone(), keys));
    }

    /// A command failed before the collection produced anything: back to idle, nothing to
    /// answer again.
    pub fn abandon(&mut self) {
        self.phase = Phase::Idle;
    }

    /// The collection in progress, if any.
    pub fn current(&self) -> Option<&CollectionRef> {
        match &self.phase {
            Phase::Collecting(at) => Some(at),
            Phase::Idle => None,
        }
    }

    pub fn commands(&self) -> &NsysCommands {
        &self.commands
    }

    /// The report and its export of `at`.
    pub fn outputs(&self, at: &CollectionRef) -> (PathBuf, PathBuf) {
        let rep = report_path(&self.dir, at);
        let sqlite = rep.with_extension("sqlite");
        (rep, sqlite)
    }
}

#[cfg(test)]
mod tests;
