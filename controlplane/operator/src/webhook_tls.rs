//! The injector webhook's serving certificate, issued and renewed by the webhook itself (the
//! chart's default; a certificate of your own is `--cert`/`--key` plus the chart's `caBundle`,
//! and is never touched).
//!
//! ```text
//! start ──> Secret <release>-webhook-tls in the release namespace?
//!             yes (ca.crt, ca.key, tls.crt, tls.key) ──> certs::rotation: due? renew, replace
//!             no  ──> certs::issue(<service>.<ns>.svc...) ──> create (409: re-read)
//!       ──> MutatingWebhookConfiguration <release>-injector: every webhook's caBundle = ca.crt
//!       ──> serve HTTPS with tls.crt/tls.key (server::SwappableCert)
//! every 5 minutes: the same check (a renewal by this or another replica is picked up), then
//!       caBundle = ca.crt (a `helm upgrade` that resets it is repaired), then the served
//!       certificate swapped if the Secret's differs: the API server trusts the new CA first
//!       (ca.crt is a bundle of the new and the old CA while they overlap).
//!       (the Secret is owned by that configuration: `helm uninstall` leaves neither behind)
//! ```
//! Until the caBundle is set the API server cannot verify the webhook; the failure policy
//! (Ignore) admits Pods uninjected meanwhile, so the webhook patches it before it listens.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use k8s_openapi::{
    api::{admissionregistration::v1::MutatingWebhookConfiguration, core::v1::Secret},
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference},
    ByteString,
};
use kube::{api::PostParams, Api, Client};

use crate::{
    certs::{
        self,
        rotation::{self, Files},
    },
    server::SwappableCert,
};

/// Where the webhook finds (or puts) its certificate and whom it tells.
#[derive(Clone, Debug)]
pub struct Issue {
    pub namespace: String,
    /// The Secret holding `ca.crt`, `ca.key`, `tls.crt`, `tls.key`.
    pub secret: String,
    /// The webhook's Service (its DNS names go into the certificate).
    pub service: String,
    /// The MutatingWebhookConfiguration whose `caBundle` is set.
    pub configuration: String,
    pub cluster_domain: String,
}

impl Issue {
    fn wanted(&self) -> rotation::Wanted {
        let names = certs::service_names(&self.service, &self.namespace, &self.cluster_domain);
        certs::serving_wanted(&self.service, names)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read, create or replace the Secret {0} with the webhook's certificate")]
    Secret(String, #[source] kube::Error),
    #[error("the Secret {0} lacks {1}; delete it and the webhook issues a new certificate")]
    Incomplete(String, &'static str),
    #[error("cannot issue the webhook's certificate")]
    Issue(#[source] rotation::Error),
    #[error("cannot set the caBundle of MutatingWebhookConfiguration {0}")]
    CaBundle(String, #[source] kube::Error),
}

/// The PEM files of the Secret.
fn files(secret: &Secret) -> Files {
    let data = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    certs::files_of(&data)
}

/// What the webhook serves and trusts: `ca.crt` (bundle), `tls.crt`, `tls.key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Serving {
    pub ca: String,
    pub cert: String,
    pub key: String,
}

impl Serving {
    fn of(files: &Files, name: &str) -> Result<Self, Error> {
        let get = |key: &'static str| {
            files
                .get(key)
                .cloned()
                .ok_or_else(|| Error::Incomplete(name.to_owned(), key))
        };
        Ok(Self {
            ca: get(certs::CA_KEY)?,
            cert: get(certs::SERVER_CERT_KEY)?,
            key: get(certs::SERVER_KEY_KEY)?,
        })
    }
}

fn data(files: &Files) -> BTreeMap<String, ByteString> {
    files
        .iter()
        .map(|(k, v)| (k.clone(), ByteString(v.as_bytes().to_vec())))
        .collect()
}

/// The certificate in the Secret: issued and stored first when there is none, renewed and
/// stored first when `certs::rotation` says it is due. The Secret is owned by the webhook
/// configuration: `helm uninstall` removes both.
pub async fn ensure_certificate(client: &Client, issue: &Issue) -> Result<Serving, Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &issue.namespace);
    let read = |e| Error::Secret(issue.secret.clone(), e);
    let wanted = issue.wanted();
    if let Some(mut existing) = secrets.get_opt(&issue.secret).await.map_err(read)? {
        let current = files(&existing);
        let Some((renewed, reasons)) =
            rotation::rotate(&current, &wanted, certs::now()).map_err(Error::Issue)?
        else {
            return Serving::of(&current, &issue.secret);
        };
        existing.data = Some(data(&renewed));
        return match secrets
            .replace(&issue.secret, &PostParams::default(), &existing)
            .await
        {
            Ok(_) => {
                tracing::info!(
                    secret = %issue.secret,
                    reasons = %rotation::describe(&reasons),
                    "renewed the webhook's serving certificate"
                );
                Serving::of(&renewed, &issue.secret)
            }
            // Another replica renewed it first: use its certificate.
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let existing = secrets.get(&issue.secret).await.map_err(read)?;
                Serving::of(&files(&existing), &issue.secret)
            }
            Err(e) => Err(read(e)),
        };
    }
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
    let issued = certs::issue(&wanted, certs::now()).map_err(Error::Issue)?;
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
        data: Some(data(&issued)),
        ..Secret::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            tracing::info!(secret = %issue.secret, "issued the webhook's serving certificate");
            Serving::of(&issued, &issue.secret)
        }
        // Another replica was first: use its certificate.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = secrets.get(&issue.secret).await.map_err(read)?;
            Serving::of(&files(&existing), &issue.secret)
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

/// An error with its causes, `a: b: c`.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Every 5 minutes: renews the certificate when due (or picks up another replica's renewal),
/// re-asserts the caBundle (a `helm upgrade` may reset it), then serves the Secret's
/// certificate if it is not the one served. `served` is what the server started with.
pub fn keep_current(client: Client, issue: Issue, mut served: Serving, cert: Arc<SwappableCert>) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(300)).await;
            let serving = match ensure_certificate(&client, &issue).await {
                Ok(serving) => serving,
                Err(e) => {
                    tracing::warn!(error = %chain(&e), "the webhook's certificate was not checked; the current one is served");
                    served.clone()
                }
            };
            if let Err(e) = set_ca_bundle(&client, &issue, &serving.ca).await {
                tracing::warn!(error = %chain(&e), "caBundle not re-asserted");
                // The API server may not trust a new CA yet: keep serving the current one.
                continue;
            }
            if serving.cert != served.cert || serving.key != served.key {
                match cert.set(&serving.cert, &serving.key) {
                    Ok(()) => {
                        tracing::info!(secret = %issue.secret, "now serving the renewed certificate");
                        served = serving;
                    }
                    Err(e) => {
                        tracing::warn!(error = %chain(&e), "the renewed certificate cannot be served; the current one stays")
                    }
                }
            }
        }
    });
}
