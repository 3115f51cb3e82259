// zlib for Swift: deflateInit2/inflateInit2 are macros, so wrap them.
#ifndef TAP_CZLIB_SHIM_H
#define TAP_CZLIB_SHIM_H
#include <zlib.h>
static inline int tap_deflateInit2(z_streamp s, int level, int windowBits) {
    return deflateInit2(s, level, Z_DEFLATED, windowBits, 8, Z_DEFAULT_STRATEGY);
}
static inline int tap_inflateInit2(z_streamp s, int windowBits) { return inflateInit2(s, windowBits); }
#endif
