//! The exact nsys command lines and the collection state machine.

use super::*;

fn commands() -> NsysCommands {
    NsysCommands::new(
        "/opt/nsys/bin/nsys".into(),
        "agent-42".into(),
        &split_tool_args("--trace=cuda,nvtx --sample=none"),
        true,
    )
    .unwrap()
}

fn at(c: u32) -> CollectionRef {
    CollectionRef {
        session: "s1".into(),
        collection: c,
    }
}

fn v(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

#[test]
fn command_lines_are_exact() {
    let c = commands();
    let app = v(&["python3", "train.py", "--epochs", "2"]);
    assert_eq!(
        c.launch(&app),
        v(&[
            "/opt/nsys/bin/nsys",
            "launch",
            "--session-new=agent-42",
            "--trace=cuda,nvtx",
            "--",
            "python3",
            "train.py",
            "--epochs",
            "2"
        ])
    );
    assert_eq!(
        c.start(Path::new("/w/s1-1.nsys-rep")),
        v(&[
            "/opt/nsys/bin/nsys",
            "start",
            "--session=agent-42",
            "--output=/w/s1-1.nsys-rep",
            "--force-overwrite=true",
            "--sample=none"
        ])
    );
    assert_eq!(
        c.stop(),
        v(&["/opt/nsys/bin/nsys", "stop", "--session=agent-42"])
    );
    assert_eq!(
        c.profile(&app, Path::new("/w/r.nsys-rep"), Some(30)),
        v(&[
            "/opt/nsys/bin/nsys",
            "profile",
            "--output=/w/r.nsys-rep",
            "--force-overwrite=true",
            "--duration=30",
            "--trace=cuda,nvtx",
            "--sample=none",
            "--",
            "python3",
            "train.py",
            "--epochs",
            "2"
        ])
    );
    let (export, sqlite) = c.export(Path::new("/w/r.nsys-rep"));
    assert_eq!(sqlite, Path::new("/w/r.sqlite"));
    assert_eq!(
        export,
        v(&[
            "/opt/nsys/bin/nsys",
            "export",
            "--type",
            "sqlite",
            "--force-overwrite",
            "true",
            "--output",
            "/w/r.sqlite",
            "/w/r.nsys-rep"
        ])
    );
}

#[test]
fn each_option_class_goes_to_the_commands_that_accept_it() {
    let app = v(&["python3", "train.py"]);
    let mut c = NsysCommands::new(
        "nsys".into(),
        "s".into(),
        &split_tool_args(
            "-t cuda,nvtx --sample=none --cpuctxsw=none --cuda-memory-usage true -b none",
        ),
        true,
    )
    .unwrap();
    c.wrapper = v(&[
        "/opt/nsight/nsight-agent",
        "exec-marked",
        "/w/started",
        "--",
    ]);
    assert_eq!(
        c.launch(&app),
        v(&[
            "nsys",
            "launch",
            "--session-new=s",
            "-t",
            "cuda,nvtx",
            "--cuda-memory-usage",
            "true",
            "--",
            "/opt/nsight/nsight-agent",
            "exec-marked",
            "/w/started",
            "--",
            "python3",
            "train.py"
        ])
    );
    assert_eq!(
        c.start(Path::new("/w/r.nsys-rep")),
        v(&[
            "nsys",
            "start",
            "--session=s",
            "--output=/w/r.nsys-rep",
            "--force-overwrite=true",
            "--sample=none",
            "--cpuctxsw=none",
            "-b",
            "none"
        ])
    );
    // Launch mode: everything to `profile`, in the order given; `--duration` only there.
    let c = NsysCommands::new(
        "nsys".into(),
        "s".into(),
        &split_tool_args("--sample=none -t nvtx --duration=5"),
        false,
    )
    .unwrap();
    assert_eq!(
        c.profile(&app, Path::new("/w/r.nsys-rep"), None),
        v(&[
            "nsys",
            "profile",
            "--output=/w/r.nsys-rep",
            "--force-overwrite=true",
            "--sample=none",
            "-t",
            "nvtx",
            "--duration=5",
            "--",
            "python3",
            "train.py"
        ])
    );
    // What nsys would refuse is refused before anything runs.
    let refused = |args: &str, coordinator| {
        NsysCommands::new(
            "nsys".into(),
            "s".into(),
            &split_tool_args(args),
            coordinator,
        )
        .unwrap_err()
        .to_string()
    };
    assert!(refused("--duration=5", true).contains("coordinator: false"));
    assert!(refused("--cpuctxs=none", false).contains("--cpuctxs is not an option"));
    assert!(refused("--output=x", false).contains("set by the Nsight agent"));
}

#[test]
fn tool_args_split_on_whitespace_and_keep_quoted_groups() {
    assert_eq!(
        split_tool_args(" -t cuda,nvtx  --env-var='A=1 2' \"\" "),
        v(&["-t", "cuda,nvtx", "--env-var=A=1 2", ""])
    );
    assert!(split_tool_args("   ").is_empty());
}

#[test]
fn the_state_machine_runs_start_stop_export_once_per_collection() {
    let mut s = NsysState::new(commands(), "/w".into());
    let c = commands();
    assert_eq!(
        s.on_start(&at(1)).unwrap(),
        Action::Run(vec![c.start(Path::new("/w/s1-1.nsys-rep"))])
    );
    assert_eq!(
        s.on_start(&at(1)).unwrap(),
        Action::Repeat,
        "a resent START"
    );
    assert!(s
        .on_start(&at(2))
        .unwrap_err()
        .contains("already collecting s1/1"));
    let (export, _) = c.export(Path::new("/w/s1-1.nsys-rep"));
    assert_eq!(
        s.on_stop(&at(1)).unwrap(),
        Action::Run(vec![c.stop(), export])
    );
    s.finished(&at(1), vec!["k1".into()]);
    assert_eq!(
        s.on_stop(&at(1)).unwrap(),
        Action::Answer(vec!["k1".into()]),
        "a resent STOP answers with the same keys"
    );
    assert!(s.on_stop(&at(2)).unwrap_err().contains("nothing to stop"));
    assert!(matches!(s.on_start(&at(2)).unwrap(), Action::Run(_)));
    assert_eq!(
        s.outputs(&at(2)),
        ("/w/s1-2.nsys-rep".into(), "/w/s1-2.sqlite".into())
    );
}

#[test]
fn the_duration_is_read_as_nsys_reads_it() {
    let d = |s: &str| duration_of(&split_tool_args(s));
    assert_eq!(d("-t cuda,nvtx --duration=3"), Some(3));
    assert_eq!(d("--duration 7 -t nvtx"), Some(7));
    assert_eq!(d("-d 5"), Some(5));
    assert_eq!(d("-d12"), Some(12));
    assert_eq!(d("-t cuda,nvtx --delay=2"), None);
    assert_eq!(d("--duration=soon"), None);
    assert_eq!(d(""), None);
}
