#!/usr/bin/env bash
# A standalone Flink 2.3.0 session cluster on this machine (one JobManager,
# one TaskManager, two plain `java` processes bound to 127.0.0.1), for the
# `flink-cluster` engine:
#
#     eval "$(jobs/flink/cluster.sh start)"   # start (or complete) it, wait for a TaskManager
#     jobs/flink/cluster.sh status            # what runs, exit 0 when ready
#     jobs/flink/cluster.sh stop              # stop it; no process, no temp file is left
#
# `start` reuses jobs/flink/setup.sh's cache folder and adds to it:
#
#     ${MFSTREAM_RUNTIMES:-$HOME/.cache/mfstream/runtimes}/flink/
#         venv/                      + the apache-flink wheel (--no-deps): bin/*.sh, conf/
#         cluster-job/               the cluster job's jar (MfstreamClusterJob.java)
#         cluster-<rest port>/       conf/, log/, pid/, tmp/ of the running cluster
#
# and builds the client (`cargo build --release -p mfstream-flink-client`)
# unless MFSTREAM_FLINK_CLIENT names one. Its last lines on stdout, and the
# only ones, are `export` commands: MFSTREAM_FLINK_REST (the REST address)
# and MFAPI_FLINK_CLUSTER_CMD (the job command of the engine).
#
# Idempotent: `start` on a running cluster only checks it (and restarts a
# TaskManager that died); `stop` on a stopped one does nothing.
#
# `start` refuses to start a JobManager on ports that are taken (REST, RPC,
# and the blob port when MFSTREAM_FLINK_BLOB_PORT fixes one), naming each
# port and the process that holds it, and exits 1. And it takes the cluster
# as ready only when the JobManager that answers on the REST port is the
# one started here: each start writes a random id into the cluster's
# config.yaml (`mfstream.cluster.id`) and reads it back through the REST
# API (GET /jobmanager/config). Another server or cluster answering there
# (this run's JobManager died on a port taken meanwhile) fails the start, and
# the processes it started are stopped: none joins the other cluster.
#
# Environment (defaults in brackets):
#     MFSTREAM_FLINK_REST_PORT  REST port [28081]
#     MFSTREAM_FLINK_RPC_PORT   JobManager RPC port [26123]
#     MFSTREAM_FLINK_BLOB_PORT  JobManager blob server port [0: any free one]
#     MFSTREAM_FLINK_SLOTS      task slots of the TaskManager [2]
#     MFSTREAM_FLINK_JM_MEMORY  JobManager process size [768m]
#     MFSTREAM_FLINK_TM_MEMORY  TaskManager process size [1024m]
#     MFSTREAM_FLINK_START_TIMEOUT  seconds to wait for a TaskManager [60]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${MFSTREAM_RUNTIMES:-$HOME/.cache/mfstream/runtimes}/flink
version=2.3.0
rest_port=${MFSTREAM_FLINK_REST_PORT:-28081}
rpc_port=${MFSTREAM_FLINK_RPC_PORT:-26123}
blob_port=${MFSTREAM_FLINK_BLOB_PORT:-0}
slots=${MFSTREAM_FLINK_SLOTS:-2}
jm_memory=${MFSTREAM_FLINK_JM_MEMORY:-768m}
tm_memory=${MFSTREAM_FLINK_TM_MEMORY:-1024m}
timeout=${MFSTREAM_FLINK_START_TIMEOUT:-60}
state=$cache/cluster-$rest_port
rest=http://127.0.0.1:$rest_port
exec 3>&1 1>&2 # stdout is for the exports only

usage() {
    echo "usage: $0 start|stop|status" >&2
    exit 2
}

# The pids, one a line, of the running processes of daemon $1
# (standalonesession, taskexecutor) recorded in the cluster's pid folder.
pids() {
    local file=$state/pid/flink-mfstream-$1.pid
    [ -f "$file" ] || return 0
    # Neither a zombie (a killed daemon whose reaper is slow) nor a
    # recycled pid: a live process started with this cluster's folders.
    while read -r pid; do
        [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || continue
        [ "$(cut -d')' -f2 "/proc/$pid/stat" | cut -d' ' -f2)" != Z ] || continue
        tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$state/" && echo "$pid"
    done <"$file"
    return 0
}

# The body of GET $rest$1, or nothing when the cluster does not answer.
get() {
    python3 - "$rest$1" <<'PY' 2>/dev/null || true
import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())
except Exception:
    pass
PY
}

# The number of TaskManagers registered with the JobManager.
taskmanagers() {
    get /taskmanagers | python3 -c 'import json,sys
try: print(len(json.load(sys.stdin)["taskmanagers"]))
except Exception: print(0)'
}

# The cluster id of the JobManager answering on the REST port (its config's
# mfstream.cluster.id): nothing when nothing answers, `none` when the
# server answering has none (another cluster, or not Flink).
answering_id() {
    local config
    config=$(get /jobmanager/config)
    [ -n "$config" ] || return 0
    printf '%s' "$config" | python3 -c 'import json,sys
try:
    entries = json.load(sys.stdin)
    print(next((e["value"] for e in entries if e.get("key") == "mfstream.cluster.id"), "none"))
except Exception:
    print("none")'
}

# This cluster's id, written at the JobManager's start.
cluster_id() {
    cat "$state/cluster-id" 2>/dev/null || true
}

# Whether the JobManager answering on the REST port is this cluster's.
ours() {
    local answering
    answering=$(answering_id)
    [ -n "$answering" ] && [ "$answering" = "$(cluster_id)" ]
}

# The ports a JobManager of this cluster would bind that are taken, one a
# line: "the NAME port PORT (VARIABLE) is taken by WHO". A port is free when
# it can be bound on 127.0.0.1 (with SO_REUSEADDR, as the JVM binds: a
# connection in TIME_WAIT does not hold it); its holder is found through
# /proc (the listening socket's inode among the processes' descriptors).
taken_ports() {
    local fixed="REST:$rest_port:MFSTREAM_FLINK_REST_PORT RPC:$rpc_port:MFSTREAM_FLINK_RPC_PORT"
    # A blob port of 0 is any free one; a range is Flink's to choose in.
    case $blob_port in
    0 | *[!0-9]*) ;;
    *) fixed="$fixed blob:$blob_port:MFSTREAM_FLINK_BLOB_PORT" ;;
    esac
    python3 - $fixed <<'PY'
import os, socket, sys

def holders(port):
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add("socket:[%s]" % f[9])
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir("/proc/%s/fd" % pid)
            if not any(os.readlink("/proc/%s/fd/%s" % (pid, fd)) in inodes for fd in fds):
                continue
            argv = open("/proc/%s/cmdline" % pid, "rb").read().decode(errors="replace").split("\0")
        except OSError:
            continue
        argv = [a for a in argv if a]
        # A JVM's class path says little: its main class and config folder.
        if argv and os.path.basename(argv[0]) == "java":
            main = [a for a in argv if a.startswith("org.apache.flink.")]
            conf = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--configDir"]
            what = " ".join(["java"] + main[:1] + (["--configDir", conf[0]] if conf else []))
        else:
            what = " ".join(" ".join(argv).split())
            what = what if len(what) <= 120 else what[:117] + "..."
        found.append("pid %s (%s)" % (pid, what))
    return "; ".join(found) or "a process this user cannot see"

for spec in sys.argv[1:]:
    name, port, variable = spec.split(":")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", int(port)))
    except OSError:
        print("the %s port %s (%s) is taken by %s" % (name, port, variable, holders(int(port))))
    finally:
        s.close()
PY
}

# Flink's scripts, with this cluster's folders.
flink() {
    local site
    site=$(echo "$cache"/venv/lib/python3*/site-packages)
    FLINK_HOME=$site/pyflink FLINK_CONF_DIR=$state/conf FLINK_LOG_DIR=$state/log \
        FLINK_PID_DIR=$state/pid FLINK_IDENT_STRING=mfstream \
        setsid "$site/pyflink/bin/$1" start </dev/null 3>&- # the daemons must not hold our stdout
}

install() {
    "$here/setup.sh" >/dev/null # the venv with the jars; its exports are not ours
    local site lib
    site=$(echo "$cache"/venv/lib/python3*/site-packages)
    lib=$site/pyflink/lib
    if [ ! -f "$cache/venv/.installed-cluster-$version" ]; then
        echo "flink-cluster: installing apache-flink==$version (scripts, conf) into $cache/venv" >&2
        "$cache/venv/bin/pip" install -q --disable-pip-version-check --no-deps "apache-flink==$version"
        touch "$cache/venv/.installed-cluster-$version"
    fi
    [ -x "$site/pyflink/bin/jobmanager.sh" ] || {
        echo "flink-cluster: no bin/jobmanager.sh in $site/pyflink" >&2
        exit 1
    }

    # The cluster job's jar, named after its sources so that a changed job
    # is uploaded anew and an unchanged one is reused by the client.
    local stamp
    stamp=$(cat "$here/MfstreamClusterJob.java" "$here"/../jvm/*.java | sha256sum | cut -c1-16)
    jar=$cache/cluster-job/mfstream-cluster-job-$stamp.jar
    if [ ! -f "$jar" ]; then
        echo "flink-cluster: compiling the cluster job into $jar" >&2
        rm -rf "$cache/cluster-job"
        mkdir -p "$cache/cluster-job/classes"
        javac -nowarn -d "$cache/cluster-job/classes" -cp "$lib/*" "$here/MfstreamClusterJob.java" "$here"/../jvm/*.java
        jar --create --file "$jar.tmp" --main-class MfstreamClusterJob -C "$cache/cluster-job/classes" .
        rm -rf "$cache/cluster-job/classes"
        mv "$jar.tmp" "$jar"
    fi

    if [ -n "${MFSTREAM_FLINK_CLIENT:-}" ]; then
        client=$MFSTREAM_FLINK_CLIENT
    else
        echo "flink-cluster: building the client (cargo build --release -p mfstream-flink-client)" >&2
        (cd "$repo" && cargo build --release -q -p mfstream-flink-client)
        client=$repo/target/release/mfstream-flink-client
    fi

    # The configuration: Flink 2 reads config.yaml only, flat keys work.
    mkdir -p "$state/conf" "$state/log" "$state/pid" "$state/tmp"
    cp "$site/pyflink/conf/log4j.properties" "$site/pyflink/conf/logback.xml" "$state/conf/"
    local opens
    opens=$(grep -o -- '--add-[a-z]*=[^ ]*' "$site/pyflink/conf/config.yaml" | tr '\n' ' ')
    cat >"$state/conf/config.yaml" <<CONF
# Written by jobs/flink/cluster.sh: a session cluster for mfstream on 127.0.0.1.
jobmanager.rpc.address: 127.0.0.1
jobmanager.rpc.port: $rpc_port
jobmanager.bind-host: 127.0.0.1
taskmanager.host: 127.0.0.1
taskmanager.bind-host: 127.0.0.1
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
rest.port: $rest_port
blob.server.port: $blob_port
jobmanager.memory.process.size: $jm_memory
taskmanager.memory.process.size: $tm_memory
taskmanager.numberOfTaskSlots: $slots
parallelism.default: 1
restart-strategy.type: none
io.tmp.dirs: $state/tmp
web.tmpdir: $state/tmp
web.upload.dir: $state/tmp/jars
env.pid.dir: $state/pid
env.log.dir: $state/log
heartbeat.interval: 2000
heartbeat.timeout: 10000
env.java.opts.all: $opens -Djava.io.tmpdir=$state/tmp
# Read back through GET /jobmanager/config: the JobManager answering is this one.
mfstream.cluster.id: $(cluster_id)
CONF
}

# Stops the processes of this cluster that are in `$1` (pids), and says so.
stop_started() {
    local pid
    for pid in $1; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in $1; do
        local deadline=$((SECONDS + 15))
        while kill -0 "$pid" 2>/dev/null; do
            if [ $SECONDS -ge $deadline ]; then
                kill -9 "$pid" 2>/dev/null || true
            fi
            sleep 0.1
        done
    done
    [ -z "$1" ] || echo "flink-cluster: stopped what this start started (pids $1)" >&2
}

# Fails the start: the message, the logs, then the processes this start
# started are stopped.
fail_start() {
    echo "flink-cluster: $1" >&2
    if compgen -G "$state/log/*.log" >/dev/null; then
        echo "flink-cluster: logs in $state/log:" >&2
        tail -n 20 "$state"/log/*.log >&2 || true
    fi
    local started=
    [ -z "$started_jm" ] || started="$(pids standalonesession)"
    [ -z "$started_tm" ] || started="$started $(pids taskexecutor)"
    stop_started "$(echo $started)"
    exit 1
}

start() {
    started_jm= started_tm=
    if [ -z "$(pids standalonesession)" ]; then
        # Before anything else: a taken port would make the JobManager die,
        # while whatever holds it answers for it.
        local taken
        taken=$(taken_ports)
        if [ -n "$taken" ]; then
            printf '%s\n' "$taken" | sed 's/^/flink-cluster: cannot start the JobManager: /' >&2
            echo "flink-cluster: stop what holds them, or choose other ports (MFSTREAM_FLINK_REST_PORT, MFSTREAM_FLINK_RPC_PORT, MFSTREAM_FLINK_BLOB_PORT)" >&2
            exit 1
        fi
        mkdir -p "$state"
        python3 -c 'import secrets; print(secrets.token_hex(16))' >"$state/cluster-id"
    elif [ -z "$(cluster_id)" ]; then
        echo "flink-cluster: the JobManager running from $state has no cluster id (an older cluster.sh started it): $0 stop, then start" >&2
        exit 1
    fi
    install
    if [ -z "$(pids standalonesession)" ]; then
        echo "flink-cluster: starting the JobManager (REST $rest)" >&2
        flink jobmanager.sh
        started_jm=1
    fi
    if [ -z "$(pids taskexecutor)" ]; then
        echo "flink-cluster: starting a TaskManager ($slots slots)" >&2
        flink taskmanager.sh
        started_tm=1
    fi
    local deadline=$((SECONDS + timeout)) answering
    while :; do
        answering=$(answering_id)
        if [ -n "$answering" ] && [ "$answering" != "$(cluster_id)" ]; then
            fail_start "$rest is answered by a server that is not the JobManager started here (pid $(pids standalonesession | tr '\n' ' ')) from $state/conf: another cluster or server took the REST port; not ready"
        fi
        [ -z "$answering" ] || [ "$(taskmanagers)" -lt 1 ] || break
        if [ -z "$(pids standalonesession)" ]; then
            fail_start "the JobManager exited"
        fi
        if [ -z "$(pids taskexecutor)" ]; then
            fail_start "the TaskManager exited"
        fi
        if [ $SECONDS -ge $deadline ]; then
            fail_start "no TaskManager registered within ${timeout} s"
        fi
        sleep 0.2
    done
    echo "flink-cluster: ready at $rest (JobManager $(pids standalonesession), TaskManager $(pids taskexecutor))" >&2
    echo "export MFSTREAM_FLINK_REST='$rest'" >&3
    echo "export MFAPI_FLINK_CLUSTER_CMD='$client --rest $rest --jar $jar'" >&3
}

stop() {
    local pid all
    all="$(pids taskexecutor) $(pids standalonesession)"
    for pid in $all; do
        kill "$pid" 2>/dev/null || true
    done
    # Flink's own shutdown hooks end a JVM within seconds of SIGTERM.
    local deadline=$((SECONDS + 15))
    for pid in $all; do
        while kill -0 "$pid" 2>/dev/null; do
            if [ $SECONDS -ge $deadline ]; then
                echo "flink-cluster: $pid did not stop: SIGKILL" >&2
                kill -9 "$pid" 2>/dev/null || true
            fi
            sleep 0.1
        done
    done
    [ -d "$state" ] && echo "flink-cluster: stopped; removing $state" >&2
    rm -rf "$state"
}

status() {
    local jm tm registered=0 answering=yes
    jm=$(pids standalonesession | tr '\n' ' ')
    tm=$(pids taskexecutor | tr '\n' ' ')
    echo "jobmanager: ${jm:-not running}" >&3
    echo "taskmanager: ${tm:-not running}" >&3
    # Another cluster's TaskManagers are not this one's.
    if ours; then
        registered=$(taskmanagers)
    elif [ -n "$(answering_id)" ]; then
        answering="another server (not this cluster's JobManager)"
    fi
    echo "taskmanagers registered: $registered at $rest" >&3
    [ "$answering" = yes ] || echo "answering at $rest: $answering" >&3
    [ -n "$jm" ] && [ -n "$tm" ] && [ "$registered" -ge 1 ]
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) status ;;
*) usage ;;
esac
