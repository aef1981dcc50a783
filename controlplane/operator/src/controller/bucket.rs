//! The managed S3 server's bucket: the operator itself creates the bucket its generated
//! `storage-config.yaml` names (`render::storage::BUCKET`) with the server's root credentials,
//! once the StatefulSet has a ready replica, and reports it as the `BucketReady` condition.
//!
//! ```text
//! StatefulSet ready? ─no─> BucketReady=False ServerNotReady (the StatefulSet's status change
//!    │ yes                  triggers the next reconcile)
//! GET Secret <name>-credentials ─> storage-config.yaml ─> S3Settings (endpoint, bucket, keys)
//! CreateBucket (idempotent: BucketAlreadyOwnedByYou is success) ─> BucketReady=True | False
//! ```
//!
//! Every reconcile of a managed server asks again (one small request), so a bucket lost with an
//! emptyDir when the Pod moved comes back once the new Pod is ready. `settings_from_secret` and
//! `condition` are pure; `ensure` is the one network call.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use nsight_storage::{
    config::StorageConfig,
    s3::{S3Settings, S3Store},
};

use crate::{conditions::Cond, render::storage::STORAGE_CONFIG_KEY};

/// The condition type.
pub const CONDITION_BUCKET: &str = "BucketReady";
/// A CreateBucket that takes longer is reported as failed (and retried on the next recheck).
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Why no bucket request was made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotAttempted {
    pub reason: &'static str,
    pub message: String,
}

/// The S3 settings of the generated Secret's `storage-config.yaml`, with the endpoint replaced
/// by `endpoint` when the manager reaches the server another way (`{name}`/`{namespace}` in
/// it are the storage config's). Pure.
pub fn settings_from_secret(
    secret: Option<&Secret>,
    endpoint: Option<&str>,
    name: &str,
    namespace: &str,
) -> Result<S3Settings, NotAttempted> {
    let unreadable = |message: String| NotAttempted {
        reason: "CredentialsUnreadable",
        message,
    };
    let secret_name = crate::render::storage::credentials_secret_name(name);
    let secret = secret.ok_or_else(|| {
        unreadable(format!(
            "Secret {secret_name} (the S3 server's credentials) does not exist"
        ))
    })?;
    let text = secret
        .data
        .as_ref()
        .and_then(|d| d.get(STORAGE_CONFIG_KEY))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(STORAGE_CONFIG_KEY))
                .cloned()
        })
        .ok_or_else(|| {
            unreadable(format!(
                "Secret {secret_name} has no key {STORAGE_CONFIG_KEY}"
            ))
        })?;
    let origin = format!("key {STORAGE_CONFIG_KEY} of Secret {secret_name}");
    let loaded = StorageConfig::from_yaml(&text, &origin).map_err(|e| unreadable(e.to_string()))?;
    let StorageConfig::S3(config) = loaded.config else {
        return Err(unreadable(format!("{origin} is not an S3 storage config")));
    };
    let mut settings = S3Settings::from_config(&config);
    if let Some(endpoint) = endpoint {
        settings.endpoint_url = Some(
            endpoint
                .replace("{name}", name)
                .replace("{namespace}", namespace),
        );
        settings.force_path_style = true;
    }
    settings.connect_timeout = Duration::from_secs(3);
    // The controller retries (RECHECK); one attempt per reconcile is enough.
    settings.sdk_max_attempts = 1;
    Ok(settings)
}

/// The condition for one attempt (or for none). Pure.
pub fn condition(bucket: &str, endpoint: &str, outcome: Result<(), String>) -> Cond {
    match outcome {
        Ok(()) => Cond {
            type_: CONDITION_BUCKET,
            status: true,
            reason: "BucketExists",
            message: format!("bucket {bucket} exists at {endpoint}"),
        },
        Err(why) => Cond {
            type_: CONDITION_BUCKET,
            status: false,
            reason: "CreateBucketFailed",
            message: format!("cannot create bucket {bucket} at {endpoint}: {why}"),
        },
    }
}

/// The condition when no request is made.
pub fn not_attempted(n: NotAttempted) -> Cond {
    Cond {
        type_: CONDITION_BUCKET,
        status: false,
        reason: n.reason,
        message: n.message,
    }
}

/// Creates the bucket (or finds it there, ours); the condition saying so.
pub async fn ensure(settings: S3Settings) -> Cond {
    let bucket = settings.bucket.clone();
    let endpoint = settings.endpoint_label();
    let outcome = match S3Store::new(settings) {
        Err(e) => Err(chain(&e)),
        Ok(store) => match tokio::time::timeout(TIMEOUT, store.create_bucket()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(chain(&e)),
            Err(_) => Err(format!("no answer within {} s", TIMEOUT.as_secs())),
        },
    };
    condition(&bucket, &endpoint, outcome)
}

/// `error: cause: cause`.
fn chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn secret(yaml: &str) -> Secret {
        Secret {
            data: Some(BTreeMap::from([(
                STORAGE_CONFIG_KEY.to_owned(),
                ByteString(yaml.as_bytes().to_vec()),
            )])),
            ..Secret::default()
        }
    }

    const YAML: &str = "storage_type: s3\nbucket_name: nsight-reports\naws_access_key_id: u\n\
                        aws_secret_access_key: p\nregion_name: us-east-1\n\
                        endpoint_url: http://reports.research.svc:9000\n";

    #[test]
    fn settings_come_from_the_generated_storage_config() {
        let s = settings_from_secret(Some(&secret(YAML)), None, "reports", "research").unwrap();
        assert_eq!(s.bucket, "nsight-reports");
        assert_eq!(s.access_key_id, "u");
        assert_eq!(s.secret_access_key.expose(), "p");
        assert_eq!(
            s.endpoint_url.as_deref(),
            Some("http://reports.research.svc:9000")
        );
        assert!(s.force_path_style);
        let s = settings_from_secret(
            Some(&secret(YAML)),
            Some("http://127.0.0.1:9000/{namespace}-{name}"),
            "reports",
            "research",
        )
        .unwrap();
        assert_eq!(
            s.endpoint_url.as_deref(),
            Some("http://127.0.0.1:9000/research-reports")
        );
    }

    #[test]
    fn unreadable_credentials_say_which_secret() {
        let e = settings_from_secret(None, None, "reports", "ns").unwrap_err();
        assert_eq!(e.reason, "CredentialsUnreadable");
        assert!(e.message.contains("reports-credentials"), "{}", e.message);
        let e = settings_from_secret(Some(&Secret::default()), None, "reports", "ns").unwrap_err();
        assert!(e.message.contains(STORAGE_CONFIG_KEY), "{}", e.message);
        let e = settings_from_secret(Some(&secret("storage_type: nope\n")), None, "r", "ns")
            .unwrap_err();
        assert_eq!(e.reason, "CredentialsUnreadable");
    }

    #[test]
    fn conditions() {
        let c = condition("b", "http://e", Ok(()));
        assert!(c.status && c.reason == "BucketExists" && c.message.contains("http://e"));
        let c = condition("b", "http://e", Err("refused".into()));
        assert!(!c.status && c.reason == "CreateBucketFailed" && c.message.contains("refused"));
    }
}
