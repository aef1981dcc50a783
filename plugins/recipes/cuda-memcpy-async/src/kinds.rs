//! Memory kind labels (`srcKind`, `dstKind` of a copy): from the report's `ENUM_CUDA_MEM_KIND`,
//! else nsys's own numbering built in (the exports without the table use it too: a 2022.1
//! export's host-to-device copies from pinned memory are 1 -> 2).

use std::collections::HashMap;

use nsight_recipe_sdk::{Schema, Value};

pub type Labels = HashMap<i64, String>;

const KIND_TABLE: &str = "ENUM_CUDA_MEM_KIND";

/// nsys's memory kinds, as `ENUM_CUDA_MEM_KIND.label` names them.
const BUILT_IN: [(i64, &str); 8] = [
    (0, "Pageable"),
    (1, "Pinned"),
    (2, "Device"),
    (3, "Array"),
    (4, "Managed"),
    (5, "Device Static"),
    (6, "Managed Static"),
    (7, "Unknown"),
];

/// Kind -> label: the report's table where it has one, the built-in labels for the rest.
pub fn memory_kind_labels(schema: &Schema<'_>) -> Result<Labels, String> {
    let mut labels: Labels = HashMap::new();
    if schema.has_table(KIND_TABLE) {
        let label = if schema.columns(KIND_TABLE).iter().any(|c| c == "label") {
            "coalesce(label, name)"
        } else {
            "name"
        };
        schema.report().query(
            &format!("SELECT id, {label} FROM {KIND_TABLE}"),
            &[],
            &mut |row| {
                if let [Value::Int(id), Value::Text(l)] = row {
                    labels.insert(*id, l.clone());
                }
                Ok(())
            },
        )?;
    }
    for (id, label) in BUILT_IN {
        labels.entry(id).or_insert_with(|| label.to_owned());
    }
    Ok(labels)
}
