//! The job lifecycle and request checks.

use super::*;
use crate::Argument;

fn info() -> RecipeInfo {
    let arg = |name: &str| Argument {
        name: name.into(),
        description: String::new(),
        default_value: None,
    };
    RecipeInfo {
        name: "cuda_gpu_kern_sum".into(),
        display_name: "CUDA GPU Kernel Summary".into(),
        description: "kernels".into(),
        arguments: vec![arg("timeunit"), arg("name")],
    }
}

fn request(args: &[&str]) -> JobRequest {
    JobRequest {
        recipe: "cuda_gpu_kern_sum".into(),
        args: args.iter().map(|s| s.to_string()).collect(),
        session: Some("0f1e-22".into()),
        collection: None,
        inputs: None,
        tag: None,
    }
}

fn job() -> Job {
    Job::new(Uuid::nil(), request(&[]).validate(&info()).unwrap(), 10)
}

#[test]
fn arguments_parse_in_both_forms() {
    let spec = request(&["--timeunit", "usec", "--name=base"])
        .validate(&info())
        .unwrap();
    assert_eq!(
        spec.pairs,
        [
            ("timeunit".to_string(), "usec".to_string()),
            ("name".to_string(), "base".to_string())
        ]
    );
    assert_eq!(spec.tag, "default");
}

#[test]
fn bad_arguments_say_what_is_accepted() {
    for (args, want) in [
        (&["--bogus", "1"][..], "unknown argument `--bogus`"),
        (&["usec"][..], "is not `--name value`"),
        (&["--timeunit"][..], "has no value"),
    ] {
        let err = request(args).validate(&info()).unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
    }
    let err = request(&["--x=1"])
        .validate(&info())
        .unwrap_err()
        .to_string();
    assert!(err.contains("accepts: --timeunit, --name"), "{err}");
}

#[test]
fn ids_must_be_key_components() {
    let mut r = request(&[]);
    r.session = Some("../etc".into());
    let err = r.validate(&info()).unwrap_err().to_string();
    assert!(err.contains("`session` `../etc`"), "{err}");
    let mut r = request(&[]);
    r.collection = Some("a/b".into());
    assert!(r.validate(&info()).is_err());
    let mut r = request(&[]);
    r.tag = Some(String::new());
    assert!(r.validate(&info()).is_err());
    let mut r = request(&[]);
    r.tag = Some("a/b".into());
    let err = r.validate(&info()).unwrap_err().to_string();
    assert!(err.contains("only A-Z a-z 0-9 _ . - are allowed"), "{err}");
}

#[test]
fn every_tag_the_coordinator_accepts_is_accepted() {
    for tag in ["my_tag", "-lead", "trail.", "a--b", "default"] {
        let mut r = request(&[]);
        r.tag = Some(tag.into());
        let spec = r.validate(&info()).unwrap();
        assert_eq!(spec.tag, tag);
    }
}

#[test]
fn several_inputs_or_one_session_not_both() {
    let input = |s: &str, c: Option<&str>| JobInput {
        session: s.into(),
        collection: c.map(Into::into),
    };
    let mut r = request(&[]);
    (r.session, r.inputs) = (None, Some(vec![input("s1", Some("2")), input("s2", None)]));
    let spec = r.validate(&info()).unwrap();
    assert_eq!(
        (spec.session.as_str(), spec.collection.as_deref()),
        ("s1", Some("2"))
    );
    let j = Job::new(Uuid::nil(), spec, 1);
    assert_eq!(j.scopes(), [input("s1", Some("2")), input("s2", None)]);
    // The single form is one input.
    assert_eq!(job().scopes(), [input("0f1e-22", None)]);
    for (session, collection, inputs, want) in [
        (Some("s"), None, Some(vec![input("s2", None)]), "not both"),
        (None, None, Some(vec![]), "`inputs` has 0 entries"),
        (None, Some("1"), None, "`collection` needs a `session`"),
        (None, None, None, "no reports named"),
        (
            None,
            None,
            Some(vec![input("a/b", None)]),
            "`session` `a/b`",
        ),
        (
            None,
            None,
            Some(vec![input("s", Some(".."))]),
            "`collection` `..`",
        ),
    ] {
        let mut r = request(&[]);
        r.session = session.map(Into::into);
        r.collection = collection.map(Into::into);
        r.inputs = inputs;
        let err = r.validate(&info()).unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
    }
    // Records from before `inputs` still read, as their session.
    let mut v = serde_json::to_value(job()).unwrap();
    v.as_object_mut().unwrap().remove("inputs");
    let old: Job = serde_json::from_value(v).unwrap();
    assert_eq!(old.scopes(), [input("0f1e-22", None)]);
}

#[test]
fn a_job_runs_to_success() {
    let mut j = job();
    assert_eq!(j.status, JobStatus::Queued);
    j.start(20).unwrap();
    assert_eq!((j.status, j.started_at), (JobStatus::Running, Some(20)));
    let file = OutputFile {
        name: "a.csv".into(),
        size: 3,
        key: "k".into(),
    };
    j.succeed(vec!["r".into()], vec![file], vec![], 30).unwrap();
    assert_eq!(j.status, JobStatus::Succeeded);
    assert_eq!(j.finished_at, Some(30));
    assert!(j.reason.is_none());
    assert!(j.start(40).is_err());
    assert!(j.fail("x".into(), 40).is_err());
    assert!(j.request_cancel(40).is_err());
    j.check_delete().unwrap();
}

#[test]
fn cancel_of_a_queued_job_is_immediate() {
    let mut j = job();
    assert_eq!(j.request_cancel(15).unwrap(), CancelOutcome::CancelledNow);
    assert_eq!(j.status, JobStatus::Cancelled);
    assert_eq!(j.finished_at, Some(15));
    assert_eq!(
        j.request_cancel(16).unwrap(),
        CancelOutcome::AlreadyCancelled
    );
    assert!(j.start(17).is_err(), "a cancelled job never starts");
}

#[test]
fn cancel_of_a_running_job_waits_for_the_run() {
    let mut j = job();
    j.start(20).unwrap();
    assert_eq!(j.request_cancel(21).unwrap(), CancelOutcome::StopRun);
    assert_eq!(j.status, JobStatus::Running);
    assert!(j.cancel_requested);
    assert!(j.check_delete().is_err());
    j.cancelled(22).unwrap();
    assert_eq!(j.status, JobStatus::Cancelled);
    assert_eq!(j.reason.as_deref(), Some("cancelled by request"));
}

#[test]
fn failures_keep_their_reason() {
    let mut j = job();
    j.start(20).unwrap();
    j.fail("no report".into(), 25).unwrap();
    assert_eq!(j.status, JobStatus::Failed);
    assert_eq!(j.reason.as_deref(), Some("no report"));
    assert!(j.cancelled(26).is_err());
}

#[test]
fn restore_fails_running_jobs_and_keeps_queued_ones() {
    let mut running = job();
    running.start(20).unwrap();
    assert!(running.restore(100));
    assert_eq!(running.status, JobStatus::Failed);
    assert_eq!(running.reason.as_deref(), Some(RESTART_REASON));
    let mut queued = job();
    assert!(!queued.restore(100));
    assert_eq!(queued.status, JobStatus::Queued);
    let mut done = job();
    done.start(1).unwrap();
    done.succeed(vec![], vec![], vec![], 2).unwrap();
    assert!(!done.restore(100));
}

#[test]
fn json_shape_is_camel_case() {
    let v = serde_json::to_value(job()).unwrap();
    assert_eq!(v["status"], "queued");
    assert_eq!(v["createdAt"], 10);
    assert_eq!(v["cancelRequested"], false);
    assert!(v["collection"].is_null());
    let back: Job = serde_json::from_value(v).unwrap();
    assert_eq!(back, job());
    for s in JobStatus::ALL {
        assert_eq!(JobStatus::parse(s.as_str()), Some(s));
    }
}
