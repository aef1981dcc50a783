//! The control protocol between the agent (server, on a Unix socket) and each injected process
//! (client, from a background thread): one text line per message.
//!
//! ```text
//!  process -> agent   HELLO <pid> <name>
//!  agent -> process   START                 process -> agent   STARTED
//!  agent -> process   STOP <dump path>      process -> agent   DUMPED <dump path> | ERROR <why>
//! ```
//! Parsing and formatting are pure (shared by both sides); [`serve`] is the client loop over any
//! stream. When the agent goes away the loop ends and the process keeps running untouched.

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
};

/// A message from the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Start,
    Stop(PathBuf),
}

/// A message from a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Hello { pid: u32, name: String },
    Started,
    Dumped(PathBuf),
    Error(String),
}

impl Command {
    pub fn parse(line: &str) -> Result<Self, String> {
        let line = line.trim_end_matches(['\r', '\n']);
        match line.split_once(' ') {
            None if line == "START" => Ok(Self::Start),
            Some(("STOP", path)) if !path.is_empty() => Ok(Self::Stop(PathBuf::from(path))),
            _ => Err(format!("unknown control command `{line}`")),
        }
    }

    pub fn line(&self) -> String {
        match self {
            Self::Start => "START\n".to_owned(),
            Self::Stop(path) => format!("STOP {}\n", path.display()),
        }
    }
}

/// Keeps a free-text field on one line.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

impl Reply {
    pub fn parse(line: &str) -> Result<Self, String> {
        let line = line.trim_end_matches(['\r', '\n']);
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "HELLO" => {
                let (pid, name) = rest.split_once(' ').unwrap_or((rest, ""));
                let pid = pid
                    .parse()
                    .map_err(|_| format!("HELLO without a pid: `{line}`"))?;
                Ok(Self::Hello {
                    pid,
                    name: name.to_owned(),
                })
            }
            "STARTED" => Ok(Self::Started),
            "DUMPED" if !rest.is_empty() => Ok(Self::Dumped(PathBuf::from(rest))),
            "ERROR" => Ok(Self::Error(rest.to_owned())),
            _ => Err(format!("unknown control reply `{line}`")),
        }
    }

    pub fn line(&self) -> String {
        match self {
            Self::Hello { pid, name } => format!("HELLO {pid} {}\n", one_line(name)),
            Self::Started => "STARTED\n".to_owned(),
            Self::Dumped(path) => format!("DUMPED {}\n", path.display()),
            Self::Error(why) => format!("ERROR {}\n", one_line(why)),
        }
    }
}

/// What the client does on each command.
pub trait Handler {
    fn start(&self);
    /// Writes the window's dump to `path`.
    fn stop(&self, path: &Path) -> Result<(), String>;
}

/// The client loop: says hello, then answers commands until the agent closes the stream.
pub fn serve<S: std::io::Read + Write>(
    stream: S,
    writer: &mut impl Write,
    pid: u32,
    name: &str,
    handler: &impl Handler,
) -> std::io::Result<()> {
    let hello = Reply::Hello {
        pid,
        name: name.to_owned(),
    };
    writer.write_all(hello.line().as_bytes())?;
    writer.flush()?;
    let reader = BufReader::new(stream);
    for line in reader.lines() {
        let reply = match Command::parse(&line?) {
            Ok(Command::Start) => {
                handler.start();
                Reply::Started
            }
            Ok(Command::Stop(path)) => match handler.stop(&path) {
                Ok(()) => Reply::Dumped(path),
                Err(why) => Reply::Error(why),
            },
            Err(why) => Reply::Error(why),
        };
        writer.write_all(reply.line().as_bytes())?;
        writer.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::{cell::RefCell, io::Cursor};

    use super::*;

    #[test]
    fn lines_round_trip() {
        for c in [Command::Start, Command::Stop("/tmp/a b.json".into())] {
            assert_eq!(Command::parse(&c.line()).unwrap(), c);
        }
        for r in [
            Reply::Hello {
                pid: 12,
                name: "python3".into(),
            },
            Reply::Started,
            Reply::Dumped("/x/y.json".into()),
            Reply::Error("disk full".into()),
        ] {
            assert_eq!(Reply::parse(&r.line()).unwrap(), r);
        }
        assert!(Command::parse("STOP").is_err());
        assert!(Command::parse("REBOOT now").is_err());
        assert!(Reply::parse("HELLO abc").is_err());
        assert_eq!(
            Reply::parse(&Reply::Error("a\nb".into()).line()).unwrap(),
            Reply::Error("a b".into())
        );
    }

    struct Log(RefCell<Vec<String>>);

    impl Handler for Log {
        fn start(&self) {
            self.0.borrow_mut().push("start".into());
        }
        fn stop(&self, path: &Path) -> Result<(), String> {
            self.0.borrow_mut().push(format!("stop {}", path.display()));
            if path.ends_with("bad") {
                Err("cannot write".into())
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn the_client_answers_each_command_in_order() {
        let input = Cursor::new(b"START\nSTOP /d/1.json\nSTOP /bad\nNOPE\n".to_vec());
        let mut out = Vec::new();
        let log = Log(RefCell::new(Vec::new()));
        serve(input, &mut out, 42, "app", &log).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HELLO 42 app\nSTARTED\nDUMPED /d/1.json\nERROR cannot write\nERROR unknown control command `NOPE`\n"
        );
        assert_eq!(*log.0.borrow(), ["start", "stop /d/1.json", "stop /bad"]);
    }
}
