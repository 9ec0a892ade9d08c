/**
 * The lifted operations of the bridge protocol (jobs/README.md), shared by
 * the JVM jobs (Flink, Flink on a session cluster, Spark): validated from
 * the command line, applied to one number, with the reference job's
 * messages and the {@code local} engine's results.
 */
public final class LiftedOperation implements java.io.Serializable {
    final String op;
    final double arg;

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
        boolean binary;
        switch (op) {
            case "ln": case "exp": case "log10": case "ceil": case "floor": case "abs":
            case "degrees": case "radians": case "sin": case "cos": case "tan":
                binary = false;
                break;
            case "add": case "sub": case "mul": case "div":
                binary = true;
                break;
            default:
                throw new JobError("unknown operation '" + op + "': supported operations are "
                        + "ln, exp, log10, ceil, floor, abs, degrees, radians, sin, cos, tan, "
                        + "add <x>, sub <x>, mul <x>, div <x>", true);
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
        if (op.equals("div") && a == 0) {
            throw new JobError("operation div by zero is undefined", true);
        }
        arg = a;
    }

    /** The result for {@code x}; {@code shown} is x as the input wrote it, for messages. */
    public double apply(double x, String shown) {
        if ((op.equals("ln") || op.equals("log10")) && !(x > 0) && !Double.isNaN(x)) {
            throw new JobError(op + " is defined for positive values only, got " + shown);
        }
        double y;
        switch (op) {
            case "ln": y = Math.log(x); break;
            case "exp": y = Math.exp(x); break;
            case "log10": y = Math.log10(x); break;
            case "ceil": y = Math.ceil(x); break;
            case "floor": y = Math.floor(x); break;
            case "abs": y = Math.abs(x); break;
            case "degrees": y = Math.toDegrees(x); break;
            case "radians": y = Math.toRadians(x); break;
            case "sin": y = Math.sin(x); break;
            case "cos": y = Math.cos(x); break;
            case "tan": y = Math.tan(x); break;
            case "add": y = x + arg; break;
            case "sub": y = x - arg; break;
            case "mul": y = x * arg; break;
            default: y = x / arg; break;
        }
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

    /** A line for a message, cut at 200 characters. */
    public static String quote(String line) {
        String more = line.length() > 200 ? "…" : "";
        return "'" + line.substring(0, Math.min(line.length(), 200)) + "'" + more;
    }
}
