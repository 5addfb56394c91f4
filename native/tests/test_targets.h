/* The CPU targets a native test runs its checks on: all three by default;
 * KWK_TEST_TARGETS="portable,avx512" (a comma-separated list) narrows that
 * (native/tests/run.sh does for the sanitized build: see why there). */
#ifndef KWK_TEST_TARGETS_H
#define KWK_TEST_TARGETS_H

#include <stdlib.h>
#include <string.h>
#include "kwker.h"

enum { KWK_TEST_NTARGETS = 3 };
static const char *const KWK_TEST_TARGET_NAMES[KWK_TEST_NTARGETS] = {"portable", "avx2", "avx512"};

static int test_target_wanted(const char *name)
{
    const char *list = getenv("KWK_TEST_TARGETS");
    if (list == NULL || list[0] == '\0') return 1;
    const size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

/* kwk_set_target for a wanted target; KWK_E_ARG (skip it) otherwise. */
static int test_set_target(const char *name)
{
    return test_target_wanted(name) ? kwk_set_target(name) : KWK_E_ARG;
}

#endif
