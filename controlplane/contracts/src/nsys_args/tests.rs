//! The option table per class and the split of tool arguments by nsys command.

use super::*;

fn v(text: &str) -> Vec<String> {
    words(text)
}

#[test]
fn launch_options_go_to_launch_and_profile_only() {
    for args in [
        "--trace=cuda,nvtx",
        "-t cuda,nvtx",
        "-tcuda",
        "--cuda-memory-usage=true",
        "--cuda-memory-usage true",
        "--env-var=A=1",
        "-e A=1",
        "--wait=primary",
        "--wait all",
        "-w true",
        "--show-output=false",
        "--pytorch=autograd-nvtx",
        "--python-sampling=true",
        "--nvtx-domain-include=a,b",
        "--osrt-threshold=1000",
    ] {
        let s = split(&v(args)).unwrap();
        assert_eq!(s.launch, v(args), "{args}");
        assert!(s.start.is_empty(), "{args}");
        assert_eq!(s.profile, v(args), "{args}");
    }
}

#[test]
fn collection_options_go_to_start_and_profile_only() {
    for args in [
        "--sample=none",
        "-s none",
        "-scpu",
        "--cpuctxsw=none",
        "--cpuctxsw none",
        "--backtrace=dwarf",
        "-b lbr",
        "--capture-range=cudaProfilerApi",
        "-c nvtx",
        "--capture-range-end=stop",
        "--nvtx-capture=range@domain",
        "--gpu-metrics-devices=all",
        "--stats=true",
        "--export=sqlite",
        "--sampling-frequency=1000",
        "--ftrace=drm/drm_vblank_event",
        "--stop-on-exit=false",
        "-x true",
    ] {
        let s = split(&v(args)).unwrap();
        assert!(s.launch.is_empty(), "{args}");
        assert_eq!(s.start, v(args), "{args}");
        assert_eq!(s.profile, v(args), "{args}");
    }
}

#[test]
fn profile_only_options_go_to_profile_and_are_refused_in_coordinator_mode() {
    for (args, name) in [
        ("--duration=30", "--duration"),
        ("-d 30", "-d"),
        ("-d30", "-d"),
        ("--delay 5", "--delay"),
        ("--kill=none", "--kill"),
    ] {
        let s = split(&v(args)).unwrap();
        assert!(s.launch.is_empty() && s.start.is_empty(), "{args}");
        assert_eq!(s.profile, v(args), "{args}");
        assert_eq!(check(&v(args), false).unwrap(), s, "{args}");
        let e = check(&v(args), true).unwrap_err();
        assert_eq!(
            e,
            ArgsError::ProfileOnly {
                option: name.into()
            },
            "{args}"
        );
        assert!(e.to_string().contains("coordinator: false"), "{e}");
    }
}

#[test]
fn the_issue_s_arguments_split_in_order() {
    let s = check(&v("-t cuda,nvtx --sample=none --cpuctxsw=none"), true).unwrap();
    assert_eq!(s.launch, v("-t cuda,nvtx"));
    assert_eq!(s.start, v("--sample=none --cpuctxsw=none"));
    assert_eq!(s.profile, v("-t cuda,nvtx --sample=none --cpuctxsw=none"));
    let mixed = v("--sample none -t nvtx --cuda-memory-usage=true -b none --duration=5");
    let s = split(&mixed).unwrap();
    assert_eq!(s.launch, v("-t nvtx --cuda-memory-usage=true"));
    assert_eq!(s.start, v("--sample none -b none"));
    assert_eq!(s.profile, mixed);
    assert_eq!(split(&[]).unwrap(), Split::default());
}

#[test]
fn the_first_problem_in_argument_order_is_reported() {
    assert_eq!(
        check(&v("-t nvtx --duration=3 --output=x"), true).unwrap_err(),
        ArgsError::ProfileOnly {
            option: "--duration".into()
        }
    );
    assert_eq!(
        check(&v("-t nvtx --output=x --duration=3"), true).unwrap_err(),
        ArgsError::AgentOwned {
            option: "--output".into()
        }
    );
}

#[test]
fn options_the_agent_sets_are_refused() {
    for (args, name) in [
        ("--output=/tmp/x", "--output"),
        ("-o x", "-o"),
        ("--force-overwrite true", "--force-overwrite"),
        ("-f true", "-f"),
        ("--session=s", "--session"),
        ("--session-new=s", "--session-new"),
    ] {
        let e = split(&v(args)).unwrap_err();
        assert_eq!(
            e,
            ArgsError::AgentOwned {
                option: name.into()
            },
            "{args}"
        );
        assert!(e.to_string().contains("remove it"), "{e}");
    }
}

#[test]
fn malformed_arguments_are_refused_with_an_actionable_message() {
    let e = split(&v("--trace=cuda --cpuctxs=none")).unwrap_err();
    assert_eq!(
        e,
        ArgsError::Unknown {
            option: "--cpuctxs".into()
        }
    );
    assert!(e.to_string().contains("correct its spelling"), "{e}");
    assert_eq!(
        split(&v("-Q 1")).unwrap_err(),
        ArgsError::Unknown {
            option: "-Q".into()
        }
    );
    assert_eq!(
        split(&v("-t cuda --sample")).unwrap_err(),
        ArgsError::MissingValue {
            option: "--sample".into()
        }
    );
    assert_eq!(
        split(&v("-t cuda python train.py")).unwrap_err(),
        ArgsError::NotAnOption {
            word: "python".into()
        }
    );
    assert_eq!(
        split(&v("-")).unwrap_err(),
        ArgsError::NotAnOption { word: "-".into() }
    );
    assert!(split(&v("--")).is_err());
}

#[test]
fn the_table_has_each_name_once_and_every_option_somewhere() {
    for (i, a) in OPTIONS.iter().enumerate() {
        let acc = a.accepts;
        assert!(acc.launch || acc.start || acc.profile, "{}", a.long);
        for b in &OPTIONS[i + 1..] {
            assert_ne!(a.long, b.long);
            assert!(a.short.is_none() || a.short != b.short, "{}", a.long);
        }
    }
    // Documented classes of the options the issue names.
    let accepts = |l: &str| by_long(l).unwrap().accepts;
    for l in ["trace", "cuda-memory-usage", "env-var", "wait"] {
        assert_eq!(accepts(l), LAUNCH, "{l}");
    }
    for l in [
        "sample",
        "cpuctxsw",
        "backtrace",
        "capture-range",
        "output",
        "force-overwrite",
        "stats",
        "export",
    ] {
        assert_eq!(accepts(l), START, "{l}");
    }
    assert_eq!(accepts("duration"), PROFILE);
    assert_eq!(by_short('t').unwrap().long, "trace");
    assert_eq!(by_short('s').unwrap().long, "sample");
    assert_eq!(by_short('d').unwrap().long, "duration");
    assert_eq!(by_short('w').unwrap().long, "show-output");
}

#[test]
fn words_split_on_whitespace_and_keep_quoted_groups() {
    assert_eq!(
        words(" -t cuda,nvtx  --env-var='A=1 2' \"\" "),
        vec!["-t", "cuda,nvtx", "--env-var=A=1 2", ""]
    );
    assert!(words("   ").is_empty());
}
