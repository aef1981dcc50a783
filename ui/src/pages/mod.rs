//! The UI's pages, one module each; they fetch through `crate::api` and render the contract's
//! types.

pub mod sessions;
