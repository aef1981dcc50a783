//! The proxy-wasm filters' post-link step: keep only the hooks a filter implements.
//!
//! The Rust proxy-wasm SDK exports every `proxy_on_*` hook. Envoy's host
//! (proxy-wasm-cpp-host, `WasmBase::getFunctions`) looks each hook up once at load and calls
//! only those the module exports (`ContextBase::onLog` etc. return at once when the export is
//! missing). Each call into the V8 VM costs microseconds, and the SDK's default bodies of the
//! hooks our filters do not implement (`on_log`, `on_done`, the body hooks...) do nothing, so
//! removing those exports removes VM entries from every request and changes no behaviour.
//!
//! Only `proxy_on_*` exports are ever removed; every other export (memory, `_initialize`, the
//! ABI marker) is kept. A hook listed as kept but missing from the module is an error (the
//! SDK renamed or dropped it), and the rewritten module is validated before it is written.

use anyhow::{bail, Context, Result};
use wasm_encoder::{ExportKind, ExportSection, Module, RawSection};
use wasmparser::{ExternalKind, Parser, Payload, Validator};

/// Hooks every filter keeps: context creation (the SDK builds its root and per-request
/// contexts there), VM start, configuration and deletion (the SDK frees a request's context
/// in `proxy_on_delete`: without it every request would leak its context), and the host's
/// allocator.
const COMMON_HOOKS: &[&str] = &[
    "proxy_on_context_create",
    "proxy_on_vm_start",
    "proxy_on_configure",
    "proxy_on_delete",
    "proxy_on_memory_allocate",
];

/// One module written from a filter's build: its file name (without `.wasm`) and the hooks
/// it keeps beyond `COMMON_HOOKS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    pub name: &'static str,
    pub hooks: &'static [&'static str],
}

/// Request headers (the decision); HTTP call answers and the tick (JWKS and OIDC discovery
/// fetches).
const AUTH_LEAN_HOOKS: &[&str] = &[
    "proxy_on_request_headers",
    "proxy_on_http_call_response",
    "proxy_on_tick",
];

/// The modules written from a filter's build (by crate artifact name).
pub fn filter_variants(artifact: &str) -> Result<&'static [Variant]> {
    Ok(match artifact {
        "nsight_auth_filter" => &[
            // Every mode: also response headers (OAuth2 mode renews the session cookie on
            // the upstream's response).
            Variant {
                name: "nsight_auth_filter",
                hooks: &[
                    "proxy_on_request_headers",
                    "proxy_on_response_headers",
                    "proxy_on_http_call_response",
                    "proxy_on_tick",
                ],
            },
            // The same code without the response-headers hook, so Envoy enters the VM one
            // time fewer per request: for the configurations that never touch the response
            // (unauthenticated, API key, JWT). The gateway picks it (`AuthFilter::module_path`
            // in nsight-gateway); an OAuth2 configuration always gets the full module.
            Variant {
                name: "nsight_auth_filter_lean",
                hooks: AUTH_LEAN_HOOKS,
            },
        ],
        // Request headers only: the routing decision.
        "nsight_routing_filter" => &[Variant {
            name: "nsight_routing_filter",
            hooks: &["proxy_on_request_headers"],
        }],
        other => bail!(
            "no hook list for filter {other:?}: add the hooks it implements to \
             xtask/tasks/src/wasm_exports.rs (filter_variants)"
        ),
    })
}

/// Whether the export `name` stays in a filter that implements `hooks`.
fn kept(name: &str, hooks: &[&str]) -> bool {
    !name.starts_with("proxy_on_") || COMMON_HOOKS.contains(&name) || hooks.contains(&name)
}

/// The module with every `proxy_on_*` export not in `hooks` (or `COMMON_HOOKS`) removed, and
/// the names removed. The functions themselves stay (unexported, unreachable from the host).
pub fn strip_hooks(module: &[u8], hooks: &[&str]) -> Result<(Vec<u8>, Vec<String>)> {
    let mut out = Module::new();
    let mut removed = Vec::new();
    let mut exported = Vec::new();
    for payload in Parser::new(0).parse_all(module) {
        let payload = payload.context("not a valid Wasm module")?;
        if let Payload::ExportSection(reader) = &payload {
            let mut section = ExportSection::new();
            for export in reader.clone() {
                let export = export.context("malformed export section")?;
                exported.push(export.name.to_owned());
                if !kept(export.name, hooks) {
                    removed.push(export.name.to_owned());
                    continue;
                }
                section.export(export.name, export_kind(export.kind)?, export.index);
            }
            out.section(&section);
            continue;
        }
        if let Some((id, range)) = payload.as_section() {
            let data = usize::try_from(range.start)
                .ok()
                .zip(usize::try_from(range.end).ok())
                .and_then(|(s, e)| module.get(s..e))
                .context("section outside the module")?;
            out.section(&RawSection { id, data });
        }
    }
    for hook in COMMON_HOOKS.iter().chain(hooks) {
        if !exported.iter().any(|e| e == hook) {
            bail!("the module does not export {hook}, which the filter is listed to implement");
        }
    }
    let bytes = out.finish();
    Validator::new()
        .validate_all(&bytes)
        .context("the module without the unused hooks does not validate")?;
    Ok((bytes, removed))
}

fn export_kind(kind: ExternalKind) -> Result<ExportKind> {
    Ok(match kind {
        ExternalKind::Func => ExportKind::Func,
        ExternalKind::Table => ExportKind::Table,
        ExternalKind::Memory => ExportKind::Memory,
        ExternalKind::Global => ExportKind::Global,
        ExternalKind::Tag => ExportKind::Tag,
        other => bail!("unsupported export kind {other:?}"),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use wasm_encoder::{
        CodeSection, CustomSection, Function, FunctionSection, Instruction, MemorySection,
        MemoryType, TypeSection,
    };

    use super::*;

    /// A module exporting memory, `_initialize` and the given functions (all `() -> ()`),
    /// with a custom section that must survive.
    fn module(functions: &[&str]) -> Vec<u8> {
        let mut m = Module::new();
        let mut types = TypeSection::new();
        types.ty().function([], []);
        m.section(&types);
        let mut funcs = FunctionSection::new();
        let mut code = CodeSection::new();
        for _ in 0..=functions.len() {
            funcs.function(0);
            let mut f = Function::new([]);
            f.instruction(&Instruction::End);
            code.function(&f);
        }
        m.section(&funcs);
        let mut memory = MemorySection::new();
        memory.memory(MemoryType {
            minimum: 1,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        m.section(&memory);
        let mut exports = ExportSection::new();
        exports.export("memory", ExportKind::Memory, 0);
        exports.export("_initialize", ExportKind::Func, 0);
        for (i, name) in functions.iter().enumerate() {
            exports.export(name, ExportKind::Func, u32::try_from(i + 1).unwrap());
        }
        m.section(&exports);
        m.section(&code);
        m.section(&CustomSection {
            name: "producers".into(),
            data: b"kept"[..].into(),
        });
        m.finish()
    }

    fn exports(bytes: &[u8]) -> Vec<String> {
        let mut names = Vec::new();
        for payload in Parser::new(0).parse_all(bytes) {
            if let Payload::ExportSection(r) = payload.unwrap() {
                names.extend(r.into_iter().map(|e| e.unwrap().name.to_owned()));
            }
        }
        names
    }

    #[test]
    fn removes_only_the_unlisted_hooks() {
        let mut all: Vec<&str> = COMMON_HOOKS.to_vec();
        all.extend([
            "proxy_abi_version_0_2_1",
            "proxy_on_request_headers",
            "proxy_on_log",
            "proxy_on_done",
        ]);
        let (bytes, removed) = strip_hooks(&module(&all), &["proxy_on_request_headers"]).unwrap();
        assert_eq!(removed, ["proxy_on_log", "proxy_on_done"]);
        let left = exports(&bytes);
        assert!(left.contains(&"memory".to_owned()));
        assert!(left.contains(&"_initialize".to_owned()));
        assert!(left.contains(&"proxy_abi_version_0_2_1".to_owned()));
        assert!(left.contains(&"proxy_on_request_headers".to_owned()));
        assert!(left.contains(&"proxy_on_delete".to_owned()));
        assert!(!left
            .iter()
            .any(|e| e == "proxy_on_log" || e == "proxy_on_done"));
        // The other sections, custom ones included, are carried over.
        assert!(bytes.windows(4).any(|w| w == b"kept"));
    }

    #[test]
    fn a_listed_hook_the_module_lacks_is_an_error() {
        let mut all: Vec<&str> = COMMON_HOOKS.to_vec();
        all.push("proxy_on_request_headers");
        let err = strip_hooks(&module(&all), &["proxy_on_tick"]).unwrap_err();
        assert!(err.to_string().contains("proxy_on_tick"), "{err}");
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        assert!(strip_hooks(b"not wasm", &[]).is_err());
        assert!(filter_variants("nsight_unknown_filter").is_err());
    }

    #[test]
    fn the_lean_auth_module_differs_only_by_the_response_hook() {
        let variants = filter_variants("nsight_auth_filter").unwrap();
        let [full, lean] = variants else {
            panic!("two auth modules expected: {variants:?}")
        };
        assert_eq!(full.name, "nsight_auth_filter");
        assert_eq!(lean.name, "nsight_auth_filter_lean");
        let mut without: Vec<&str> = full
            .hooks
            .iter()
            .copied()
            .filter(|h| *h != "proxy_on_response_headers")
            .collect();
        without.sort_unstable();
        let mut lean_hooks = lean.hooks.to_vec();
        lean_hooks.sort_unstable();
        assert_eq!(without, lean_hooks);
    }
}
