//! A real `eddy` process for tests that need what an in-process server cannot give: its own
//! RSS, and a log to check for panics.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// A running `eddy` process, killed when dropped; its stderr goes to `log`.
pub struct Eddy {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its stderr.
    pub log: PathBuf,
}

impl Eddy {
    /// Starts `eddy playground` on a free port with extra `args`.
    pub fn start(name: &str, args: &[&str]) -> Self {
        let mut all = vec!["playground"];
        all.extend_from_slice(args);
        Self::launch(env!("CARGO_BIN_EXE_eddy"), name, &all)
    }

    /// Starts the `eddy` binary at `bin` (another build of it, e.g. a release binary) on a free
    /// port with `args`.
    pub fn launch(bin: &str, name: &str, args: &[&str]) -> Self {
        let log = crate::support::temp_dir(name).join("eddy.log");
        let stderr = std::fs::File::create(&log).expect("log file");
        let mut child = Command::new(bin)
            .args(args)
            .args(["--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"])
            .env("EDDY_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .expect("eddy starts");
        let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        reader.read_line(&mut line).expect("startup line");
        std::thread::spawn(move || {
            let mut sink = String::new();
            while reader.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                sink.clear();
            }
        });
        let addr = line
            .split_whitespace()
            .skip_while(|w| *w != "on")
            .nth(1)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in startup line {line:?}"));
        Self { child, addr, log }
    }

    /// Resident memory in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.status_field("VmRSS").and_then(|v| v.split_whitespace().next()?.parse().ok()).unwrap_or(0)
    }

    /// A field of `/proc/<pid>/status` (e.g. `VmRSS`), if the kernel has it.
    pub fn status_field(&self, name: &str) -> Option<String> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status.lines().find_map(|l| Some(l.strip_prefix(name)?.strip_prefix(':')?.trim().to_string()))
    }

    /// True while the process runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Its stderr so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Eddy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
