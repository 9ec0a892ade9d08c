//! `mfstream-flink-client`: the bridge job of the `flink-cluster` engine.
//! It runs one query on a Flink session cluster and speaks the line protocol
//! of jobs/README.md (value framing) on its stdin and stdout:
//!
//! 1. it listens on two ports of `--listen` (the address the TaskManagers
//!    connect back to), finds the job jar on the cluster by name or uploads
//!    it (`GET /jars`, `POST /jars/upload`), and runs it
//!    (`POST /jars/<id>/run`) with its address, ports, operation and argument;
//! 2. the job's source connects to the first port and reads the records,
//!    its sink connects to the second and writes the results;
//! 3. the client copies stdin to the first connection and the second to
//!    stdout, as they come: bytes, not lines, so it costs nothing per record;
//! 4. at the end of stdin it shuts its side of the first connection: the
//!    job's source ends, the job FINISHES, its sink closes, and the client
//!    exits 0 once `/jobs/overview` says FINISHED.
//!
//! Under bridge protocol 2 (`MFSTREAM_PROTOCOL=2`, passed on to the job) a
//! record with no result (a domain error) is an error line `!message` from
//! the job, copied through like any answer. A failed job's reason
//! (`/jobs/<id>/exceptions`) goes to stderr: the job's own message and exit 2
//! for a bad line (or, under protocol 1, a domain error), Flink's cause and
//! exit 1 otherwise. SIGTERM, SIGINT and SIGHUP cancel the job
//! (`PATCH /jobs/<id>?mode=cancel`). If the client dies, its connections
//! close: the job's source ends or its sink fails, so no job outlives it; a
//! job still waiting for a slot fails when it cannot connect.

mod args;
mod flink;
mod http;

use std::io::{Read, Write};
use std::mem::ManuallyDrop;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use args::{Options, parse_args, usage};
use flink::Cluster;

const NAME: &str = "mfstream-flink-client";
const CHUNK: usize = 64 * 1024;
/// How long the cluster may take to settle a job whose results ended.
const SETTLE: Duration = Duration::from_secs(30);

/// The job being run, for the signal thread: the cluster and the job id.
static JOB: Mutex<Option<(Arc<Cluster>, String)>> = Mutex::new(None);

/// Set by the signal thread: it cancels the job and exits, so the main
/// thread's view of the cancelled job is not to be reported.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Ends the client: a message on stderr, and an exit status.
pub(crate) struct Exit(i32, String);

/// Blocks the stop signals in this thread and the threads it starts; the
/// signal thread takes them with sigwait.
fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data that sigemptyset initialises; the calls
    // take valid pointers to it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// On a stop signal: cancel the job (once it is submitted), wait briefly
/// for the cluster to confirm, exit 128 + the signal.
fn on_stop_signals(set: libc::sigset_t) {
    std::thread::spawn(move || {
        let mut sig = 0;
        // SAFETY: set is an initialised sigset_t, sig a valid out pointer.
        unsafe { libc::sigwait(&set, &mut sig) };
        STOPPING.store(true, Ordering::SeqCst);
        let job = JOB.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some((cluster, jid)) = job {
            match cluster.cancel(&jid) {
                Ok(()) => {
                    let deadline = Instant::now() + Duration::from_secs(5);
                    while Instant::now() < deadline {
                        match cluster.state(&jid) {
                            Ok(Some(state)) if !flink::is_terminal(&state) => {
                                std::thread::sleep(Duration::from_millis(20))
                            }
                            _ => break,
                        }
                    }
                    eprintln!("{NAME}: signal {sig}: cancelled job {jid}");
                }
                Err(e) => eprintln!("{NAME}: signal {sig}: {e}"),
            }
        }
        std::process::exit(128 + sig);
    });
}

fn main() {
    let set = block_stop_signals();
    let status = match parse_args().and_then(|options| {
        on_stop_signals(set);
        run(options)
    }) {
        Ok(()) => 0,
        Err(Exit(status, message)) => {
            while STOPPING.load(Ordering::SeqCst) {
                std::thread::park(); // the signal thread exits
            }
            if status == 0 {
                println!("{message}");
            } else {
                eprintln!("{NAME}: {message}");
            }
            status
        }
    };
    std::process::exit(status);
}

fn run(options: Options) -> Result<(), Exit> {
    let fail = |e: String| Exit(1, e);
    let cluster = Arc::new(Cluster::new(&options.rest).map_err(usage)?);
    let bind = |what: &str| {
        TcpListener::bind((options.listen.as_str(), 0)).map_err(|e| {
            fail(format!(
                "cannot listen on {} (from {}) for the job's {what}: {e}; give --listen, else \
                 MFSTREAM_FLINK_LISTEN, an address of this machine the TaskManagers can reach",
                options.listen, options.listen_from
            ))
        })
    };
    let (records, results) = (bind("source")?, bind("sink")?);
    let port = |l: &TcpListener| l.local_addr().map(|a| a.port()).unwrap_or(0);
    let mut args = Vec::new();
    // Bridge protocol 2: the job answers a record with no result with an
    // error line (older jars, without the flag, are named apart by hash).
    if options.protocol >= 2 {
        args.push(format!("--protocol={}", options.protocol));
    }
    args.extend([
        options.listen.clone(),
        port(&records).to_string(),
        port(&results).to_string(),
        options.op.clone(),
    ]);
    args.extend(options.arg.clone());

    let started = Instant::now();
    let deadline = started + options.schedule_timeout;
    let mut told = false;
    let jar_id = cluster
        .jar_id(&options.jar)
        .map_err(|e| fail(format!("{e} (the REST address from {})", options.rest_from)))?;
    // A job that finds no free slot, or no TaskManager at all, may fail at
    // once (NoResourceAvailableException) rather than wait: submit it again,
    // backing off, until the schedule timeout.
    let mut backoff = Duration::from_millis(250);
    let (jid, source, sink) = loop {
        let jid = {
            // Held while submitting, so that a signal cancels what was submitted.
            let mut job = JOB.lock().unwrap_or_else(|p| p.into_inner());
            let jid = cluster.run(&jar_id, &args).map_err(fail)?;
            *job = Some((cluster.clone(), jid.clone()));
            jid
        };
        match connections(&cluster, &jid, &records, &results, deadline, &mut told) {
            Ok((source, sink)) => break (jid, source, sink),
            Err(Exit(_, reason)) if reason.contains("NoResourceAvailableException") => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(not_started(&cluster, &jid));
                }
                if !told {
                    told = true;
                    eprintln!(
                        "{NAME}: no task slot for the job ({}); trying again for {:?}",
                        slots_in_use(&cluster),
                        options.schedule_timeout
                    );
                }
                std::thread::sleep(backoff.min(deadline - now));
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
            Err(exit) => return Err(exit),
        }
    };
    if std::env::var_os("MFSTREAM_FLINK_CLIENT_VERBOSE").is_some() {
        eprintln!("{NAME}: job {jid} running after {:?}", started.elapsed());
    }

    // stdin -> the job's source; at its end, shut our side: the source ends.
    let feeder = std::thread::spawn(move || feed(source));
    let ended = relay(sink);
    match ended {
        Relay::Done => {}
        Relay::StdoutClosed => {
            // Nobody wants the results any more.
            let _ = cluster.cancel(&jid);
            return Ok(());
        }
    }
    drop(feeder);
    settle(&cluster, &jid)
}

/// Waits until the job's source and sink have connected. The job may wait
/// for a free slot (said once on stderr) until `deadline`; then it is
/// cancelled with a message naming the slots in use.
fn connections(
    cluster: &Cluster,
    jid: &str,
    records: &TcpListener,
    results: &TcpListener,
    deadline: Instant,
    told: &mut bool,
) -> Result<(TcpStream, TcpStream), Exit> {
    let started = Instant::now();
    let mut streams: [Option<TcpStream>; 2] = [None, None];
    let listeners = [records, results];
    while streams.iter().any(Option::is_none) {
        let mut fds: Vec<libc::pollfd> = listeners
            .iter()
            .map(|l| libc::pollfd {
                fd: l.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: fds is a valid array of fds.len() pollfd structs.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 200) };
        for (which, fd) in fds.iter().enumerate() {
            if fd.revents & libc::POLLIN != 0 && streams[which].is_none() {
                let (stream, _) = listeners[which]
                    .accept()
                    .map_err(|e| Exit(1, format!("accepting the job's connection: {e}")))?;
                let _ = stream.set_nodelay(true);
                streams[which] = Some(stream);
            }
        }
        if streams.iter().all(Option::is_some) {
            break;
        }
        if let Some(state) = cluster.state(jid).map_err(|e| Exit(1, e))? {
            if flink::is_terminal(&state) {
                return Err(failed(cluster, jid, &state));
            }
        }
        if started.elapsed() > Duration::from_secs(2) && !*told {
            *told = true;
            eprintln!(
                "{NAME}: job {jid} is waiting for a task slot ({})",
                slots_in_use(cluster)
            );
        }
        if Instant::now() > deadline {
            let _ = cluster.cancel(jid);
            return Err(not_started(cluster, jid));
        }
    }
    let [Some(source), Some(sink)] = streams else {
        unreachable!("the loop ends when both connections are in");
    };
    Ok((source, sink))
}

/// "2 of 2 task slots in use", or why the cluster could not say.
fn slots_in_use(cluster: &Cluster) -> String {
    match cluster.slots() {
        Ok((_, 0)) => "the cluster has no TaskManager".to_owned(),
        Ok((used, total)) => format!("{used} of {total} task slots in use"),
        Err(e) => e,
    }
}

/// The exit for a job that got no slot within the schedule timeout.
fn not_started(cluster: &Cluster, jid: &str) -> Exit {
    Exit(
        1,
        format!(
            "job {jid} did not start within the schedule timeout (MFSTREAM_FLINK_SCHEDULE_TIMEOUT): {}",
            slots_in_use(cluster)
        ),
    )
}

/// Copies stdin to the job's source, then shuts the connection for writing.
fn feed(mut source: TcpStream) {
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0u8; CHUNK];
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if source.write_all(&buf[..n]).is_err() {
                    return; // the job is gone; its state says why
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = source.shutdown(Shutdown::Write);
}

enum Relay {
    /// The job closed its sink.
    Done,
    /// Our stdout is closed.
    StdoutClosed,
}

/// Copies the job's results to stdout as they arrive: one write per read,
/// so what the sink flushed is on our stdout at once.
fn relay(mut sink: TcpStream) -> Relay {
    // SAFETY: fd 1 is open for the life of the process; ManuallyDrop keeps
    // this File from closing it.
    let mut stdout = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(1) });
    let mut buf = vec![0u8; CHUNK];
    loop {
        match sink.read(&mut buf) {
            Ok(0) => return Relay::Done,
            Ok(n) => {
                if stdout.write_all(&buf[..n]).is_err() {
                    return Relay::StdoutClosed;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Relay::Done, // reset: the job's state says why
        }
    }
}

/// After the results ended: FINISHED is success; anything else is reported.
fn settle(cluster: &Cluster, jid: &str) -> Result<(), Exit> {
    let deadline = Instant::now() + SETTLE;
    loop {
        match cluster.state(jid).map_err(|e| Exit(1, e))? {
            Some(state) if state == "FINISHED" => return Ok(()),
            Some(state) if flink::is_terminal(&state) => return Err(failed(cluster, jid, &state)),
            state => {
                if Instant::now() > deadline {
                    let _ = cluster.cancel(jid);
                    return Err(Exit(
                        1,
                        format!(
                            "job {jid} closed its results connection but is still {} after {SETTLE:?}; cancelled it",
                            state.as_deref().unwrap_or("unknown to the cluster")
                        ),
                    ));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// The exit for a job that ended in `state` other than FINISHED.
fn failed(cluster: &Cluster, jid: &str, state: &str) -> Exit {
    if state != "FAILED" {
        return Exit(1, format!("job {jid} ended {state} on the cluster"));
    }
    // The exception history is filled in shortly after the state changes.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match cluster.failure(jid) {
            Ok(Some((message, true))) => return Exit(2, message),
            Ok(Some((cause, false))) => {
                return Exit(1, format!("job {jid} failed on the cluster: {cause}"));
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                return Exit(
                    1,
                    format!("job {jid} failed on the cluster (no exception recorded)"),
                );
            }
            Err(e) => return Exit(1, format!("job {jid} failed on the cluster; {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(rest: &str, listen: &str, listen_from: &'static str) -> Options {
        Options {
            rest: rest.to_owned(),
            rest_from: "--rest",
            jar: "mfstream-cluster-job.jar".into(),
            listen: listen.to_owned(),
            listen_from,
            schedule_timeout: Duration::from_secs(1),
            op: "mul".to_owned(),
            arg: Some("2".to_owned()),
            protocol: 2,
        }
    }

    /// A loopback port nothing listens on.
    fn closed_port() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }

    #[test]
    fn an_address_it_cannot_listen_on_is_named_with_where_it_came_from() {
        // TEST-NET-1 (RFC 5737): no interface here has it.
        let rest = format!("http://127.0.0.1:{}", closed_port());
        let Err(Exit(status, message)) = run(options(&rest, "192.0.2.1", "MFSTREAM_FLINK_LISTEN"))
        else {
            panic!("listening on 192.0.2.1 succeeded");
        };
        assert_eq!(status, 1);
        assert!(
            message.starts_with("cannot listen on 192.0.2.1 (from MFSTREAM_FLINK_LISTEN)"),
            "{message}"
        );
        assert!(message.contains("the TaskManagers can reach"), "{message}");
    }

    #[test]
    fn a_rest_port_it_cannot_reach_is_named_with_its_address() {
        let port = closed_port();
        let rest = format!("http://127.0.0.1:{port}");
        let Err(Exit(status, message)) = run(options(&rest, "127.0.0.1", "the default")) else {
            panic!("a closed REST port answered");
        };
        assert_eq!(status, 1);
        assert!(
            message.contains(&format!("127.0.0.1:{port}")) && message.contains("refused"),
            "{message}"
        );
        assert!(
            message.ends_with("(the REST address from --rest)"),
            "{message}"
        );
    }
}
