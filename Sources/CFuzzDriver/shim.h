// libFuzzer's driver entry point, declared for the fuzz target (linked only with -sanitize=fuzzer).
#ifndef TAP_CFUZZDRIVER_H
#define TAP_CFUZZDRIVER_H
#include <stddef.h>
#include <stdint.h>
typedef int (*TapFuzzCallback)(const uint8_t *data, size_t size);
int LLVMFuzzerRunDriver(int *argc, char ***argv, TapFuzzCallback callback);
#endif
