/* FROZEN: the mfstream_plugin.h of ABI version 2, as the previous release shipped it, so
 * that the tests build a plugin against the previous ABI and prove the host
 * still loads and runs it. Never edit; the current ABI is in
 * plugins/mfstream-plugin/include/mfstream_plugin.h. */
/*
 * mfstream_plugin.h: the mfstream plugin ABI, version 2, for plugin authors
 * writing in C (or Zig, Go, C++ ... through their C FFI).
 *
 * The source of truth is plugins/mfstream-plugin/src/abi.rs; this header
 * declares the same types, and mfstream's tests compile a C program that
 * checks every size and offset against the Rust definitions.
 *
 * The contract, in short (abi.rs has the full text):
 *
 * - Export `const MfsPlugin *mfstream_plugin(void)`. The descriptor and all
 *   it points to (names, the engines array) are owned by the plugin and stay
 *   valid and unchanged while the library is loaded.
 * - struct_size and abi_version are the first two fields of MfsPlugin in
 *   every ABI version. The host refuses a plugin whose abi_version is not
 *   one it speaks (MFS_MIN_ABI_VERSION to MFS_ABI_VERSION) or whose
 *   struct_size is not sizeof(MfsPlugin); each MfsEngine's struct_size is
 *   checked the same way.
 * - Strings (MfsStr) are UTF-8, pointer + length, not NUL-terminated. A
 *   string the host passes is borrowed for the call; a string the plugin
 *   passes to a host callback is copied before the callback returns.
 * - Per query: open once, process per batch, close exactly once (also after
 *   a failed process and on stop). close emits what is still held, then
 *   frees the state, whatever it returns.
 * - ready (may be NULL) is called when the registry is built: MFS_ERROR with
 *   a reason lists the engine as not ready.
 * - One query's state is used by one thread at a time, not always the same
 *   thread; open may run on several threads at once for different queries.
 * - Results go through host->emit (copied by the host before it returns);
 *   it returns MFS_OK, or MFS_STOP when the query is ending.
 * - A failing call calls host->fail(host->ctx, reason), then returns
 *   MFS_ERROR; the query fails with that reason.
 * - (Version 2.) A record the plugin cannot compute (ln of -1, an exp that
 *   overflows) is reported with host->error(host->ctx, datetime, message)
 *   instead of an event, and process goes on with the next record: the
 *   host applies the query's onError. error returns MFS_OK (skipped and
 *   counted: go on) or MFS_STOP (the query fails naming the record: return
 *   soon). A NaN or infinite number emitted is taken the same way.
 * - No exception or unwinding may cross the boundary.
 *
 * Versioning: any change to a type, a field, a signature or the meaning of a
 * call bumps MFS_ABI_VERSION. The host loads versions 1 and 2. Version 2
 * added MfsHost.error, the last field: a version-1 plugin never reads it,
 * and under onError "skip" the host never hands it a record the operation
 * catalogue says has no result.
 */
#ifndef MFSTREAM_PLUGIN_H
#define MFSTREAM_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MFS_ABI_VERSION 2u
#define MFS_MIN_ABI_VERSION 1u /* the oldest version the host still loads */
#define MFS_ENTRY_SYMBOL "mfstream_plugin"

#define MFS_OK 0
#define MFS_ERROR 1
#define MFS_STOP 2

#define MFS_NUMBER 0u /* in MfsValue.number */
#define MFS_TEXT 1u   /* in MfsValue.text */
#define MFS_BOOL 2u   /* in MfsValue.number, 0 or 1 */

#define MFS_SERVES_TRANSFORM 1u /* required: the host windows the outputs itself */
#define MFS_SERVES_AGGREGATE 2u /* reserved: v1 hosts never ask a plugin to aggregate */

typedef struct MfsStr {
    const uint8_t *ptr; /* may be NULL when len is 0 */
    size_t len;         /* in bytes */
} MfsStr;

typedef struct MfsValue {
    uint32_t kind; /* MFS_NUMBER, MFS_TEXT or MFS_BOOL */
    double number;
    MfsStr text;
} MfsValue;

/* A record the host passes in, borrowed for the call. */
typedef struct MfsInstant {
    MfsStr datetime; /* ISO-8601, verbatim */
    MfsValue value;
} MfsInstant;

/* A result the plugin emits; copied by the host during emit. */
typedef struct MfsEvent {
    MfsStr datetime;
    MfsValue value; /* a number should be finite (else: no result, as host->error) */
} MfsEvent;

/* The host's callbacks; valid for the duration of the call they come with. */
typedef struct MfsHost {
    void *ctx;
    int32_t (*emit)(void *ctx, const MfsEvent *events, size_t n);
    void (*fail)(void *ctx, MfsStr message);
    /* Version 2: the record at datetime has no result; MFS_OK or MFS_STOP. */
    int32_t (*error)(void *ctx, MfsStr datetime, MfsStr message);
} MfsHost;

/* spec: the query as JSON, borrowed; on MFS_OK *state holds the query's state. */
typedef int32_t (*MfsOpenFn)(MfsStr spec, const MfsHost *host, void **state);
typedef int32_t (*MfsProcessFn)(void *state, const MfsInstant *batch, size_t n,
                                const MfsHost *host);
/* Flushes, then frees state whatever it returns. */
typedef int32_t (*MfsCloseFn)(void *state, const MfsHost *host);
/* Whether the engine can run queries now: MFS_OK, or host->fail(reason) and
 * MFS_ERROR (shown by `mfstream engines`). May be NULL: always ready. */
typedef int32_t (*MfsReadyFn)(const MfsHost *host);

typedef struct MfsEngine {
    uint32_t struct_size; /* sizeof(MfsEngine) */
    uint32_t serves;      /* MFS_SERVES_* bits */
    MfsStr name;          /* [a-z][a-z0-9_-]{0,62}, unique in the registry */
    MfsStr description;
    MfsOpenFn open;
    MfsProcessFn process;
    MfsCloseFn close;
    MfsReadyFn ready; /* may be NULL */
} MfsEngine;

typedef struct MfsPlugin {
    uint32_t struct_size; /* sizeof(MfsPlugin); always the first field */
    uint32_t abi_version; /* MFS_ABI_VERSION; always the second field */
    MfsStr name;
    MfsStr version;
    const MfsEngine *engines;
    size_t engine_count;
} MfsPlugin;

typedef const MfsPlugin *(*MfsEntryFn)(void);

/* A string literal as an MfsStr. */
#define MFS_STR(literal) ((MfsStr){(const uint8_t *)(literal), sizeof(literal) - 1})

#ifdef __cplusplus
}
#endif

#endif /* MFSTREAM_PLUGIN_H */
