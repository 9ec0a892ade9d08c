//! `mfstream serve`: the control plane, until SIGTERM or SIGINT.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use mfstream::{CpuLimit, KafkaIngest, MqttIngest, Registry, ServeOptions, Server};
use tokio::signal::unix::{SignalKind, signal};

use super::ServeArgs;
use crate::Outcome;

/// Serves until a signal; then stops every query, ends every stream and
/// exits 0.
pub fn serve(args: ServeArgs) -> Result<Outcome> {
    let path = Registry::discover(args.config.config.as_deref());
    let registry = Arc::new(Registry::load(path.as_deref())?);
    let options = ServeOptions {
        addr: args.addr,
        token: args.token,
        max_body: args.max_body,
        max_connections: args.max_connections,
        header_timeout: Duration::from_millis(args.header_timeout_ms),
        body_timeout: Duration::from_millis(args.body_timeout_ms),
        max_queries: args.max_queries,
        max_subscribers: args.max_subscribers,
        max_streams: args.max_streams,
        max_properties: args.max_properties,
        replay: args.replay,
        replay_bytes: args.replay_bytes,
        max_query_state: args.max_query_state,
        max_total_query_state: args.max_total_query_state,
        compute_threads: args.compute_threads.map(usize::from),
        max_query_cpu: args
            .max_query_cpu
            .map(|share| CpuLimit::new(share, Duration::from_secs(args.query_cpu_window)))
            .transpose()
            .context("--max-query-cpu")?,
        max_inflight_bytes: args.max_inflight_bytes,
        shutdown_grace: Duration::from_millis(args.shutdown_grace_ms),
        ingest_wait: Duration::from_millis(args.ingest_wait_ms),
        max_datetime_ahead: Duration::from_millis(args.max_datetime_ahead_ms),
        keep_alive: Duration::from_millis(args.keep_alive_ms),
        state: args.state,
        durability: args.durability.into(),
        allowed_hosts: args.allowed_host,
        cors_origins: args.cors_origin,
        tiles: args.tiles,
        max_query_log: args.max_query_log,
        mqtt: args.mqtt.map(|url| MqttIngest {
            url,
            ca: args.mqtt_ca,
            topics: args.mqtt_topic,
            client_id: args.mqtt_client_id,
            username: std::env::var("MFSTREAM_MQTT_USERNAME").ok(),
            password: std::env::var("MFSTREAM_MQTT_PASSWORD").ok(),
        }),
        kafka: args.kafka.map(|brokers| KafkaIngest {
            brokers,
            group: args.kafka_group,
            topics: args.kafka_topic,
            session_timeout: Some(Duration::from_millis(args.kafka_session_timeout_ms)),
        }),
        ..ServeOptions::default()
    };
    raise_open_files_limit(options.max_connections as u64 + SPARE_FILES);
    let mqtt_url = options.mqtt.as_ref().map(|m| m.url.clone());
    if !options.addr.ip().is_loopback() && options.token.is_none() {
        tracing::warn!(
            "serving on {} without a token: anyone who reaches it can run queries",
            options.addr
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
        let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
        let hangup = signal(SignalKind::hangup()).context("cannot watch SIGHUP")?;
        let server = Server::bind(registry.clone(), options).await?;
        let addr = server.local_addr()?;
        // The one line a supervisor (or a test) waits for.
        let mut out = std::io::stdout().lock();
        writeln!(out, "mfstream: listening on http://{addr}").context("cannot write to stdout")?;
        out.flush().context("cannot write to stdout")?;
        drop(out);
        tokio::spawn(reload_on_hangup(hangup, registry));
        if let (Some(subscriptions), Some(url)) = (server.mqtt_subscriptions(), mqtt_url) {
            tokio::spawn(say_subscribed(subscriptions, url));
        }
        if let Some((brokers, assignments)) = server.kafka_assignments() {
            tokio::spawn(say_assigned(assignments, brokers));
        }
        let shutdown = async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        };
        server.run(shutdown).await?;
        eprintln!("mfstream: stopped");
        Ok(Outcome::Success)
    })
}

/// Prints `mfstream: kafka assigned on BROKERS` each time the consumer
/// group gives the server partitions: the line a test or a supervisor
/// waits for.
async fn say_assigned(mut assignments: tokio::sync::watch::Receiver<u64>, brokers: String) {
    while assignments.changed().await.is_ok() {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "mfstream: kafka assigned on {brokers}").and_then(|()| out.flush());
    }
}

/// Prints `mfstream: mqtt subscribed on URL` each time the broker grants
/// the subscriptions (at each connection): the line a test or a supervisor
/// waits for.
async fn say_subscribed(mut subscriptions: tokio::sync::watch::Receiver<u64>, url: String) {
    while subscriptions.changed().await.is_ok() {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "mfstream: mqtt subscribed on {url}").and_then(|()| out.flush());
    }
}

/// Descriptors beyond the connections: the listener, bridge jobs' pipes,
/// plugin libraries, logs.
const SPARE_FILES: u64 = 256;

/// Raises the soft limit on open files toward `want` (up to the hard
/// limit), so `--max-connections` connections fit beside everything else;
/// warns when the hard limit is lower.
fn raise_open_files_limit(want: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limits into a struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    if limit.rlim_cur >= want {
        return;
    }
    let raised = libc::rlimit {
        rlim_cur: want.min(limit.rlim_max),
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads a struct we own; a soft limit at most the
    // hard one is always allowed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 || raised.rlim_cur < want {
        tracing::warn!(
            "only {} files may be open (ulimit -n): lower --max-connections, or raise the limit",
            raised.rlim_cur.max(limit.rlim_cur)
        );
    }
}

/// Reloads engines.toml on every SIGHUP: new queries use the new engines,
/// running ones keep theirs. A file with errors leaves the engines as they
/// were. Each outcome is one line on stdout (the errors go to stderr).
async fn reload_on_hangup(mut hangup: tokio::signal::unix::Signal, registry: Arc<Registry>) {
    while hangup.recv().await.is_some() {
        let line = match (registry.path(), registry.reload_from_file()) {
            (None, _) => "mfstream: no engines.toml to reload".to_owned(),
            (Some(path), Ok(())) => format!(
                "mfstream: reloaded {} ({} engines)",
                path.display(),
                registry.engines().len()
            ),
            (Some(path), Err(e)) => {
                eprintln!("{e}");
                format!(
                    "mfstream: cannot reload {}: the engines are unchanged",
                    path.display()
                )
            }
        };
        // A closed stdout (nobody reading the status lines) is no reason to
        // stop reloading.
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
}
