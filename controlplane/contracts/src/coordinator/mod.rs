//! The coordinator's REST contract (docs/api/coordinator-rest.md): its data model as served
//! ([`model`]), the views `status` and the listings answer with ([`view`]), and the requests,
//! queries and answers of each endpoint ([`api`]).

pub mod api;
pub mod model;
pub mod session_order;
pub mod view;

pub use api::*;
pub use model::*;
pub use view::*;
