//! The `nvtx_sum` recipe (NVTX range summary), as a component of the `recipe` world.
//!
//! For now it carries the recipe's description and arguments; the statistics arrive with the
//! report query interface of the analysis service.

/// The canonical-ABI glue generated from wit/recipe.wit, and the export of this recipe.
#[allow(
    unsafe_code,
    reason = "wit-bindgen generates the canonical ABI glue as unsafe fns"
)]
mod component {
    wit_bindgen::generate!({
        world: "recipe",
        path: "../../../wit",
    });

    use super::NvtxSum;
    export!(NvtxSum);

    pub use nsight::recipe::{
        host::{log, Level},
        types::Argument,
    };
}

use component::{log, Argument, Guest, Level, RecipeInfo};

struct NvtxSum;

impl Guest for NvtxSum {
    fn describe() -> RecipeInfo {
        log(Level::Debug, "nvtx_sum: describe");
        RecipeInfo {
            name: "nvtx_sum".into(),
            display_name: "NVTX Range Summary".into(),
            description: "Time spent in each NVTX range (push/pop and start/end), per range name \
                          and style: count, total, average, median, min, max and standard \
                          deviation, sorted by total time."
                .into(),
            arguments: vec![
                Argument {
                    name: "timeunit".into(),
                    description: "Unit of the time columns: nsec, usec, msec or sec.".into(),
                    default_value: Some("nsec".into()),
                },
                Argument {
                    name: "filter-time".into(),
                    description: "Keep only ranges inside <start>/<end> (ns since session start)."
                        .into(),
                    default_value: None,
                },
            ],
        }
    }
}
