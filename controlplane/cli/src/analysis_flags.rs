//! `analysis run NAME [ARGS..]`: clap collects everything after the recipe's name as the
//! recipe's own arguments, so `run nvtx_sum --timeunit usec --wait` would hand `--wait` to the
//! recipe. [`lift_trailing_flags`] moves this command's own flags found there into their
//! fields, so they work before or after the recipe's arguments; anything else (and anything
//! after a literal `--`) stays the recipe's.

use std::path::PathBuf;

use crate::analysis::RunArgs;

/// `analysis run`'s flags that take a value.
const VALUE_FLAGS: [&str; 6] = [
    "session",
    "collection",
    "input",
    "output",
    "recipes-dir",
    "cache-dir",
];

/// `run` with its own flags taken out of `run.args`. Errors name the flag: a missing value, a
/// bad `--session`, or a single-valued flag given twice.
pub fn lift_trailing_flags(mut run: RunArgs) -> Result<RunArgs, String> {
    let mut recipe_args = Vec::with_capacity(run.args.len());
    let mut rest = std::mem::take(&mut run.args).into_iter();
    while let Some(arg) = rest.next() {
        if arg == "--" {
            recipe_args.extend(rest.by_ref());
            break;
        }
        if arg == "--wait" {
            run.wait = true;
            continue;
        }
        let flag = arg.strip_prefix("--").and_then(|f| {
            let (name, value) = f.split_once('=').map_or((f, None), |(n, v)| (n, Some(v)));
            VALUE_FLAGS
                .contains(&name)
                .then(|| (name.to_owned(), value.map(str::to_owned)))
        });
        let Some((name, value)) = flag else {
            recipe_args.push(arg);
            continue;
        };
        let value = match value {
            Some(v) => v,
            None => rest
                .next()
                .ok_or_else(|| format!("--{name} needs a value"))?,
        };
        let once = |slot: &mut Option<PathBuf>| {
            if slot.is_some() {
                return Err(format!("--{name} is given twice"));
            }
            *slot = Some(PathBuf::from(&value));
            Ok(())
        };
        match name.as_str() {
            "session" => run
                .session
                .push(value.parse().map_err(|e| format!("--session: {e}"))?),
            "collection" => {
                if run.collection.is_some() {
                    return Err("--collection is given twice".into());
                }
                run.collection = Some(value);
            }
            "input" => run.input.push(PathBuf::from(value)),
            "output" => once(&mut run.output_dir)?,
            "recipes-dir" => once(&mut run.recipes_dir)?,
            _ => once(&mut run.cache_dir)?,
        }
    }
    run.args = recipe_args;
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_args(args: &[&str]) -> RunArgs {
        RunArgs {
            name: "nvtx_sum".into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            ..RunArgs::empty()
        }
    }

    const A: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";

    #[test]
    fn server_flags_after_the_recipe_arguments_are_ours() {
        let session = format!("--session={A}:2");
        let run = lift_trailing_flags(run_args(&[
            "--timeunit",
            "usec",
            "--wait",
            &session,
            "--session",
            A,
            "--filter-nvtx=step",
        ]))
        .unwrap();
        assert_eq!(run.args, ["--timeunit", "usec", "--filter-nvtx=step"]);
        assert!(run.wait);
        let sessions: Vec<String> = run.session.iter().map(ToString::to_string).collect();
        assert_eq!(sessions, [format!("{A}:2"), A.to_owned()]);
    }

    #[test]
    fn local_flags_after_the_recipe_arguments_are_ours() {
        let run = lift_trailing_flags(run_args(&[
            "--timeunit",
            "usec",
            "--input",
            "a.sqlite",
            "--input=b.sqlite",
            "--output",
            "out",
            "--name=base",
        ]))
        .unwrap();
        assert_eq!(run.args, ["--timeunit", "usec", "--name=base"]);
        assert_eq!(
            run.input,
            [PathBuf::from("a.sqlite"), PathBuf::from("b.sqlite")]
        );
        assert_eq!(run.output_dir, Some(PathBuf::from("out")));
    }

    #[test]
    fn after_a_double_dash_everything_is_the_recipes() {
        let run =
            lift_trailing_flags(run_args(&["--wait", "--", "--wait", "--input", "x"])).unwrap();
        assert!(run.wait);
        assert_eq!(run.args, ["--wait", "--input", "x"]);
        assert!(run.input.is_empty());
    }

    #[test]
    fn mistakes_are_named() {
        let err = |args: &[&str]| lift_trailing_flags(run_args(args)).err();
        assert_eq!(err(&["--input"]).as_deref(), Some("--input needs a value"));
        assert_eq!(
            err(&["--output", "a", "--output=b"]).as_deref(),
            Some("--output is given twice")
        );
        assert_eq!(
            err(&["--collection", "1", "--collection", "2"]).as_deref(),
            Some("--collection is given twice")
        );
        let bad = err(&["--session", "nope"]).unwrap_or_default();
        assert!(
            bad.starts_with("--session: \"nope\" is not a session ID"),
            "{bad}"
        );
    }
}
