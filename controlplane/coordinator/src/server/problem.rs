//! The coordinator's errors as RFC 9457 problem details (`nsight_contracts::Problem`).

pub use nsight_contracts::Problem;

use super::hub::HubError;
use crate::state::CoordError;

impl From<CoordError> for Problem {
    fn from(e: CoordError) -> Self {
        Self::new(e.kind().http_status(), e.to_string())
    }
}

impl From<HubError> for Problem {
    fn from(e: HubError) -> Self {
        match e {
            HubError::Refused(e) => e.into(),
            HubError::Store(source) => {
                tracing::error!(error = %source, "state store failed");
                Self::new(503, HubError::Store(source).to_string())
            }
        }
    }
}
