//! A static Envoy configuration for tests of our auth filter outside xDS: one HTTP listener
//! running the filter (its JSON configuration inline) before the router, and behind it either a
//! fixed answer or one upstream, plus any clusters the filter itself calls (the issuer's JWKS).

use std::{net::SocketAddr, path::Path};

/// What the listener answers once the filter lets a request through.
#[derive(Debug, Clone, Copy)]
pub enum Behind<'a> {
    /// A 200 with this body, from Envoy itself.
    DirectResponse(&'a str),
    /// Routed to this upstream (cluster `echo`).
    Upstream(SocketAddr),
}

/// Envoy's YAML: admin on `admin`, the listener on `listen` with the Wasm `filter` configured by
/// `filter_config` (JSON), then `behind`.
pub fn auth_filter_config(
    listen: u16,
    admin: u16,
    filter: &Path,
    filter_config: &str,
    behind: Behind<'_>,
) -> String {
    auth_filter_config_with_clusters(listen, admin, filter, filter_config, behind, &[])
}

/// [`auth_filter_config`] plus plain-HTTP `STATIC` clusters `(name, address)` for the filter's
/// own calls (`dispatch_http_call`), e.g. the issuer serving the JWKS.
pub fn auth_filter_config_with_clusters(
    listen: u16,
    admin: u16,
    filter: &Path,
    filter_config: &str,
    behind: Behind<'_>,
    filter_clusters: &[(&str, SocketAddr)],
) -> String {
    let (route, mut clusters) = match behind {
        Behind::DirectResponse(body) => (
            format!("direct_response: {{ status: 200, body: {{ inline_string: \"{body}\" }} }}"),
            String::new(),
        ),
        Behind::Upstream(upstream) => (
            "route: { cluster: echo }".to_owned(),
            format!("  clusters:\n{}", static_cluster("echo", upstream)),
        ),
    };
    for (name, addr) in filter_clusters {
        if clusters.is_empty() {
            clusters.push_str("  clusters:\n");
        }
        clusters.push_str(&static_cluster(name, *addr));
    }
    format!(
        r#"
admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {admin} }} }}
static_resources:
  listeners:
  - name: gateway
    address: {{ socket_address: {{ address: 127.0.0.1, port_value: {listen} }} }}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: gateway
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{ prefix: "/" }}
                {route}
          http_filters:
{auth}          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
{clusters}"#,
        auth = wasm_auth_filter(filter, filter_config),
    )
}

/// Our auth filter as one entry of a listener's `http_filters` (YAML, indented as above): the
/// module at `filter` under V8, configured by `filter_config` (JSON, inline).
pub fn wasm_auth_filter(filter: &Path, filter_config: &str) -> String {
    let filter_config = filter_config.replace('\'', "''");
    format!(
        r#"          - name: nsight.auth
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
              config:
                name: nsight_auth
                configuration:
                  "@type": type.googleapis.com/google.protobuf.StringValue
                  value: '{filter_config}'
                vm_config:
                  runtime: envoy.wasm.runtime.v8
                  code: {{ local: {{ filename: "{filter}" }} }}
"#,
        filter = filter.display(),
    )
}

/// One plain-HTTP `STATIC` cluster (an entry of `static_resources.clusters`).
pub fn static_cluster(name: &str, addr: SocketAddr) -> String {
    format!(
        r#"  - name: {name}
    type: STATIC
    connect_timeout: 2s
    load_assignment:
      cluster_name: {name}
      endpoints:
      - lb_endpoints:
        - endpoint: {{ address: {{ socket_address: {{ address: "{ip}", port_value: {port} }} }} }}
"#,
        ip = addr.ip(),
        port = addr.port()
    )
}

/// [`auth_filter_config_with_clusters`] with the listener serving TLS (the certificate chain
/// and key as PEM files), as the OAuth2 mode requires.
pub fn auth_filter_config_tls(
    listen: u16,
    admin: u16,
    filter: &Path,
    filter_config: &str,
    behind: Behind<'_>,
    filter_clusters: &[(&str, SocketAddr)],
    (cert_chain, private_key): (&Path, &Path),
) -> String {
    let plain = auth_filter_config_with_clusters(
        listen,
        admin,
        filter,
        filter_config,
        behind,
        filter_clusters,
    );
    let tls = format!(
        r#"    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates:
            - certificate_chain: {{ filename: "{}" }}
              private_key: {{ filename: "{}" }}
      filters:"#,
        cert_chain.display(),
        private_key.display()
    );
    plain.replacen("    filter_chains:\n    - filters:", &tls, 1)
}
