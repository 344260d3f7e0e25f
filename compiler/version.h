/* version.h — the compiler's version, printed by --version and stamped into generated files. */
#ifndef COLOSSAL_VERSION_H
#define COLOSSAL_VERSION_H
#define COLOSSAL_VERSION "0.1.0"
#endif
