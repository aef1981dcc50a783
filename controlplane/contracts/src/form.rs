//! Argument forms for recipes: what kind of field each [`RecipeArgument`] a recipe declares is,
//! the syntax check a client runs on a typed value before sending it, and the command-line
//! arguments (`--name value`) a filled form becomes. The browser UI builds its "Run analysis"
//! form from these; the CLI may use them to check `analysis run` arguments early.
//!
//! ```text
//!  RecipeArgument {name, description, default} ──ArgumentField::of──> kind + range + choices
//!  typed values ──FormValues::command_line──> ["--timeunit", "usec", ...]  or  per-field errors
//! ```
//!
//! A recipe declares only a name, a description and a default (`wit/recipe.wit`), so the kind is
//! read from those: a numeric default makes a number field (a whole number when the description
//! counts something: "Number of ...", "Most ..."), a stated range `(1-10000` bounds it, and a
//! description ending in a list `...: a, b, c or d.` that holds the default makes a choice. Only
//! syntax is checked here; the recipe itself has the last word on every value (a job it refuses
//! fails with the recipe's reason).

use crate::analysis::RecipeArgument;

/// What a field holds.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    /// Free text (an empty value leaves the argument out).
    Text,
    /// A number, maybe whole, maybe bounded (inclusive).
    Number {
        integer: bool,
        min: Option<f64>,
        max: Option<f64>,
    },
    /// One of these words.
    Choice(Vec<String>),
}

/// One field of a recipe's argument form.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgumentField {
    pub name: String,
    pub description: String,
    pub default: Option<String>,
    pub kind: FieldKind,
}

/// The words of a trailing list `...: a, b, c or d.` (at least two single words).
fn listed_choices(description: &str) -> Option<Vec<String>> {
    let tail = description.trim().trim_end_matches('.');
    let (_, list) = tail.rsplit_once(':')?;
    let (head, last) = list.rsplit_once(" or ")?;
    let words: Vec<String> = head
        .split(',')
        .chain([last])
        .map(|w| w.trim().to_owned())
        .collect();
    let plain = |w: &String| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    };
    (words.len() >= 2 && words.iter().all(plain)).then_some(words)
}

/// A stated range `(A-B` (non-negative numbers), as in "(1-10000; ...)".
fn stated_range(description: &str) -> Option<(f64, f64)> {
    description.match_indices('(').find_map(|(at, _)| {
        let rest = description.get(at + 1..)?;
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
            .unwrap_or(rest.len());
        let (lo, hi) = rest.get(..end)?.split_once('-')?;
        Some((lo.parse().ok()?, hi.parse().ok()?))
    })
}

impl ArgumentField {
    /// The field for a declared argument.
    pub fn of(argument: &RecipeArgument) -> ArgumentField {
        let default = argument.default.clone().filter(|d| !d.is_empty());
        let description = argument.description.trim();
        let kind = match default.as_deref() {
            Some(d) if d.parse::<f64>().is_ok_and(f64::is_finite) => {
                let counts = ["Number of", "Most "]
                    .iter()
                    .any(|p| description.starts_with(p));
                let range = stated_range(description);
                FieldKind::Number {
                    integer: counts || (range.is_some() && d.parse::<i64>().is_ok()),
                    min: range.map(|r| r.0),
                    max: range.map(|r| r.1),
                }
            }
            Some(d) => match listed_choices(description) {
                Some(choices) if choices.iter().any(|c| c == d) => FieldKind::Choice(choices),
                _ => FieldKind::Text,
            },
            None => FieldKind::Text,
        };
        ArgumentField {
            name: argument.name.clone(),
            description: argument.description.clone(),
            default,
            kind,
        }
    }

    /// Checks a typed value: `Ok(None)` leaves the argument out (empty: the recipe's default
    /// applies), `Ok(Some(v))` passes `--name v`; `Err` says what is allowed.
    pub fn check(&self, raw: &str) -> Result<Option<String>, String> {
        let value = raw.trim();
        if value.is_empty() {
            return Ok(None);
        }
        if value.chars().any(char::is_control) {
            return Err("must not contain control characters".to_owned());
        }
        match &self.kind {
            FieldKind::Text => {}
            FieldKind::Choice(choices) => {
                if !choices.iter().any(|c| c == value) {
                    return Err(format!("must be one of {}", choices.join(", ")));
                }
            }
            FieldKind::Number { integer, min, max } => {
                let number = value
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite())
                    .ok_or_else(|| format!("{value:?} is not a number"))?;
                if *integer && number.fract() != 0.0 {
                    return Err(format!("{value:?} is not a whole number"));
                }
                match (min, max) {
                    (Some(lo), Some(hi)) if number < *lo || number > *hi => {
                        return Err(format!("must be between {lo} and {hi}"));
                    }
                    (Some(lo), None) if number < *lo => {
                        return Err(format!("must be at least {lo}"));
                    }
                    (None, Some(hi)) if number > *hi => {
                        return Err(format!("must be at most {hi}"));
                    }
                    _ => {}
                }
            }
        }
        Ok(Some(value.to_owned()))
    }
}

/// A recipe's whole form: its fields in declared order.
#[derive(Debug, Clone, PartialEq)]
pub struct RecipeForm {
    pub fields: Vec<ArgumentField>,
}

/// A field that failed its check, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub name: String,
    pub message: String,
}

impl RecipeForm {
    pub fn of(arguments: &[RecipeArgument]) -> RecipeForm {
        RecipeForm {
            fields: arguments.iter().map(ArgumentField::of).collect(),
        }
    }

    /// The command-line arguments of the values typed into the fields (by name; a missing
    /// name counts as empty), or every field's error.
    pub fn command_line(
        &self,
        value_of: impl Fn(&str) -> String,
    ) -> Result<Vec<String>, Vec<FieldError>> {
        let mut args = Vec::new();
        let mut errors = Vec::new();
        for field in &self.fields {
            match field.check(&value_of(&field.name)) {
                Ok(Some(v)) => args.extend([format!("--{}", field.name), v]),
                Ok(None) => {}
                Err(message) => errors.push(FieldError {
                    name: field.name.clone(),
                    message,
                }),
            }
        }
        if errors.is_empty() {
            Ok(args)
        } else {
            Err(errors)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(name: &str, description: &str, default: Option<&str>) -> RecipeArgument {
        RecipeArgument {
            name: name.into(),
            description: description.into(),
            default: default.map(Into::into),
        }
    }

    #[test]
    fn kinds_come_from_the_declaration() {
        let unit = ArgumentField::of(&arg(
            "timeunit",
            "Unit of the time columns: nsec, usec, msec or sec.",
            Some("nsec"),
        ));
        assert_eq!(
            unit.kind,
            FieldKind::Choice(vec![
                "nsec".into(),
                "usec".into(),
                "msec".into(),
                "sec".into()
            ])
        );
        let bins = ArgumentField::of(&arg(
            "bins",
            "Number of equal-width bins between the shortest and the longest kernel (1-10000; at most one per nanosecond of that range).",
            Some("30"),
        ));
        assert_eq!(
            bins.kind,
            FieldKind::Number {
                integer: true,
                min: Some(1.0),
                max: Some(10000.0)
            }
        );
        let gap = ArgumentField::of(&arg(
            "gap",
            "Show idle periods longer than this many milliseconds.",
            Some("500"),
        ));
        assert_eq!(
            gap.kind,
            FieldKind::Number {
                integer: false,
                min: None,
                max: None
            }
        );
        let query = ArgumentField::of(&arg(
            "query",
            "The statement (SELECT or a read-only PRAGMA).",
            None,
        ));
        assert_eq!(query.kind, FieldKind::Text);
        // A list that does not hold the default is prose, not choices.
        let prose = ArgumentField::of(&arg("x", "Pick: red or blue.", Some("green")));
        assert_eq!(prose.kind, FieldKind::Text);
    }

    #[test]
    fn values_are_checked_with_messages_that_say_what_is_allowed() {
        let form = RecipeForm::of(&[
            arg("timeunit", "Unit: nsec, usec, msec or sec.", Some("nsec")),
            arg("bins", "Number of bins (1-100).", Some("30")),
            arg("filter-nvtx", "Only inside a range.", None),
        ]);
        let values = |unit: &'static str, bins: &'static str, nvtx: &'static str| {
            move |name: &str| match name {
                "timeunit" => unit.to_owned(),
                "bins" => bins.to_owned(),
                "filter-nvtx" => nvtx.to_owned(),
                _ => String::new(),
            }
        };
        assert_eq!(
            form.command_line(values("usec", " 12 ", "step@app")),
            Ok(vec![
                "--timeunit".to_owned(),
                "usec".into(),
                "--bins".into(),
                "12".into(),
                "--filter-nvtx".into(),
                "step@app".into()
            ])
        );
        assert_eq!(form.command_line(values("", "", "")), Ok(vec![]));
        let errors = form.command_line(values("hours", "2.5", "")).unwrap_err();
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].name, "timeunit");
        assert_eq!(errors[0].message, "must be one of nsec, usec, msec, sec");
        assert_eq!(errors[1].message, "\"2.5\" is not a whole number");
        let errors = form.command_line(values("", "1000", "")).unwrap_err();
        assert_eq!(errors[0].message, "must be between 1 and 100");
        let errors = form.command_line(values("", "ten", "a\u{7}")).unwrap_err();
        assert_eq!(errors[0].message, "\"ten\" is not a number");
        assert_eq!(errors[1].message, "must not contain control characters");
    }
}
