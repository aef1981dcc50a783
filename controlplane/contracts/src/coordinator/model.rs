//! Plain data of the coordinator: validated names (tags, titles), identifiers, agents, sessions
//! and collections. Everything here is serde-serializable (camelCase JSON): the coordinator
//! persists sessions and serves them over REST unchanged, and clients read them with the same
//! types. No behaviour beyond syntax checks of names and small queries lives here; the state
//! machine that changes sessions is the coordinator's (`nsight_coordinator::state`).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A point in time as unix milliseconds. The state machine never reads a clock: every mutating
/// call is given `now`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct Millis(pub u64);

impl Millis {
    /// Milliseconds from `earlier` to `self`; 0 when the clock went backwards.
    pub fn since(self, earlier: Millis) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// Why a user-supplied name or identifier was rejected. Each message says what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    #[error("tag is empty; use 1 to {max} characters of A-Z a-z 0-9 _ . - (default: \"default\")", max = Tag::MAX_LEN)]
    TagEmpty,
    #[error("tag is {len} characters long; at most {max} are allowed", max = Tag::MAX_LEN)]
    TagTooLong { len: usize },
    #[error("tag contains {ch:?} at position {index}; only A-Z a-z 0-9 _ . - are allowed")]
    TagInvalidChar { ch: char, index: usize },
    #[error("title is empty; omit the title instead of passing an empty one")]
    TitleEmpty,
    #[error("title is {len} characters long; at most {max} are allowed", max = Title::MAX_LEN)]
    TitleTooLong { len: usize },
    #[error("title contains a control character ({ch:?}) at position {index}; titles are shown and used as download directory names, so they must be printable")]
    TitleControlChar { ch: char, index: usize },
    #[error("title contains {ch:?} at position {index}; titles become download directory names, so path separators ('/' and '\\') are not allowed")]
    TitlePathSeparator { ch: char, index: usize },
    #[error("title {title:?} is not allowed: titles become download directory names and {title:?} names a special directory")]
    TitleDotName { title: String },
    #[error("{input:?} is not a session ID; session IDs are UUIDs such as 67e55044-10b1-426f-9247-bb680e5fe0c8")]
    SessionId { input: String },
}

/// A name that fails its syntax check is the client's mistake: 400, with the message.
impl From<ValidationError> for crate::Problem {
    fn from(e: ValidationError) -> Self {
        Self::bad_request(e.to_string())
    }
}

/// A label that partitions agents and sessions: 1 to 63 characters of `[A-Za-z0-9_.-]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend("pattern" = "^[A-Za-z0-9_.-]{1,63}$"))
)]
#[serde(try_from = "String", into = "String")]
pub struct Tag(String);

impl Tag {
    /// The tag used when none is given.
    pub const DEFAULT: &'static str = "default";
    /// The longest tag allowed, in characters.
    pub const MAX_LEN: usize = 63;

    /// Validates a tag.
    pub fn parse(input: &str) -> Result<Tag, ValidationError> {
        if input.is_empty() {
            return Err(ValidationError::TagEmpty);
        }
        if let Some((index, ch)) = input
            .chars()
            .enumerate()
            .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
        {
            return Err(ValidationError::TagInvalidChar { ch, index });
        }
        // Only ASCII remains, so bytes == characters.
        if input.len() > Self::MAX_LEN {
            return Err(ValidationError::TagTooLong { len: input.len() });
        }
        Ok(Tag(input.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Tag {
    fn default() -> Self {
        Tag(Self::DEFAULT.to_owned())
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Tag {
    type Err = ValidationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Tag::parse(s)
    }
}

impl TryFrom<String> for Tag {
    type Error = ValidationError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Tag::parse(&s)
    }
}

impl From<Tag> for String {
    fn from(tag: Tag) -> String {
        tag.0
    }
}

/// A session title: 1 to 256 printable characters. Titles become download directory names, so
/// path separators and the names `.` and `..` are rejected too.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
// No control characters (C0, DEL, C1) and no path separators; `.` and `..` are refused too.
#[cfg_attr(
    feature = "schema",
    schemars(extend(
        "minLength" = 1,
        "maxLength" = 256,
        "pattern" = "^[^\\u0000-\\u001f\\u007f-\\u009f/\\\\]+$"
    ))
)]
#[serde(try_from = "String", into = "String")]
pub struct Title(String);

impl Title {
    /// The longest title allowed, in characters (not bytes).
    pub const MAX_LEN: usize = 256;

    /// Validates a title.
    pub fn parse(input: &str) -> Result<Title, ValidationError> {
        if input.is_empty() {
            return Err(ValidationError::TitleEmpty);
        }
        let len = input.chars().count();
        if len > Self::MAX_LEN {
            return Err(ValidationError::TitleTooLong { len });
        }
        for (index, ch) in input.chars().enumerate() {
            if ch.is_control() {
                return Err(ValidationError::TitleControlChar { ch, index });
            }
            if ch == '/' || ch == '\\' {
                return Err(ValidationError::TitlePathSeparator { ch, index });
            }
        }
        if input == "." || input == ".." {
            return Err(ValidationError::TitleDotName {
                title: input.to_owned(),
            });
        }
        Ok(Title(input.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Title {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Title {
    type Err = ValidationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Title::parse(s)
    }
}

impl TryFrom<String> for Title {
    type Error = ValidationError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Title::parse(&s)
    }
}

impl From<Title> for String {
    fn from(title: Title) -> String {
        title.0
    }
}

/// Identifies a session (a UUID, shown hyphenated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct SessionId(pub Uuid);

#[cfg(feature = "random")]
impl SessionId {
    /// A fresh random (v4) ID.
    pub fn random() -> SessionId {
        SessionId(Uuid::new_v4())
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl FromStr for SessionId {
    type Err = ValidationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(s)
            .map(SessionId)
            .map_err(|_| ValidationError::SessionId {
                input: s.to_owned(),
            })
    }
}

/// Identifies a collection within its session: 1, 2, 3... in start order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct CollectionId(pub u32);

impl CollectionId {
    /// The ID of a session's first collection.
    pub const FIRST: CollectionId = CollectionId(1);

    /// The ID after this one, `None` on overflow.
    pub fn next(self) -> Option<CollectionId> {
        self.0.checked_add(1).map(CollectionId)
    }
}

impl fmt::Display for CollectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Who an agent is: one profiled process in one container. Unique among connected agents.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AgentIdentity {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub process_name: String,
    pub pid: u32,
}

impl AgentIdentity {
    /// The stable key of this identity.
    pub fn key(&self) -> AgentKey {
        AgentKey::from(self)
    }
}

/// A stable string key derived from an [`AgentIdentity`]:
/// `namespace/pod/container/process_name/pid`, with `%` and `/` inside the parts
/// percent-encoded so that distinct identities always give distinct keys. A string so it can key
/// JSON maps.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct AgentKey(String);

impl AgentKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&AgentIdentity> for AgentKey {
    fn from(id: &AgentIdentity) -> AgentKey {
        fn escape(part: &str) -> String {
            part.replace('%', "%25").replace('/', "%2F")
        }
        AgentKey(format!(
            "{}/{}/{}/{}/{}",
            escape(&id.namespace),
            escape(&id.pod),
            escape(&id.container),
            escape(&id.process_name),
            id.pid
        ))
    }
}

impl fmt::Display for AgentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How an agent profiles its process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Backend {
    /// Nsight Systems (`nsys`) collects the report.
    Nsys,
    /// Lightweight NVTX range collection.
    Nvtx,
    /// GPU kernels, copies and CUDA API calls through CUPTI (built in, no nsys).
    Cupti,
    /// NVTX ranges and GPU activity through CUPTI (built in).
    #[serde(rename = "nvtx+cupti")]
    NvtxCupti,
}

impl Backend {
    /// Every backend, in the order of [`Backend::as_str`]'s names.
    pub const ALL: [Backend; 4] = [
        Backend::Nsys,
        Backend::Nvtx,
        Backend::Cupti,
        Backend::NvtxCupti,
    ];

    /// The backend's name as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Nsys => "nsys",
            Backend::Nvtx => "nvtx",
            Backend::Cupti => "cupti",
            Backend::NvtxCupti => "nvtx+cupti",
        }
    }

    /// The backend named `name` (as [`Backend::as_str`] spells it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.as_str() == name)
    }
}

/// What an agent says about itself when it registers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AgentInfo {
    pub identity: AgentIdentity,
    #[serde(default)]
    pub tag: Tag,
    pub node: String,
    pub backend: Backend,
    /// Free-form notes from the agent (versions, warnings) shown in status.
    #[serde(default)]
    pub diagnostics: Vec<String>,
}

impl AgentInfo {
    pub fn key(&self) -> AgentKey {
        self.identity.key()
    }
}

/// Whether a session accepts new collections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum SessionState {
    Open,
    Ended,
}

impl SessionState {
    /// The state's name as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Open => "open",
            SessionState::Ended => "ended",
        }
    }

    /// Parses a serialized name (`open`, `ended`).
    pub fn parse(raw: &str) -> Option<SessionState> {
        [SessionState::Open, SessionState::Ended]
            .into_iter()
            .find(|s| s.as_str() == raw)
    }
}

/// A user's profiling session on one tag: a sequence of collections.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Session {
    pub id: SessionId,
    pub tag: Tag,
    pub title: Option<Title>,
    pub state: SessionState,
    pub created_at: Millis,
    pub ended_at: Option<Millis>,
    pub collections: Vec<Collection>,
}

impl Session {
    pub fn collection(&self, id: CollectionId) -> Option<&Collection> {
        self.collections.iter().find(|c| c.id == id)
    }

    pub fn collection_mut(&mut self, id: CollectionId) -> Option<&mut Collection> {
        self.collections.iter_mut().find(|c| c.id == id)
    }

    /// The collection currently in [`CollectionState::Collecting`], if any.
    pub fn collecting(&self) -> Option<&Collection> {
        self.collections
            .iter()
            .rev()
            .find(|c| c.state == CollectionState::Collecting)
    }

    /// The ID the next collection gets; `None` only after `u32::MAX` collections.
    pub fn next_collection_id(&self) -> Option<CollectionId> {
        match self.collections.iter().map(|c| c.id).max() {
            None => Some(CollectionId::FIRST),
            Some(last) => last.next(),
        }
    }
}

/// Where a collection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum CollectionState {
    /// START was sent; agents are profiling.
    Collecting,
    /// STOP was sent; waiting for agents to upload.
    Stopping,
    /// Every agent uploaded its report.
    Completed,
    /// Every agent settled, but some failed, timed out or were lost.
    Incomplete,
}

impl CollectionState {
    /// The state's name as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            CollectionState::Collecting => "collecting",
            CollectionState::Stopping => "stopping",
            CollectionState::Completed => "completed",
            CollectionState::Incomplete => "incomplete",
        }
    }

    /// Collecting or Stopping: agents may still change the collection.
    pub fn is_open(self) -> bool {
        matches!(
            self,
            CollectionState::Collecting | CollectionState::Stopping
        )
    }
}

/// One START..STOP cycle of a session, with what happened at each agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Collection {
    pub id: CollectionId,
    pub started_at: Millis,
    pub stop_requested_at: Option<Millis>,
    pub completed_at: Option<Millis>,
    pub state: CollectionState,
    pub agents: BTreeMap<AgentKey, AgentOutcome>,
}

/// What happened at one agent in one collection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum AgentOutcome {
    /// START was sent (or is due when the agent reconnects).
    Pending,
    /// The agent acknowledged START.
    Started,
    /// STOP was sent (or is due when the agent reconnects).
    StopSent,
    /// The agent uploaded its report under these object keys.
    Uploaded { keys: Vec<String> },
    /// The agent reported an error.
    Failed { reason: String },
    /// The agent did not upload within the upload timeout after STOP.
    TimedOut,
    /// The agent went silent for longer than the heartbeat timeout before uploading.
    Lost,
}

impl AgentOutcome {
    /// The state's name as serialized (`pending`, `started`, `stopSent`, `uploaded`, ...).
    pub fn state_name(&self) -> &'static str {
        match self {
            AgentOutcome::Pending => "pending",
            AgentOutcome::Started => "started",
            AgentOutcome::StopSent => "stopSent",
            AgentOutcome::Uploaded { .. } => "uploaded",
            AgentOutcome::Failed { .. } => "failed",
            AgentOutcome::TimedOut => "timedOut",
            AgentOutcome::Lost => "lost",
        }
    }

    /// Uploaded, Failed, TimedOut or Lost: nothing more is expected from the agent, so the
    /// collection may complete. (A Lost agent that reconnects while the collection is still open
    /// resumes, see `Coordinator::register_agent`.)
    pub fn is_settled(&self) -> bool {
        matches!(
            self,
            AgentOutcome::Uploaded { .. }
                | AgentOutcome::Failed { .. }
                | AgentOutcome::TimedOut
                | AgentOutcome::Lost
        )
    }

    /// Pending or Started: the agent is (or should be) profiling.
    pub fn is_profiling(&self) -> bool {
        matches!(self, AgentOutcome::Pending | AgentOutcome::Started)
    }

    /// Why the agent failed, for `failed`.
    pub fn reason(&self) -> Option<&str> {
        match self {
            AgentOutcome::Failed { reason } => Some(reason),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Backend;

    #[test]
    fn backends_round_trip_by_the_names_agents_register_with() {
        for b in Backend::ALL {
            assert_eq!(Backend::parse(b.as_str()), Some(b));
            let json = serde_json::to_string(&b).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", b.as_str()));
        }
        assert_eq!(Backend::parse("gpu"), None);
    }
}
