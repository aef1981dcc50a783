//! The recipes the service offers: every `*.wasm` in the recipes directory, compiled once and
//! described at start. A component that does not load or describe itself is left out with a
//! warning (the others still serve); two components with the same recipe name keep the first
//! by file name.

use std::{collections::BTreeMap, path::Path, sync::Arc};

use nsight_contracts::analysis::{RecipeArgument, RecipeView};
use wasmtime::component::Component;

use crate::{RecipeHost, RecipeInfo};

/// One offered recipe.
pub struct Recipe {
    pub info: RecipeInfo,
    pub file: String,
    pub component: Arc<Component>,
}

impl std::fmt::Debug for Recipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recipe")
            .field("name", &self.info.name)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl Recipe {
    /// The JSON of `GET recipes/{name}`.
    pub fn view(&self) -> RecipeView {
        RecipeView {
            arguments: self
                .info
                .arguments
                .iter()
                .map(|a| RecipeArgument {
                    default: a.default_value.clone(),
                    description: a.description.clone(),
                    name: a.name.clone(),
                })
                .collect(),
            description: self.info.description.clone(),
            display_name: self.info.display_name.clone(),
            name: self.info.name.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot read the recipes directory {path}: pass --recipes-dir with the compiled recipes (`cargo xtask build-wasm` puts them in $NSIGHT_WASM_DIR/recipes)")]
pub struct CatalogError {
    path: String,
    #[source]
    source: std::io::Error,
}

/// The recipes by name.
#[derive(Debug, Default)]
pub struct Catalog {
    recipes: BTreeMap<String, Recipe>,
}

impl Catalog {
    /// Loads every `*.wasm` in `dir`; returns the catalog and warnings for what was left out.
    pub fn load(host: &RecipeHost, dir: &Path) -> Result<(Self, Vec<String>), CatalogError> {
        let err = |source| CatalogError {
            path: dir.display().to_string(),
            source,
        };
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(err)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "wasm") && p.is_file())
            .collect();
        files.sort();
        // Compiling is the slow part (seconds per component in a debug build): one thread
        // per file.
        let loaded: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = files
                .iter()
                .map(|path| {
                    scope.spawn(move || {
                        host.load(path)
                            .and_then(|c| host.describe(&c).map(|info| (c, info)))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join()).collect()
        });
        let mut catalog = Self::default();
        let mut warnings = Vec::new();
        for (path, loaded) in files.iter().zip(loaded) {
            let file = path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            match loaded {
                Ok(Ok((component, info))) => {
                    if let Some(first) = catalog.recipes.get(&info.name) {
                        warnings.push(format!(
                            "{file} names itself `{}` like {}: left out",
                            info.name, first.file
                        ));
                        continue;
                    }
                    catalog.recipes.insert(
                        info.name.clone(),
                        Recipe {
                            info,
                            file,
                            component,
                        },
                    );
                }
                Ok(Err(e)) => warnings.push(format!("{file} left out: {}", super::error_chain(&e))),
                Err(_) => warnings.push(format!("{file} left out: compiling it panicked")),
            }
        }
        Ok((catalog, warnings))
    }

    pub fn get(&self, name: &str) -> Option<&Recipe> {
        self.recipes.get(name)
    }

    /// Sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Recipe> {
        self.recipes.values()
    }

    pub fn names(&self) -> Vec<&str> {
        self.recipes.keys().map(String::as_str).collect()
    }
}
