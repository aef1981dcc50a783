//! Scenario tests of the state machine, driven only through its public API, plus the helpers
//! they share. Each submodule covers one area: user lifecycle, agents, timeouts, restore.

mod agents;
mod lifecycle;
mod model;
mod restore;
mod timeouts;

use super::*;

const T0: Millis = Millis(1_000_000);

fn at(offset_ms: u64) -> Millis {
    Millis(T0.0 + offset_ms)
}

fn tag(name: &str) -> Tag {
    Tag::parse(name).unwrap()
}

fn agent(tag_name: &str, pod: &str) -> AgentInfo {
    AgentInfo {
        identity: AgentIdentity {
            namespace: "ml".into(),
            pod: pod.into(),
            container: "trainer".into(),
            process_name: "python".into(),
            pid: 42,
        },
        tag: tag(tag_name),
        node: "node-1".into(),
        backend: Backend::Nsys,
        diagnostics: vec![],
    }
}

fn coordinator() -> Coordinator {
    Coordinator::new(Config::default())
}

/// Registers an agent and returns its key.
fn register(c: &mut Coordinator, info: AgentInfo, now: Millis) -> AgentKey {
    c.register_agent(info, now).unwrap().value.agent
}

/// The commands sent, in order.
fn sends(effects: &[Effect]) -> Vec<(AgentKey, Command)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send { agent, command } => Some((agent.clone(), command.clone())),
            _ => None,
        })
        .collect()
}

/// The sessions to persist, in order.
fn persisted(effects: &[Effect]) -> Vec<SessionId> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Persist { session } => Some(*session),
            _ => None,
        })
        .collect()
}

fn collection(c: &Coordinator, session: SessionId, id: u32) -> Collection {
    c.session(session)
        .unwrap()
        .collection(CollectionId(id))
        .unwrap()
        .clone()
}

fn outcome(c: &Coordinator, session: SessionId, id: u32, agent: &AgentKey) -> AgentOutcome {
    collection(c, session, id).agents[agent].clone()
}

fn start_cmd(session: SessionId, id: u32) -> Command {
    Command::Start {
        session,
        collection: CollectionId(id),
    }
}

fn stop_cmd(session: SessionId, id: u32) -> Command {
    Command::Stop {
        session,
        collection: CollectionId(id),
    }
}

/// Two agents on the default tag and one on "other", registered at T0.
fn with_agents() -> (Coordinator, AgentKey, AgentKey, AgentKey) {
    let mut c = coordinator();
    let a = register(&mut c, agent("default", "pod-a"), T0);
    let b = register(&mut c, agent("default", "pod-b"), T0);
    let other = register(&mut c, agent("other", "pod-o"), T0);
    (c, a, b, other)
}
