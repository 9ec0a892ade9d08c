// Windowed aggregation for the mfstream Flink job, done by Flink's own
// windows, with the semantics of mfstream's `local` engine
// (jobs/reference/windows.py):
//
// - COUNT n: GlobalWindows with a trigger that fires every n records and, at
//   the end of input (the final watermark), fires what is left as partial.
// - TUMBLING: TumblingEventTimeWindows, epoch-aligned like local's.
// - HOPPING size/hop: SlidingEventTimeWindows with the offset that puts the
//   window ends on multiples of the hop (local's boundaries).
// - Event time is the record's datetime in nanoseconds since the epoch
//   (Flink's "milliseconds" are only a unit of account: windows are sized
//   in the same nanoseconds). A watermark of (latest datetime - grace - 1)
//   follows every record (grace: the query's allowed lateness, "grace" in
//   seconds, 0 when absent), so a window closes when a record at or past
//   its end plus the grace arrives, as in local: Flink's bounded
//   out-of-orderness, emitted per record; the final watermark at the end of
//   input closes the open windows, which are marked partial.
// - A watermark line from the host, {"watermark":W} (no record earlier than
//   W follows), becomes a marker Rec that only the watermark generator
//   sees: it emits Flink's Watermark(W - 1), the same as a record at W
//   would, and a filter drops the marker before the window operator. So
//   Flink's own timers fire every window ending at or before W, at once,
//   in the source's thread; the source flushes the results before its next
//   read. COUNT windows ignore watermark lines.
// - Late records (every window of theirs has closed) are dropped by Flink's
//   window operator; the parse step, chained in the same thread, sees the
//   same watermark and counts them, and the next window result carries the
//   count as "late", as local does.

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.flink.api.common.eventtime.Watermark;
import org.apache.flink.api.common.eventtime.WatermarkGenerator;
import org.apache.flink.api.common.eventtime.WatermarkOutput;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.state.ReducingState;
import org.apache.flink.api.common.state.ReducingStateDescriptor;
import org.apache.flink.api.common.typeutils.base.LongSerializer;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamUtils;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.GlobalWindows;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.triggers.Trigger;
import org.apache.flink.streaming.api.windowing.triggers.TriggerResult;
import org.apache.flink.streaming.api.windowing.windows.GlobalWindow;
import org.apache.flink.streaming.api.windowing.windows.Window;
import org.apache.flink.util.Collector;

final class Windows {
    private Windows() {}

    /**
     * One instant on its way to a window: event time, datetime as given,
     * value; or, with `watermark` set, the host's watermark at time t.
     */
    public static final class Rec {
        public boolean watermark;
        public long t;
        public String dt;
        public double num;
        public String text;
        public boolean flag;

        public Rec() {}
    }

    /** The query's window and aggregation, from MFSTREAM_QUERY. */
    static final class Spec implements java.io.Serializable {
        String type; // the property type: TReal, TInteger, TText, TBoolean
        String valueType; // TReal when a transform comes first
        String aggregation;
        String kind; // COUNT, TUMBLING, HOPPING
        long size;
        long span; // nanoseconds
        long hop; // nanoseconds
        long grace; // nanoseconds of allowed lateness
        boolean emitPartial;
        LiftedOperation operation; // null when none comes first

        static long unit(JsonNode window, String key) {
            String u = window.path(key).asText("");
            switch (u) {
                case "SECONDS": return 1_000_000_000L;
                case "MINUTES": return 60_000_000_000L;
                case "HOURS": return 3_600_000_000_000L;
                default:
                    throw usage("window." + key + " must be SECONDS, MINUTES or HOURS, got " + window.path(key));
            }
        }

        static long positive(JsonNode window, String key) {
            JsonNode v = window.path(key);
            if (!v.isIntegralNumber() || v.asLong() <= 0) {
                throw usage("window." + key + " must be a positive integer, got " + v);
            }
            return v.asLong();
        }

        static Spec parse(String[] args, String json) {
            JsonNode q;
            try {
                q = Json.MAPPER.readTree(json == null ? "" : json);
            } catch (Exception e) {
                throw usage("MFSTREAM_QUERY is not a JSON query (" + e.getMessage() + ")");
            }
            if (q == null || !q.isObject()) {
                throw usage("MFSTREAM_QUERY is not a JSON object");
            }
            Spec s = new Spec();
            s.aggregation = q.path("aggregation").asText(null);
            if (args.length != 2 || !args[1].equals(s.aggregation)) {
                throw usage("expected `aggregate " + s.aggregation + "` as MFSTREAM_QUERY says, got "
                        + String.join(" ", args));
            }
            if (q.has("operation")) {
                String[] op = q.has("arg")
                        ? new String[] {q.get("operation").asText(), Double.toString(q.get("arg").asDouble())}
                        : new String[] {q.get("operation").asText()};
                s.operation = LiftedOperation.fromArgs(op);
            }
            s.type = q.path("type").asText("TReal");
            s.valueType = s.operation != null ? "TReal" : s.type;
            String allowed;
            switch (s.valueType) {
                case "TReal": case "TInteger": allowed = "COUNT SUM AVG MIN MAX"; break;
                case "TText": allowed = "COUNT COUNT_DISTINCT"; break;
                case "TBoolean": allowed = "COUNT ANY ALL COUNT_TRUE COUNT_FALSE"; break;
                default: throw usage("unknown property type '" + s.type + "'");
            }
            if (!List.of(allowed.split(" ")).contains(s.aggregation)) {
                throw usage(s.valueType + " allows " + allowed.replace(" ", ", ") + ", not '" + s.aggregation + "'");
            }
            JsonNode w = q.path("window");
            s.kind = w.path("type").asText("");
            s.size = positive(w, "size");
            switch (s.kind) {
                case "COUNT":
                    break;
                case "TUMBLING":
                    s.span = s.size * unit(w, "unit");
                    break;
                case "HOPPING":
                    s.span = s.size * unit(w, "unit");
                    s.hop = positive(w, "hop") * unit(w, "hopUnit");
                    if (s.hop > s.span) {
                        throw usage("window.hop must not be larger than window.size");
                    }
                    break;
                default:
                    throw usage("window.type must be COUNT, TUMBLING or HOPPING, got " + w.path("type"));
            }
            s.emitPartial = q.path("emitPartial").asBoolean(true);
            JsonNode grace = q.path("grace");
            if (!grace.isMissingNode() && !grace.isNull()) {
                if (!grace.canConvertToLong() || !grace.isIntegralNumber() || grace.asLong() < 0) {
                    throw usage("grace must be a non-negative integer number of seconds, got " + grace);
                }
                s.grace = grace.asLong() * 1_000_000_000L;
            }
            return s;
        }

        /** The end of the last window holding time t: t is late once it is at most the watermark + 1. */
        long lastEnd(long t) {
            if (kind.equals("TUMBLING")) {
                return t - Math.floorMod(t, span) + span;
            }
            return (t + span) - Math.floorMod(t + span, hop);
        }
    }

    static JobError usage(String message) {
        return new JobError("MFSTREAM_QUERY: " + message, true);
    }

    /**
     * Late records seen since the last window result. Parse and the window
     * function run chained in one thread: no lock needed.
     */
    static long late;

    /** A JSON instant to a Rec: checks the value's type, applies the transform, parses the datetime. */
    static final class Parse implements MapFunction<String, Rec> {
        private final Spec spec;
        private long number;
        private long latest = Long.MIN_VALUE; // event time so far, less the grace

        Parse(Spec spec) {
            this.spec = spec;
        }

        @Override
        public Rec map(String line) {
            number++;
            try {
                return parse(line);
            } catch (JobError e) {
                MfstreamFlinkJob.Stdout.flush();
                MfstreamFlinkJob.Stdout.failure = new JobError("line " + number + ": " + e.getMessage(), false);
                throw MfstreamFlinkJob.Stdout.failure;
            }
        }

        private Rec parse(String line) {
            JsonNode node = Json.read(line);
            String mark = Json.watermark(node);
            if (mark != null) {
                return watermark(mark);
            }
            ObjectNode obj = Json.instant(node, line, "{\"datetime\":\"...\",\"value\":<number, string or boolean>}"
                    + " or {\"watermark\":\"...\"}");
            Rec r = new Rec();
            r.dt = obj.get("datetime").asText();
            JsonNode v = obj.get("value");
            String shown = "record at " + r.dt + " has value " + v;
            if (spec.operation != null) {
                if (!v.isNumber()) {
                    throw new JobError(shown + ", but the operation takes numbers", false);
                }
                double x = v.asDouble();
                r.num = spec.operation.apply(x, Double.toString(x));
            } else {
                switch (spec.type) {
                    case "TText":
                        if (!v.isTextual()) {
                            throw new JobError(shown + ", but TText values are strings", false);
                        }
                        r.text = v.asText();
                        break;
                    case "TBoolean":
                        if (!v.isBoolean()) {
                            throw new JobError(shown + ", but TBoolean values are booleans", false);
                        }
                        r.flag = v.asBoolean();
                        break;
                    default:
                        if (!v.isNumber()) {
                            throw new JobError(shown + ", but " + spec.type + " values are numbers", false);
                        }
                        r.num = v.asDouble();
                }
            }
            if (!spec.kind.equals("COUNT")) {
                Long t = nanos(r.dt);
                if (t == null) {
                    throw new JobError("record at '" + r.dt + "': not a datetime", false);
                }
                r.t = t;
                // Flink's window operator drops a record whose every window
                // ends at or before the watermark, which is latest - 1.
                if (latest != Long.MIN_VALUE && spec.lastEnd(t) <= latest) {
                    late++;
                }
                latest = Math.max(latest, t - spec.grace);
            }
            return r;
        }

        /** A watermark line's marker: the datetime checked, the lateness bound raised. */
        private Rec watermark(String dt) {
            Long w = nanos(dt);
            if (w == null) {
                throw new JobError("watermark '" + dt + "': not a datetime", false);
            }
            Rec r = new Rec();
            r.watermark = true;
            r.dt = dt;
            r.t = w;
            if (!spec.kind.equals("COUNT")) {
                // The generator emits W - 1 (when larger than its last): a
                // record is late from now on when its last window ends by W.
                latest = Math.max(latest, w);
            }
            return r;
        }
    }

    /**
     * A watermark of (latest event time - grace - 1) after every record, and
     * of (W - 1) after the host's watermark W, which comes with the grace
     * subtracted (not for COUNT windows): never backwards.
     */
    static final class EveryRecord implements WatermarkGenerator<Rec> {
        private final boolean count;
        private final long grace;
        private long latest = Long.MIN_VALUE;

        EveryRecord(boolean count, long grace) {
            this.count = count;
            this.grace = grace;
        }

        @Override
        public void onEvent(Rec r, long timestamp, WatermarkOutput out) {
            if (r.watermark && count) {
                return;
            }
            long w = r.watermark ? timestamp : timestamp - grace;
            if (w > latest) {
                latest = w;
                out.emitWatermark(new Watermark(latest - 1));
            }
        }

        @Override
        public void onPeriodicEmit(WatermarkOutput out) {}
    }

    /** COUNT windows: fire every n records; at the end of input, fire the rest. */
    static final class CountOrEnd extends Trigger<Rec, GlobalWindow> {
        private final long size;
        private final ReducingStateDescriptor<Long> count =
                new ReducingStateDescriptor<>("count", Long::sum, LongSerializer.INSTANCE);

        CountOrEnd(long size) {
            this.size = size;
        }

        @Override
        public TriggerResult onElement(Rec r, long timestamp, GlobalWindow w, TriggerContext ctx) throws Exception {
            ReducingState<Long> c = ctx.getPartitionedState(count);
            c.add(1L);
            ctx.registerEventTimeTimer(w.maxTimestamp()); // the end of input
            if (c.get() >= size) {
                c.clear();
                return TriggerResult.FIRE_AND_PURGE;
            }
            return TriggerResult.CONTINUE;
        }

        @Override
        public TriggerResult onEventTime(long time, GlobalWindow w, TriggerContext ctx) throws Exception {
            ReducingState<Long> c = ctx.getPartitionedState(count);
            Long n = c.get();
            c.clear();
            return n != null && n > 0 ? TriggerResult.FIRE_AND_PURGE : TriggerResult.PURGE;
        }

        @Override
        public TriggerResult onProcessingTime(long time, GlobalWindow w, TriggerContext ctx) {
            return TriggerResult.CONTINUE;
        }

        @Override
        public void clear(GlobalWindow w, TriggerContext ctx) {
            ctx.getPartitionedState(count).clear();
        }
    }

    /** Whether the host speaks bridge protocol 2 (error lines for one result). */
    static final boolean PROTOCOL_2 = protocol() >= 2;

    private static int protocol() {
        try {
            return Integer.parseInt(System.getenv().getOrDefault("MFSTREAM_PROTOCOL", "1").trim());
        } catch (NumberFormatException e) {
            return 1;
        }
    }

    /** One window's records to its result line. */
    static final class Result<W extends Window> extends ProcessWindowFunction<Rec, String, Integer, W> {
        private final Spec spec;

        Result(Spec spec) {
            this.spec = spec;
        }

        @Override
        public void process(Integer key, Context ctx, Iterable<Rec> records, Collector<String> out) {
            boolean partial = ctx.currentWatermark() == Long.MAX_VALUE;
            if (partial && !spec.emitPartial) {
                return;
            }
            List<Rec> rs = new ArrayList<>();
            records.forEach(rs::add);
            if (rs.isEmpty()) {
                return;
            }
            ObjectNode e = Json.MAPPER.createObjectNode();
            e.put("windowStart", rs.get(0).dt);
            e.put("windowEnd", rs.get(rs.size() - 1).dt);
            String error = aggregate(rs, e);
            e.put("count", rs.size());
            if (error != null) {
                // Protocol 2: this window has no result; the host applies
                // the query's onError (late stays for the next window).
                e.put("error", error);
                out.collect(e.toString());
                return;
            }
            if (partial) {
                e.put("partial", true);
            }
            if (late > 0) {
                e.put("late", late);
                late = 0;
            }
            out.collect(e.toString());
        }

        /**
         * Puts the window's aggregate in {@code e}. A SUM or AVG that is not
         * finite ends the job, as protocol 1 has it; with protocol 2
         * (MFSTREAM_PROTOCOL=2) it is returned, for an error line instead.
         */
        private String aggregate(List<Rec> rs, ObjectNode e) {
            switch (spec.aggregation) {
                case "COUNT":
                    e.put("value", rs.size());
                    return null;
                case "COUNT_DISTINCT": {
                    HashSet<String> seen = new HashSet<>();
                    rs.forEach(r -> seen.add(r.text));
                    e.put("value", seen.size());
                    return null;
                }
                case "ANY":
                    e.put("value", rs.stream().anyMatch(r -> r.flag));
                    return null;
                case "ALL":
                    e.put("value", rs.stream().allMatch(r -> r.flag));
                    return null;
                case "COUNT_TRUE":
                    e.put("value", rs.stream().filter(r -> r.flag).count());
                    return null;
                case "COUNT_FALSE":
                    e.put("value", rs.stream().filter(r -> !r.flag).count());
                    return null;
                case "MIN":
                    e.put("value", rs.stream().mapToDouble(r -> r.num).min().getAsDouble());
                    return null;
                case "MAX":
                    e.put("value", rs.stream().mapToDouble(r -> r.num).max().getAsDouble());
                    return null;
                default: break;
            }
            // SUM and AVG: Neumaier's compensated sum, as local's.
            double sum = 0, comp = 0;
            for (Rec r : rs) {
                double x = r.num, t = sum + x;
                comp += Math.abs(sum) >= Math.abs(x) ? (sum - t) + x : (x - t) + sum;
                sum = t;
            }
            double v = spec.aggregation.equals("SUM") ? sum + comp : (sum + comp) / rs.size();
            if (!Double.isFinite(v)) {
                String message = "the " + spec.aggregation + " of the window from " + rs.get(0).dt
                        + " to " + rs.get(rs.size() - 1).dt + " overflows";
                if (PROTOCOL_2) {
                    return message;
                }
                MfstreamFlinkJob.Stdout.flush();
                MfstreamFlinkJob.Stdout.failure = new JobError(message, false);
                throw MfstreamFlinkJob.Stdout.failure;
            }
            e.put("value", v);
            return null;
        }
    }

    /** The windowed part of the pipeline, from lines to result lines. */
    static DataStream<String> pipeline(DataStream<String> lines, Spec spec) {
        boolean count = spec.kind.equals("COUNT");
        DataStream<Rec> recs = lines.map(new Parse(spec)).name("parse")
                .assignTimestampsAndWatermarks(WatermarkStrategy.<Rec>forGenerator(ctx -> new EveryRecord(count, spec.grace))
                        .withTimestampAssigner((r, ts) -> r.t))
                .name("event time")
                // The generator has turned the host's watermarks into Flink's.
                .filter(r -> !r.watermark).name("records");
        // One key, forward partitioning: the window operator stays chained
        // to the source, in its thread (a keyBy would add a network hop).
        KeyedStream<Rec, Integer> keyed = DataStreamUtils.reinterpretAsKeyedStream(recs, r -> 0);
        switch (spec.kind) {
            case "COUNT":
                return keyed.window(GlobalWindows.create()).trigger(new CountOrEnd(spec.size))
                        .process(new Result<>(spec)).name("COUNT " + spec.aggregation);
            case "TUMBLING":
                return keyed.window(TumblingEventTimeWindows.of(java.time.Duration.ofMillis(spec.span)))
                        .process(new Result<>(spec)).name("TUMBLING " + spec.aggregation);
            default:
                long offset = Math.floorMod(-spec.span, spec.hop);
                return keyed.window(SlidingEventTimeWindows.of(java.time.Duration.ofMillis(spec.span),
                                java.time.Duration.ofMillis(spec.hop), java.time.Duration.ofMillis(offset)))
                        .process(new Result<>(spec)).name("HOPPING " + spec.aggregation);
        }
    }

    // 2026-01-01T00:00:00Z, ...+00:00, ... +00, 2026-01-01 00:00:00.5+05:30, naive (UTC)
    private static final Pattern DATETIME = Pattern.compile(
            "(\\d{4})-(\\d{2})-(\\d{2})[T ](\\d{2}):(\\d{2}):(\\d{2})(?:\\.(\\d{1,9}))? ?(Z|[+-]\\d{2}(?::?\\d{2})?)?");

    /** Nanoseconds since the epoch, or null when text is not a datetime (local's forms). */
    static Long nanos(String text) {
        Matcher m = DATETIME.matcher(text);
        if (!m.matches()) {
            return null;
        }
        int y = Integer.parseInt(m.group(1)), mo = Integer.parseInt(m.group(2)), d = Integer.parseInt(m.group(3));
        int h = Integer.parseInt(m.group(4)), mi = Integer.parseInt(m.group(5)), s = Integer.parseInt(m.group(6));
        boolean leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
        int[] monthDays = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        if (mo < 1 || mo > 12 || d < 1 || d > monthDays[mo - 1] || h >= 24 || mi >= 60 || s >= 60) {
            return null;
        }
        String f = m.group(7) == null ? "" : m.group(7);
        long frac = f.isEmpty() ? 0 : Long.parseLong((f + "000000000").substring(0, 9));
        long offset = 0;
        String zone = m.group(8);
        if (zone != null && !zone.equals("Z")) {
            String digits = zone.substring(1).replace(":", "");
            int oh = Integer.parseInt(digits.substring(0, 2));
            int om = digits.length() > 2 ? Integer.parseInt(digits.substring(2)) : 0;
            if (oh > 23 || om > 59) {
                return null;
            }
            offset = (oh * 60L + om) * 60 * (zone.charAt(0) == '+' ? 1 : -1);
        }
        long days = java.time.LocalDate.of(y, mo, d).toEpochDay();
        long seconds = days * 86400 + h * 3600L + mi * 60L + s - offset;
        return seconds * 1_000_000_000L + frac;
    }
}
