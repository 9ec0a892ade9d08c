/* Prints the size and field offsets of every ABI type, one per line, for the
 * test that checks mfstream_plugin.h against abi.rs. */
#include <stddef.h>
#include <stdio.h>

#include "mfstream_plugin.h"

#define SIZE(t) printf(#t " %zu\n", sizeof(t))
#define AT(t, f) printf(#t "." #f " %zu\n", offsetof(t, f))

int main(void) {
    SIZE(MfsStr); AT(MfsStr, ptr); AT(MfsStr, len);
    SIZE(MfsPoint); AT(MfsPoint, x); AT(MfsPoint, y); AT(MfsPoint, z);
    SIZE(MfsValue); AT(MfsValue, kind); AT(MfsValue, flags); AT(MfsValue, number);
    AT(MfsValue, text); AT(MfsValue, point);
    SIZE(MfsInstant); AT(MfsInstant, datetime); AT(MfsInstant, value); AT(MfsInstant, micros);
    SIZE(MfsEvent); AT(MfsEvent, datetime); AT(MfsEvent, value); AT(MfsEvent, micros);
    SIZE(MfsPositionSpec); AT(MfsPositionSpec, struct_size); AT(MfsPositionSpec, step);
    AT(MfsPositionSpec, detect); AT(MfsPositionSpec, geodetic); AT(MfsPositionSpec, srid);
    AT(MfsPositionSpec, crs); AT(MfsPositionSpec, geometry); AT(MfsPositionSpec, spec);
    SIZE(MfsHost); AT(MfsHost, ctx); AT(MfsHost, emit); AT(MfsHost, fail); AT(MfsHost, error);
    SIZE(MfsEngine); AT(MfsEngine, struct_size); AT(MfsEngine, serves); AT(MfsEngine, name);
    AT(MfsEngine, description); AT(MfsEngine, open); AT(MfsEngine, process);
    AT(MfsEngine, close); AT(MfsEngine, ready); AT(MfsEngine, open_positions);
    SIZE(MfsPlugin); AT(MfsPlugin, struct_size); AT(MfsPlugin, abi_version); AT(MfsPlugin, name);
    AT(MfsPlugin, version); AT(MfsPlugin, engines); AT(MfsPlugin, engine_count);
    printf("MFS_ABI_VERSION %u\n", MFS_ABI_VERSION);
    printf("MFS_POINT %u MFS_DETECT %u MFS_HAS_Z %u MFS_SERVES_POSITIONS %u\n", MFS_POINT,
           MFS_DETECT, MFS_HAS_Z, MFS_SERVES_POSITIONS);
    printf("MFS_STEP %u %u %u %u %u %u\n", MFS_STEP_SPEED, MFS_STEP_AZIMUTH,
           MFS_STEP_CUMULATIVE_LENGTH, MFS_STEP_DISTANCE, MFS_STEP_POSITION, MFS_STEP_GEOFENCE);
    printf("MFS_DETECT_ %u %u %u %u %u\n", MFS_DETECT_ENTER, MFS_DETECT_EXIT,
           MFS_DETECT_INSIDE, MFS_DETECT_OUTSIDE, MFS_DETECT_CROSS);
    printf("MFS_NO_TIME %lld\n", (long long)MFS_NO_TIME);
    return 0;
}
