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
# Environment (defaults in brackets):
#     MFSTREAM_FLINK_REST_PORT  REST port [28081]
#     MFSTREAM_FLINK_RPC_PORT   JobManager RPC port [26123]
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
blob.server.port: ${MFSTREAM_FLINK_BLOB_PORT:-0}
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
CONF
}

start() {
    install
    if [ -z "$(pids standalonesession)" ]; then
        echo "flink-cluster: starting the JobManager (REST $rest)" >&2
        flink jobmanager.sh
    fi
    if [ -z "$(pids taskexecutor)" ]; then
        echo "flink-cluster: starting a TaskManager ($slots slots)" >&2
        flink taskmanager.sh
    fi
    local deadline=$((SECONDS + timeout))
    until [ "$(taskmanagers)" -ge 1 ]; do
        if [ $SECONDS -ge $deadline ] || [ -z "$(pids standalonesession)" ] || [ -z "$(pids taskexecutor)" ]; then
            echo "flink-cluster: no TaskManager registered within ${timeout} s; logs in $state/log:" >&2
            tail -n 20 "$state"/log/*.log >&2 || true
            exit 1
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
    local jm tm
    jm=$(pids standalonesession | tr '\n' ' ')
    tm=$(pids taskexecutor | tr '\n' ' ')
    echo "jobmanager: ${jm:-not running}" >&3
    echo "taskmanager: ${tm:-not running}" >&3
    echo "taskmanagers registered: $(taskmanagers) at $rest" >&3
    [ -n "$jm" ] && [ -n "$tm" ] && [ "$(taskmanagers)" -ge 1 ]
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) status ;;
*) usage ;;
esac
