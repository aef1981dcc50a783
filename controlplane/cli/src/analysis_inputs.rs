//! Which reports an `analysis run` job reads, from its `--session` and `--collection` flags
//! (pure). One session (or none: the default one) is the service's `session`/`collection`
//! form; several sessions, or one session given twice with different collections, are its
//! `inputs` form, in order (A, then B, for `diff`):
//!
//! ```text
//!  (no --session) [--collection C]        ──> {"session": <default>, "collection": C}
//!  --session A [--collection C]           ──> {"session": A, "collection": C}
//!  --session A:C                          ──> {"session": A, "collection": C}
//!  --session A[:C] --session B[:D] ...    ──> {"inputs": [{"session": A, "collection": C},
//!                                                         {"session": B, "collection": D}, ...]}
//! ```

use std::{fmt, str::FromStr};

use nsight_contracts::analysis::{JobInput, JobRequest, MAX_INPUTS};
use uuid::Uuid;

/// A session's ID: a coordinator session's UUID, or the `launch-<unix seconds>-<8 hex>` a
/// launch-mode agent stores its reports under (no coordinator names those).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionId {
    Coordinator(Uuid),
    Launch(String),
}

impl SessionId {
    fn parse(id: &str) -> Option<Self> {
        if let Ok(u) = Uuid::parse_str(id) {
            return Some(Self::Coordinator(u));
        }
        let (secs, hex) = id.strip_prefix("launch-")?.split_once('-')?;
        let launch = !secs.is_empty()
            && secs.chars().all(|c| c.is_ascii_digit())
            && hex.len() == 8
            && hex.chars().all(|c| c.is_ascii_hexdigit());
        launch.then(|| Self::Launch(id.to_owned()))
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Coordinator(u) => write!(f, "{u}"),
            Self::Launch(s) => f.write_str(s),
        }
    }
}

/// One `--session` value: `ID` or `ID:COLLECTION`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInput {
    pub session: SessionId,
    pub collection: Option<String>,
}

impl FromStr for SessionInput {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        let (id, collection) = match value.split_once(':') {
            Some((id, c)) => (id, Some(c)),
            None => (value, None),
        };
        let session = SessionId::parse(id).ok_or_else(|| {
            format!(
                "{id:?} is not a session ID; write UUID or UUID:COLLECTION, e.g. \
                 67e55044-10b1-426f-9247-bb680e5fe0c8:2 (a launch-mode session: \
                 launch-<seconds>-<8 hex digits>, as the agent's log names it)"
            )
        })?;
        let collection = match collection {
            None => None,
            Some("") => return Err("the collection after `:` is empty; write UUID:COLLECTION, e.g. 67e55044-10b1-426f-9247-bb680e5fe0c8:2, or just the UUID for every collection".into()),
            Some(c) if !c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '.' || ch == '-') => {
                return Err(format!(
                    "{c:?} is not a collection ID (letters, digits, `.` and `-`, as `nsight-cloud ls` shows them)"
                ));
            }
            Some(c) => Some(c.to_owned()),
        };
        Ok(Self {
            session,
            collection,
        })
    }
}

impl fmt::Display for SessionInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.collection {
            Some(c) => write!(f, "{}:{c}", self.session),
            None => write!(f, "{}", self.session),
        }
    }
}

/// The reports of one job, as the flags give them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One session (`None`: the tag's open one, else its latest) and maybe one collection.
    One {
        session: Option<SessionId>,
        collection: Option<String>,
    },
    /// Two or more, in order.
    Several(Vec<SessionInput>),
}

/// The scope `--session` (repeated) and `--collection` give; the error says what to write.
pub fn scope(sessions: &[SessionInput], collection: Option<&str>) -> Result<Scope, String> {
    match sessions {
        [] => Ok(Scope::One {
            session: None,
            collection: collection.map(str::to_owned),
        }),
        [one] => match (&one.collection, collection) {
            (Some(_), Some(_)) => Err(format!(
                "the collection is given twice (--session {one} and --collection); give it once"
            )),
            (c, given) => Ok(Scope::One {
                session: Some(one.session.clone()),
                collection: c.clone().or_else(|| given.map(str::to_owned)),
            }),
        },
        several if collection.is_some() => Err(format!(
            "--collection names the collection of one session; with {} --session flags, give \
             each its own as --session UUID:COLLECTION",
            several.len()
        )),
        several if several.len() > MAX_INPUTS => Err(format!(
            "a job reads at most {MAX_INPUTS} sessions or collections; got {}",
            several.len()
        )),
        several => Ok(Scope::Several(several.to_vec())),
    }
}

/// The `POST jobs` body of the single form: `session` (resolved) and maybe a collection.
pub fn single_request(
    recipe: &str,
    args: &[String],
    tag: &str,
    session: &str,
    collection: Option<&str>,
) -> JobRequest {
    JobRequest {
        recipe: recipe.to_owned(),
        args: args.to_vec(),
        session: Some(session.to_string()),
        collection: collection.map(str::to_owned),
        inputs: None,
        tag: Some(tag.to_owned()),
    }
}

/// The `POST jobs` body of the inputs form: `inputs` in order.
pub fn inputs_request(
    recipe: &str,
    args: &[String],
    tag: &str,
    inputs: &[SessionInput],
) -> JobRequest {
    let inputs: Vec<JobInput> = inputs
        .iter()
        .map(|i| JobInput {
            session: i.session.to_string(),
            collection: i.collection.clone(),
        })
        .collect();
    JobRequest {
        recipe: recipe.to_owned(),
        args: args.to_vec(),
        session: None,
        collection: None,
        inputs: Some(inputs),
        tag: Some(tag.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const A: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";
    const B: &str = "0f6c6a52-51a7-4bbd-9d3b-2fd5a4a7c5a1";

    fn input(s: &str) -> SessionInput {
        s.parse().unwrap()
    }

    #[test]
    fn a_session_may_name_one_collection() {
        assert_eq!(input(A).collection, None);
        assert_eq!(input(&format!("{A}:2")).collection.as_deref(), Some("2"));
        assert_eq!(input(&format!("{A}:2")).to_string(), format!("{A}:2"));
        let err = format!("{A}:").parse::<SessionInput>().unwrap_err();
        assert!(err.contains("empty"), "{err}");
        let err = format!("{A}:../x").parse::<SessionInput>().unwrap_err();
        assert!(err.contains("not a collection ID"), "{err}");
        let err = "last".parse::<SessionInput>().unwrap_err();
        assert!(err.contains("\"last\" is not a session ID"), "{err}");
        let launch = input("launch-1795774112-5dda4c77:1");
        assert_eq!(
            launch.session,
            SessionId::Launch("launch-1795774112-5dda4c77".into())
        );
        assert_eq!(launch.to_string(), "launch-1795774112-5dda4c77:1");
        for bad in [
            "launch-",
            "launch-12-xyz",
            "launch-12-5dda4c7",
            "launch-x-5dda4c77",
        ] {
            assert!(bad.parse::<SessionInput>().is_err(), "{bad}");
        }
    }

    #[test]
    fn one_session_is_the_session_form_and_several_the_inputs_form() {
        assert_eq!(
            scope(&[], Some("1")).unwrap(),
            Scope::One {
                session: None,
                collection: Some("1".into())
            }
        );
        assert_eq!(
            scope(&[input(&format!("{A}:3"))], None).unwrap(),
            Scope::One {
                session: Some(input(A).session),
                collection: Some("3".into())
            }
        );
        let err = scope(&[input(&format!("{A}:3"))], Some("1")).unwrap_err();
        assert!(err.contains("given twice"), "{err}");
        let two = [input(A), input(&format!("{B}:1"))];
        let Scope::Several(inputs) = scope(&two, None).unwrap() else {
            panic!("two sessions are the inputs form");
        };
        let body = serde_json::to_value(inputs_request("diff", &[], "default", &inputs)).unwrap();
        assert_eq!(
            body,
            json!({"recipe": "diff", "args": [], "tag": "default",
                   "inputs": [{"session": A}, {"session": B, "collection": "1"}]})
        );
        let err = scope(&two, Some("1")).unwrap_err();
        assert!(err.contains("--session UUID:COLLECTION"), "{err}");
        let many = vec![input(A); MAX_INPUTS + 1];
        let err = scope(&many, None).unwrap_err();
        assert!(err.contains("at most 16"), "{err}");
    }

    #[test]
    fn the_single_form_names_the_session_and_maybe_a_collection() {
        let body = single_request(
            "nvtx_sum",
            &["--timeunit".into(), "usec".into()],
            "t",
            A,
            None,
        );
        assert_eq!(
            serde_json::to_value(body).unwrap(),
            json!({"recipe": "nvtx_sum", "args": ["--timeunit", "usec"], "session": A,
                   "tag": "t"})
        );
    }
}
