//! The injector webhook's serving certificate, issued by the webhook itself (the chart's
//! default; a certificate of your own is `--cert`/`--key` plus the chart's `caBundle`).
//!
//! ```text
//! start ──> Secret <release>-webhook-tls in the release namespace?
//!             yes (ca.crt, tls.crt, tls.key) ──> use it        (every replica, every restart)
//!             no  ──> certs::issue_serving(<service>.<ns>.svc...) ──> create (409: re-read)
//!       ──> MutatingWebhookConfiguration <release>-injector: every webhook's caBundle = ca.crt
//!           (again every 5 minutes: a `helm upgrade` that resets it is repaired)
//!       (the Secret is owned by that configuration: `helm uninstall` leaves neither behind)
//!       ──> serve HTTPS with tls.crt/tls.key
//! ```
//! Until the caBundle is set the API server cannot verify the webhook; the failure policy
//! (Ignore) admits Pods uninjected meanwhile, so the webhook patches it before it listens.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    api::{admissionregistration::v1::MutatingWebhookConfiguration, core::v1::Secret},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
    ByteString,
};
use kube::{api::PostParams, Api, Client};

use crate::certs::{self, Serving};

/// Where the webhook finds (or puts) its certificate and whom it tells.
#[derive(Clone, Debug)]
pub struct Issue {
    pub namespace: String,
    /// The Secret holding `ca.crt`, `tls.crt`, `tls.key`.
    pub secret: String,
    /// The webhook's Service (its DNS names go into the certificate).
    pub service: String,
    /// The MutatingWebhookConfiguration whose `caBundle` is set.
    pub configuration: String,
    pub cluster_domain: String,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read or create the Secret {0} with the webhook's certificate")]
    Secret(String, #[source] kube::Error),
    #[error("the Secret {0} lacks {1}; delete it and the webhook issues a new certificate")]
    Incomplete(String, &'static str),
    #[error("cannot issue the webhook's certificate: {0}")]
    Issue(String),
    #[error("cannot set the caBundle of MutatingWebhookConfiguration {0}")]
    CaBundle(String, #[source] kube::Error),
}

fn text(secret: &Secret, key: &'static str, name: &str) -> Result<String, Error> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
        .ok_or_else(|| Error::Incomplete(name.to_owned(), key))
}

fn from_secret(secret: &Secret, name: &str) -> Result<Serving, Error> {
    Ok(Serving {
        ca: text(secret, certs::CA_KEY, name)?,
        cert: text(secret, certs::SERVER_CERT_KEY, name)?,
        key: text(secret, certs::SERVER_KEY_KEY, name)?,
    })
}

/// The certificate in the Secret, issued and stored first when there is none. The Secret is
/// owned by the webhook configuration: `helm uninstall` removes both.
pub async fn ensure_certificate(client: &Client, issue: &Issue) -> Result<Serving, Error> {
    let configuration = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get(&issue.configuration)
        .await
        .map_err(|e| Error::CaBundle(issue.configuration.clone(), e))?;
    let owner = OwnerReference {
        api_version: "admissionregistration.k8s.io/v1".into(),
        kind: "MutatingWebhookConfiguration".into(),
        name: issue.configuration.clone(),
        uid: configuration.metadata.uid.clone().unwrap_or_default(),
        ..OwnerReference::default()
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &issue.namespace);
    let read = |e| Error::Secret(issue.secret.clone(), e);
    if let Some(existing) = secrets.get_opt(&issue.secret).await.map_err(read)? {
        return from_secret(&existing, &issue.secret);
    }
    let names = certs::service_names(&issue.service, &issue.namespace, &issue.cluster_domain);
    let serving = certs::issue_serving(&issue.service, names, certs::today())
        .map_err(|e| Error::Issue(e.to_string()))?;
    let data: BTreeMap<String, ByteString> = [
        (certs::CA_KEY, &serving.ca),
        (certs::SERVER_CERT_KEY, &serving.cert),
        (certs::SERVER_KEY_KEY, &serving.key),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
    .collect();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(issue.secret.clone()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_owned(),
                "nsight-operator".to_owned(),
            )])),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(data),
        ..Secret::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(secret = %issue.secret, "issued the webhook's serving certificate");
            Ok(serving)
        }
        // Another replica was first: use its certificate.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = secrets.get(&issue.secret).await.map_err(read)?;
            from_secret(&existing, &issue.secret)
        }
        Err(e) => Err(read(e)),
    }
}

/// Sets every webhook's `caBundle` of the configuration to `ca` (PEM) when it differs.
pub async fn set_ca_bundle(client: &Client, issue: &Issue, ca: &str) -> Result<bool, Error> {
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let fail = |e| Error::CaBundle(issue.configuration.clone(), e);
    for _ in 0..5 {
        let mut config = api.get(&issue.configuration).await.map_err(fail)?;
        let want = ByteString(ca.as_bytes().to_vec());
        let mut changed = false;
        for hook in config.webhooks.iter_mut().flatten() {
            if hook.client_config.ca_bundle.as_ref() != Some(&want) {
                hook.client_config.ca_bundle = Some(want.clone());
                changed = true;
            }
        }
        if !changed {
            return Ok(false);
        }
        match api
            .replace(&issue.configuration, &PostParams::default(), &config)
            .await
        {
            Ok(_) => {
                tracing::info!(configuration = %issue.configuration, "caBundle set");
                return Ok(true);
            }
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(e) => return Err(fail(e)),
        }
    }
    Ok(false)
}

/// Re-asserts the caBundle every 5 minutes (a `helm upgrade` may reset it).
pub fn keep_ca_bundle(client: Client, issue: Issue, ca: String) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(300)).await;
            if let Err(e) = set_ca_bundle(&client, &issue, &ca).await {
                tracing::warn!(error = %e, "caBundle not re-asserted");
            }
        }
    });
}
