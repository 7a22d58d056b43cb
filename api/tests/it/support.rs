//! What the suites of this binary share.

use std::process::Command;

/// Set in the child process [`isolated`] starts: the name of the one test it runs. Not a
/// `PAYGATE_` name: the configuration refuses unknown `PAYGATE_*` variables.
const ISOLATED_TEST: &str = "IT_ISOLATED_TEST";

/// Runs `body` in a child process of this test binary that runs only the test `name` (its path
/// in this binary, e.g. `rate_limits::some_test`), for a test that changes process-wide state:
/// environment variables or the working directory would otherwise be seen by the tests running
/// beside it and inherited by the processes they start. Fails when the child fails, and when
/// `name` matched no test (the body never ran).
pub fn isolated(name: &str, body: impl FnOnce()) {
    if std::env::var(ISOLATED_TEST).is_ok_and(|n| n == name) {
        return body();
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(ISOLATED_TEST, name)
        .output()
        .unwrap_or_else(|e| panic!("start the test binary for {name}: {e}"));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{name} failed in its own process:\n{stdout}\n{stderr}");
    assert!(stdout.contains("test result: ok. 1 passed"), "{name} did not run in its own process:\n{stdout}\n{stderr}");
}
