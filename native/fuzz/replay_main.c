/*
 * replay_main.c - runs fuzz inputs without libFuzzer: each argument is a
 * file or a directory of files, fed once to LLVMFuzzerTestOneInput.  Lets a
 * machine without clang replay the committed corpus (under gcc's ASan and
 * UBSan) and lets a finding be debugged with an ordinary build.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long ran;

static void run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = (uint8_t *)malloc(n > 0 ? (size_t)n : 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) { perror(path); exit(2); }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    ++ran;
}

int main(int argc, char **argv)
{
    for (int a = 1; a < argc; ++a) {
        struct stat st;
        if (stat(argv[a], &st) != 0) { perror(argv[a]); return 2; }
        if (!S_ISDIR(st.st_mode)) { run_file(argv[a]); continue; }
        DIR *d = opendir(argv[a]);
        if (!d) { perror(argv[a]); return 2; }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            run_file(path);
        }
        closedir(d);
    }
    printf("replayed %ld inputs\n", ran);
    return 0;
}
