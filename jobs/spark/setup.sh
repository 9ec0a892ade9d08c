#!/usr/bin/env bash
# Installs Apache Spark 4.0.1 from PyPI (pyspark ships Spark's jars) and
# builds the mfstream Spark bridge job, into a cache folder:
#
#     ${MFSTREAM_RUNTIMES:-$HOME/.cache/mfstream/runtimes}/spark/
#         venv/         the wheel; its jars are in site-packages/pyspark/jars
#         classes/      the compiled job
#         run-job       the launcher: run-job OP [ARG]
#
# Idempotent: a second run with nothing to do takes well under a second.
# Everything goes to stderr but the last lines, `export` commands for stdout:
#
#     eval "$(jobs/spark/setup.sh)"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${MFSTREAM_RUNTIMES:-$HOME/.cache/mfstream/runtimes}/spark
version=4.0.1
exec 3>&1 1>&2 # stdout is for the exports only

mkdir -p "$cache"
if [ ! -f "$cache/venv/.installed-$version" ]; then
    echo "spark: installing pyspark==$version into $cache/venv (about 40 s)" >&2
    rm -rf "$cache/venv"
    python3 -m venv "$cache/venv"
    "$cache/venv/bin/pip" install -q --disable-pip-version-check "pyspark==$version"
    touch "$cache/venv/.installed-$version"
fi
jars=$(echo "$cache"/venv/lib/python3*/site-packages/pyspark/jars)
[ -f "$jars/spark-sql_2.13-$version.jar" ] || { echo "spark: no spark-sql jar in $jars" >&2; exit 1; }

# Rebuild when the job's sources change.
stamp=$(cat "$here/MfstreamSparkJob.java" "$here"/../jvm/*.java "$here/log4j2.properties" "$here/setup.sh" | sha256sum | cut -c1-16)
if [ "$(cat "$cache/built" 2>/dev/null)" != "$stamp" ]; then
    echo "spark: compiling the job into $cache/classes" >&2
    rm -rf "$cache/built" "$cache/classes" "$cache/job.jar" "$cache/job.jsa"
    mkdir -p "$cache/classes"
    javac -nowarn -d "$cache/classes" -cp "$jars/*" "$here/MfstreamSparkJob.java" "$here"/../jvm/*.java
    # A jar, not a folder: the JVM's class archive (below) takes jars only.
    jar cf "$cache/job.jar" -C "$cache/classes" .
    cp "$here/log4j2.properties" "$cache/log4j2.properties"
    # Java 17: the module options spark-submit adds (JavaModuleOptions).
    opens="-XX:+IgnoreUnrecognizedVMOptions --add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.lang.invoke=ALL-UNNAMED --add-opens=java.base/java.lang.reflect=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED --add-opens=java.base/java.net=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.util.concurrent=ALL-UNNAMED --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED --add-opens=java.base/jdk.internal.ref=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/sun.nio.cs=ALL-UNNAMED --add-opens=java.base/sun.security.action=ALL-UNNAMED --add-opens=java.base/sun.util.calendar=ALL-UNNAMED -Djdk.reflect.useDirectMethodHandle=false -Dio.netty.tryReflectionSetAccessible=true"
    # The JVM's own logs (class archive warnings) go to stderr: stdout is
    # for results only.
    jvm="-Xlog:disable -Xlog:all=warning:stderr $opens"
    log4j="-Dlog4j.configurationFile=$cache/log4j2.properties"
    cp="$cache/job.jar:$jars/*"
    # The launcher execs the JVM: it is the job's process, in the job's
    # process group, and gets the host's signals itself.
    cat > "$cache/run-job" <<LAUNCHER
#!/bin/sh
# mfstream Spark bridge job launcher, written by jobs/spark/setup.sh.
exec java \${MFSTREAM_JAVA_OPTS:--Xmx1g -XX:+UseSerialGC} -XX:SharedArchiveFile="$cache/job.jsa" \\
    $jvm "$log4j" -cp "$cp" MfstreamSparkJob "\$@"
LAUNCHER
    chmod +x "$cache/run-job"
    # A class archive (AppCDS) from a training run: it cuts the JVM's
    # start-up by a third to a half. Without it the job still runs.
    echo "spark: training run for the class archive" >&2
    printf '1\n' |
        MFSTREAM_FRAMING=value java -XX:+UseSerialGC -XX:ArchiveClassesAtExit="$cache/job.jsa" $jvm "$log4j" -cp "$cp" MfstreamSparkJob mul 2 >/dev/null 2>&1 ||
        echo "spark: no class archive (the training run failed): start-up will be slower" >&2
    echo "$stamp" > "$cache/built"
fi

echo "export MFAPI_SPARK_CMD='$cache/run-job'" >&3
