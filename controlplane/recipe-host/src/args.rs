//! Recipe arguments as users type them (`--name value` or `--name=value`), checked against what
//! the recipe declares; the same rules for a service job and a local run. Also [`error_chain`],
//! how both print an error with its causes.

use crate::RecipeInfo;

/// Parses command-line style arguments (`--name value` or `--name=value`) into pairs, refusing
/// names the recipe does not declare.
pub fn parse_args(args: &[String], info: &RecipeInfo) -> Result<Vec<(String, String)>, String> {
    let known: Vec<&str> = info.arguments.iter().map(|a| a.name.as_str()).collect();
    let accepted = || {
        if known.is_empty() {
            format!("recipe {} takes no arguments", info.name)
        } else {
            format!(
                "recipe {} accepts: {}",
                info.name,
                known
                    .iter()
                    .map(|k| format!("--{k}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    };
    let mut pairs = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let Some(flag) = arg.strip_prefix("--") else {
            return Err(format!(
                "argument `{arg}` is not `--name value` or `--name=value`; {}",
                accepted()
            ));
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n.to_owned(), v.to_owned()),
            None => {
                let value = rest
                    .next()
                    .ok_or_else(|| format!("argument `--{flag}` has no value"))?;
                (flag.to_owned(), value.clone())
            }
        };
        if !known.contains(&name.as_str()) {
            return Err(format!("unknown argument `--{name}`; {}", accepted()));
        }
        pairs.push((name, value));
    }
    Ok(pairs)
}

/// An error and its sources, joined with `: `.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        out.push_str(": ");
        out.push_str(&s.to_string());
        next = s.source();
    }
    out
}
