//! The agents of a tag, as `GET /status?tag` lists them: where each runs (namespace, pod,
//! container, node), what it profiles (process and pid, backend), whether it is connected and
//! when it was last heard from, what its OTLP mirroring sent and dropped (as of its last
//! heartbeat; the last export error on hover), and what it said about itself (diagnostics).

use leptos::prelude::*;
use nsight_contracts::coordinator::{AgentStatus, MirroringStatus};

use crate::format::utc;

/// The mirroring cell's text: `off` for an agent that does not mirror.
pub fn mirroring_text(m: Option<&MirroringStatus>) -> String {
    match m {
        None => "off".into(),
        Some(m) if m.not_mirrored > 0 => format!(
            "{} sent, {} dropped, {} not mirrored",
            m.sent, m.dropped, m.not_mirrored
        ),
        Some(m) => format!("{} sent, {} dropped", m.sent, m.dropped),
    }
}

fn agent_row(a: AgentStatus) -> impl IntoView {
    let id = &a.info.identity;
    let place = format!("{}/{}/{}", id.namespace, id.pod, id.container);
    let process = format!("{} (pid {})", id.process_name, id.pid);
    let connected = if a.connected { "yes" } else { "no" };
    let mirroring = mirroring_text(a.mirroring.as_ref());
    let dropped = a.mirroring.as_ref().is_some_and(|m| m.dropped > 0);
    let last_error = a
        .mirroring
        .as_ref()
        .and_then(|m| m.last_error.clone())
        .unwrap_or_default();
    view! {
        <tr data-testid="agent-row">
            <td><code>{place}</code></td>
            <td>{process}</td>
            <td>{a.info.node.clone()}</td>
            <td>{a.info.backend.as_str()}</td>
            <td data-testid="agent-connected" class:bad=!a.connected>{connected}</td>
            <td>{utc(a.last_seen.0)}</td>
            <td data-testid="agent-mirroring" class:bad=dropped title=last_error>{mirroring}</td>
            <td>{a.info.diagnostics.join("; ")}</td>
        </tr>
    }
}

/// The table of a tag's agents; `known` is how many there are in all (the list may be cut).
pub fn agents_table(agents: Vec<AgentStatus>, known: usize) -> AnyView {
    if agents.is_empty() {
        return view! {
            <p data-testid="agents-empty">"No agent of this tag has registered: start a profiled workload (nsight-agent run, or a pod the operator injects)."</p>
        }
        .into_any();
    }
    let shown = agents.len();
    let cut = (shown < known).then(|| format!(" (the first {shown} of {known})"));
    view! {
        <table data-testid="agents">
            <caption>{format!("Agents{}", cut.unwrap_or_default())}</caption>
            <thead><tr>
                <th scope="col">"Namespace/pod/container"</th><th scope="col">"Process"</th>
                <th scope="col">"Node"</th><th scope="col">"Backend"</th><th scope="col">"Connected"</th>
                <th scope="col">"Last seen"</th><th scope="col">"OTLP mirroring"</th>
                <th scope="col">"Diagnostics"</th>
            </tr></thead>
            <tbody>{agents.into_iter().map(agent_row).collect_view()}</tbody>
        </table>
    }
    .into_any()
}
