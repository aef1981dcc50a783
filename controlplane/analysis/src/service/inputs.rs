//! Which stored objects a job reads and where its outputs go (pure: works on a listing).
//!
//! ```text
//!  inputs:  <tag>/<session>/<collection>/<process>_<tag>_<instance>_<stub>.sqlite  (ReportKey)
//!  outputs: <tag>/<session>/analysis/<job-id>/<file>
//! ```
//!
//! Output keys have five components, so `ReportKey::parse` never takes them for reports and
//! downloads of the session (`layout::plan_download`) skip them; `analysis` is never a
//! collection id (the coordinator numbers collections).

use nsight_storage::{
    layout::{sanitize_component, session_prefix, ReportKey, ReportKind},
    ObjectInfo,
};
use uuid::Uuid;

/// The tag when a request names none (as the coordinator's).
pub const DEFAULT_TAG: &str = "default";
/// The directory under a session that holds analysis outputs.
pub const ANALYSIS_DIR: &str = "analysis";
/// The notebook every successful job writes.
pub const NOTEBOOK_FILE: &str = "notebook.ipynb";
/// The HTML rendering of the same tables.
pub const HTML_FILE: &str = "notebook.html";

/// Whether `raw` is already a sanitised key component (what `ReportKey::parse` accepts).
pub fn is_component(raw: &str) -> bool {
    !raw.is_empty() && sanitize_component(raw) == raw
}

/// The listing prefix that holds a job's candidate reports.
pub fn listing_prefix(tag: &str, session: &str, collection: Option<&str>) -> String {
    let session = session_prefix(tag, session);
    match collection {
        Some(c) => format!("{session}{}/", sanitize_component(c)),
        None => session,
    }
}

/// The `.sqlite` reports of the session (and collection, if given) in `listing`, sorted by
/// key. Objects that are not reports of this session are ignored. `tag` is the user's (keys
/// hold it sanitised: `my_tag` -> `my-tag`).
pub fn select_reports(
    listing: &[ObjectInfo],
    tag: &str,
    session: &str,
    collection: Option<&str>,
) -> Vec<ReportKey> {
    let tag = sanitize_component(tag);
    let mut out: Vec<ReportKey> = listing
        .iter()
        .filter_map(|o| ReportKey::parse(&o.key).ok())
        .filter(|k| {
            k.kind == ReportKind::Sqlite
                && k.tag == tag
                && k.session == session
                && collection.is_none_or(|c| k.collection == c)
        })
        .collect();
    out.sort();
    out
}

/// `<tag>/<session>/analysis/<job-id>/`.
pub fn output_prefix(tag: &str, session: &str, job: Uuid) -> String {
    format!("{}{ANALYSIS_DIR}/{job}/", session_prefix(tag, session))
}

/// The CSV of one table of one report: `<collection>_<report file stem>_<table>.csv`, unique
/// within a job (a report key is unique, the recipe's table names are sanitised).
pub fn csv_file(report: &ReportKey, table: &str) -> String {
    report_file(report, table, "csv")
}

/// The SVG of one figure of one report: `<collection>_<report file stem>_<figure>.svg`.
pub fn svg_file(report: &ReportKey, figure: &str) -> String {
    report_file(report, figure, "svg")
}

fn report_file(report: &ReportKey, name: &str, ext: &str) -> String {
    let file = report.file_name();
    let stem = file.strip_suffix(".sqlite").unwrap_or(&file);
    format!(
        "{}_{stem}_{}.{ext}",
        report.collection,
        sanitize_component(name)
    )
}

/// The CSV of one table of a run over several reports (a multi-recipe): `<table>.csv`.
pub fn combined_csv_file(table: &str) -> String {
    format!("{}.csv", sanitize_component(table))
}

/// The SVG of one figure of a run over several reports: `<figure>.svg`.
pub fn combined_svg_file(figure: &str) -> String {
    format!("{}.svg", sanitize_component(figure))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(key: &str) -> ObjectInfo {
        ObjectInfo {
            key: key.into(),
            size: 1,
            last_modified: None,
            etag: None,
            checksum_sha256: None,
            sha256: None,
        }
    }

    #[test]
    fn selects_the_sessions_sqlite_reports_only() {
        let listing = [
            obj("default/s1/1/app_default_i_a.sqlite"),
            obj("default/s1/1/app_default_i_a.nsys-rep"),
            obj("default/s1/2/app_default_i_b.sqlite"),
            obj("default/s1/session.json"),
            obj("default/s1/analysis/0000/1_app_default_i_a_nvtx.csv"),
            obj("default/s2/1/app_default_i_c.sqlite"),
            obj("default/s1/1/bad name.sqlite"),
            obj("other/s1/1/app_other_i_a.sqlite"),
        ];
        let all = select_reports(&listing, "default", "s1", None);
        let keys: Vec<String> = all.iter().map(ReportKey::to_key).collect();
        assert_eq!(
            keys,
            [
                "default/s1/1/app_default_i_a.sqlite",
                "default/s1/2/app_default_i_b.sqlite"
            ]
        );
        let one = select_reports(&listing, "default", "s1", Some("2"));
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].collection, "2");
        assert!(select_reports(&listing, "default", "s3", None).is_empty());
        // A tag the coordinator accepts but keys hold sanitised.
        let mine = [obj("my-tag/s1/1/app_my-tag_i_a.sqlite")];
        assert_eq!(select_reports(&mine, "my_tag", "s1", None).len(), 1);
    }

    #[test]
    fn output_keys_are_never_reports() {
        let job = Uuid::nil();
        let prefix = output_prefix("default", "s1", job);
        assert_eq!(
            prefix,
            "default/s1/analysis/00000000-0000-0000-0000-000000000000/"
        );
        for file in ["x.csv", NOTEBOOK_FILE, HTML_FILE, "a_default_b_c.sqlite"] {
            let key = format!("{prefix}{file}");
            assert!(ReportKey::parse(&key).is_err(), "{key}");
            assert!(nsight_storage::key::validate_key(&key).is_ok(), "{key}");
        }
        let plan =
            nsight_storage::layout::plan_download(&[obj(&format!("{prefix}x.csv"))], &[], false);
        assert!(plan.items.is_empty());
    }

    #[test]
    fn csv_names_are_unique_and_plain() {
        let report = ReportKey::parse("default/s1/3/app_default_i_a.sqlite").unwrap();
        assert_eq!(
            csv_file(&report, "nvtx_sum"),
            "3_app_default_i_a_nvtx-sum.csv"
        );
        assert_eq!(csv_file(&report, "../x"), "3_app_default_i_a_x.csv");
        assert_eq!(combined_csv_file("diff_kernels"), "diff-kernels.csv");
        assert_eq!(
            svg_file(&report, "util_pid1"),
            "3_app_default_i_a_util-pid1.svg"
        );
        assert_eq!(combined_svg_file("a.b"), "a.b.svg");
    }

    #[test]
    fn components_are_checked_as_the_layout_does() {
        assert!(is_component("3f2c-11"));
        assert!(is_component("default"));
        for bad in ["", "a/b", "..", "a b", "_x", "x_"] {
            assert!(!is_component(bad), "{bad}");
        }
        assert_eq!(listing_prefix("default", "s", Some("2")), "default/s/2/");
        assert_eq!(listing_prefix("default", "s", None), "default/s/");
    }
}
