//! `serve --mqtt`: ingest from a real mosquitto (Debian's `mosquitto` and
//! `mosquitto-clients`, installed by .ci/run), started on a random
//! loopback port with persistence on, stopped by its process id. The
//! cases every broker source shares are the conformance suite's
//! ([`super::sources`]), run here against mosquitto.

use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::sources::{self, TestBroker, assert_line, free_port, read_lines};
use super::*;

/// A mosquitto of the test's own: a config file on a loopback port, its
/// database in the test's directory.
pub(super) struct Broker {
    child: Option<Child>,
    port: u16,
    dir: TempDir,
    /// The lines of its log (stderr), read on a thread so it never blocks.
    log: Option<mpsc::Receiver<String>>,
}

impl Broker {
    pub(super) fn start(name: &str) -> Broker {
        Broker::start_with(name, |_| String::new())
    }

    /// With more configuration: `extra` is given the broker's directory.
    fn start_with(name: &str, extra: impl FnOnce(&TempDir) -> String) -> Broker {
        let dir = TempDir::new(&format!("{name}-broker"));
        // Bound and released: mosquitto reuses the address.
        let port = free_port();
        let conf = format!(
            "listener {port} 127.0.0.1\nallow_anonymous true\npersistence true\n\
             persistence_location {}/\n\
             # Started as root it would drop to the user mosquitto, which cannot\n\
             # write the test's directory (and so not save its database).\n\
             user root\n\
             # An offline session keeps 1,000 messages by default, and drops the rest.\n\
             max_queued_messages 1000000\nmax_inflight_messages 1000\n{}",
            dir.path().display(),
            extra(&dir)
        );
        std::fs::write(dir.join("mosquitto.conf"), conf).unwrap();
        let mut broker = Broker {
            child: None,
            port,
            dir,
            log: None,
        };
        broker.run();
        broker
    }

    /// Starts mosquitto and waits for the line that says it runs.
    pub(super) fn run(&mut self) {
        let mut child = Command::new("mosquitto")
            .arg("-c")
            .arg(self.dir.join("mosquitto.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect(
                "mosquitto runs: install it (apt-get install mosquitto mosquitto-clients; .ci/run \
                 does)",
            );
        let rx = read_lines(child.stderr.take().unwrap());
        self.child = Some(child);
        loop {
            let line = rx
                .recv_timeout(PATIENCE)
                .expect("mosquitto says it runs in time");
            if line.contains(" running") {
                break;
            }
            assert!(!line.contains("Error"), "mosquitto: {line}");
        }
        self.log = Some(rx);
    }

    /// Stops it with SIGTERM (it saves its database) and waits.
    pub(super) fn stop(&mut self) {
        let mut child = self.child.take().expect("running");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        assert!(child.wait().unwrap().success());
    }

    pub(super) fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    /// Publishes one message at QoS 1, waiting for the broker's ack.
    pub(super) fn publish(&self, topic: &str, payload: &str) {
        let status = Command::new("mosquitto_pub")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q", "1"])
            .args(["-t", topic, "-m", payload])
            .status()
            .expect("mosquitto_pub runs: install mosquitto-clients");
        assert!(status.success(), "mosquitto_pub {topic} {payload}");
    }

    /// Publishes each of `payloads` as a message at QoS 1 from a client of
    /// its own (rumqttc, MQTT 5), on a task: its end means the broker
    /// acknowledged every one. (`mosquitto_pub -l` exits 0 before its
    /// queue is sent: with 300,000 lines an independent subscriber got
    /// about a third.)
    fn publish_all(&self, topic: &str, payloads: Vec<String>) -> tokio::task::JoinHandle<()> {
        use rumqttc::v5::mqttbytes::QoS;
        use rumqttc::v5::mqttbytes::v5::Packet;
        use rumqttc::v5::{AsyncClient, Event, MqttOptions};
        static PUBLISHERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let id = format!(
            "test-pub-{}-{}",
            std::process::id(),
            PUBLISHERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let options = MqttOptions::new(id, "127.0.0.1", self.port);
        let (client, mut eventloop) = AsyncClient::new(options, 1024);
        let n = payloads.len();
        let topic = topic.to_owned();
        let sender = client.clone();
        tokio::spawn(async move {
            for payload in payloads {
                sender
                    .publish(topic.as_str(), QoS::AtLeastOnce, false, payload)
                    .await
                    .unwrap();
            }
        });
        tokio::spawn(async move {
            let mut acked = 0;
            while acked < n {
                match tokio::time::timeout(PATIENCE, eventloop.poll()).await {
                    Ok(Ok(Event::Incoming(Packet::PubAck(_)))) => acked += 1,
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => panic!("the publisher failed after {acked} of {n}: {e}"),
                    Err(_) => panic!("the broker acknowledged {acked} of {n} in time"),
                }
            }
            // Kept until every message is acknowledged.
            drop(client);
        })
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub(super) const TOPIC: &str = "mfapi/ships/s1/speed";

impl TestBroker for Broker {
    const SOURCE: &'static str = "mqtt";
    const STATUS: &'static str = "/ingest/mqtt";
    const RECEIVED: &'static str = "messages";
    const ACKNOWLEDGED: &'static str = "acknowledged";
    const BAD_METRIC: &'static str = "mfstream_mqtt_bad_messages_total";
    /// Held between the socket and their acknowledgement: at most the
    /// channel (4,096), a batch (1,024) and the one being sent.
    const MAX_HELD: u64 = 4096 + 1024 + 1;
    const PATIENCE: Duration = PATIENCE;
    const BAD_ID_TOPICS: Option<[&'static str; 2]> =
        Some(["mfapi//s1/speed", "mfapi/ships/../speed"]);

    async fn start(name: &str) -> Broker {
        Broker::start(name)
    }

    fn topic(property: &str) -> String {
        format!("mfapi/ships/s1/{property}")
    }

    fn serve(&self, name: &str, args: &[&str], env: &[(&str, String)]) -> Serve {
        serve_on(name, self, args, env)
    }

    fn send_to(&self, topic: &str, payloads: Vec<String>) -> tokio::task::JoinHandle<()> {
        self.publish_all(topic, payloads)
    }

    /// SIGTERM (its database saved), then started again.
    fn restart(&mut self) {
        self.stop();
        self.run();
    }
}

sources::conformance!("mqtt", Broker);

/// `serve --mqtt URL ARGS`, once it is subscribed.
pub(super) fn serve_on(
    name: &str,
    broker: &Broker,
    args: &[&str],
    env: &[(&str, String)],
) -> Serve {
    let url = broker.url();
    let mut all = vec!["--mqtt", url.as_str()];
    all.extend_from_slice(args);
    let mut server = Serve::start(name, &all, env);
    assert_subscribed(&mut server, broker);
    server
}

/// Waits for the line the server prints once subscribed (at each
/// connection).
pub(super) fn assert_subscribed(server: &mut Serve, broker: &Broker) {
    let want = format!("mfstream: mqtt subscribed on {}", broker.url());
    assert_line(server, &want, PATIENCE, "subscribes in time");
}

/// Events until the one whose value is `last`; every value before it.
async fn until_value(sse: &mut Sse, last: f64) -> Vec<f64> {
    sources::until_value(sse, last, PATIENCE).await
}

#[tokio::test]
async fn mqtt_instants_arrays_and_bare_numbers_reach_the_queries() {
    let broker = Broker::start("mqtt-round-trip");
    let server = sources::instants_arrays_and_bare_numbers_reach_the_queries(
        &broker,
        "mqtt-round-trip",
        &[],
    )
    .await;
    let mut client = server.client();
    let status = client.get("/ingest/mqtt").await.json();
    assert_eq!(status["broker"], broker.url());
    assert_eq!(status["topics"][0], "mfapi/{cid}/{fid}/{pname}");
    assert_eq!(status["connected"], true);
    assert!(
        status["clientId"]
            .as_str()
            .unwrap()
            .starts_with("mfstream-")
    );
}

#[tokio::test]
async fn mqtt_topic_patterns_name_the_property_and_the_default_one_is_replaced() {
    let broker = Broker::start("mqtt-patterns");
    let server = serve_on(
        "mqtt-patterns",
        &broker,
        &["--mqtt-topic", "fleet/{fid}/{pname}/in/{cid}"],
        &[],
    );
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":3}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    // Not subscribed to any more: never arrives.
    broker.publish(TOPIC, &instant(1, "1"));
    broker.publish("fleet/s1/speed/in/ships", &instant(2, "2"));
    assert_eq!(values(&take(&mut sse, 1).await), [6.0]);
}

#[tokio::test]
async fn mqtt_a_broker_restart_mid_stream_loses_and_doubles_nothing_and_a_lost_session_is_subscribed_again()
 {
    let broker = &mut Broker::start("mqtt-restart");
    let (mut server, mut sse, n) =
        sources::a_broker_restart_mid_stream_loses_and_doubles_nothing(broker, "mqtt-restart")
            .await;
    let mut client = server.client();
    // It reconnected, and says so.
    assert_subscribed(&mut server, broker);

    // A broker that lost the session (its database gone) knows no
    // subscription: only subscribing again brings the messages.
    broker.stop();
    std::fs::remove_file(broker.dir.join("mosquitto.db")).unwrap();
    broker.run();
    assert_subscribed(&mut server, broker);
    broker.publish(TOPIC, &instant(n, &n.to_string()));
    assert_eq!(until_value(&mut sse, n as f64).await, [n as f64]);
    let status = client.get("/ingest/mqtt").await.json();
    assert_eq!(status["connects"], 3, "{status}");
}

/// Runs `program args` in `dir`, which must succeed.
fn run_in(dir: &TempDir, program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir.path())
        .output()
        .unwrap_or_else(|e| panic!("{program} runs: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn mqtt_over_tls_with_a_user_from_the_environment() {
    let broker = Broker::start_with("mqtt-tls", |dir| {
        // A CA, and the broker's certificate for 127.0.0.1 signed by it.
        let subject = |cn: &str| format!("/CN={cn}");
        run_in(
            dir,
            "openssl",
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                &subject("mfstream test ca"),
            ],
        );
        run_in(
            dir,
            "openssl",
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                &subject("127.0.0.1"),
            ],
        );
        std::fs::write(dir.join("ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
        run_in(
            dir,
            "openssl",
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.pem",
                "-days",
                "2",
                "-extfile",
                "ext",
            ],
        );
        run_in(
            dir,
            "mosquitto_passwd",
            &["-b", "-c", "passwords", "device", "s3cret"],
        );
        let d = dir.path().display();
        format!(
            "cafile {d}/ca.pem\ncertfile {d}/server.pem\nkeyfile {d}/server.key\n\
             allow_anonymous false\npassword_file {d}/passwords\n"
        )
    });
    let ca = broker.dir.join("ca.pem");
    let ca = ca.to_str().unwrap();
    let url = format!("mqtts://127.0.0.1:{}", broker.port);
    let user = [
        ("MFSTREAM_MQTT_USERNAME", "device".to_owned()),
        ("MFSTREAM_MQTT_PASSWORD", "s3cret".to_owned()),
    ];
    let mut server = Serve::start("mqtt-tls", &["--mqtt", &url, "--mqtt-ca", ca], &user);
    assert_eq!(
        server.next_line().trim(),
        format!("mfstream: mqtt subscribed on {url}")
    );
    let mut client = server.client();
    let query = register(&mut client, P, r#"{"operation":"mul","arg":2}"#).await;
    let mut sse = server.subscribe(&format!("{query}/stream"), &[]).await;
    let status = Command::new("mosquitto_pub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &broker.port.to_string(),
            "--cafile",
            ca,
        ])
        .args(["-u", "device", "-P", "s3cret", "-q", "1", "-t", TOPIC])
        .args(["-m", &instant(1, "21")])
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(values(&take(&mut sse, 1).await), [42.0]);

    // Without the password the broker refuses the connection, and says so.
    let wrong = [("MFSTREAM_MQTT_USERNAME", "device".to_owned())];
    let refused = Serve::start(
        "mqtt-tls-refused",
        &["--mqtt", &url, "--mqtt-ca", ca],
        &wrong,
    );
    let mut client = refused.client();
    let status = eventually(
        "the broker's refusal in lastError",
        PATIENCE,
        async || client.get("/ingest/mqtt").await.json(),
        |status| !status["lastError"].is_null(),
    )
    .await;
    assert_eq!(status["connected"], false, "{status}");
    let error = status["lastError"].as_str().unwrap();
    assert!(
        error.to_lowercase().contains("auth")
            || error.contains("NotAuthorized")
            || error.contains("BadUserNamePassword"),
        "{error}"
    );
}

#[test]
fn mqtt_a_bad_url_pattern_or_tls_option_exits_2_naming_it() {
    for (args, says) in [
        (&["--mqtt", "http://b"][..], "not an MQTT URL"),
        (&["--mqtt", "mqtt://u:p@b"], "MFSTREAM_MQTT_USERNAME"),
        (
            &["--mqtt", "mqtt://b", "--mqtt-topic", "a/{cid}"],
            "has 0 {fid}",
        ),
        (&["--mqtt", "mqtts://b"], "needs --mqtt-ca"),
    ] {
        let out = serve_exits("mqtt-bad-flags", args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}
