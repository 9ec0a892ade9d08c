/*
 * meos-job: an mfstream bridge job that applies the lifted operations with
 * MobilityDB's MEOS library (the libmeos of PyPI's pymeos-cffi 1.3.0).
 *
 *     meos-job OP [ARG]            (value framing; see jobs/README.md)
 *
 * Each number read is made a MEOS temporal float instant (tfloatinst_make),
 * the MEOS lifted function is applied to it (tfloat_ln, add_tfloat_float,
 * ...), and the instant's value is written back. The arithmetic is MEOS's.
 *
 * libmeos is loaded with dlopen by its soname alone (MEOS_SONAME, fixed by
 * setup.sh at build time), so the dynamic loader finds it, and its bundled
 * dependencies, through LD_LIBRARY_PATH: the engine's libpath_env
 * (MFAPI_MEOS_LIBPATH). The wheel ships no header, so the few prototypes
 * used are declared here.
 *
 * MEOS 1.3 has no lifted sine, cosine or tangent (no tfloat_sin, ...), but it
 * exports its adaptation of PostgreSQL's float8 sine and cosine, pg_dsin and
 * pg_dcos (NaN in, NaN out; an infinite input is an error through the error
 * handler, like the other operations' domain errors). `sin` and `cos` apply
 * them to each number read (a tfloat instant would carry the value
 * unchanged). MEOS has no pg_dtan: `tan` is the quotient
 * pg_dsin(x) / pg_dcos(x) of MEOS's sine and cosine, which may be 2 ulps
 * from libm's tan (jobs/meos/README.md gives the measurements).
 *
 * Errors follow the protocol: bad usage exits 2 before reading; a line that
 * does not parse exits 2 naming the line. A record with no result (a domain
 * error, MEOS's own message from the error handler installed below, which
 * records the message instead of exiting; or a result that is not finite):
 * under bridge protocol 2 (MFSTREAM_PROTOCOL=2, which the host sets for an
 * engine with protocol = 2) an error line `!message` in the answer's place,
 * and the job goes on; under protocol 1 it exits 2 naming the line and the
 * value, answers to earlier lines flushed first. MEOS's exp ends the process
 * from inside the library when the result overflows or underflows (it
 * bypasses the handler): under protocol 2 the job asks libm first, as MEOS's
 * dexp does (a finite x whose exp is inf or 0), and answers with an error
 * line; under protocol 1 it lets MEOS end it, and an atexit hook names the
 * line and the value under MEOS's message and exits 2.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef MEOS_SONAME
#error "build with -DMEOS_SONAME='\"libmeos-<hash>.so\"' (jobs/meos/setup.sh does)"
#endif

#define CHUNK (64 * 1024)
#define MAX_LINE (1024 * 1024)
#define OUT_CAP (64 * 1024)

/* The MEOS declarations this job needs (meos.h, MEOS 1.3). */
typedef struct Temporal Temporal;
typedef int64_t TimestampTz;
typedef void (*error_handler_fn)(int errlevel, int errcode, const char *errmsg);

static void (*meos_initialize)(void);
static void (*meos_initialize_timezone)(const char *name);
static void (*meos_initialize_error_handler)(error_handler_fn handler);
static Temporal *(*tfloatinst_make)(double d, TimestampTz t);
static double (*tfloat_start_value)(const Temporal *temp);

typedef Temporal *(*unary_fn)(const Temporal *temp);
typedef Temporal *(*degrees_fn)(const Temporal *temp, bool normalize);
typedef Temporal *(*binary_fn)(const Temporal *temp, double d);
typedef double (*scalar_fn)(double x);

/* SCALAR: a MEOS float8 function of the value; TAN: pg_dsin / pg_dcos. */
enum kind { UNARY, DEGREES, BINARY, SCALAR, TAN };

struct op {
    const char *name;
    enum kind kind;
    const char *symbol; /* the MEOS function */
    bool nonzero_arg;   /* the argument must not be 0 (div) */
};

/* The operations, from the catalogue (crates/ops/src/catalogue.rs). Do not
 * edit by hand: MFSTREAM_BLESS=1 cargo test -p mfstream-ops --test generated */
/* BEGIN GENERATED: operations */
static const struct op OPS[] = {
    {"ln", UNARY, "tfloat_ln", false},
    {"exp", UNARY, "tfloat_exp", false},
    {"log10", UNARY, "tfloat_log10", false},
    {"ceil", UNARY, "tfloat_ceil", false},
    {"floor", UNARY, "tfloat_floor", false},
    {"abs", UNARY, "tnumber_abs", false},
    {"degrees", DEGREES, "tfloat_degrees", false},
    {"radians", UNARY, "tfloat_radians", false},
    {"sin", SCALAR, "pg_dsin", false},
    {"cos", SCALAR, "pg_dcos", false},
    {"tan", TAN, "pg_dsin", false}, /* and pg_dcos */
    {"add", BINARY, "add_tfloat_float", false},
    {"sub", BINARY, "sub_tfloat_float", false},
    {"mul", BINARY, "mult_tfloat_float", false},
    {"div", BINARY, "div_tfloat_float", true},
};
#define OPERATIONS "ln, exp, log10, ceil, floor, abs, degrees, radians, sin, cos, tan, add <x>, sub <x>, mul <x>, div <x>"
/* END GENERATED: operations */

static const char USAGE[] =
    "usage: meos-job OP [ARG]   (MFSTREAM_FRAMING=value; libmeos on LD_LIBRARY_PATH)\n"
    "operations: " OPERATIONS "\n";

/* Output: one buffer, written to fd 1 when full and before every read. */
static char out[OUT_CAP];
static size_t out_len;

/* What is being computed, for the atexit hook and the error handler. */
static const struct op *current_op;
static long current_line;
static char current_value[64];
static bool in_meos;
static bool meos_failed;
static char meos_message[1024];

/* Bridge protocol 2: a record with no result is answered with `!message`. */
static bool protocol2;

static void die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

static void flush_out(void) {
    size_t done = 0;
    while (done < out_len) {
        ssize_t n = write(1, out + done, out_len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            if (errno == EPIPE)
                _exit(0); /* the host stopped reading: nobody wants answers */
            fprintf(stderr, "meos-job: writing stdout: %s\n", strerror(errno));
            _exit(1);
        }
        done += (size_t)n;
    }
    out_len = 0;
}

static void die(int status, const char *fmt, ...) {
    flush_out(); /* the answers to every line before a bad one */
    va_list args;
    va_start(args, fmt);
    fputs("meos-job: ", stderr);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
    in_meos = false;
    _exit(status);
}

/* MEOS calls this for an error instead of exiting: keep the message; the
 * caller sees a NULL result and fails the query with it. */
static void on_meos_error(int errlevel, int errcode, const char *errmsg) {
    (void)errlevel;
    meos_failed = true;
    snprintf(meos_message, sizeof meos_message, "%s (MEOS error %d)", errmsg ? errmsg : "?",
             errcode);
}

/* MEOS ends the process itself on some errors (it printed its message on
 * stderr); say which line and value it was, in the protocol's terms. */
static void on_exit_hook(void) {
    if (!in_meos)
        return;
    in_meos = false;
    flush_out();
    fprintf(stderr,
            "meos-job: line %ld: MEOS ended the process computing %s of %s (its message is "
            "above)\n",
            current_line, current_op->name, current_value);
    fflush(stderr);
    _exit(2);
}

static void *need(void *lib, const char *symbol) {
    void *f = dlsym(lib, symbol);
    if (!f)
        die(2, "%s has no function %s: %s", MEOS_SONAME, symbol, dlerror());
    return f;
}

/* A number as strtod reads one, whole line, finite or not (the result is
 * checked); NULL-free. Returns false if it does not parse. */
static bool parse_number(const char *text, double *x) {
    while (*text == ' ' || *text == '\t' || *text == '\r')
        text++;
    if (*text == '\0')
        return false;
    /* strtod also reads hexadecimal; the protocol's numbers are decimal */
    for (const char *p = text; *p; p++)
        if (*p == 'x' || *p == 'X' || *p == '_')
            return false;
    char *end;
    errno = 0;
    *x = strtod(text, &end);
    while (*end == ' ' || *end == '\t' || *end == '\r')
        end++;
    return *end == '\0';
}

/* The shortest of %.15g, %.16g, %.17g that reads back as the same double. */
static void write_number(double y) {
    if (out_len + 32 > OUT_CAP)
        flush_out();
    char *dst = out + out_len;
    int n = 0;
    for (int precision = 15; precision <= 17; precision++) {
        n = snprintf(dst, 32, "%.*g", precision, y);
        if (precision == 17 || strtod(dst, NULL) == y)
            break; /* 17 significant digits always read back the same */
    }
    dst[n] = '\n';
    out_len += (size_t)n + 1;
}

/* A record with no result: under protocol 2 the error line `!message` in
 * its answer's place (the host keeps 200 bytes of a message), and the job
 * goes on; under protocol 1 the end of the job, naming the line. */
static void no_result(long line, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void no_result(long line, const char *fmt, ...) {
    char message[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    if (!protocol2)
        die(2, "line %ld: %s", line, message);
    size_t n = strlen(message);
    if (out_len + n + 2 > OUT_CAP)
        flush_out();
    out[out_len++] = '!';
    memcpy(out + out_len, message, n);
    out_len += n;
    out[out_len++] = '\n';
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN); /* a closed stdout is EPIPE, handled above */
    const char *framing = getenv("MFSTREAM_FRAMING");
    if (framing && strcmp(framing, "value") != 0)
        die(2, "MFSTREAM_FRAMING must be \"value\" (the MEOS job speaks value framing only), "
               "got \"%s\"",
            framing);
    const char *protocol = getenv("MFSTREAM_PROTOCOL");
    protocol2 = protocol && atoi(protocol) >= 2;
    if (argc < 2 || argc > 3) {
        fputs(USAGE, stderr);
        die(2, "expected an operation and at most one argument");
    }
    const struct op *op = NULL;
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        if (strcmp(argv[1], OPS[i].name) == 0)
            op = &OPS[i];
    if (!op) {
        fputs(USAGE, stderr);
        die(2, "unknown operation \"%s\"", argv[1]);
    }
    double arg = 0;
    if (op->kind == BINARY) {
        if (argc != 3)
            die(2, "operation %s needs a scalar argument: %s <x>", op->name, op->name);
        if (!parse_number(argv[2], &arg) || !isfinite(arg))
            die(2, "operation %s needs a finite number, got \"%s\"", op->name, argv[2]);
        if (op->nonzero_arg && arg == 0)
            die(2, "operation %s by zero is undefined", op->name);
    } else if (argc != 2) {
        die(2, "operation %s takes no argument", op->name);
    }

    /* By soname: the loader searches LD_LIBRARY_PATH (no absolute path). */
    void *lib = dlopen(MEOS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        die(2,
            "cannot load MEOS: %s (put the folder holding %s, pymeos_cffi.libs, on "
            "LD_LIBRARY_PATH: the engine's libpath_env, MFAPI_MEOS_LIBPATH)",
            dlerror(), MEOS_SONAME);
    *(void **)&meos_initialize = need(lib, "meos_initialize");
    *(void **)&meos_initialize_timezone = need(lib, "meos_initialize_timezone");
    *(void **)&meos_initialize_error_handler = need(lib, "meos_initialize_error_handler");
    *(void **)&tfloatinst_make = need(lib, "tfloatinst_make");
    *(void **)&tfloat_start_value = need(lib, "tfloat_start_value");
    void *fn = need(lib, op->symbol);
    scalar_fn cosine = op->kind == TAN ? (scalar_fn)need(lib, "pg_dcos") : NULL;

    meos_initialize();
    meos_initialize_timezone("UTC");
    meos_initialize_error_handler(on_meos_error);
    atexit(on_exit_hook);
    current_op = op;
    /* MEOS's exp (PostgreSQL's dexp) ends the process on a range error. */
    const bool is_exp = strcmp(op->name, "exp") == 0;

    /* Value framing carries no datetimes (the host keeps them); every
     * instant is made at MEOS's epoch, 2000-01-01 00:00:00 UTC. */
    const TimestampTz at = 0;

    static char buf[MAX_LINE + CHUNK];
    size_t len = 0, start = 0;
    long line = 0;
    bool eof = false;
    while (!eof || start < len) {
        char *nl = memchr(buf + start, '\n', len - start);
        if (!nl) {
            if (eof) {
                nl = buf + len; /* a last line without its newline */
            } else {
                memmove(buf, buf + start, len - start);
                len -= start;
                start = 0;
                if (len >= MAX_LINE)
                    die(2, "line %ld: no end of line within %d bytes", line + 1, MAX_LINE);
                flush_out(); /* the read may block: answer what we have */
                ssize_t n = read(0, buf + len, CHUNK);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n < 0)
                    die(1, "reading stdin: %s", strerror(errno));
                if (n == 0)
                    eof = true;
                len += (size_t)n;
                continue;
            }
        }
        *nl = '\0';
        char *text = buf + start;
        start = (size_t)(nl - buf) + 1;
        if (start > len)
            start = len;
        line++;
        double x;
        if (!parse_number(text, &x))
            die(2, "line %ld: not a number: \"%.200s\"", line, text);

        current_line = line;
        snprintf(current_value, sizeof current_value, "%.17g", x);
        if (protocol2 && is_exp && isfinite(x)) {
            double e = exp(x);
            if (isinf(e) || e == 0.0) {
                no_result(line, "exp of %.200s: value out of range: %s (MEOS)", text,
                          e == 0.0 ? "underflow" : "overflow");
                continue;
            }
        }
        in_meos = true;
        meos_failed = false;
        double y;
        if (op->kind == SCALAR || op->kind == TAN) {
            /* On an error MEOS's handler is called and DBL_MAX returned. */
            y = ((scalar_fn)fn)(x);
            if (op->kind == TAN && !meos_failed)
                y /= cosine(x);
            in_meos = false;
            if (meos_failed) {
                no_result(line, "%s of %.200s: %s", op->name, text, meos_message);
                continue;
            }
        } else {
            Temporal *inst = tfloatinst_make(x, at);
            Temporal *result = NULL;
            if (inst) {
                switch (op->kind) {
                case UNARY:
                    result = ((unary_fn)fn)(inst);
                    break;
                case DEGREES:
                    result = ((degrees_fn)fn)(inst, false);
                    break;
                case BINARY:
                    result = ((binary_fn)fn)(inst, arg);
                    break;
                case SCALAR:
                case TAN:
                    break;
                }
            }
            y = result ? tfloat_start_value(result) : NAN;
            in_meos = false;
            free(result); /* MEOS allocates with malloc (palloc) */
            free(inst);
            if (meos_failed || !result) {
                no_result(line, "%s of %.200s: %s", op->name, text,
                          meos_failed ? meos_message : "MEOS returned no result");
                continue;
            }
        }
        if (!isfinite(y)) {
            no_result(line, "%s has no finite result, got %.200s", op->name, text);
            continue;
        }
        write_number(y);
    }
    flush_out();
    in_meos = false;
    return 0;
}
