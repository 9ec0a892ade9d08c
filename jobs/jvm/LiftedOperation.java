/**
 * The lifted operations of the bridge protocol (jobs/README.md), shared by
 * the JVM jobs (Flink, Flink on a session cluster, Spark): validated from
 * the command line, applied to one number, with the reference job's
 * messages and the {@code local} engine's results.
 */
public final class LiftedOperation implements java.io.Serializable {
    final String op;
    final double arg;
    /** The catalogue's domain: x > 0 (ln, log10). */
    final boolean positiveOnly;

    /** From a job's arguments: {@code OP [ARG]}. */
    public static LiftedOperation fromArgs(String[] args) {
        if (args.length < 1 || args.length > 2) {
            throw new JobError("expected an operation and at most one argument, got "
                    + args.length + " arguments", true);
        }
        return new LiftedOperation(args[0], args.length == 2 ? args[1] : null);
    }

    /** {@code argText} is null when no argument was given. */
    public LiftedOperation(String op, String argText) {
        this.op = op;
        this.positiveOnly = positiveOnly(op);
        Boolean binary = takesArg(op);
        if (binary == null) {
            throw new JobError("unknown operation '" + op + "': supported operations are "
                    + CATALOGUE, true);
        }
        if (!binary) {
            if (argText != null) {
                throw new JobError("operation " + op + " takes no argument", true);
            }
            arg = 0;
            return;
        }
        if (argText == null) {
            throw new JobError("operation " + op + " needs a scalar argument: " + op + " <x>", true);
        }
        Double a = parseNumber(argText);
        if (a == null || !Double.isFinite(a)) {
            throw new JobError("operation " + op + " needs a finite number, got '" + argText + "'", true);
        }
        if (nonZeroArg(op) && a == 0) {
            throw new JobError("operation " + op + " by zero is undefined", true);
        }
        arg = a;
    }

    /** The result for {@code x}; {@code shown} is x as the input wrote it, for messages. */
    public double apply(double x, String shown) {
        if (positiveOnly && !(x > 0) && !Double.isNaN(x)) {
            throw new JobError(op + " is defined for positive values only, got " + shown);
        }
        double y = compute(op, x, arg);
        if (!Double.isFinite(y)) {
            throw new JobError(op + " has no finite result, got " + shown);
        }
        return y;
    }

    /**
     * A decimal number as the protocol writes them; null otherwise. Java
     * alone reads "1d", "0x1p3" and "1f": those are refused.
     */
    public static Double parseNumber(String text) {
        String t = text.strip();
        if (t.isEmpty()) {
            return null;
        }
        for (int i = 0; i < t.length(); i++) {
            char c = t.charAt(i);
            if ((c == 'd' || c == 'D' || c == 'f' || c == 'F' || c == 'x' || c == 'X')
                    && !(t.endsWith("Infinity") || t.equals("NaN"))) {
                return null;
            }
        }
        try {
            return Double.parseDouble(t);
        } catch (NumberFormatException e) {
            return null;
        }
    }

    // The operations, from the catalogue (crates/ops/src/catalogue.rs). Do not
    // edit by hand: MFSTREAM_BLESS=1 cargo test -p mfstream-ops --test generated
    // BEGIN GENERATED: operations
    /** Every operation, for messages. */
    static final String CATALOGUE = "ln, exp, log10, ceil, floor, abs, degrees, radians, sin, cos, tan, add <x>, sub <x>, mul <x>, div <x>";

    /** Whether {@code op} takes an argument; null when it is no operation. */
    static Boolean takesArg(String op) {
        switch (op) {
            case "ln": return false;
            case "exp": return false;
            case "log10": return false;
            case "ceil": return false;
            case "floor": return false;
            case "abs": return false;
            case "degrees": return false;
            case "radians": return false;
            case "sin": return false;
            case "cos": return false;
            case "tan": return false;
            case "add": return true;
            case "sub": return true;
            case "mul": return true;
            case "div": return true;
            default: return null;
        }
    }

    /** Whether {@code op} is defined for positive values only. */
    static boolean positiveOnly(String op) {
        return op.equals("ln") || op.equals("log10");
    }

    /** Whether {@code op}'s argument must not be 0. */
    static boolean nonZeroArg(String op) {
        return op.equals("div");
    }

    /** {@code op} of {@code x} and the argument {@code a}, before the finiteness check. */
    static double compute(String op, double x, double a) {
        switch (op) {
            case "ln": return Math.log(x);
            case "exp": return Math.exp(x);
            case "log10": return Math.log10(x);
            case "ceil": return Math.ceil(x);
            case "floor": return Math.floor(x);
            case "abs": return Math.abs(x);
            case "degrees": return Math.toDegrees(x);
            case "radians": return Math.toRadians(x);
            case "sin": return Math.sin(x);
            case "cos": return Math.cos(x);
            case "tan": return Math.tan(x);
            case "add": return x + a;
            case "sub": return x - a;
            case "mul": return x * a;
            case "div": return x / a;
            default: throw new IllegalArgumentException("unknown operation " + op);
        }
    }
    // END GENERATED: operations

    /** A line for a message, cut at 200 characters. */
    public static String quote(String line) {
        String more = line.length() > 200 ? "…" : "";
        return "'" + line.substring(0, Math.min(line.length(), 200)) + "'" + more;
    }
}
