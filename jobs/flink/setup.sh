#!/usr/bin/env bash
# Installs Apache Flink 2.3.0 from PyPI (apache-flink-libraries: the jars
# only) and builds the mfstream Flink bridge job, into a cache folder:
#
#     ${MFSTREAM_RUNTIMES:-$HOME/.cache/mfstream/runtimes}/flink/
#         venv/         the wheel; its jars are in site-packages/pyflink/lib
#         classes/      the compiled job
#         run-job       the launcher: run-job OP [ARG]
#
# Idempotent: a second run with nothing to do takes well under a second.
# Everything goes to stderr but the last lines, `export` commands for stdout:
#
#     eval "$(jobs/flink/setup.sh)"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${MFSTREAM_RUNTIMES:-$HOME/.cache/mfstream/runtimes}/flink
version=2.3.0
exec 3>&1 1>&2 # stdout is for the exports only

mkdir -p "$cache"
if [ ! -f "$cache/venv/.installed-$version" ]; then
    echo "flink: installing apache-flink-libraries==$version into $cache/venv" >&2
    rm -rf "$cache/venv"
    python3 -m venv "$cache/venv"
    "$cache/venv/bin/pip" install -q --disable-pip-version-check "apache-flink-libraries==$version"
    touch "$cache/venv/.installed-$version"
fi
jars=$(echo "$cache"/venv/lib/python3*/site-packages/pyflink/lib)
[ -f "$jars/flink-dist-$version.jar" ] || { echo "flink: no flink-dist jar in $jars" >&2; exit 1; }

# Rebuild when the job's sources change.
stamp=$(cat "$here"/*.java "$here"/../jvm/*.java "$here/log4j2.properties" "$here/setup.sh" | sha256sum | cut -c1-16)
if [ "$(cat "$cache/built" 2>/dev/null)" != "$stamp" ]; then
    echo "flink: compiling the job into $cache/classes" >&2
    rm -rf "$cache/built" "$cache/classes" "$cache/job.jar" "$cache/job.jsa"
    mkdir -p "$cache/classes"
    javac -nowarn -d "$cache/classes" -cp "$jars/*" "$here"/*.java "$here"/../jvm/*.java
    # A jar, not a folder: the JVM's class archive (below) takes jars only.
    jar cf "$cache/job.jar" -C "$cache/classes" .
    cp "$here/log4j2.properties" "$cache/log4j2.properties"
    # Java 17 needs Flink's --add-opens list (its conf/config.yaml,
    # env.java.opts.all) as soon as Kryo serialises a generic type.
    opens="--add-exports=java.base/sun.net.util=ALL-UNNAMED --add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.net=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/java.lang.reflect=ALL-UNNAMED --add-opens=java.base/java.text=ALL-UNNAMED --add-opens=java.base/java.time=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.util.concurrent=ALL-UNNAMED --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED --add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED"
    # The JVM's own logs (class archive warnings) go to stderr: stdout is
    # for results only.
    jvm="-Xlog:disable -Xlog:all=warning:stderr $opens"
    log4j="-Dlog4j.configurationFile=$cache/log4j2.properties"
    cp="$cache/job.jar:$jars/*"
    # The launcher execs the JVM: it is the job's process, in the job's
    # process group, and gets the host's signals itself.
    cat > "$cache/run-job" <<LAUNCHER
#!/bin/sh
# mfstream Flink bridge job launcher, written by jobs/flink/setup.sh.
exec java \${MFSTREAM_JAVA_OPTS:--Xmx512m -XX:+UseSerialGC} -XX:SharedArchiveFile="$cache/job.jsa" \\
    $jvm "$log4j" -cp "$cp" MfstreamFlinkJob "\$@"
LAUNCHER
    chmod +x "$cache/run-job"
    # A class archive (AppCDS) from a training run: it cuts the JVM's
    # start-up by a third to a half. Without it the job still runs.
    echo "flink: training run for the class archive" >&2
    printf '%s\n' '{"datetime":"2026-01-01T00:00:00Z","value":1}' |
        MFSTREAM_FRAMING=json java -XX:+UseSerialGC -XX:ArchiveClassesAtExit="$cache/job.jsa" $jvm "$log4j" -cp "$cp" MfstreamFlinkJob mul 2 >/dev/null 2>&1 ||
        echo "flink: no class archive (the training run failed): start-up will be slower" >&2
    echo "$stamp" > "$cache/built"
fi

echo "export MFAPI_FLINK_CMD='$cache/run-job'" >&3
