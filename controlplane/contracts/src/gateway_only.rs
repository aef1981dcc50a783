//! Services that answer only the gateway: the gateway adds a shared secret to every request it
//! forwards to the coordinator and the analysis service ([`HEADER`], overwriting any value a
//! client sent), and a service started with the same secret refuses API requests without it.
//! So the API key (or JWT, or OAuth2 session) checked at the gateway cannot be skipped by
//! connecting to a service's own port.
//!
//! ```text
//!  client ──(API key)──> gateway ──(x-nsight-gateway-token: T)──> coordinator / analysis
//!  client ─────────────────────────(no token)──────────────────> 403 problem+json
//! ```
//!
//! The token guards the API routes only; health checks (`/healthz`, probed by Envoy and the
//! kubelet without the route's headers) and signed object URLs (authenticated by their own
//! signature) stay as they are. The token type never prints its value.

use std::sync::Arc;

use subtle::ConstantTimeEq as _;

/// The request header the gateway sets to the token.
pub const HEADER: &str = "x-nsight-gateway-token";

/// The fewest characters a token may have (a generated one has 68).
pub const MIN_LEN: usize = 32;

/// The shared secret between the gateway and the services behind it.
#[derive(Clone, PartialEq, Eq)]
pub struct GatewayToken(Arc<str>);

impl std::fmt::Debug for GatewayToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GatewayToken(<redacted>)")
    }
}

/// Why a text cannot be a token; says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the gateway token is {0} characters long; it must have at least {MIN_LEN}")]
    TooShort(usize),
    #[error(
        "the gateway token may hold only visible ASCII characters (it is sent as a header value)"
    )]
    NotVisibleAscii,
}

impl GatewayToken {
    /// The token in `text` (a file's content: surrounding whitespace is ignored).
    pub fn parse(text: &str) -> Result<Self, TokenError> {
        let token = text.trim();
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError::NotVisibleAscii);
        }
        if token.len() < MIN_LEN {
            return Err(TokenError::TooShort(token.len()));
        }
        Ok(Self(token.into()))
    }

    /// The value the gateway sends. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is the token, in time that does not depend on where they differ.
    pub fn matches(&self, presented: &[u8]) -> bool {
        presented.ct_eq(self.0.as_bytes()).into()
    }
}

#[cfg(feature = "axum")]
pub use guard::{read, require};

#[cfg(feature = "axum")]
mod guard {
    use axum::{
        extract::{Request, State},
        middleware::{self, Next},
        response::{IntoResponse as _, Response},
        Router,
    };

    use super::{GatewayToken, HEADER};
    use crate::Problem;

    /// The token in the file a service's `--gateway-token-file` names (`None`: no flag), or
    /// why it cannot be used. The one file read in this crate: every server reads it the same
    /// way at start.
    pub fn read(path: Option<&std::path::Path>) -> Result<Option<GatewayToken>, String> {
        let Some(path) = path else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the gateway token file {}: {e}", path.display()))?;
        GatewayToken::parse(&text)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// `api` answering only requests that carry `token` in [`HEADER`] (others get a 403
    /// problem that says where to send them); `None` leaves `api` open (a service run by hand
    /// or in a test, with no gateway in front).
    pub fn require(api: Router, token: Option<GatewayToken>) -> Router {
        match token {
            Some(token) => api.layer(middleware::from_fn_with_state(token, check)),
            None => api,
        }
    }

    async fn check(State(token): State<GatewayToken>, request: Request, next: Next) -> Response {
        let presented = request.headers().get(HEADER).map(|v| v.as_bytes());
        if presented.is_some_and(|p| token.matches(p)) {
            return next.run(request).await;
        }
        Problem::new(
            403,
            "this service answers only requests forwarded by the platform's gateway; send the \
             request to the gateway (port 8888 unless configured otherwise) with your API key \
             or token",
        )
        .into_response()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    const T: &str = "nsk_0123456789abcdef0123456789abcdef";

    #[test]
    fn a_token_is_trimmed_checked_and_never_printed() {
        let token = GatewayToken::parse(&format!("  {T}\n")).unwrap();
        assert_eq!(token.expose(), T);
        assert_eq!(format!("{token:?}"), "GatewayToken(<redacted>)");
        assert_eq!(
            GatewayToken::parse("short"),
            Err(TokenError::TooShort(5)),
            "a short token is refused"
        );
        assert_eq!(
            GatewayToken::parse(&format!("{T} x")),
            Err(TokenError::NotVisibleAscii)
        );
    }

    #[cfg(feature = "axum")]
    #[test]
    fn a_token_file_is_read_or_refused_with_its_path() {
        let dir = std::env::temp_dir().join(format!("gateway-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        assert_eq!(read(None), Ok(None));
        let missing = read(Some(&file)).unwrap_err();
        assert!(
            missing.contains("cannot read the gateway token file") && missing.contains("token")
        );
        std::fs::write(&file, "short\n").unwrap();
        assert!(read(Some(&file)).unwrap_err().contains("at least 32"));
        std::fs::write(&file, format!("{T}\n")).unwrap();
        assert_eq!(read(Some(&file)).unwrap().unwrap().expose(), T);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_the_same_bytes_match() {
        let token = GatewayToken::parse(T).unwrap();
        assert!(token.matches(T.as_bytes()));
        assert!(!token.matches(&T.as_bytes()[1..]));
        let mut other = T.as_bytes().to_vec();
        other[20] ^= 1;
        assert!(!token.matches(&other));
        assert!(!token.matches(b""));
    }
}
