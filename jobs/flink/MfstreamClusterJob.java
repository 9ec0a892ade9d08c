// The mfstream bridge job on a Flink session cluster: the program that the
// client (jobs/flink-cluster-client, `mfstream-flink-client`) submits with
// POST /jars/<id>/run. It connects back to the client:
//
//     MfstreamClusterJob [--protocol=N] HOST IN_PORT OUT_PORT OP [ARG]
//
//     socketTextStream(HOST, IN_PORT) -> map (the lifted operation) -> a sink
//     writing one result per line to HOST:OUT_PORT
//
// at parallelism 1 with restarts off, chained into one task (the legacy
// addSink stays chained; sinkTo would put a network hop with a 100 ms
// buffer timeout between the map and the sink).
//
// - Value framing (jobs/README.md): one number per line each way, in order.
// - The sink flushes after a short idle gap (200 us), or 5 ms after its
//   oldest unflushed result, and whenever its 64 KiB buffer fills: a burst
//   costs one write per 64 KiB, a lone live record comes out at once.
// - A record with no result (a domain error: ln 0, exp 1000): under bridge
//   protocol 2 (--protocol=2, which the client passes when the host sets
//   MFSTREAM_PROTOCOL=2) an error line "!message" in the answer's place, and
//   the job goes on. Under protocol 1, and for a line that is not a number,
//   the job fails with a JobError "line N: ..." (the client fetches it from
//   /jobs/<id>/exceptions and prints it); the results before that line are
//   flushed by close().
// - At the end of the input (the client shuts its side of IN_PORT) the
//   source ends, the sink flushes and closes: the job FINISHES.
// - close() never throws: a sink whose close() throws (a broken pipe when
//   the client died) takes the whole TaskManager down.
// - A connection back to the client that fails (the client listens on an
//   address this TaskManager cannot reach: --listen / MFSTREAM_FLINK_LISTEN on
//   mfstream's machine) fails the job with a ConnectException naming the
//   address, the port and that setting, not Java's bare "Connection
//   refused". It has no cause: the client prints the deepest cause.

import java.io.IOException;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.NoRouteToHostException;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.util.concurrent.locks.LockSupport;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.legacy.RichSinkFunction;
import org.apache.flink.streaming.api.functions.source.legacy.SocketTextStreamFunction;

public final class MfstreamClusterJob {
    static final String USAGE =
            "usage: MfstreamClusterJob [--protocol=N] HOST IN_PORT OUT_PORT OP [ARG]";
    static final int BUFFER = 64 * 1024;

    /**
     * Why the job cannot connect back to the client at host:port, for
     * `what` (its records, its results): the address, the port, this
     * TaskManager and the setting to change. No cause, so that it is the
     * deepest cause the client prints.
     */
    static ConnectException unreachable(String what, String host, int port, IOException e) {
        String here;
        try {
            here = InetAddress.getLocalHost().getHostName();
        } catch (IOException unknown) {
            here = "this host";
        }
        return new ConnectException("cannot connect to mfstream-flink-client at " + host + ":" + port
                + " for the job's " + what + " from TaskManager " + here + ": " + e.getMessage()
                + "; the client listens on --listen, else MFSTREAM_FLINK_LISTEN, where mfstream runs:"
                + " set it to an address of that machine this TaskManager can reach");
    }

    /**
     * Flink's socket source on the client's IN_PORT; a failed connection
     * names the address (a connection lost later is Flink's own error).
     */
    static final class ClientSource extends SocketTextStreamFunction {
        private final String host;
        private final int port;

        ClientSource(String host, int port) {
            super(host, port, "\n", 0);
            this.host = host;
            this.port = port;
        }

        @Override
        public void run(SourceContext<String> context) throws Exception {
            try {
                super.run(context);
            } catch (ConnectException | NoRouteToHostException | SocketTimeoutException
                    | UnknownHostException e) {
                // Only connecting throws these: the source sets no read timeout.
                throw unreachable("records", host, port, e);
            }
        }
    }

    /**
     * The lifted operation on one line; names the line on an error, or
     * answers a record with no result with an error line (protocol 2).
     */
    static final class Apply extends RichMapFunction<String, String> {
        private final LiftedOperation operation;
        private final boolean errorLines;
        private long number;

        Apply(LiftedOperation operation, boolean errorLines) {
            this.operation = operation;
            this.errorLines = errorLines;
        }

        @Override
        public String map(String line) {
            number++;
            Double x = LiftedOperation.parseNumber(line);
            if (x == null) {
                throw new JobError("line " + number + ": not a number: " + LiftedOperation.quote(line));
            }
            try {
                return Double.toString(operation.apply(x, line.strip()));
            } catch (JobError e) {
                if (errorLines) {
                    return "!" + e.getMessage().replace('\n', ' ');
                }
                throw new JobError("line " + number + ": " + e.getMessage());
            }
        }
    }

    /**
     * Results to the client's OUT_PORT through a 64 KiB buffer, flushed by
     * a companion thread after an idle gap. invoke and the flusher share
     * the buffer under a lock, uncontended but for a flush.
     */
    static final class ClientSink extends RichSinkFunction<String> {
        static final long IDLE_GAP_NANOS = 200_000;
        static final long MAX_DELAY_NANOS = 5_000_000;

        private final String host;
        private final int port;
        private transient Socket socket;
        private transient OutputStream out;
        private transient byte[] buf;
        private transient int len;
        private transient long written; // results written, for the flusher's idle test
        private transient long dirtySince; // 0 when everything is flushed
        private transient volatile boolean closing;
        private transient Thread flusher;
        private transient Object lock;

        ClientSink(String host, int port) {
            this.host = host;
            this.port = port;
        }

        @Override
        public void open(OpenContext context) throws IOException {
            lock = new Object();
            buf = new byte[BUFFER];
            socket = new Socket();
            socket.setTcpNoDelay(true);
            try {
                socket.connect(new InetSocketAddress(host, port), 10_000);
            } catch (IOException e) {
                socket.close();
                throw unreachable("results", host, port, e);
            }
            out = socket.getOutputStream();
            flusher = new Thread(this::flushLoop, "mfstream-sink-flusher");
            flusher.setDaemon(true);
            flusher.start();
        }

        @Override
        public void invoke(String value, Context context) throws IOException {
            int n = value.length();
            synchronized (lock) {
                if (len + n + 1 > buf.length) {
                    drain();
                }
                if (n + 1 > buf.length) {
                    out.write((value + "\n").getBytes(java.nio.charset.StandardCharsets.UTF_8));
                } else {
                    for (int i = 0; i < n; i++) {
                        buf[len++] = (byte) value.charAt(i); // results are ASCII
                    }
                    buf[len++] = '\n';
                }
                written++;
                if (dirtySince == 0) {
                    dirtySince = System.nanoTime();
                    LockSupport.unpark(flusher);
                }
            }
        }

        /** Writes the buffer out; the caller holds the lock. */
        private void drain() throws IOException {
            if (len > 0) {
                int n = len;
                len = 0;
                out.write(buf, 0, n);
            }
        }

        private void flushLoop() {
            while (!closing) {
                long seen;
                long since;
                synchronized (lock) {
                    seen = written;
                    since = dirtySince;
                }
                if (since == 0) {
                    LockSupport.park(this);
                    continue;
                }
                LockSupport.parkNanos(this, IDLE_GAP_NANOS);
                synchronized (lock) {
                    if (dirtySince != 0
                            && (written == seen || System.nanoTime() - dirtySince > MAX_DELAY_NANOS)) {
                        try {
                            drain();
                        } catch (IOException e) {
                            // the next invoke fails on the broken socket
                        }
                        dirtySince = 0;
                    }
                }
            }
        }

        @Override
        public void finish() throws IOException {
            synchronized (lock) {
                drain();
                dirtySince = 0;
            }
        }

        @Override
        public void close() {
            closing = true;
            try {
                if (flusher != null) {
                    LockSupport.unpark(flusher);
                }
                if (lock != null) {
                    synchronized (lock) {
                        drain();
                    }
                }
            } catch (Throwable e) {
                // the client is gone: nobody wants the results
            }
            try {
                if (socket != null) {
                    socket.close();
                }
            } catch (Throwable e) {
                // already closed
            }
        }
    }

    public static void main(String[] args) throws Exception {
        // Bridge protocol 2: records with no result are error lines.
        int protocol = 1;
        if (args.length > 0 && args[0].startsWith("--protocol=")) {
            protocol = Integer.parseInt(args[0].substring("--protocol=".length()));
            args = java.util.Arrays.copyOfRange(args, 1, args.length);
        }
        if (args.length < 4 || args.length > 5) {
            throw new JobError("expected HOST IN_PORT OUT_PORT OP [ARG], got " + args.length
                    + " arguments\n" + USAGE);
        }
        String host = args[0];
        int inPort = Integer.parseInt(args[1]);
        int outPort = Integer.parseInt(args[2]);
        LiftedOperation operation = new LiftedOperation(args[3], args.length == 5 ? args[4] : null);

        // Restarts off: a failure ends the query with its reason; the host's
        // own restart policy ([engine.restart]) replays what was not answered
        // on a new job.
        Configuration conf = new Configuration();
        conf.setString("restart-strategy.type", "none");
        conf.setString("pipeline.object-reuse", "true");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        env.addSource(new ClientSource(host, inPort), "client " + host + ":" + inPort, Types.STRING)
                .map(new Apply(operation, protocol >= 2))
                .name(operation.op)
                .addSink(new ClientSink(host, outPort))
                .name("client " + host + ":" + outPort);
        env.executeAsync("mfstream " + String.join(" ", java.util.Arrays.copyOfRange(args, 3, args.length))
                + " <-> " + host + ":" + inPort + "/" + outPort);
    }
}
