//! What tests need around the shared cluster: a namespace that goes away with the test, and a
//! description of a namespace's Pods and Events for failure messages.

use serde_json::Value;

use super::Cluster;

/// A namespace for one test, deleted (with everything in it) when dropped, passed or not.
#[derive(Debug)]
pub struct TestNamespace<'a> {
    cluster: &'a Cluster,
    pub name: String,
}

impl<'a> TestNamespace<'a> {
    /// Creates `<prefix>-<pid>`; panics with the API server's answer when it cannot.
    pub fn create(cluster: &'a Cluster, prefix: &str) -> Self {
        let name = format!("{prefix}-{}", std::process::id());
        let (status, body) = cluster.request(
            "POST",
            "/api/v1/namespaces",
            Some(&serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})),
        );
        assert_eq!(status, 201, "create namespace {name}: {body}");
        Self { cluster, name }
    }
}

impl Drop for TestNamespace<'_> {
    fn drop(&mut self) {
        self.cluster
            .request("DELETE", &format!("/api/v1/namespaces/{}", self.name), None);
    }
}

impl Cluster {
    /// The Pods of `ns` (phase, container states) and its Events, for failure messages.
    pub fn describe_namespace(&self, ns: &str) -> String {
        let (_, pods) = self.request("GET", &format!("/api/v1/namespaces/{ns}/pods"), None);
        let (_, events) = self.request("GET", &format!("/api/v1/namespaces/{ns}/events"), None);
        let pods: Vec<String> = pods["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                format!(
                    "{} {} init={} containers={}",
                    p["metadata"]["name"],
                    p["status"]["phase"],
                    p["status"]["initContainerStatuses"],
                    p["status"]["containerStatuses"]
                )
            })
            .collect();
        let events: Vec<String> = events["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                format!(
                    "{} {}: {}",
                    e["involvedObject"]["name"], e["reason"], e["message"]
                )
            })
            .collect();
        format!("pods:\n{}\nevents:\n{}", pods.join("\n"), events.join("\n"))
    }

    /// POSTs `object` to `collection` and expects 201.
    pub fn create(&self, collection: &str, object: &Value) -> Value {
        let (status, body) = self.request("POST", collection, Some(object));
        assert_eq!(status, 201, "POST {collection}: {body}");
        body
    }
}
