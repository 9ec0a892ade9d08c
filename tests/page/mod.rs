//! The page at `/`, driven in a real headless browser (Debian's chromium):
//! its self-test mode registers a query, pushes instants, checks the results
//! arrive and are drawn, deletes the query, registers a geofence from the
//! map's form and pushes a track across it (the map must draw the track,
//! the fence and the enter and exit marks), and reports its outcome to the
//! server, where this test waits for it. The map's own tests, on queries
//! registered by the server's client and a screenshot's pixels, are in
//! [`map`] and [`tiles`].

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::serve::{Serve, register};
use crate::util::{TempDir, require};

mod cdp;
mod map;
mod tiles;

use cdp::chromium;

/// Where the page reports its self-test outcome.
const OUTCOME: &str = "/collections/selftest/items/page/tproperties/outcome";

/// Kills the browser's whole process group when dropped.
struct Browser(std::process::Child);

impl Drop for Browser {
    fn drop(&mut self) {
        // SAFETY: signalling the process group we started (pgid = its pid).
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

#[tokio::test]
#[ignore = "needs chromium: apt-get install chromium"]
async fn the_page_registers_ingests_and_draws_results_in_a_real_browser() {
    let chromium = require(
        chromium(),
        "chromium",
        "apt-get install chromium, or set MFSTREAM_CHROMIUM",
    );
    let server = Serve::start("page", &[], &[]);
    let mut client = server.client();
    let outcome = register(&mut client, OUTCOME, r#"{"operation":"abs"}"#).await;
    let mut reports = server.subscribe(&format!("{outcome}/stream"), &[]).await;

    let profile = TempDir::new("page-profile");
    let log = profile.join("chromium.log");
    // Chromium makes its own temporary folder (org.chromium.Chromium.*) in
    // $TMPDIR and removes it only on a clean exit, never after the SIGKILL
    // below: in the profile's folder, it goes with the profile.
    let tmp = profile.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let browser = Browser(
        Command::new(&chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--enable-logging=stderr",
            ])
            .arg(format!(
                "--user-data-dir={}",
                profile.join("data").display()
            ))
            .arg(format!("http://{}/?selftest=1", server.addr))
            .env("TMPDIR", &tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .process_group(0)
            .spawn()
            .expect("chromium starts"),
    );
    let report = tokio::time::timeout(Duration::from_secs(90), reports.next()).await;
    drop(browser);
    // The page logs its message to the console, which chromium writes to
    // its log (--enable-logging=stderr).
    let chromium_said = || {
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<_> = log.lines().filter(|l| !l.contains("dbus")).collect();
        tail[tail.len().saturating_sub(20)..].join("\n")
    };
    let report = match report {
        Ok(Some(report)) => report.json(),
        _ => panic!(
            "the page reported no outcome; chromium said:\n{}",
            chromium_said()
        ),
    };
    assert_eq!(
        report["value"],
        1,
        "the self-test failed; chromium said:\n{}",
        chromium_said()
    );
    let left = std::fs::read_dir(&tmp).unwrap().count();
    assert!(left > 0, "chromium's temporary files went elsewhere");
    let folder = profile.path().to_owned();
    drop(profile);
    assert!(!folder.exists(), "{} is left behind", folder.display());
}
