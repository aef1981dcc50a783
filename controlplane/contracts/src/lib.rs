//! One home for every shape that crosses a process boundary over REST: what the coordinator,
//! the analysis service (jobs and report timelines: [`timeline`]), the tenant API and the OTLP
//! converter ([`otlp`], with its span attribute names) accept and answer, the problem details of
//! their refusals, and the route prefixes they are served under. Servers, the CLI and the browser
//! UI all compile against these types, so a change to the wire is a compile error in every party,
//! not an e2e failure.
//!
//! ```text
//!                   nsight-contracts (serde only; host and wasm32)
//!          ┌──────────────┬──────────────┬──────────────┐
//!          v              v              v              v
//!    coordinator,   analysis service    nsight-cloud    ui (browser)
//!    tenant API      (axum feature)       (reqwest)      (fetch)
//!   (axum feature)
//! ```
//!
//! What lives here: plain data, serde attributes, and syntax checks a client can run before
//! sending (a tag's characters, a title's length, a recipe argument's value: [`form`]), the
//! reading of the CSV tables jobs write ([`table`]) and the filtering of long lists
//! ([`listing`]). What must not: I/O (one exception: the servers' gateway token file,
//! [`gateway_only`]), clocks, state rules (who may start a collection, which job transitions are
//! allowed): those stay with the service that owns the
//! data. The OpenAPI documents in docs/api/ describe these types.

pub mod analysis;
pub mod coordinator;
pub mod form;
pub mod gateway_only;
pub mod listing;
pub mod nsys_args;
#[cfg(feature = "schema")]
pub mod openapi;
pub mod otlp;
pub mod problem;
#[cfg(feature = "axum")]
pub mod request;
pub mod routes;
pub mod table;
pub mod tenant;
pub mod timeline;

pub use problem::Problem;
