// The mfstream bridge job on Apache Flink: a DataStream pipeline in a local
// mini-cluster at parallelism 1 (source -> lifted operation -> sink, chained
// into one task), speaking the value and json framings of jobs/README.md,
// and computing windowed aggregates with Flink's windows (Windows.java).
//
//     java -cp CLASSES:FLINK_LIB/* MfstreamFlinkJob OP [ARG]
//     MFSTREAM_FRAMING=json MFSTREAM_QUERY='{...}' java ... MfstreamFlinkJob aggregate AGG
//
// - The source reads stdin (fd 0) in chunks of up to 64 KiB and emits one
//   line per record; the map applies the operation; the sink writes each
//   result to fd 1 through a 64 KiB buffer. The three run chained in the
//   source's thread, so when the source is about to block on a read every
//   result so far is in the buffer: it flushes then. A burst costs one
//   flush per chunk; a lone live record comes out at once.
// - stdout carries results only: System.out is pointed at stderr before
//   Flink starts, and log4j2 logs to stderr (the launcher's config).
// - Exit 0 at end of input; 2 with "mfstream-flink: line N: ..." on stderr
//   for bad usage, a line that is not a number or a domain error (the
//   results before it are flushed first); 0 quietly when the host closes
//   stdout; 1 for anything else.
// - Each run gets its own temp folder (Flink unpacks a 24 MB RPC jar and a
//   mini-cluster folder there), removed at exit.

import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.legacy.RichSinkFunction;
import org.apache.flink.streaming.api.functions.source.legacy.SourceFunction;

public final class MfstreamFlinkJob {
    static final String NAME = "mfstream-flink";
    static final String USAGE = "usage: MfstreamFlinkJob OP [ARG]   (MFSTREAM_FRAMING=value|json)\n"
            + "       MfstreamFlinkJob aggregate AGG   (MFSTREAM_FRAMING=json, the query in MFSTREAM_QUERY)";
    static final int CHUNK = 64 * 1024;
    static final int MAX_LINE = 1024 * 1024;

    /**
     * The job's stdout: fd 1 behind a buffer, shared by the sink (which
     * writes) and the source (which flushes before it blocks). Source, map
     * and sink run chained in one thread; main reads the outcome after the
     * job ended.
     */
    static final class Stdout {
        static final OutputStream OUT = new FileOutputStream(FileDescriptor.out);
        static final byte[] BUF = new byte[CHUNK];
        static int len;
        static volatile boolean closed; // the host closed our stdout
        static volatile JobError failure; // the error that ended the job

        static void write(String line) throws IOException {
            int n = line.length();
            if (len + n + 1 > BUF.length) {
                drain();
            }
            if (n + 1 > BUF.length) {
                OUT.write((line + "\n").getBytes(StandardCharsets.UTF_8));
                return;
            }
            for (int i = 0; i < n; i++) {
                BUF[len++] = (byte) line.charAt(i); // results are ASCII
            }
            BUF[len++] = '\n';
        }

        static void drain() throws IOException {
            if (len > 0) {
                int n = len;
                len = 0;
                OUT.write(BUF, 0, n);
            }
        }

        static void flush() {
            if (closed) {
                return;
            }
            try {
                drain();
                OUT.flush();
            } catch (IOException e) {
                closed = true; // EPIPE: nobody wants the answers
            }
        }
    }

    /** Lines of fd 0; flushes stdout before every read, since a read may block. */
    static final class StdinSource implements SourceFunction<String> {
        private volatile boolean running = true;

        @Override
        public void run(SourceContext<String> ctx) throws Exception {
            InputStream in = new FileInputStream(FileDescriptor.in);
            byte[] chunk = new byte[CHUNK];
            byte[] pending = new byte[CHUNK];
            int pendingLen = 0;
            long number = 0;
            while (running && !Stdout.closed) {
                Stdout.flush();
                int n = in.read(chunk);
                if (n < 0) {
                    break;
                }
                synchronized (ctx.getCheckpointLock()) {
                    int start = 0;
                    for (int i = 0; i < n; i++) {
                        if (chunk[i] != '\n') {
                            continue;
                        }
                        String line;
                        if (pendingLen > 0) {
                            pending = append(pending, pendingLen, chunk, start, i - start);
                            line = new String(pending, 0, pendingLen + i - start, StandardCharsets.UTF_8);
                            pendingLen = 0;
                        } else {
                            line = new String(chunk, start, i - start, StandardCharsets.UTF_8);
                        }
                        start = i + 1;
                        number++;
                        ctx.collect(line);
                    }
                    if (start < n) {
                        pending = append(pending, pendingLen, chunk, start, n - start);
                        pendingLen += n - start;
                        if (pendingLen >= MAX_LINE) {
                            Stdout.failure = new JobError("line " + (number + 1)
                                    + ": no end of line within " + MAX_LINE + " bytes", false);
                            throw Stdout.failure;
                        }
                    }
                }
            }
            if (pendingLen > 0 && !Stdout.closed) {
                synchronized (ctx.getCheckpointLock()) {
                    ctx.collect(new String(pending, 0, pendingLen, StandardCharsets.UTF_8));
                }
            }
        }

        private static byte[] append(byte[] to, int len, byte[] from, int off, int n) {
            if (len + n > to.length) {
                to = java.util.Arrays.copyOf(to, Math.max(to.length * 2, len + n));
            }
            System.arraycopy(from, off, to, len, n);
            return to;
        }

        @Override
        public void cancel() {
            running = false;
        }
    }

    /** The lifted operation on one line; names the line on an error. */
    static final class Apply extends RichMapFunction<String, String> {
        private final LiftedOperation operation;
        private final boolean json;
        private long number;

        Apply(LiftedOperation operation, boolean json) {
            this.operation = operation;
            this.json = json;
        }

        @Override
        public String map(String line) {
            number++;
            try {
                if (json) {
                    var instant = Json.instant(line, "{\"datetime\":\"...\",\"value\":<number>}");
                    var value = instant.get("value");
                    if (!value.isNumber()) {
                        throw new JobError("not a JSON instant {\"datetime\":\"...\",\"value\":<number>}: "
                                + LiftedOperation.quote(line), false);
                    }
                    double x = value.asDouble();
                    return Json.event(instant.get("datetime"), operation.apply(x, Double.toString(x)));
                }
                Double x = LiftedOperation.parseNumber(line);
                if (x == null) {
                    throw new JobError("not a number: " + LiftedOperation.quote(line), false);
                }
                return Double.toString(operation.apply(x, line.strip()));
            } catch (JobError e) {
                // Everything before this line is in the sink's buffer: deliver
                // it, then end the job with the error.
                Stdout.flush();
                Stdout.failure = new JobError("line " + number + ": " + e.getMessage(), false);
                throw Stdout.failure;
            }
        }
    }

    /** Results to fd 1; the source flushes. close() never throws. */
    static final class StdoutSink extends RichSinkFunction<String> {
        @Override
        public void invoke(String value, Context context) {
            if (Stdout.closed) {
                throw new JobError("stdout closed", false);
            }
            try {
                Stdout.write(value);
            } catch (IOException e) {
                Stdout.closed = true;
                throw new JobError("stdout closed", false);
            }
        }

        @Override
        public void finish() {
            Stdout.flush();
        }

        @Override
        public void close() {
            Stdout.flush();
        }
    }

    public static void main(String[] args) {
        PrintStream err = System.err;
        System.setOut(err); // whatever Flink prints goes to stderr
        Path tmp = null;
        int status;
        try {
            String framing = System.getenv().getOrDefault("MFSTREAM_FRAMING", "value");
            if (!framing.equals("value") && !framing.equals("json")) {
                throw new JobError("MFSTREAM_FRAMING must be \"value\" or \"json\", got '" + framing + "'", true);
            }
            LiftedOperation operation = null;
            Windows.Spec windows = null;
            if (args.length > 0 && args[0].equals("aggregate")) {
                if (!framing.equals("json")) {
                    throw new JobError("windowed aggregates need MFSTREAM_FRAMING=json", true);
                }
                windows = Windows.Spec.parse(args, System.getenv("MFSTREAM_QUERY"));
            } else {
                operation = LiftedOperation.fromArgs(args);
            }
            tmp = Files.createTempDirectory("mfstream-flink-");
            Path dir = tmp;
            Runtime.getRuntime().addShutdownHook(new Thread(() -> remove(dir)));
            run(operation, framing.equals("json"), windows, tmp);
            status = 0;
        } catch (JobError e) {
            err.println(NAME + ": " + e.getMessage() + (e.usage ? "\n" + USAGE : ""));
            status = 2;
        } catch (Throwable e) {
            if (Stdout.closed) {
                status = 0;
            } else if (Stdout.failure != null) {
                err.println(NAME + ": " + Stdout.failure.getMessage());
                status = 2;
            } else {
                err.println(NAME + ": the Flink job failed: " + e);
                for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
                    err.println("  caused by: " + c);
                }
                status = 1;
            }
        }
        Stdout.flush();
        err.flush();
        if (tmp != null) {
            remove(tmp);
        }
        // Halt: Flink's own shutdown hooks have nothing left to do once the
        // job and its mini-cluster have ended, and take seconds.
        Runtime.getRuntime().halt(status);
    }

    static void run(LiftedOperation operation, boolean json, Windows.Spec windows, Path tmp) throws Exception {
        Configuration conf = new Configuration();
        conf.setString("io.tmp.dirs", tmp.toString());
        conf.setString("restart-strategy.type", "none");
        conf.setString("pipeline.object-reuse", "true");
        conf.setString("taskmanager.numberOfTaskSlots", "1");
        conf.setString("pipeline.auto-watermark-interval", "0"); // watermarks come with the records and watermark lines
        System.setProperty("java.io.tmpdir", tmp.toString());
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, conf);
        var lines = env.addSource(new StdinSource(), "stdin");
        var results = windows != null
                ? Windows.pipeline(lines, windows)
                : lines.map(new Apply(operation, json)).name(operation.op);
        results.addSink(new StdoutSink()).name("stdout");
        env.execute("mfstream " + (windows != null ? windows.kind + " " + windows.aggregation : operation.op));
    }

    static void remove(Path dir) {
        try (Stream<Path> paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException | RuntimeException e) {
            // already gone, or removed by the other path (hook or main)
        }
    }
}
