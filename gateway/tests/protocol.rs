//! The SotW and delta state machines and the snapshot cache, driven directly (no network):
//! initial request, ACK, NACK, wildcard, removal, reconnect.

#![allow(clippy::unwrap_used, reason = "tests")]

use std::net::SocketAddr;

use nsight_gateway::{
    cache::{node_id, Snapshot, SnapshotCache, SnapshotError},
    ir::{GatewayIr, Route},
    protocol::{delta::DeltaStream, sotw::SotwStream, Event, ProtocolError},
    resources::{ResourceType, Resources},
    translate::translate,
};
use xds_api::pb::{
    envoy::{
        config::core::v3::Node,
        service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest, DiscoveryResponse},
    },
    google::rpc::Status,
};

const NODE: &str = "nsight-gateway/test/gw";

fn addr(port: u16) -> SocketAddr {
    ([127, 0, 0, 1], port).into()
}

fn ir_with(extra_route: Option<&str>) -> GatewayIr {
    let mut ir = GatewayIr::local()
        .listen("127.0.0.1", 18888, 19000)
        .coordinator(addr(8081))
        .ui(addr(8084))
        .build()
        .unwrap();
    if let Some(prefix) = extra_route {
        let l = ir.listener_mut("gateway").unwrap();
        l.routes.insert(0, Route::api(prefix, "coordinator"));
    }
    ir
}

fn snapshot(version: u64, ir: &GatewayIr) -> Snapshot {
    Snapshot::new(version, translate(ir).unwrap()).unwrap()
}

fn req(kind: ResourceType, names: &[&str], version: &str, nonce: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        node: Some(Node {
            id: NODE.into(),
            ..Default::default()
        }),
        type_url: kind.type_url().into(),
        resource_names: names.iter().map(|s| s.to_string()).collect(),
        version_info: version.into(),
        response_nonce: nonce.into(),
        ..Default::default()
    }
}

fn ack_of(r: &DiscoveryResponse, kind: ResourceType, names: &[&str]) -> DiscoveryRequest {
    req(kind, names, &r.version_info, &r.nonce)
}

#[test]
fn sotw_initial_request_gets_every_cluster_then_ack_waits_for_a_change() {
    let s1 = snapshot(1, &ir_with(None));
    let mut stream = SotwStream::new();
    let step = stream
        .on_request(&req(ResourceType::Cluster, &[], "", ""), Some(&s1))
        .unwrap();
    assert_eq!(step.responses.len(), 1);
    let r = &step.responses[0];
    assert_eq!(r.resources.len(), 2, "wildcard: both clusters");
    assert_eq!(r.version_info, s1.type_version(ResourceType::Cluster));

    let step = stream
        .on_request(&ack_of(r, ResourceType::Cluster, &[]), Some(&s1))
        .unwrap();
    assert!(step.responses.is_empty(), "nothing new after the ACK");
    assert_eq!(
        step.events,
        vec![Event::Ack {
            kind: ResourceType::Cluster,
            version: r.version_info.clone()
        }]
    );
    // Same snapshot again: nothing to send.
    assert!(stream.on_snapshot(&s1).is_empty());
}

#[test]
fn sotw_sends_only_the_types_that_changed_and_only_requested_route_names() {
    let s1 = snapshot(1, &ir_with(None));
    let mut stream = SotwStream::new();
    let c = stream
        .on_request(&req(ResourceType::Cluster, &[], "", ""), Some(&s1))
        .unwrap()
        .responses
        .remove(0);
    stream
        .on_request(&ack_of(&c, ResourceType::Cluster, &[]), Some(&s1))
        .unwrap();
    let names = ["gateway-routes"];
    let r = stream
        .on_request(&req(ResourceType::Route, &names, "", ""), Some(&s1))
        .unwrap()
        .responses
        .remove(0);
    assert_eq!(r.resources.len(), 1, "only the named route configuration");
    stream
        .on_request(&ack_of(&r, ResourceType::Route, &names), Some(&s1))
        .unwrap();

    let s2 = snapshot(2, &ir_with(Some("/new/")));
    let pushed = stream.on_snapshot(&s2);
    assert_eq!(
        pushed.len(),
        1,
        "clusters unchanged, routes changed: {pushed:?}"
    );
    assert_eq!(pushed[0].type_url, ResourceType::Route.type_url());
    assert_eq!(pushed[0].version_info, s2.type_version(ResourceType::Route));
}

#[test]
fn sotw_nack_is_reported_and_the_same_version_is_not_resent() {
    let s1 = snapshot(1, &ir_with(None));
    let mut stream = SotwStream::new();
    let l = stream
        .on_request(&req(ResourceType::Listener, &[], "", ""), Some(&s1))
        .unwrap()
        .responses
        .remove(0);
    let mut nack = req(ResourceType::Listener, &[], "", &l.nonce);
    nack.error_detail = Some(Status {
        code: 3,
        message: "Proto constraint validation failed".into(),
        details: vec![],
    });
    let step = stream.on_request(&nack, Some(&s1)).unwrap();
    assert!(step.responses.is_empty(), "not the same bad version again");
    assert_eq!(
        step.events,
        vec![Event::Nack {
            kind: ResourceType::Listener,
            version: l.version_info.clone(),
            code: 3,
            message: "Proto constraint validation failed".into()
        }]
    );
    // A fixed configuration goes out at once.
    let mut fixed = ir_with(None);
    fixed.listener_mut("gateway").unwrap().stream_idle_timeout = std::time::Duration::from_secs(7);
    let s2 = snapshot(2, &fixed);
    let pushed = stream.on_snapshot(&s2);
    assert_eq!(pushed.len(), 1);
    assert_eq!(
        pushed[0].version_info,
        s2.type_version(ResourceType::Listener)
    );
}

#[test]
fn sotw_stale_nonce_is_ignored_and_one_response_per_type_is_in_flight() {
    let s1 = snapshot(1, &ir_with(None));
    let s2 = snapshot(2, &ir_with(Some("/a/")));
    let mut stream = SotwStream::new();
    let first = stream
        .on_request(
            &req(ResourceType::Route, &["gateway-routes"], "", ""),
            Some(&s1),
        )
        .unwrap()
        .responses
        .remove(0);
    // Not acknowledged yet: the new snapshot waits.
    assert!(stream.on_snapshot(&s2).is_empty());
    let step = stream
        .on_request(
            &req(ResourceType::Route, &["gateway-routes"], "", "999"),
            Some(&s2),
        )
        .unwrap();
    assert!(
        step.responses.is_empty() && step.events.is_empty(),
        "stale nonce"
    );
    // The ACK of the first response releases the newer version.
    let step = stream
        .on_request(
            &ack_of(&first, ResourceType::Route, &["gateway-routes"]),
            Some(&s2),
        )
        .unwrap();
    assert_eq!(step.responses.len(), 1);
    assert_eq!(
        step.responses[0].version_info,
        s2.type_version(ResourceType::Route)
    );
}

#[test]
fn sotw_removal_is_omission_for_wildcard_types() {
    let full = GatewayIr::local()
        .listen("127.0.0.1", 1, 2)
        .coordinator(addr(1))
        .storage(addr(2))
        .build()
        .unwrap();
    let smaller = GatewayIr::local()
        .listen("127.0.0.1", 1, 2)
        .coordinator(addr(1))
        .build()
        .unwrap();
    let mut stream = SotwStream::new();
    let l = stream
        .on_request(
            &req(ResourceType::Listener, &[], "", ""),
            Some(&snapshot(1, &full)),
        )
        .unwrap()
        .responses
        .remove(0);
    assert_eq!(l.resources.len(), 2);
    stream
        .on_request(
            &ack_of(&l, ResourceType::Listener, &[]),
            Some(&snapshot(1, &full)),
        )
        .unwrap();
    let pushed = stream.on_snapshot(&snapshot(2, &smaller));
    assert_eq!(pushed[0].resources.len(), 1, "the storage listener is gone");
}

#[test]
fn sotw_reconnect_gets_the_current_state_even_at_the_same_version() {
    let s1 = snapshot(1, &ir_with(None));
    let mut stream = SotwStream::new();
    let version = s1.type_version(ResourceType::Cluster).to_string();
    // A new stream from an Envoy that already has this version: it still gets an answer.
    let step = stream
        .on_request(&req(ResourceType::Cluster, &[], &version, ""), Some(&s1))
        .unwrap();
    assert_eq!(step.responses.len(), 1);
}

#[test]
fn sotw_without_snapshot_waits_and_the_first_request_must_name_the_node() {
    let mut stream = SotwStream::new();
    let mut anonymous = req(ResourceType::Cluster, &[], "", "");
    anonymous.node = None;
    assert_eq!(
        stream.on_request(&anonymous, None).unwrap_err(),
        ProtocolError::NoNodeId
    );
    let step = stream
        .on_request(&req(ResourceType::Cluster, &[], "", ""), None)
        .unwrap();
    assert!(step.responses.is_empty());
    let s1 = snapshot(1, &ir_with(None));
    assert_eq!(
        stream.on_snapshot(&s1).len(),
        1,
        "sent when the snapshot arrives"
    );
    let mut unknown = req(ResourceType::Cluster, &[], "", "");
    unknown.type_url = "type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint".into();
    assert!(matches!(
        stream.on_request(&unknown, None),
        Err(ProtocolError::UnknownType(_))
    ));
}

fn delta_req(kind: ResourceType, subscribe: &[&str], nonce: &str) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        node: Some(Node {
            id: NODE.into(),
            ..Default::default()
        }),
        type_url: kind.type_url().into(),
        resource_names_subscribe: subscribe.iter().map(|s| s.to_string()).collect(),
        response_nonce: nonce.into(),
        ..Default::default()
    }
}

#[test]
fn delta_sends_only_changes_and_removals() {
    let full = GatewayIr::local()
        .listen("127.0.0.1", 1, 2)
        .coordinator(addr(1))
        .ui(addr(3))
        .storage(addr(2))
        .build()
        .unwrap();
    let mut changed = full.clone();
    changed.upstreams.retain(|u| u.name != "storage");
    changed.listeners.retain(|l| l.name != "storage-proxy");
    changed.upstreams[0].connect_timeout = std::time::Duration::from_secs(9);

    let mut stream = DeltaStream::new();
    let s1 = snapshot(1, &full);
    let r = stream
        .on_request(&delta_req(ResourceType::Cluster, &[], ""), Some(&s1))
        .unwrap()
        .responses
        .remove(0);
    assert_eq!(r.resources.len(), 3, "wildcard: every cluster");
    let step = stream
        .on_request(&delta_req(ResourceType::Cluster, &[], &r.nonce), Some(&s1))
        .unwrap();
    assert!(step.responses.is_empty());
    assert!(matches!(step.events[0], Event::Ack { .. }));

    let pushed = stream.on_snapshot(&snapshot(2, &changed));
    assert_eq!(pushed.len(), 1);
    let names: Vec<&str> = pushed[0]
        .resources
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(names, ["coordinator"], "only the changed cluster");
    assert_eq!(pushed[0].removed_resources, ["storage"]);
}

#[test]
fn delta_reconnect_with_initial_versions_resends_nothing_unchanged_and_nack_is_reported() {
    let s1 = snapshot(1, &ir_with(None));
    let mut first = DeltaStream::new();
    let r = first
        .on_request(
            &delta_req(ResourceType::Route, &["gateway-routes"], ""),
            Some(&s1),
        )
        .unwrap()
        .responses
        .remove(0);
    assert_eq!(r.resources.len(), 1);

    let mut nack = delta_req(ResourceType::Route, &[], &r.nonce);
    nack.error_detail = Some(Status {
        code: 13,
        message: "bad route".into(),
        details: vec![],
    });
    let step = first.on_request(&nack, Some(&s1)).unwrap();
    assert!(step.responses.is_empty());
    assert!(matches!(&step.events[0], Event::Nack { message, .. } if message == "bad route"));

    // Reconnect: Envoy declares what it has; the initial answer is empty but present.
    let mut second = DeltaStream::new();
    let mut again = delta_req(ResourceType::Route, &["gateway-routes"], "");
    again
        .initial_resource_versions
        .insert("gateway-routes".into(), r.resources[0].version.clone());
    let step = second.on_request(&again, Some(&s1)).unwrap();
    assert_eq!(step.responses.len(), 1);
    assert!(step.responses[0].resources.is_empty());
}

#[test]
fn delta_unsubscribe_forgets_a_route() {
    let s1 = snapshot(1, &ir_with(None));
    let mut stream = DeltaStream::new();
    let r = stream
        .on_request(
            &delta_req(ResourceType::Route, &["gateway-routes"], ""),
            Some(&s1),
        )
        .unwrap()
        .responses
        .remove(0);
    let mut unsub = delta_req(ResourceType::Route, &[], &r.nonce);
    unsub.resource_names_unsubscribe = vec!["gateway-routes".into()];
    stream.on_request(&unsub, Some(&s1)).unwrap();
    assert!(stream
        .on_snapshot(&snapshot(2, &ir_with(Some("/x/"))))
        .is_empty());
}

#[test]
fn cache_versions_grow_only_on_change_and_reject_dangling_references() {
    let cache = SnapshotCache::new();
    let node = node_id::gateway("ns", "gw");
    assert_eq!(node, "nsight-gateway/ns/gw");
    assert_eq!(
        node_id::otlp_sidecar("ns", "pod-1"),
        "nsight-otlp-sidecar/ns/pod-1"
    );
    let mut watch = cache.watch(&node);
    assert!(watch.borrow_and_update().is_none());
    assert_eq!(
        cache
            .set(&node, translate(&ir_with(None)).unwrap())
            .unwrap(),
        1
    );
    assert!(watch.has_changed().unwrap());
    watch.borrow_and_update();
    assert_eq!(
        cache
            .set(&node, translate(&ir_with(None)).unwrap())
            .unwrap(),
        1
    );
    assert!(!watch.has_changed().unwrap(), "no change, no wake-up");
    assert_eq!(
        cache
            .set(&node, translate(&ir_with(Some("/b/"))).unwrap())
            .unwrap(),
        2
    );

    let mut broken: Resources = translate(&ir_with(None)).unwrap();
    broken
        .get_mut(&ResourceType::Cluster)
        .unwrap()
        .remove("coordinator");
    let err = cache.set(&node, broken).unwrap_err();
    assert!(
        matches!(err, SnapshotError::DanglingReference { ref missing, .. } if missing == "coordinator")
    );
    assert!(err.to_string().contains("gateway-routes"));
    assert_eq!(
        cache.get(&node).unwrap().version(),
        2,
        "the last good one stays"
    );
}

#[test]
fn invalid_ir_is_refused_with_a_message_naming_the_fix() {
    let mut ir = ir_with(None);
    ir.listener_mut("gateway").unwrap().routes[0].upstream = "nope".into();
    let err = translate(&ir).unwrap_err().to_string();
    assert!(
        err.contains("`nope`") && err.contains("not defined"),
        "{err}"
    );
}
