/* FROZEN with the version-2 header next to it: prints its layouts for the
 * test that checks them against abi::v2. Never edit. */
/* Prints the size and field offsets of every ABI type, one per line, for the
 * test that checks mfstream_plugin.h against abi.rs. */
#include <stddef.h>
#include <stdio.h>

#include "mfstream_plugin.h"

#define SIZE(t) printf(#t " %zu\n", sizeof(t))
#define AT(t, f) printf(#t "." #f " %zu\n", offsetof(t, f))

int main(void) {
    SIZE(MfsStr); AT(MfsStr, ptr); AT(MfsStr, len);
    SIZE(MfsValue); AT(MfsValue, kind); AT(MfsValue, number); AT(MfsValue, text);
    SIZE(MfsInstant); AT(MfsInstant, datetime); AT(MfsInstant, value);
    SIZE(MfsEvent); AT(MfsEvent, datetime); AT(MfsEvent, value);
    SIZE(MfsHost); AT(MfsHost, ctx); AT(MfsHost, emit); AT(MfsHost, fail); AT(MfsHost, error);
    SIZE(MfsEngine); AT(MfsEngine, struct_size); AT(MfsEngine, serves); AT(MfsEngine, name);
    AT(MfsEngine, description); AT(MfsEngine, open); AT(MfsEngine, process);
    AT(MfsEngine, close); AT(MfsEngine, ready);
    SIZE(MfsPlugin); AT(MfsPlugin, struct_size); AT(MfsPlugin, abi_version); AT(MfsPlugin, name);
    AT(MfsPlugin, version); AT(MfsPlugin, engines); AT(MfsPlugin, engine_count);
    printf("MFS_ABI_VERSION %u\n", MFS_ABI_VERSION);
    return 0;
}
