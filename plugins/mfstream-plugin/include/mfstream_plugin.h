/*
 * mfstream_plugin.h: the mfstream plugin ABI, version 3, for plugin authors
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
 * Positions (version 3): an engine whose serves has MFS_SERVES_POSITIONS
 * sets open_positions, which the host calls instead of open for a position
 * query, with an MfsPositionSpec (step, reference system, geometry as
 * GeoJSON text, detect bits). process then gets one feature's positions
 * (value.kind MFS_POINT, value.point, micros set), checked by the host
 * (finite, lon/lat in range when geodetic, times strictly increasing).
 * Per instant it emits, with the instant's datetime:
 * - SPEED, AZIMUTH, CUMULATIVE_LENGTH, DISTANCE: one number, or nothing
 *   where undefined (speed and azimuth at the first instant, azimuth of a
 *   zero-length segment). Speed of the segment ending at the instant (m/s
 *   on the WGS84 ellipsoid when geodetic, units/s when planar); azimuth in
 *   degrees clockwise from north, [0, 360); length since the first instant
 *   (0 there); distance to the geometry (metres, or units).
 * - POSITION: the instant's point (MFS_POINT, with MFS_HAS_Z and z if any).
 * - GEOFENCE: 0..n MFS_DETECT events in time order: the crossings of the
 *   segment ending at the instant (enter, exit, or cross for a pass with
 *   both ends outside) at the crossing point and its linearly interpolated
 *   time (set micros, leave datetime empty: the host writes it), then
 *   inside or outside at the instant; only the kinds in detect. Edges and
 *   segments are straight in x/y (lon/lat); the boundary is inside.
 *
 * Versioning: any change to a type, a field, a signature or the meaning of a
 * call bumps MFS_ABI_VERSION. The host loads versions 1 to 3. Version 2
 * added MfsHost.error, the last field: a version-1 plugin never reads it,
 * and under onError "skip" the host never hands it a record the operation
 * catalogue says has no result. Version 3 added positions: MfsValue.flags
 * (in what was padding) and .point, MfsInstant.micros and MfsEvent.micros,
 * MfsEngine.open_positions (last), MfsPositionSpec. The host passes
 * version-1 and version-2 plugins their own layouts (frozen in
 * tests/plugins/c/v2/mfstream_plugin.h) and numbers only.
 */
#ifndef MFSTREAM_PLUGIN_H
#define MFSTREAM_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MFS_ABI_VERSION 3u
#define MFS_MIN_ABI_VERSION 1u /* the oldest version the host still loads */
#define MFS_ENTRY_SYMBOL "mfstream_plugin"

#define MFS_OK 0
#define MFS_ERROR 1
#define MFS_STOP 2

#define MFS_NUMBER 0u /* in MfsValue.number */
#define MFS_TEXT 1u   /* in MfsValue.text */
#define MFS_BOOL 2u   /* in MfsValue.number, 0 or 1 */
#define MFS_POINT 3u  /* version 3: in MfsValue.point (z with MFS_HAS_Z) */
#define MFS_DETECT 4u /* version 3, emitted: where in point, the kind's name in text */

#define MFS_HAS_Z 1u /* MfsValue.flags: point.z is a height */

#define MFS_NO_TIME INT64_MIN /* MfsInstant/MfsEvent.micros: not given */

/* MfsPositionSpec.step */
#define MFS_STEP_SPEED 1u
#define MFS_STEP_AZIMUTH 2u
#define MFS_STEP_CUMULATIVE_LENGTH 3u
#define MFS_STEP_DISTANCE 4u
#define MFS_STEP_POSITION 5u
#define MFS_STEP_GEOFENCE 6u

/* MfsPositionSpec.detect bits; emitted as text "enter", "exit", ... */
#define MFS_DETECT_ENTER 1u
#define MFS_DETECT_EXIT 2u
#define MFS_DETECT_INSIDE 4u
#define MFS_DETECT_OUTSIDE 8u
#define MFS_DETECT_CROSS 16u

#define MFS_SERVES_TRANSFORM 1u /* required: the host windows the outputs itself */
#define MFS_SERVES_AGGREGATE 2u /* reserved: hosts never ask a plugin to aggregate */
#define MFS_SERVES_POSITIONS 4u /* version 3: set open_positions */

typedef struct MfsStr {
    const uint8_t *ptr; /* may be NULL when len is 0 */
    size_t len;         /* in bytes */
} MfsStr;

typedef struct MfsPoint {
    double x; /* longitude in degrees (geodetic), or easting */
    double y; /* latitude in degrees (geodetic), or northing */
    double z; /* the height with MFS_HAS_Z, else 0 */
} MfsPoint;

typedef struct MfsValue {
    uint32_t kind;  /* MFS_NUMBER, MFS_TEXT, MFS_BOOL, MFS_POINT or MFS_DETECT */
    uint32_t flags; /* version 3: MFS_HAS_Z; 0 otherwise */
    double number;
    MfsStr text;    /* a text; a detection's kind */
    MfsPoint point; /* version 3: a point's or a detection's coordinates */
} MfsValue;

/* A record the host passes in, borrowed for the call. */
typedef struct MfsInstant {
    MfsStr datetime; /* ISO-8601, verbatim */
    MfsValue value;
    int64_t micros; /* version 3: µs since 1970 UTC for a position, else MFS_NO_TIME */
} MfsInstant;

/* A result the plugin emits; copied by the host during emit. */
typedef struct MfsEvent {
    MfsStr datetime; /* version 3: empty = the host writes micros */
    MfsValue value;  /* a number should be finite (else: no result, as host->error) */
    int64_t micros;  /* version 3: read when datetime is empty, else MFS_NO_TIME */
} MfsEvent;

/* Version 3: what a position query asks; borrowed for open_positions. */
typedef struct MfsPositionSpec {
    uint32_t struct_size; /* sizeof(MfsPositionSpec) */
    uint32_t step;        /* MFS_STEP_* */
    uint32_t detect;      /* MFS_DETECT_* bits for GEOFENCE (never 0), else 0 */
    uint32_t geodetic;    /* 1: lon/lat on WGS84 (TGeogPoint); 0: planar (TGeomPoint) */
    int32_t srid;         /* EPSG code: 4326 when geodetic */
    MfsStr crs;           /* "EPSG:4326" */
    MfsStr geometry;      /* GeoJSON text for DISTANCE and GEOFENCE, else empty */
    MfsStr spec;          /* the whole query as JSON */
} MfsPositionSpec;

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
/* Version 3: opens a position query, as open otherwise. */
typedef int32_t (*MfsOpenPositionsFn)(const MfsPositionSpec *spec, const MfsHost *host,
                                      void **state);

typedef struct MfsEngine {
    uint32_t struct_size; /* sizeof(MfsEngine) */
    uint32_t serves;      /* MFS_SERVES_* bits */
    MfsStr name;          /* [a-z][a-z0-9_-]{0,62}, unique in the registry */
    MfsStr description;
    MfsOpenFn open;
    MfsProcessFn process;
    MfsCloseFn close;
    MfsReadyFn ready; /* may be NULL */
    MfsOpenPositionsFn open_positions; /* version 3: set iff serves has MFS_SERVES_POSITIONS */
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
