//! Turns the S3 SDK's errors into [`Cause`]s a person can act on: which server, which bucket,
//! which access key (never the secret), and what to change.
//!
//! Owns only the classification; the operations live in [`crate::s3`].

use aws_sdk_s3::{
    config::http::HttpResponse,
    error::{ProvideErrorMetadata, SdkError},
};

use crate::error::Cause;

/// What the messages name.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    pub endpoint: String,
    pub bucket: String,
    pub access_key_id: String,
}

/// The HTTP status and S3 error code of a service error, if it was one.
pub(crate) fn service_status<E>(err: &SdkError<E, HttpResponse>) -> Option<(u16, Option<String>)>
where
    E: ProvideErrorMetadata,
{
    let service = err.as_service_error()?;
    let status = err.raw_response().map_or(0, |r| r.status().as_u16());
    Some((status, service.code().map(str::to_owned)))
}

/// Classifies an SDK error.
pub(crate) fn classify<E>(ctx: &Context, err: SdkError<E, HttpResponse>) -> Cause
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    if let Some(service) = err.as_service_error() {
        let status = err.raw_response().map_or(0, |r| r.status().as_u16());
        return from_service(
            ctx,
            status,
            service.code(),
            service.message().unwrap_or_default(),
        );
    }
    match err {
        SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => Cause::Unreachable {
            endpoint: ctx.endpoint.clone(),
            source: Box::new(err),
        },
        SdkError::ResponseError(_) => Cause::Response {
            endpoint: ctx.endpoint.clone(),
            source: Box::new(err),
        },
        other => Cause::Client(Box::new(other)),
    }
}

/// Classifies a service error by its S3 code, or by its status when the response had no body
/// (HEAD requests).
pub(crate) fn from_service(ctx: &Context, status: u16, code: Option<&str>, message: &str) -> Cause {
    let credentials = |code: &str| Cause::Credentials {
        endpoint: ctx.endpoint.clone(),
        access_key_id: ctx.access_key_id.clone(),
        code: code.to_owned(),
    };
    match code {
        Some("NoSuchBucket") => Cause::NoSuchBucket {
            bucket: ctx.bucket.clone(),
            endpoint: ctx.endpoint.clone(),
        },
        Some(
            c @ ("InvalidAccessKeyId"
            | "SignatureDoesNotMatch"
            | "InvalidToken"
            | "ExpiredToken"
            | "AuthorizationHeaderMalformed"
            | "InvalidSecurity"
            | "NotSignedUp"),
        ) => credentials(c),
        Some(c @ ("AccessDenied" | "AllAccessDisabled" | "AccountProblem")) => {
            Cause::AccessDenied {
                endpoint: ctx.endpoint.clone(),
                access_key_id: ctx.access_key_id.clone(),
                bucket: ctx.bucket.clone(),
                code: c.to_owned(),
            }
        }
        Some("NoSuchKey" | "NotFound") => Cause::NotFound,
        None if status == 404 => Cause::NotFound,
        code => Cause::Server {
            endpoint: ctx.endpoint.clone(),
            status,
            code: code.unwrap_or("(no error code)").to_owned(),
            message: message.to_owned(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context {
            endpoint: "http://127.0.0.1:9000".into(),
            bucket: "reports".into(),
            access_key_id: "AKID".into(),
        }
    }

    #[test]
    fn codes_map_to_actionable_causes() {
        let c = from_service(&ctx(), 404, Some("NoSuchBucket"), "");
        assert_eq!(
            c.to_string(),
            "bucket `reports` does not exist at http://127.0.0.1:9000: create it or fix bucket_name"
        );
        let c = from_service(&ctx(), 403, Some("SignatureDoesNotMatch"), "");
        assert!(c.to_string().contains("access key `AKID`"), "{c}");
        assert!(c.to_string().contains("aws_secret_access_key"), "{c}");
        assert!(!c.is_transient());
        assert!(matches!(
            from_service(&ctx(), 403, Some("AccessDenied"), ""),
            Cause::AccessDenied { .. }
        ));
        assert!(matches!(
            from_service(&ctx(), 404, None, ""),
            Cause::NotFound
        ));
        let c = from_service(&ctx(), 503, Some("SlowDown"), "reduce your rate");
        assert!(c.is_transient());
        assert!(
            c.to_string().contains("503 SlowDown: reduce your rate"),
            "{c}"
        );
        assert!(!from_service(&ctx(), 400, Some("InvalidArgument"), "").is_transient());
    }
}
