// The mfstream bridge job on Apache Spark: a Structured Streaming query in
// local[1] (driver and executor in this JVM, bound to loopback), speaking the
// value framing of jobs/README.md.
//
//     java -cp CLASSES:SPARK_JARS/* MfstreamSparkJob OP [ARG]
//
// - The main thread reads stdin (fd 0) in chunks of up to 64 KiB and adds the
//   complete lines of each chunk, numbered, to a MemoryStream (the public
//   socket source stalls on large batches).
// - The streaming query maps each line through the lifted operation (a Spark
//   map over the micro-batch, one partition, so in order) and a foreachBatch
//   sink writes the batch's results to fd 1 and flushes: one flush per
//   micro-batch, which is also Spark's unit of latency. Trigger
//   ProcessingTime(0): the next micro-batch starts as soon as data is there.
// - Structured Streaming has no end of stream: at EOF the job waits until
//   every line read has been written, then stops the query and exits 0.
// - A line that is not a number, or with bridge protocol 1 a domain error:
//   the results before it are written, then "mfstream-spark: line N: ..." on
//   stderr and exit 2. With protocol 2 (MFSTREAM_PROTOCOL=2, which the host
//   sets) a domain error is answered with an error line, "!" and the
//   message, and the job goes on: the host applies the query's onError.
//   Bad usage: exit 2 before Spark starts. The host closing stdout: exit 0.
// - Spark's local dirs, checkpoints and warehouse go to a per-run temp folder,
//   removed at exit.

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
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

import org.apache.spark.api.java.function.MapFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.execution.streaming.MemoryStream;
import org.apache.spark.sql.streaming.StreamingQuery;
import org.apache.spark.sql.streaming.Trigger;

import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

public final class MfstreamSparkJob {
    static final String NAME = "mfstream-spark";
    static final String USAGE = "usage: MfstreamSparkJob OP [ARG]   (MFSTREAM_FRAMING=value)";
    static final int CHUNK = 64 * 1024;
    static final int MAX_LINE = 1024 * 1024;
    /** Lines read but not yet answered, at most (about): memory stays flat. */
    static final long MAX_PENDING = 100_000;
    /** Marks a map result that is an error message rather than a number. */
    static final String ERROR = "!";
    /**
     * Marks a map result for a value with no result (ln of 0, an overflow)
     * under bridge protocol 2: the sink answers it with an error line, "!"
     * and the message, and the job goes on; the host applies the query's
     * onError. Under protocol 1 such a value is an ERROR, as before.
     */
    static final String NO_RESULT = "?";
    /** Whether the host speaks bridge protocol 2 (MFSTREAM_PROTOCOL). */
    static final boolean PROTOCOL_2 = protocol() >= 2;

    private static int protocol() {
        try {
            return Integer.parseInt(System.getenv().getOrDefault("MFSTREAM_PROTOCOL", "1").trim());
        } catch (NumberFormatException e) {
            return 1;
        }
    }

    /** The lifted operation on one numbered line: its result, or ERROR + message. */
    static final class Apply implements MapFunction<Tuple2<Long, String>, String> {
        private final LiftedOperation operation;

        Apply(LiftedOperation operation) {
            this.operation = operation;
        }

        @Override
        public String call(Tuple2<Long, String> line) {
            Double x = LiftedOperation.parseNumber(line._2());
            if (x == null) {
                return ERROR + "line " + line._1() + ": not a number: " + LiftedOperation.quote(line._2());
            }
            try {
                return Double.toString(operation.apply(x, line._2().strip()));
            } catch (JobError e) {
                if (PROTOCOL_2) {
                    return NO_RESULT + e.getMessage();
                }
                return ERROR + "line " + line._1() + ": " + e.getMessage();
            }
        }
    }

    /** What the sink has done, shared with the main thread. */
    static final class Progress {
        static final OutputStream OUT = new FileOutputStream(FileDescriptor.out);
        static long written; // lines answered, guarded by Progress.class
        static boolean closed; // the host closed our stdout
        static String failure; // the error that ends the job

        /** The foreachBatch sink: writes a micro-batch's results in order, then flushes. */
        static void sink(Dataset<String> batch, Long id) {
            List<String> results = batch.collectAsList();
            StringBuilder out = new StringBuilder(results.size() * 20);
            long answered = 0;
            String error = null;
            for (String r : results) {
                if (r.startsWith(ERROR)) {
                    error = r.substring(ERROR.length());
                    break;
                }
                if (r.startsWith(NO_RESULT)) {
                    // Protocol 2: this line's answer is an error line.
                    out.append('!').append(r, NO_RESULT.length(), r.length()).append('\n');
                    answered++;
                    continue;
                }
                out.append(r).append('\n');
                answered++;
            }
            boolean broken = false;
            try {
                OUT.write(out.toString().getBytes(StandardCharsets.US_ASCII));
                OUT.flush();
            } catch (IOException e) {
                broken = true;
            }
            synchronized (Progress.class) {
                written += answered;
                closed |= broken;
                if (error != null && failure == null) {
                    failure = error;
                }
                Progress.class.notifyAll();
            }
        }
    }

    public static void main(String[] args) {
        PrintStream err = System.err;
        System.setOut(err); // whatever Spark prints goes to stderr
        Path tmp = null;
        int status;
        try {
            String framing = System.getenv().getOrDefault("MFSTREAM_FRAMING", "value");
            if (!framing.equals("value")) {
                throw new JobError("MFSTREAM_FRAMING must be \"value\" (this job serves the value framing only), got '"
                        + framing + "'", true);
            }
            LiftedOperation operation = LiftedOperation.fromArgs(args);
            tmp = Files.createTempDirectory("mfstream-spark-");
            Path dir = tmp;
            Runtime.getRuntime().addShutdownHook(new Thread(() -> remove(dir)));
            status = run(operation, tmp, err);
        } catch (JobError e) {
            err.println(NAME + ": " + e.getMessage() + (e.usage ? "\n" + USAGE : ""));
            status = 2;
        } catch (Throwable e) {
            err.println(NAME + ": the Spark job failed: " + e);
            for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
                err.println("  caused by: " + c);
            }
            status = 1;
        }
        err.flush();
        if (tmp != null) {
            remove(tmp);
        }
        // Halt: the query has been stopped and every result written; Spark's
        // own shutdown hooks only clean up what the temp folder held.
        Runtime.getRuntime().halt(status);
    }

    static int run(LiftedOperation operation, Path tmp, PrintStream err) throws Exception {
        System.setProperty("java.io.tmpdir", tmp.toString());
        SparkSession spark = SparkSession.builder()
                .appName("mfstream " + operation.op)
                .master("local[1]")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.ui.enabled", "false")
                .config("spark.local.dir", tmp.resolve("local").toString())
                .config("spark.sql.warehouse.dir", tmp.resolve("warehouse").toString())
                .config("spark.sql.streaming.checkpointLocation", tmp.resolve("checkpoint").toString())
                .config("spark.sql.shuffle.partitions", "1")
                .config("spark.sql.adaptive.enabled", "false")
                .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
                .config("spark.task.maxFailures", "1")
                .getOrCreate();
        spark.sparkContext().setLogLevel("ERROR");

        MemoryStream<Tuple2<Long, String>> lines = new MemoryStream<>(1, spark.sqlContext(),
                scala.Option.apply((Object) 1), Encoders.tuple(Encoders.LONG(), Encoders.STRING()));
        StreamingQuery query = lines.toDS()
                .map(new Apply(operation), Encoders.STRING())
                .writeStream()
                .foreachBatch(Progress::sink)
                .trigger(Trigger.ProcessingTime(0))
                .start();

        InputStream in = new FileInputStream(FileDescriptor.in);
        byte[] chunk = new byte[CHUNK];
        byte[] pending = new byte[CHUNK];
        int pendingLen = 0;
        long number = 0;
        while (true) {
            synchronized (Progress.class) {
                if (Progress.closed || Progress.failure != null) {
                    break;
                }
            }
            int n = in.read(chunk);
            if (n < 0) {
                break;
            }
            List<Tuple2<Long, String>> batch = new ArrayList<>();
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
                batch.add(new Tuple2<>(++number, line));
            }
            if (start < n) {
                pending = append(pending, pendingLen, chunk, start, n - start);
                pendingLen += n - start;
                if (pendingLen >= MAX_LINE) {
                    throw new JobError("line " + (number + 1) + ": no end of line within " + MAX_LINE + " bytes", false);
                }
            }
            if (!batch.isEmpty()) {
                lines.addData(CollectionConverters.asScala(batch));
            }
            // Backpressure: the MemoryStream holds what is not yet answered
            // (it drops batches once committed); stop reading while too much is.
            synchronized (Progress.class) {
                while (number - Progress.written > MAX_PENDING && !Progress.closed
                        && Progress.failure == null && query.isActive()) {
                    Progress.class.wait(50);
                }
            }
        }
        if (pendingLen > 0) {
            List<Tuple2<Long, String>> last = new ArrayList<>();
            last.add(new Tuple2<>(++number, new String(pending, 0, pendingLen, StandardCharsets.UTF_8)));
            lines.addData(CollectionConverters.asScala(last));
        }

        // No end of stream: wait until everything read has been answered.
        synchronized (Progress.class) {
            while (Progress.written < number && !Progress.closed && Progress.failure == null
                    && query.isActive()) {
                Progress.class.wait(50);
            }
        }
        String failure;
        boolean closed;
        long written;
        synchronized (Progress.class) {
            failure = Progress.failure;
            closed = Progress.closed;
            written = Progress.written;
        }
        if (query.exception().isDefined() && failure == null && !closed) {
            throw query.exception().get();
        }
        query.stop();
        if (closed) {
            return 0;
        }
        if (failure != null) {
            err.println(NAME + ": " + failure);
            return 2;
        }
        if (written < number) {
            err.println(NAME + ": the query ended having answered " + written + " of " + number + " lines");
            return 1;
        }
        return 0;
    }

    private static byte[] append(byte[] to, int len, byte[] from, int off, int n) {
        if (len + n > to.length) {
            to = java.util.Arrays.copyOf(to, Math.max(to.length * 2, len + n));
        }
        System.arraycopy(from, off, to, len, n);
        return to;
    }

    static void remove(Path dir) {
        try (Stream<Path> paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException | RuntimeException e) {
            // already gone, or removed by the other path (hook or main)
        }
    }
}
