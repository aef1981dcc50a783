//! Loading and calling recipe components. Owns the wasmtime `Engine`, the compiled-component
//! cache and the per-call sandbox (a fresh `Store` with fuel and memory limits). It does not
//! touch reports or storage.

use std::{
    collections::HashMap,
    path::Path,
    sync::{Arc, Mutex},
};

use sha2::{Digest, Sha256};
use wasmtime::{
    component::{Component, HasSelf, Linker},
    Config, Engine, Store, StoreLimits, StoreLimitsBuilder,
};

mod bindings {
    wasmtime::component::bindgen!({
        world: "recipe",
        path: "../../wit",
    });
}

pub use bindings::nsight::recipe::types::{Argument, RecipeInfo};
use bindings::{nsight::recipe::host, Recipe};

/// What one recipe call may use.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Wasm fuel (roughly, instructions) per call.
    pub fuel: u64,
    /// Linear memory per instance, in bytes.
    pub memory_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            fuel: 10_000_000_000,
            memory_bytes: 512 << 20,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecipeHostError {
    #[error("cannot configure the Wasm engine")]
    Engine(#[source] wasmtime::Error),
    #[error("cannot read recipe component {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid recipe component")]
    Compile {
        path: String,
        #[source]
        source: wasmtime::Error,
    },
    #[error("recipe component does not fit the recipe world (wit/recipe.wit)")]
    Instantiate(#[source] wasmtime::Error),
    #[error("recipe call `{call}` failed (trap, fuel or memory limit)")]
    Call {
        call: &'static str,
        #[source]
        source: wasmtime::Error,
    },
}

/// Per-call state: the limits and the log lines the recipe wrote.
struct CallState {
    limits: StoreLimits,
    log: Vec<(host::Level, String)>,
}

impl host::Host for CallState {
    fn log(&mut self, level: host::Level, message: String) {
        tracing::debug!(?level, %message, "recipe log");
        self.log.push((level, message));
    }
}

impl bindings::nsight::recipe::types::Host for CallState {}

/// Compiles recipe components once and runs each call in a fresh sandbox.
pub struct RecipeHost {
    engine: Engine,
    linker: Linker<CallState>,
    limits: Limits,
    compiled: Mutex<HashMap<[u8; 32], Arc<Component>>>,
}

impl std::fmt::Debug for RecipeHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecipeHost")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl RecipeHost {
    pub fn new(limits: Limits) -> Result<Self, RecipeHostError> {
        let mut config = Config::new();
        config.consume_fuel(true);
        let engine = Engine::new(&config).map_err(RecipeHostError::Engine)?;
        let mut linker = Linker::new(&engine);
        Recipe::add_to_linker::<_, HasSelf<CallState>>(&mut linker, |s| s)
            .map_err(RecipeHostError::Engine)?;
        Ok(Self {
            engine,
            linker,
            limits,
            compiled: Mutex::new(HashMap::new()),
        })
    }

    /// Compiles (or takes from the cache, by content digest) the component at `path`.
    pub fn load(&self, path: &Path) -> Result<Arc<Component>, RecipeHostError> {
        let bytes = std::fs::read(path).map_err(|source| RecipeHostError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        if let Some(c) = self.cache().get(&digest) {
            return Ok(Arc::clone(c));
        }
        let component =
            Component::new(&self.engine, &bytes).map_err(|source| RecipeHostError::Compile {
                path: path.display().to_string(),
                source,
            })?;
        let component = Arc::new(component);
        self.cache().insert(digest, Arc::clone(&component));
        Ok(component)
    }

    /// Number of distinct compiled components held.
    pub fn cached_components(&self) -> usize {
        self.cache().len()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Arc<Component>>> {
        // A poisoned cache only means another thread panicked mid-insert; the map is still valid.
        self.compiled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn store(&self) -> Result<Store<CallState>, RecipeHostError> {
        let limits = StoreLimitsBuilder::new()
            .memory_size(self.limits.memory_bytes)
            .instances(4)
            .build();
        let mut store = Store::new(
            &self.engine,
            CallState {
                limits,
                log: Vec::new(),
            },
        );
        store.limiter(|s| &mut s.limits);
        store
            .set_fuel(self.limits.fuel)
            .map_err(RecipeHostError::Engine)?;
        Ok(store)
    }

    /// Calls the recipe's `describe` in a fresh sandbox.
    pub fn describe(&self, component: &Component) -> Result<RecipeInfo, RecipeHostError> {
        let mut store = self.store()?;
        let recipe = Recipe::instantiate(&mut store, component, &self.linker)
            .map_err(RecipeHostError::Instantiate)?;
        recipe
            .call_describe(&mut store)
            .map_err(|source| RecipeHostError::Call {
                call: "describe",
                source,
            })
    }
}
