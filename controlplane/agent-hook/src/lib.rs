//! The LD_PRELOAD exec hook (`libnsight_hook.so`): decides, for every `execve`, `execv`,
//! `execvp`, `execvpe`, `posix_spawn` and `posix_spawnp` of the container, whether the program
//! is re-executed as `nsight-agent run -- <path> <args>`.
//!
//! ```text
//!  exec*(path, argv, envp) ──> ffi (thin) ──> matching::decide(...) ──> Wrap(new argv) | Untouched
//!                                   └── any error: the original call, unchanged
//! ```
//! [`matching`] is the pure decision (include/exclude regexes over "<path> <args>", the default
//! exclude list, the no-recursion marker); [`ffi`] only converts C arguments and calls through
//! `dlsym(RTLD_NEXT, ..)`.
//!
//! Environment: `NSIGHT_INJECT_INCLUDE` and `NSIGHT_INJECT_EXCLUDE` (regexes, one per line),
//! `NSIGHT_AGENT_BIN` (absolute path of `nsight-agent`), `NSIGHT_AGENT_ACTIVE` (set by the agent
//! in its target's environment: such processes are never wrapped).

mod ffi;
pub mod matching;
