//! The analysis service: recipes as sandboxed Wasm components of the `recipe` world (wit/).
//!
//! ```text
//!  recipes dir ──load──> RecipeHost (compile once, cache by sha256)
//!                            │ new Store per call: fuel + memory limits
//!                            v
//!                        component ──describe()──> RecipeInfo
//! ```

pub mod recipe_host;

pub use recipe_host::{Limits, RecipeHost, RecipeHostError, RecipeInfo};
