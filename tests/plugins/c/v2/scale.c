/* FROZEN: the C test plugin scale.c of ABI version 2, as the previous release shipped it, so
 * that the tests build a plugin against the previous ABI and prove the host
 * still loads and runs it. Never edit; the current ABI is in
 * plugins/mfstream-plugin/include/mfstream_plugin.h. */
/*
 * A plugin written in C against mfstream_plugin.h: the engine `cscale`
 * applies the lifted operations (the catalogue, crates/ops/src/catalogue.rs), so its
 * results equal the `local` engine's. The tests compile it with the system C
 * compiler:
 *
 *   cc -shared -fPIC -I plugins/mfstream-plugin/include scale.c -lm -o libcscale.so
 *
 * A record with no result is reported with host->error (ABI version 2) and
 * the batch goes on.
 *
 * Test variants: -DMFS_TEST_ABI_1 is a version-1 plugin (it fails the call
 * on a record with no result, as plugins built before version 2 do);
 * -DMFS_TEST_WRONG_ABI claims ABI version 3;
 * -DMFS_TEST_NO_ENTRY exports no entry symbol; -DMFS_TEST_ENGINE_NAME=\"x\"
 * renames the engine; -DMFS_TEST_ABORT_ON_LOAD aborts as soon as the library
 * is loaded.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mfstream_plugin.h"

#ifndef MFS_TEST_ENGINE_NAME
#define MFS_TEST_ENGINE_NAME "cscale"
#endif

/* The table is generated from the catalogue (crates/ops/src/catalogue.rs):
   MFSTREAM_BLESS=1 cargo test -p mfstream-ops --test generated */
/* BEGIN GENERATED: operations */
enum op { LN, EXP, LOG10, CEIL, FLOOR, ABS, DEGREES, RADIANS, SIN, COS, TAN, ADD, SUB, MUL, DIV };
static const char *const NAMES[] = {
    "ln",
    "exp",
    "log10",
    "ceil",
    "floor",
    "abs",
    "degrees",
    "radians",
    "sin",
    "cos",
    "tan",
    "add",
    "sub",
    "mul",
    "div",
};
#define LAST_OP DIV

/* op of x and the argument a, before the finiteness check. */
static double compute(enum op op, double x, double a) {
    (void)a;
    switch (op) {
        case LN: return x <= 0 ? NAN : log(x);
        case EXP: return exp(x);
        case LOG10: return x <= 0 ? NAN : log10(x);
        case CEIL: return ceil(x);
        case FLOOR: return floor(x);
        case ABS: return fabs(x);
        case DEGREES: return x * (180.0 / M_PI);
        case RADIANS: return x * (M_PI / 180.0);
        case SIN: return sin(x);
        case COS: return cos(x);
        case TAN: return tan(x);
        case ADD: return x + a;
        case SUB: return x - a;
        case MUL: return x * a;
        case DIV: return x / a;
    }
    return NAN;
}
/* END GENERATED: operations */

typedef struct query {
    enum op op;
    double arg;
} query;

static int32_t fail(const MfsHost *host, const char *message) {
    MfsStr text = {(const uint8_t *)message, strlen(message)};
    host->fail(host->ctx, text);
    return MFS_ERROR;
}

/* The spec is the host's compact JSON: {"id":…,"operation":"mul","arg":1.852}. */
static int32_t cscale_open(MfsStr spec, const MfsHost *host, void **state) {
    char *json = malloc(spec.len + 1);
    if (!json) return fail(host, "out of memory");
    memcpy(json, spec.ptr, spec.len);
    json[spec.len] = '\0';
    const char *op = strstr(json, "\"operation\":\"");
    if (!op) {
        free(json);
        return fail(host, "the cscale engine serves transforms only");
    }
    op += strlen("\"operation\":\"");
    int found = -1;
    for (int i = 0; i <= LAST_OP; i++) {
        size_t len = strlen(NAMES[i]);
        if (strncmp(op, NAMES[i], len) == 0 && op[len] == '"') found = i;
    }
    query *q = calloc(1, sizeof *q);
    if (found < 0 || !q) {
        free(json);
        free(q);
        return fail(host, "unknown operation");
    }
    q->op = (enum op)found;
    const char *arg = strstr(json, "\"arg\":");
    if (arg) q->arg = strtod(arg + strlen("\"arg\":"), NULL);
    free(json);
    *state = q;
    return MFS_OK;
}

static int32_t cscale_process(void *state, const MfsInstant *batch, size_t n,
                              const MfsHost *host) {
    const query *q = state;
    MfsEvent *events = malloc((n ? n : 1) * sizeof *events);
    if (!events) return fail(host, "out of memory");
    size_t out = 0;
    const char *error = NULL;
    static char message[256];
    for (size_t i = 0; i < n && !error; i++) {
        double x = batch[i].value.number, y = 0;
        if (batch[i].value.kind != MFS_NUMBER) {
            error = "a record is not a number";
            break;
        }
        y = compute(q->op, x, q->arg);
        if (!isfinite(y)) {
#ifdef MFS_TEST_ABI_1
            snprintf(message, sizeof message, "record at %.*s: %s has no finite result, got %g",
                     (int)batch[i].datetime.len, (const char *)batch[i].datetime.ptr,
                     NAMES[q->op], x);
            error = message;
            break;
#else
            /* The events before it first, in order; then the error. */
            if (out) host->emit(host->ctx, events, out);
            out = 0;
            snprintf(message, sizeof message, "%s has no finite result, got %g", NAMES[q->op], x);
            MfsStr text = {(const uint8_t *)message, strlen(message)};
            if (host->error(host->ctx, batch[i].datetime, text) == MFS_STOP) break;
            continue;
#endif
        }
        events[out].datetime = batch[i].datetime; /* borrowed: the host copies it */
        events[out].value.kind = MFS_NUMBER;
        events[out].value.number = y;
        events[out].value.text.ptr = NULL;
        events[out].value.text.len = 0;
        out++;
    }
    if (out) host->emit(host->ctx, events, out);
    free(events);
    return error ? fail(host, error) : MFS_OK;
}

static int32_t cscale_close(void *state, const MfsHost *host) {
    (void)host;
    free(state);
    return MFS_OK;
}

static const MfsEngine ENGINES[] = {{
    .struct_size = sizeof(MfsEngine),
    .serves = MFS_SERVES_TRANSFORM,
    .name = MFS_STR(MFS_TEST_ENGINE_NAME),
    .description = MFS_STR("lifted operations in a C plugin (test fixture)"),
    .open = cscale_open,
    .process = cscale_process,
    .close = cscale_close,
}};

static const MfsPlugin PLUGIN = {
    .struct_size = sizeof(MfsPlugin),
#if defined(MFS_TEST_WRONG_ABI)
    .abi_version = 3,
#elif defined(MFS_TEST_ABI_1)
    .abi_version = 1,
#else
    .abi_version = MFS_ABI_VERSION,
#endif
    .name = MFS_STR("cscale"),
    .version = MFS_STR("1.0.0"),
    .engines = ENGINES,
    .engine_count = 1,
};

#ifdef MFS_TEST_ABORT_ON_LOAD
__attribute__((constructor)) static void abort_on_load(void) { abort(); }
#endif

#ifdef MFS_TEST_NO_ENTRY
const MfsPlugin *not_the_entry_symbol(void) { return &PLUGIN; }
#else
const MfsPlugin *mfstream_plugin(void) { return &PLUGIN; }
#endif
