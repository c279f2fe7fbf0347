#include "io/model_dir.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int has_config(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", dir);
    return access(p, R_OK) == 0;
}

tern_status tern_model_dir_resolve(const char *path, char *out, size_t cap)
{
    if (!is_dir(path)) return tern_error(TERN_E_IO, "%s: not a directory", path);
    if (has_config(path)) {
        snprintf(out, cap, "%s", path);
        return TERN_OK;
    }
    char snaps[4096];
    snprintf(snaps, sizeof snaps, "%s/snapshots", path);
    if (!is_dir(snaps)) return tern_error(TERN_E_IO, "%s: no config.json (and not a Hugging Face cache entry)", path);
    char ref[4096], rev[256] = "";
    snprintf(ref, sizeof ref, "%s/refs/main", path);
    FILE *f = fopen(ref, "r");
    if (f) {
        if (fgets(rev, sizeof rev, f)) rev[strcspn(rev, " \r\n")] = 0;
        fclose(f);
        if (rev[0] && !strchr(rev, '/')) {
            snprintf(out, cap, "%s/%s", snaps, rev);
            if (has_config(out)) return TERN_OK;
            return tern_error(TERN_E_IO, "%s: refs/main names snapshot %s, which has no config.json", path, rev);
        }
    }
    DIR *d = opendir(snaps);
    if (!d) return tern_error(TERN_E_IO, "%s: cannot list snapshots", path);
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char cand[4096];
        snprintf(cand, sizeof cand, "%s/%s", snaps, e->d_name);
        if (!has_config(cand)) continue;
        if (found++) break;
        snprintf(out, cap, "%s", cand);
    }
    closedir(d);
    if (found == 1) return TERN_OK;
    if (found == 0) return tern_error(TERN_E_IO, "%s: no snapshot with a config.json", path);
    return tern_error(TERN_E_INVALID, "%s: several snapshots and no refs/main to choose one", path);
}
