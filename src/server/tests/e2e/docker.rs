//! `docker/` (issue 15): our machines have no Docker engine, so the Dockerfile and the compose
//! file are checked by `e2e_test/docker_lint.py` (YAML parsing, every reference resolving, a
//! non-root final stage). PyYAML is required under CI and skipped without it otherwise.

#[test]
fn docker_files_are_well_formed() {
    let script = format!("{}/../../e2e_test/docker_lint.py", env!("CARGO_MANIFEST_DIR"));
    let has_yaml = std::process::Command::new("python3").args(["-c", "import yaml"]).status().map(|s| s.success()).unwrap_or(false);
    if !has_yaml {
        assert!(std::env::var("CI").is_err(), "PyYAML is required in CI (.ci/run installs it)");
        eprintln!("skipping docker lint: PyYAML is not installed");
        return;
    }
    let out = std::process::Command::new("python3").arg(&script).output().expect("python3 runs");
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}
