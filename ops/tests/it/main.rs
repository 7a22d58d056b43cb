//! The `ops` integration tests in one binary (one link of the workspace instead of one per
//! suite). Each module is one suite; `cargo test -p ops --test it <module>::` runs one. The
//! suites share the process, so none of them changes process-wide state (environment, current
//! directory, fixed files): every `ops` run (`CARGO_BIN_EXE_ops`) gets its configuration through
//! its own command's environment and a scratch directory, and the `ops` servers listen on ports
//! from `testkit::fleet::free_port`, which hands out a port once per process.

mod audit;
/// PostgreSQL and anvil (`$ANVIL_BIN`) are needed: only with `--features pg-tests`.
#[cfg(feature = "pg-tests")]
mod bench_evm_replay;
/// PostgreSQL and Redis are needed: only with `--features pg-tests,redis-tests`.
#[cfg(all(feature = "pg-tests", feature = "redis-tests"))]
mod bench_scale;
/// Headless Chromium and chromedriver are needed: only with `--features browser-tests`.
#[cfg(feature = "browser-tests")]
mod browser;
#[cfg(feature = "browser-tests")]
mod checkout_browser;
mod cli;
mod compose;
#[cfg(feature = "browser-tests")]
mod dashboard_browser;
mod embedded;
mod sandbox_reverse;
mod unclaimed;
