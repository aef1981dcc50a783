//! The tenant routing filter: its table (JSON inside Envoy) and, for a table that parses, the
//! per-request decision on a path, tenant header and identity the client controls. Never a
//! panic; a routed request goes to a cluster the table names.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nsight_routing_filter::{route, Decision, Request, RoutingConfig};

/// A table for the request half of the input.
const TABLE: &[u8] = br#"{"tenants":[
  {"namespace":"team-a","cluster":"tenant-a","identities":["alice"]},
  {"namespace":"team-b","routes":[{"prefix":"/coordinator/","cluster":"tenant-b-coordinator"}]}],
  "identity_is_namespace":true}"#;

fuzz_target!(|data: &[u8]| {
    let _ = RoutingConfig::parse(data);
    let Ok(table) = RoutingConfig::parse(TABLE) else {
        panic!("the fuzz table parses");
    };
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\n');
    let (path, identity, tenant) = (parts.next(), parts.next(), parts.next());
    let decision = route(
        &table,
        Request {
            path,
            tenant_header: tenant,
            identity,
        },
    );
    if let Decision::Route { cluster, .. } = decision {
        assert!(
            ["tenant-a", "tenant-b-coordinator"].contains(&cluster.as_str()),
            "routed to {cluster}"
        );
    }
});
