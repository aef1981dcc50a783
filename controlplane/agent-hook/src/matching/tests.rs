//! The injection decision over plain data.

use super::*;

fn config(include: &str, exclude: &str) -> HookConfig {
    HookConfig {
        include: include.into(),
        exclude: exclude.into(),
        agent_bin: Some("/opt/nsight/nsight-agent".into()),
    }
}

fn req(path: &str, argv: &[&str]) -> ExecRequest {
    ExecRequest {
        path: path.into(),
        argv: argv.iter().map(|a| (*a).to_owned()).collect(),
        agent_active: false,
    }
}

#[test]
fn a_matching_program_is_rewrapped_with_its_path_and_arguments() {
    let got = decide(
        &config("python", ""),
        &req("/usr/bin/python3", &["python3", "train.py", "--lr", "0.1"]),
    );
    assert_eq!(
        got.unwrap(),
        [
            "/opt/nsight/nsight-agent",
            "run",
            "--",
            "/usr/bin/python3",
            "train.py",
            "--lr",
            "0.1"
        ]
    );
}

#[test]
fn shells_and_utilities_are_excluded_by_default_even_when_included() {
    let c = config(".*", "");
    for (path, argv) in [
        ("/bin/sh", vec!["sh", "-c", "python3 x.py"]),
        ("/usr/bin/bash", vec!["bash", "run.sh"]),
        ("/usr/bin/env", vec!["env", "python3"]),
        ("/bin/sleep", vec!["sleep", "1"]),
        ("/usr/bin/awk", vec!["awk", "{print}"]),
        ("sed", vec!["sed"]),
    ] {
        assert_eq!(decide(&c, &req(path, &argv)), None, "{path}");
    }
    assert!(decide(&c, &req("/usr/local/bin/myapp", &["myapp"])).is_some());
    assert!(
        decide(&c, &req("/opt/bashful/app", &["app"])).is_some(),
        "only the base name counts"
    );
}

#[test]
fn user_excludes_merge_with_the_defaults_and_match_arguments_too() {
    let c = config("python", "--no-profile\n^/usr/bin/python3 -m pip");
    assert!(decide(&c, &req("/usr/bin/python3", &["python3", "a.py"])).is_some());
    assert_eq!(
        decide(
            &c,
            &req("/usr/bin/python3", &["python3", "a.py", "--no-profile"])
        ),
        None
    );
    assert_eq!(
        decide(
            &c,
            &req("/usr/bin/python3", &["python3", "-m", "pip", "list"])
        ),
        None
    );
    assert_eq!(decide(&c, &req("/bin/bash", &["bash", "python"])), None);
}

#[test]
fn nothing_is_wrapped_without_include_agent_or_with_the_marker() {
    assert_eq!(
        decide(&config("", ""), &req("/usr/bin/python3", &["python3"])),
        None
    );
    let mut no_agent = config("python", "");
    no_agent.agent_bin = None;
    assert_eq!(
        decide(&no_agent, &req("/usr/bin/python3", &["python3"])),
        None
    );
    no_agent.agent_bin = Some("relative/agent".into());
    assert_eq!(
        decide(&no_agent, &req("/usr/bin/python3", &["python3"])),
        None
    );
    let mut active = req("/usr/bin/python3", &["python3"]);
    active.agent_active = true;
    assert_eq!(decide(&config("python", ""), &active), None, "no recursion");
    assert_eq!(
        decide(
            &config("python\n(unclosed", ""),
            &req("/usr/bin/python3", &["python3"])
        ),
        None,
        "a bad pattern wraps nothing"
    );
}

#[test]
fn names_resolve_through_path_like_execvp() {
    let sh = resolve("sh", Some("/nonexistent:/bin:/usr/bin"));
    assert!(sh.ends_with("/sh") && sh.starts_with('/'), "{sh}");
    assert_eq!(resolve("./x", Some("/bin")), "./x");
    assert_eq!(
        resolve("no-such-program-xyz", Some("/bin")),
        "no-such-program-xyz"
    );
    assert_eq!(
        command_line("/bin/x", &["x".into(), "a".into()]),
        "/bin/x a"
    );
}

#[test]
fn the_agent_itself_is_never_wrapped_even_when_everything_is_included() {
    let c = config(".*", "");
    let agent = req(
        "/opt/nsight/nsight-agent",
        &["nsight-agent", "run", "--", "/app/train"],
    );
    assert_eq!(decide(&c, &agent), None);
    // The same program elsewhere is not the agent.
    assert!(decide(&c, &req("/app/train", &["train"])).is_some());
}

#[test]
fn a_process_reads_its_own_arguments_from_proc_cmdline() {
    assert_eq!(
        cmdline_argv(b"/usr/bin/python3\0train.py\0--epochs\0\0".as_slice()),
        Some(vec![
            "/usr/bin/python3".to_owned(),
            "train.py".to_owned(),
            "--epochs".to_owned(),
            String::new()
        ])
    );
    assert_eq!(
        cmdline_argv(b"/app/x\0".as_slice()),
        Some(vec!["/app/x".to_owned()])
    );
    assert_eq!(cmdline_argv(b"".as_slice()), None);
    assert_eq!(cmdline_argv(b"\xff\0".as_slice()), None);
}
