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
lib=$(echo "$cache"/venv/lib/python3*/site-packages/pyflink/lib)
[ -f "$lib/flink-dist-$version.jar" ] || { echo "flink: no flink-dist jar in $lib" >&2; exit 1; }

# Rebuild when the job's sources change.
stamp=$(cat "$here"/*.java "$here/log4j2.properties" "$here/setup.sh" | sha256sum | cut -c1-16)
if [ ! -f "$cache/classes/.built-$stamp" ]; then
    echo "flink: compiling the job into $cache/classes" >&2
    rm -rf "$cache/classes"
    mkdir -p "$cache/classes"
    javac -nowarn -d "$cache/classes" -cp "$lib/*" "$here"/*.java
    cp "$here/log4j2.properties" "$cache/log4j2.properties"
    # Java 17 needs Flink's --add-opens list (its conf/config.yaml,
    # env.java.opts.all) as soon as Kryo serialises a generic type.
    opens="--add-exports=java.base/sun.net.util=ALL-UNNAMED --add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED --add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.net=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/java.lang.reflect=ALL-UNNAMED --add-opens=java.base/java.text=ALL-UNNAMED --add-opens=java.base/java.time=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.util.concurrent=ALL-UNNAMED --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED --add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED"
    # The launcher execs the JVM: it is the job's process, in the job's
    # process group, and gets the host's signals itself.
    cat > "$cache/run-job" <<LAUNCHER
#!/bin/sh
# mfstream Flink bridge job launcher, written by jobs/flink/setup.sh.
exec java \${MFSTREAM_JAVA_OPTS:--Xmx512m -XX:+UseSerialGC} $opens \\
    -Dlog4j.configurationFile="$cache/log4j2.properties" \\
    -cp "$cache/classes:$lib/*" MfstreamFlinkJob "\$@"
LAUNCHER
    chmod +x "$cache/run-job"
    touch "$cache/classes/.built-$stamp"
fi

echo "export MFAPI_FLINK_CMD='$cache/run-job'" >&3
