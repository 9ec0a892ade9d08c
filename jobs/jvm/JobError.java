/**
 * A failure that ends a bridge job with status 2 and its message on stderr
 * (jobs/README.md, "Errors and exit status"). {@code usage}: the command
 * line or environment is at fault, so the job's usage line follows.
 */
public final class JobError extends RuntimeException {
    final boolean usage;

    public JobError(String message, boolean usage) {
        super(message, null, false, false);
        this.usage = usage;
    }

    public JobError(String message) {
        this(message, false);
    }
}
