//! Hostile input: random and malicious registration bodies and ingest
//! lines, from a seeded generator (the seed is printed, so a failure can be
//! replayed with `MFSTREAM_FUZZ_SEED`). The server must answer each with a
//! status that fits, stay up, and keep its memory bounded.

use std::time::Instant as Clock;

use super::*;

/// A small, seeded pseudo-random generator (xorshift64*): reproducible and
/// dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    fn bytes_upto(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max);
        self.bytes(n)
    }

    fn text_upto(&mut self, max: usize) -> String {
        let n = self.below(max);
        self.text(n)
    }

    fn text(&mut self, n: usize) -> String {
        const CHARS: &[char] = &[
            'a', 'Z', '0', '"', '\\', '{', '}', '[', ']', ':', ',', ' ', '\n', 'é', '😀', '\u{0}',
            '-', '.', 'T',
        ];
        (0..n).map(|_| CHARS[self.below(CHARS.len())]).collect()
    }

    /// A JSON value, sometimes nested, sometimes huge.
    fn value(&mut self, depth: usize) -> String {
        match self.below(if depth > 4 { 6 } else { 9 }) {
            0 => "null".into(),
            1 => self.pick(&["true", "false"]).into(),
            2 => self
                .pick(&[
                    "0",
                    "-1",
                    "1.852",
                    "1e308",
                    "-1e308",
                    "1e999",
                    "2",
                    "3.5",
                    "-0",
                    "9007199254740993",
                ])
                .into(),
            3 => format!("{:?}", self.text_upto(20)),
            4 => format!("\"{}\"", "x".repeat(self.below(100_000))),
            5 => self.below(u32::MAX as usize).to_string(),
            6 => format!(
                "[{}]",
                (0..self.below(4))
                    .map(|_| self.value(depth + 1))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            7 => self.object(depth + 1),
            _ => "[".repeat(200) + &"]".repeat(200),
        }
    }

    fn object(&mut self, depth: usize) -> String {
        let keys = [
            "operation",
            "arg",
            "aggregation",
            "window",
            "emitPartial",
            "engine",
            "type",
            "type",
            "size",
            "unit",
            "hop",
            "hopUnit",
            "bogus",
        ];
        let fields: Vec<_> = (0..self.below(5))
            .map(|_| format!("\"{}\":{}", self.pick(&keys), self.value(depth)))
            .collect();
        format!("{{{}}}", fields.join(","))
    }

    /// A registration body: mostly plausible, often wrong in one place.
    fn registration(&mut self) -> Vec<u8> {
        match self.below(10) {
            0 => self.bytes_upto(2000),
            1 => self.object(0).into_bytes(),
            2 => self.text_upto(300).into_bytes(),
            _ => {
                let op = self.pick(&["abs", "ln", "mul", "div", "sin", "nope", "ABS", "", "exp"]);
                let agg = self.pick(&["AVG", "count", "SUM", "MEDIAN", "ANY", "COUNT_DISTINCT"]);
                let window = match self.below(5) {
                    0 => format!(
                        r#"{{"type":"COUNT","size":{}}}"#,
                        self.pick(&["0", "1", "10", "-3", "1e9", "\"x\""])
                    ),
                    1 => format!(
                        r#"{{"type":"TUMBLING","size":{},"unit":"{}"}}"#,
                        self.pick(&["1", "10", "876000", "0"]),
                        self.pick(&["SECONDS", "HOURS", "YEARS"])
                    ),
                    2 => format!(
                        r#"{{"type":"HOPPING","size":{},"unit":"HOURS","hop":1,"hopUnit":"{}"}}"#,
                        self.pick(&["1", "24", "876000"]),
                        self.pick(&["SECONDS", "MINUTES", "HOURS"])
                    ),
                    3 => self.object(1),
                    _ => self.value(1),
                };
                let engine = self.pick(&[
                    "",
                    r#","engine":"local""#,
                    r#","engine":"nope""#,
                    r#","engine":"absent""#,
                    r#","engine":null"#,
                ]);
                let ty = self.pick(&[
                    "",
                    r#","type":"TReal""#,
                    r#","type":"TText""#,
                    r#","type":"TBoolean""#,
                    r#","type":"TNope""#,
                ]);
                let body = match self.below(3) {
                    0 => format!(
                        r#"{{"operation":"{op}","arg":{}{engine}{ty}}}"#,
                        self.value(3)
                    ),
                    1 => format!(r#"{{"aggregation":"{agg}","window":{window}{engine}{ty}}}"#),
                    _ => format!(
                        r#"{{"operation":"{op}","arg":2,"aggregation":"{agg}","window":{window},"emitPartial":{}{engine}}}"#,
                        self.value(4)
                    ),
                };
                body.into_bytes()
            }
        }
    }

    /// An ingest body: instants, some hostile.
    fn ingest(&mut self) -> Vec<u8> {
        let mut body = String::new();
        // Half the bodies are valid throughout, so results flow too.
        let hostile = self.below(2) == 0;
        for i in 0..1 + self.below(20) {
            if !hostile {
                body.push_str(&instant(i, &format!("{}.5", self.below(1000))));
                body.push('\n');
                continue;
            }
            let datetime = match self.below(8) {
                0 if i == 0 => format!("\"{}\"", "9".repeat(1 << 20)),
                1 => format!("{:?}", self.text_upto(40)),
                2 => "\"2026-13-45T99:99:99Z\"".into(),
                3 => self.value(3),
                _ => format!("\"2026-01-01T00:00:{:02}.{i:03}Z\"", self.below(60)),
            };
            let value = match self.below(6) {
                0 => self.value(3),
                1 => "\"text\"".into(),
                2 => "true".into(),
                _ => format!("{}.5", self.below(1000)),
            };
            match self.below(12) {
                0 => body.push_str(&String::from_utf8_lossy(&self.bytes(50))),
                1 => body.push_str(&self.object(0)),
                _ => body.push_str(&format!("{{\"datetime\":{datetime},\"value\":{value}}}")),
            }
            body.push('\n');
        }
        body.into_bytes()
    }
}

/// The server's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[tokio::test]
async fn hostile_registrations_and_ingests_leave_the_server_up_with_bounded_memory() {
    let seed = std::env::var("MFSTREAM_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64 | 1)
                .unwrap_or(1)
        });
    eprintln!("fuzz seed: {seed} (replay with MFSTREAM_FUZZ_SEED={seed})");
    let mut rng = Rng(seed);
    let server = Serve::start(
        "serve-fuzz",
        &[
            "--max-queries",
            "64",
            "--ingest-wait-ms",
            "100",
            "--max-body",
            "16777216",
        ],
        &[],
    );
    let pid = server.pid();
    let mut client = server.client();
    let properties = [
        P.to_owned(),
        "/collections/c/items/f/tproperties/name".to_owned(),
        "/collections/c/items/f/tproperties/flag".to_owned(),
        format!(
            "/collections/c/items/{}/tproperties/p",
            "%C3%A9".repeat(100)
        ),
        format!("/collections/c/items/{}/tproperties/p", "x".repeat(300)),
    ];
    let before = rss_kib(pid);
    let deadline = Clock::now() + Duration::from_secs(30);
    let mut requests = 0;
    while requests < 1500 && Clock::now() < deadline {
        let property = &properties[rng.below(properties.len())];
        let (path, body) = match rng.below(5) {
            0 | 1 => (format!("{property}/queries"), rng.registration()),
            2 if rng.below(10) == 0 => {
                // Now and then, delete what is there, to free slots.
                let listed = client.get(&format!("{P}/queries")).await;
                for query in listed.json()["queries"].as_array().into_iter().flatten() {
                    let path = query["channel"].as_str().unwrap_or_default().to_owned();
                    let deleted = client.delete(&path).await;
                    assert_eq!(deleted.status, 204, "seed {seed}: {deleted:?}");
                }
                continue;
            }
            _ => (format!("{property}/ingest"), rng.ingest()),
        };
        let response = client.request("POST", &path, &[], &body).await;
        requests += 1;
        let fits = matches!(response.status, 201 | 202 | 400 | 413 | 422 | 501 | 503);
        assert!(
            fits,
            "seed {seed}: POST {path} {:?} answered {response:?}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        );
        if response.status >= 400 {
            assert!(
                response.json()["code"].is_string(),
                "seed {seed}: {response:?}"
            );
        }
    }
    assert!(
        requests >= 100,
        "seed {seed}: only {requests} requests in time"
    );
    let engines = server.client().get("/engines").await;
    assert_eq!(engines.status, 200, "seed {seed}: the server is down");
    let after = rss_kib(pid);
    eprintln!("{requests} requests: resident memory {before} KiB before, {after} KiB after");
    // 64 queries' replay buffers at most, with room for the allocator.
    assert!(
        after < before + 64 * 1024,
        "seed {seed}: resident memory grew from {before} KiB to {after} KiB over {requests} requests"
    );
}
