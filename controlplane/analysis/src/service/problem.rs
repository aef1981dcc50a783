//! The analysis service's errors as RFC 9457 problem details (`nsight_contracts::Problem`).

pub use nsight_contracts::Problem;

use super::jobs::ServiceError;

impl From<ServiceError> for Problem {
    fn from(e: ServiceError) -> Self {
        let status = match &e {
            ServiceError::NotFound(_) => 404,
            ServiceError::Invalid(_) => 400,
            ServiceError::Conflict(_) => 409,
            ServiceError::Unavailable(_) => 503,
        };
        Self::new(status, e.to_string())
    }
}
