/*
 * tern.h, the version of the library linked: a program compiled against one header may be linked
 * with another build of libtern, and these tell which one it got.
 */
#include "tern.h"

const char *tern_version(void) {
    return TERN_VERSION;
}

int tern_version_number(void) {
    return TERN_VERSION_NUMBER;
}
