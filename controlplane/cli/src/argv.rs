//! The guide's syntax puts `--session` among the global options too
//! (`nsight-cloud --session <UUID> ls`); clap wants it after the action, so it is moved there
//! before parsing. (`--tag` is a global option clap accepts on either side.) Pure.

use std::ffi::OsString;

/// Global options that take a value (as `--opt value`).
const GLOBAL_WITH_VALUE: [&str; 3] = ["--tag", "--output", "--config"];
/// Actions whose first argument is a sub-action (`analysis run`).
const GROUPS: [&str; 2] = ["analysis", "port-forward"];

/// `args` (program name first) with a `--session X` / `--session=X` that precedes the action
/// moved right after it (after the sub-action of a group).
pub fn session_after_action(args: Vec<OsString>) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut moved: Vec<OsString> = Vec::new();
    let mut iter = args.into_iter();
    if let Some(program) = iter.next() {
        out.push(program);
    }
    let mut pending_group = false;
    let mut placed = false;
    while let Some(arg) = iter.next() {
        if placed {
            out.push(arg);
            continue;
        }
        let text = arg.to_string_lossy().into_owned();
        if text == "--session" {
            moved.push(arg);
            moved.extend(iter.next());
        } else if text.starts_with("--session=") {
            moved.push(arg);
        } else if GLOBAL_WITH_VALUE.contains(&text.as_str()) {
            out.push(arg);
            out.extend(iter.next());
        } else if text.starts_with('-') {
            out.push(arg);
        } else {
            out.push(arg);
            if !pending_group && GROUPS.contains(&text.as_str()) {
                pending_group = true;
                continue;
            }
            out.append(&mut moved);
            placed = true;
        }
    }
    out.append(&mut moved);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &str) -> String {
        let args = std::iter::once("nsight-cloud")
            .chain(args.split_whitespace())
            .map(OsString::from)
            .collect();
        let out: Vec<String> = session_after_action(args)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        out[1..].join(" ")
    }

    #[test]
    fn session_before_the_action_moves_after_it() {
        assert_eq!(run("--session S ls"), "ls --session S");
        assert_eq!(
            run("--tag gpu --session=S download -o d"),
            "--tag gpu download --session=S -o d"
        );
        assert_eq!(
            run("--session S analysis run nvtx_sum"),
            "analysis run --session S nvtx_sum"
        );
        assert_eq!(run("ls --session S"), "ls --session S");
        assert_eq!(run("--config c status"), "--config c status");
        // An action's own value named like an action is left alone.
        assert_eq!(run("--tag ls status"), "--tag ls status");
    }
}
