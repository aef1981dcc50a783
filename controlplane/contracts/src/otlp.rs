//! The OTLP converter's contracts (docs/otlp.md): the span and resource attribute names that
//! place a span in a collection and carry its NVTX details (the converter reads them; the
//! agent's mirroring is to write them), its own REST routes, and their answers.
//! Plain data only: the converter owns what it does with them.

use serde::{Deserialize, Serialize};

/// Attribute names. A span attribute wins over the resource attribute of the same name.
pub mod attributes {
    /// The profiling session (a coordinator session id) the span belongs to. Required.
    pub const SESSION: &str = "nsight.session";
    /// The collection within the session. Required.
    pub const COLLECTION: &str = "nsight.collection";
    /// The coordinator tag; `default` when absent.
    pub const TAG: &str = "nsight.tag";
    /// The NVTX domain of the range (a name); the default domain when absent.
    pub const NVTX_DOMAIN: &str = "nvtx.domain";
    /// The NVTX category (an integer id).
    pub const NVTX_CATEGORY: &str = "nvtx.category";
    /// The category's name (written as an NVTX category naming event).
    pub const NVTX_CATEGORY_NAME: &str = "nvtx.category.name";
    /// The colour: an ARGB integer, or `#RRGGBB` / `#AARRGGBB` / `0x...` text.
    pub const NVTX_COLOR: &str = "nvtx.color";
    /// The payload: an integer (int64) or a double.
    pub const NVTX_PAYLOAD: &str = "nvtx.payload";
}

/// The OpenTelemetry semantic conventions the converter reads and the agent's mirroring writes.
pub mod semconv {
    /// Resource: the process id (the report's `PROCESSES.pid`).
    pub const PROCESS_PID: &str = "process.pid";
    /// Resource: the executable's name (the report's process name); else `service.name`.
    pub const PROCESS_EXECUTABLE_NAME: &str = "process.executable.name";
    pub const SERVICE_NAME: &str = "service.name";
    /// Resource: where the process runs (the report key's instance): the pod, else the host.
    pub const K8S_POD_NAME: &str = "k8s.pod.name";
    pub const HOST_NAME: &str = "host.name";
    /// Resource: the pod's namespace and the container (written by the agent's mirroring).
    pub const K8S_NAMESPACE_NAME: &str = "k8s.namespace.name";
    pub const K8S_CONTAINER_NAME: &str = "k8s.container.name";
    /// Span: the OS thread that ran the span (the range's thread); else the process's main thread.
    pub const THREAD_ID: &str = "thread.id";
    pub const THREAD_NAME: &str = "thread.name";
}

/// OTLP/HTTP traces (the converter's receiver).
pub const TRACES: &str = "/v1/traces";
/// What the converter's buffer holds (`GET`, [`CollectionStatus`] list).
pub const COLLECTIONS: &str = "/v1/collections";

/// `POST` here stops a collection and converts it ([`StopAnswer`]).
pub fn stop_path(session: &str, collection: &str) -> String {
    format!("{COLLECTIONS}/{session}/{collection}/stop")
}

/// The answer to a stop: what this conversion produced.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StopAnswer {
    pub session: String,
    pub collection: String,
    /// Spans converted by this stop.
    pub spans: u64,
    /// Storage keys of the reports this stop wrote.
    pub reports: Vec<String>,
    /// Keys stored by this stop's upload (this stop's, and any left from before).
    pub stored: Vec<String>,
    /// Keys still in the converter's spool (storage unreachable), retried in the background.
    pub pending: Vec<String>,
}

/// One collection in the converter's buffer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CollectionStatus {
    pub session: String,
    pub collection: String,
    /// A stop was asked: spans arriving later are converted on their own.
    pub stopped: bool,
    /// Bytes acknowledged and not yet sealed for conversion.
    pub active_bytes: u64,
    /// Bytes sealed and waiting for conversion and upload.
    pub sealed_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_route_names_the_collection() {
        assert_eq!(stop_path("s1", "2"), "/v1/collections/s1/2/stop");
    }
}
