// SQLite 3 for Swift, with SQLITE_TRANSIENT as a function (the macro does not import).
#ifndef TAP_CSQLITE_SHIM_H
#define TAP_CSQLITE_SHIM_H
#include <sqlite3.h>
static inline sqlite3_destructor_type tap_sqlite_transient(void) { return SQLITE_TRANSIENT; }
// sqlite3_config is variadic (Swift does not call those): memory statistics off, for TapSQLite's Database.
static inline int tap_sqlite_config_no_memstatus(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }
#endif
