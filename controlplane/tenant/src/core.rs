//! The tenant API's rules, as plain functions over plain data and a clock value: who the caller
//! is, whether a launch fits under the cap, who may delete a streamer, which streamers are idle,
//! when a read must record activity, and the `NsightStreamer` a launch creates. No I/O, no
//! clock reads: the shell (`store`, `api`, `reaper`) reads the world and the time and passes
//! them in.
//!
//! ```text
//!  NsightStreamer objects ──Record::from_object──> [Record] ──decide_launch / may_delete /
//!                                                           idle / needs_touch──> decision
//!  LaunchTarget + Caller + now ──streamer_object──> the NsightStreamer to create (JSON)
//! ```

use std::{collections::BTreeMap, time::Duration};

use nsight_contracts::{
    coordinator::Millis,
    tenant::{CapReached, LaunchTarget, Streamer, StreamerPhase, MAX_IDENTITY_LEN},
    Problem,
};
use serde_json::{json, Value};

/// The annotation holding the identity that launched a streamer.
pub const OWNER_ANNOTATION: &str = "nsight.nvidia.com/owner";
/// The annotation holding the last launch or read of a streamer (unix milliseconds).
pub const LAST_ACTIVE_ANNOTATION: &str = "nsight.nvidia.com/last-active";
/// The annotation holding the one report a streamer was launched for (the operator passes it
/// to the streamer Pod's report sync).
pub use nsight_contracts::tenant::REPORT_ANNOTATION;
/// The label (and value) on every streamer the tenant API created: only those count against the
/// cap, are listed, deleted and reaped; a streamer someone applied by hand is left alone.
pub const CREATED_BY_LABEL: &str = "app.kubernetes.io/created-by";
pub const CREATED_BY: &str = "nsight-tenant-operator";
/// Names of created streamers: the API server appends five random characters.
pub const NAME_PREFIX: &str = "streamer-";

/// The caller, as the gateway's auth filter forwarded it. Invariant: 1 to
/// [`MAX_IDENTITY_LEN`] printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller(String);

impl Caller {
    /// The identity header's value; refused (401) when absent or unusable: the tenant API is
    /// reached through the gateway, which always sets it.
    pub fn from_header(raw: Option<&[u8]>) -> Result<Caller, Problem> {
        let Some(raw) = raw else {
            return Err(Problem::new(
                401,
                format!(
                    "no caller identity: the tenant API is called through the gateway, whose auth filter sets `{}`",
                    nsight_contracts::tenant::IDENTITY_HEADER
                ),
            ));
        };
        let ok = !raw.is_empty()
            && raw.len() <= MAX_IDENTITY_LEN
            && raw.iter().all(|b| (0x20..0x7f).contains(b))
            && raw.iter().any(|b| *b != b' ');
        match std::str::from_utf8(raw) {
            Ok(s) if ok => Ok(Caller(s.to_owned())),
            _ => Err(Problem::new(
                401,
                format!(
                    "the caller identity (`{}`) must be 1 to {MAX_IDENTITY_LEN} printable ASCII characters",
                    nsight_contracts::tenant::IDENTITY_HEADER
                ),
            )),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// One streamer the tenant API created, as read from its `NsightStreamer` object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub name: String,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// Empty when the annotation is missing (nobody may delete it through the API then).
    pub owner: String,
    pub session_id: String,
    pub report: Option<String>,
    pub ready: bool,
    pub url: Option<String>,
    pub created: Millis,
    /// The annotation, else the creation time.
    pub last_active: Millis,
}

/// The parts of an object a [`Record`] is read from.
#[derive(Debug, Clone, Default)]
pub struct ObjectParts<'a> {
    pub name: &'a str,
    pub uid: Option<&'a str>,
    pub resource_version: Option<&'a str>,
    pub annotations: Option<&'a BTreeMap<String, String>>,
    pub labels: Option<&'a BTreeMap<String, String>>,
    pub created: Option<Millis>,
    /// The object's `spec` and `status` (JSON; absent members are `null`).
    pub spec: &'a Value,
    pub status: &'a Value,
}

impl Record {
    /// The record of an object; `None` when the tenant API did not create it (no
    /// [`CREATED_BY_LABEL`]).
    pub fn from_object(o: &ObjectParts<'_>) -> Option<Record> {
        if o.labels
            .and_then(|l| l.get(CREATED_BY_LABEL))
            .map(String::as_str)
            != Some(CREATED_BY)
        {
            return None;
        }
        let annotation = |key: &str| o.annotations.and_then(|a| a.get(key)).cloned();
        let created = o.created.unwrap_or_default();
        let ready = o.status["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == nsight_api::common::CONDITION_READY && c["status"] == "True")
        });
        Some(Record {
            name: o.name.to_owned(),
            uid: o.uid.map(Into::into),
            resource_version: o.resource_version.map(Into::into),
            owner: annotation(OWNER_ANNOTATION).unwrap_or_default(),
            session_id: o.spec["sessionId"].as_str().unwrap_or_default().to_owned(),
            report: annotation(REPORT_ANNOTATION),
            ready,
            url: o.status["url"].as_str().map(Into::into),
            created,
            last_active: annotation(LAST_ACTIVE_ANNOTATION)
                .and_then(|v| v.parse().ok())
                .map(Millis)
                .unwrap_or(created),
        })
    }

    /// The streamer as served; it is reaped `idle` after its last activity.
    pub fn view(&self, idle: Duration) -> Streamer {
        Streamer {
            name: self.name.clone(),
            owner: self.owner.clone(),
            session_id: self.session_id.clone(),
            report: self.report.clone(),
            phase: if self.ready {
                StreamerPhase::Ready
            } else {
                StreamerPhase::Pending
            },
            url: self.url.clone().filter(|_| self.ready),
            created_at: self.created,
            last_active_at: self.last_active,
            expires_at: Millis(self.last_active.0.saturating_add(millis(idle))),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Whether `caller` may launch one more streamer while `records` run: at most `max_active` at
/// once, everyone's counted. The refusal names the caller's own streamers, oldest first.
pub fn decide_launch(
    records: &[Record],
    caller: &Caller,
    max_active: u32,
) -> Result<(), CapReached> {
    let active = u32::try_from(records.len()).unwrap_or(u32::MAX);
    if active < max_active {
        return Ok(());
    }
    let mut yours: Vec<&Record> = records.iter().filter(|r| r.owner == caller.0).collect();
    yours.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    Err(CapReached::new(
        active,
        max_active,
        yours.into_iter().map(|r| r.name.clone()).collect(),
    ))
}

/// Only a streamer's owner may delete it (403 otherwise, naming the owner's rule).
pub fn may_delete(record: &Record, caller: &Caller) -> Result<(), Problem> {
    if !record.owner.is_empty() && record.owner == caller.0 {
        return Ok(());
    }
    Err(Problem::new(
        403,
        format!(
            "streamer {} was launched by another user; only its owner can delete it (idle streamers are reaped)",
            record.name
        ),
    ))
}

/// The streamers idle for `idle` or longer at `now`, oldest activity first.
pub fn idle(records: &[Record], now: Millis, idle: Duration) -> Vec<&Record> {
    let mut out: Vec<&Record> = records
        .iter()
        .filter(|r| now.since(r.last_active) >= millis(idle))
        .collect();
    out.sort_by_key(|r| r.last_active);
    out
}

/// Whether a read at `now` must record activity: once the last record is older than a tenth
/// of the idle time (at most a minute), so that reads do not write on every call but a
/// streamer in use is never reaped.
pub fn needs_touch(record: &Record, now: Millis, idle: Duration) -> bool {
    let every = millis(idle / 10).min(60_000);
    now.since(record.last_active) >= every
}

/// How often the reaper looks: a quarter of the idle time, between half a second and a minute.
pub fn reap_interval(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_millis(500), Duration::from_secs(60))
}

/// What every launched streamer gets besides its target.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamerTemplate {
    /// The `NsightCloudStorageConfig` the streamer reads reports from.
    pub cloud_storage_ref: Option<String>,
    /// The streamer image (`spec.image`), instead of the operator's default.
    pub image: Option<String>,
    /// The streamer Pods' RuntimeClass (`spec.runtimeClassName`).
    pub runtime_class_name: Option<String>,
    /// Media ports, TURN relay and environment (`spec.mediaPorts`, `turn`, `env`).
    pub media: nsight_api::StreamerMedia,
}

/// The `NsightStreamer` a launch creates (name generated by the API server), owned by `caller`
/// and active since `now`.
pub fn streamer_object(
    target: &LaunchTarget,
    caller: &Caller,
    now: Millis,
    template: &StreamerTemplate,
) -> Value {
    let mut annotations = json!({
        OWNER_ANNOTATION: caller.as_str(),
        LAST_ACTIVE_ANNOTATION: now.0.to_string(),
    });
    if let Some(report) = target.report() {
        annotations[REPORT_ANNOTATION] = json!(report);
    }
    let mut spec = json!({ "sessionId": target.session_id() });
    if let Some(storage) = &template.cloud_storage_ref {
        spec["cloudStorageRef"] = json!(storage);
    }
    if let Some(image) = &template.image {
        spec["image"] = json!(image);
    }
    if let Some(class) = &template.runtime_class_name {
        spec["runtimeClassName"] = json!(class);
    }
    if let Ok(Value::Object(media)) = serde_json::to_value(&template.media) {
        for (field, value) in media {
            spec[field] = value;
        }
    }
    json!({
        "apiVersion": format!("{}/v1alpha1", nsight_api::GROUP),
        "kind": "NsightStreamer",
        "metadata": {
            "generateName": NAME_PREFIX,
            "labels": { CREATED_BY_LABEL: CREATED_BY },
            "annotations": annotations,
        },
        "spec": spec,
    })
}

/// A streamer name from a path: a DNS-1123 label (what the API server accepts for the kind),
/// else 400.
pub fn streamer_name(raw: &str) -> Result<&str, Problem> {
    let ok = !raw.is_empty()
        && raw.len() <= 63
        && raw
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !raw.starts_with('-')
        && !raw.ends_with('-');
    if ok {
        Ok(raw)
    } else {
        Err(Problem::bad_request(format!(
            "{raw:?} is not a streamer name (lower-case letters, digits and '-', at most 63)"
        )))
    }
}

/// A duration flag: a number with `ms`, `s`, `m` or `h` (`30m`, `90s`).
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let split = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (number, unit) = raw.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{raw:?} is not a duration such as 30m, 90s, 1h or 500ms"))?;
    let d = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(format!("{raw:?} needs a unit: ms, s, m or h (30m, 90s)")),
    };
    if d.is_zero() {
        return Err("the duration must be more than zero".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    const ID: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";

    fn record(name: &str, owner: &str, created: u64, last_active: u64) -> Record {
        Record {
            name: name.into(),
            uid: None,
            resource_version: None,
            owner: owner.into(),
            session_id: ID.into(),
            report: None,
            ready: false,
            url: None,
            created: Millis(created),
            last_active: Millis(last_active),
        }
    }

    fn caller(id: &str) -> Caller {
        Caller::from_header(Some(id.as_bytes())).unwrap()
    }

    #[test]
    fn the_caller_comes_from_the_gateway_header() {
        assert_eq!(caller("alice").as_str(), "alice");
        assert_eq!(caller("api-key:team-a").as_str(), "api-key:team-a");
        for bad in [
            None,
            Some(&b""[..]),
            Some(b"  "),
            Some(b"al\nice"),
            Some(b"\xff"),
        ] {
            let p = Caller::from_header(bad).unwrap_err();
            assert_eq!(p.status, 401, "{bad:?}");
            assert!(p.detail.contains("x-nsight-auth-identity"), "{}", p.detail);
        }
        let long = vec![b'a'; MAX_IDENTITY_LEN + 1];
        assert!(Caller::from_header(Some(&long)).is_err());
    }

    #[test]
    fn the_cap_counts_everyone_and_names_the_callers_own() {
        let mut records: Vec<Record> = (0..9)
            .map(|i| {
                record(
                    &format!("s{i}"),
                    if i % 3 == 0 { "alice" } else { "bob" },
                    100 - i,
                    0,
                )
            })
            .collect();
        assert!(decide_launch(&records, &caller("alice"), 10).is_ok());
        records.push(record("s9", "bob", 5, 0));
        let refused = decide_launch(&records, &caller("alice"), 10).unwrap_err();
        assert_eq!((refused.active, refused.max_active), (10, 10));
        // Oldest first: s6 (created 94), s3 (97), s0 (100).
        assert_eq!(refused.yours, ["s6", "s3", "s0"]);
        assert_eq!(refused.problem.status, 429);
        let nobody = decide_launch(&records, &caller("carol"), 10).unwrap_err();
        assert!(nobody.yours.is_empty());
        // A lowered cap refuses with more running than allowed.
        assert_eq!(
            decide_launch(&records, &caller("bob"), 3)
                .unwrap_err()
                .active,
            10
        );
        assert!(decide_launch(&[], &caller("bob"), 0).is_err());
    }

    #[test]
    fn only_the_owner_deletes() {
        let r = record("streamer-x", "alice", 0, 0);
        assert!(may_delete(&r, &caller("alice")).is_ok());
        let p = may_delete(&r, &caller("bob")).unwrap_err();
        assert_eq!(p.status, 403);
        assert!(p.detail.contains("only its owner"), "{}", p.detail);
        // No owner recorded: nobody deletes it through the API.
        assert!(may_delete(&record("y", "", 0, 0), &caller("alice")).is_err());
        // Identities compare exactly.
        assert!(may_delete(&r, &caller("Alice")).is_err());
    }

    #[test]
    fn idle_streamers_are_those_past_the_idle_time() {
        let idle_for = Duration::from_secs(60);
        let records = [
            record("fresh", "a", 0, 50_000),
            record("edge", "a", 0, 40_000),
            record("old", "a", 0, 1_000),
        ];
        let names = |now| {
            idle(&records, Millis(now), idle_for)
                .into_iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(100_000), ["old", "edge"]);
        assert_eq!(names(99_999), ["old"]);
        assert!(
            names(0).is_empty(),
            "a clock behind the records reaps nothing"
        );
    }

    #[test]
    fn reads_record_activity_often_enough() {
        let idle_for = Duration::from_secs(30 * 60);
        let r = record("s", "a", 0, 1_000_000);
        assert!(!needs_touch(&r, Millis(1_059_999), idle_for));
        assert!(needs_touch(&r, Millis(1_060_000), idle_for));
        let short = Duration::from_secs(3);
        assert!(needs_touch(&r, Millis(1_000_300), short));
        assert!(!needs_touch(&r, Millis(1_000_299), short));
        assert_eq!(reap_interval(idle_for), Duration::from_secs(60));
        assert_eq!(reap_interval(short), Duration::from_millis(750));
        assert_eq!(
            reap_interval(Duration::from_millis(10)),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn records_are_read_from_created_streamers_only() {
        let labels = BTreeMap::from([(CREATED_BY_LABEL.to_owned(), CREATED_BY.to_owned())]);
        let annotations = BTreeMap::from([
            (OWNER_ANNOTATION.to_owned(), "alice".to_owned()),
            (LAST_ACTIVE_ANNOTATION.to_owned(), "5000".to_owned()),
            (REPORT_ANNOTATION.to_owned(), "t/s/1/r.nsys-rep".to_owned()),
        ]);
        let spec = json!({"sessionId": ID});
        let status =
            json!({"conditions": [{"type": "Ready", "status": "True"}], "url": "http://s"});
        let parts = ObjectParts {
            name: "streamer-abcde",
            labels: Some(&labels),
            annotations: Some(&annotations),
            created: Some(Millis(1000)),
            spec: &spec,
            status: &status,
            ..ObjectParts::default()
        };
        let r = Record::from_object(&parts).unwrap();
        assert_eq!(
            (r.owner.as_str(), r.last_active, r.ready),
            ("alice", Millis(5000), true)
        );
        let view = r.view(Duration::from_secs(10));
        assert_eq!(view.phase, StreamerPhase::Ready);
        assert_eq!(view.url.as_deref(), Some("http://s"));
        assert_eq!(view.expires_at, Millis(15_000));
        assert_eq!(view.report.as_deref(), Some("t/s/1/r.nsys-rep"));
        // Not ready: no URL yet; no activity annotation: the creation time.
        let pending = json!({});
        let bare = Record::from_object(&ObjectParts {
            status: &pending,
            annotations: None,
            ..parts.clone()
        })
        .unwrap();
        assert_eq!(
            (bare.last_active, bare.ready, bare.owner.as_str()),
            (Millis(1000), false, "")
        );
        assert_eq!(bare.view(Duration::from_secs(1)).url, None);
        // Made by hand: not ours.
        assert!(Record::from_object(&ObjectParts {
            labels: None,
            ..parts
        })
        .is_none());
    }

    #[test]
    fn a_launch_creates_an_owned_labelled_streamer() {
        let target = LaunchTarget::Report {
            session_id: ID.into(),
            key: format!("default/{ID}/1/a.nsys-rep"),
        };
        let template = StreamerTemplate {
            cloud_storage_ref: Some("storage".into()),
            image: Some("nvcr.io/nvidia/devtools/nsight-streamer-nsys:2025.3".into()),
            runtime_class_name: Some("nvidia".into()),
            media: serde_json::from_value(json!({
                "mediaPorts": [{"name": "webrtc", "port": 47998}],
                "turn": {"enabled": true, "urls": ["turn:relay:3478"], "credentialsSecret": "turn"},
            }))
            .unwrap(),
        };
        let o = streamer_object(&target, &caller("alice"), Millis(42), &template);
        assert_eq!(o["apiVersion"], "nvidia.com/v1alpha1");
        assert_eq!(o["metadata"]["generateName"], NAME_PREFIX);
        assert_eq!(o["metadata"]["labels"][CREATED_BY_LABEL], CREATED_BY);
        assert_eq!(o["metadata"]["annotations"][OWNER_ANNOTATION], "alice");
        assert_eq!(o["metadata"]["annotations"][LAST_ACTIVE_ANNOTATION], "42");
        assert_eq!(
            o["metadata"]["annotations"][REPORT_ANNOTATION],
            target.report().unwrap()
        );
        assert_eq!(
            o["spec"],
            json!({"sessionId": ID, "cloudStorageRef": "storage",
                   "image": "nvcr.io/nvidia/devtools/nsight-streamer-nsys:2025.3",
                   "runtimeClassName": "nvidia",
                   "mediaPorts": [{"name": "webrtc", "port": 47998, "protocol": "UDP"}],
                   "turn": {"enabled": true, "urls": ["turn:relay:3478"], "credentialsSecret": "turn"}})
        );
        // The operator's type reads it.
        let typed: nsight_api::NsightStreamer = serde_json::from_value(o).unwrap();
        assert_eq!(typed.spec.session_id.as_deref(), Some(ID));
        assert!(typed.spec.workload.image.is_some());
        assert_eq!(typed.spec.runtime_class_name.as_deref(), Some("nvidia"));
        assert_eq!(typed.spec.media, template.media);
    }

    #[test]
    fn names_and_durations_are_checked() {
        assert!(streamer_name("streamer-ab12c").is_ok());
        for bad in ["", "Streamer", "a/b", "-a", "a-", "a.b", &"a".repeat(64)] {
            assert_eq!(streamer_name(bad).unwrap_err().status, 400, "{bad:?}");
        }
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        // What the CRD's `streamerLaunch.idleTimeout` pattern admits parses.
        assert_eq!(parse_duration("0045m"), Ok(Duration::from_secs(2700)));
        for bad in ["", "m", "30", "0s", "-1s", "1d", "1.5h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
