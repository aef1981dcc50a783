//! The agent channel is mutual TLS: an agent without a certificate, or with one from another
//! CA, never registers; one with the coordinator's agent certificate does.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

use std::time::Duration;

use nsight_e2e::{
    platform::{tls_dir, CoordinatorProcess, SimAgents},
    TempDir,
};

#[test]
fn only_agents_with_a_certificate_from_the_coordinators_ca_register() {
    let dir = TempDir::new("agent-tls");
    let coordinator = CoordinatorProcess::start(&dir.path().join("state"), 15_000);
    // Another coordinator's certificates: a valid set, from the wrong CA.
    let stranger = CoordinatorProcess::start(&dir.path().join("stranger"), 15_000);
    let url = coordinator.grpc_url();

    let plaintext = SimAgents::start_with_tls(
        dir.path(),
        &format!("http://{}", coordinator.grpc),
        None,
        1,
        "default",
        "plain",
    );
    let foreign = SimAgents::start_with_tls(
        dir.path(),
        &url,
        Some(&tls_dir(&stranger.state_dir)),
        1,
        "default",
        "foreign",
    );
    let trusted = SimAgents::start(dir.path(), &coordinator, 1, "default", "trusted");

    assert!(
        trusted.wait_count("registered", 1, Duration::from_secs(20)),
        "{:?}",
        trusted.events()
    );
    // Give the others several reconnect attempts.
    assert!(plaintext.wait_count("disconnected", 2, Duration::from_secs(20)));
    assert!(foreign.wait_count("disconnected", 2, Duration::from_secs(20)));
    assert_eq!(plaintext.count("registered"), 0, "{:?}", plaintext.events());
    assert_eq!(foreign.count("registered"), 0, "{:?}", foreign.events());

    let status = coordinator.get("/v1/status");
    let agents = status["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1, "{status}");
    assert_eq!(agents[0]["info"]["identity"]["pod"], "trusted-0");
}
