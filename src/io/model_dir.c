/* Model directory lookup (see model_dir.h). */
#include "io/model_dir.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Reads the first line of a refs/ file (a commit hash) into rev; 0 when absent or empty. */
static int read_ref(const char *entry, const char *name, char *rev, size_t cap)
{
    char ref[4096];
    snprintf(ref, sizeof ref, "%s/refs/%s", entry, name);
    FILE *f = fopen(ref, "r");
    if (!f) return 0;
    rev[0] = 0;
    if (!fgets(rev, (int)cap, f)) rev[0] = 0;
    fclose(f);
    rev[strcspn(rev, " \r\n")] = 0;
    return rev[0] && !strchr(rev, '/') && strcmp(rev, "..") && strcmp(rev, ".");
}

static tern_status snapshot(const char *entry, const char *rev, const char *via, char *out, size_t cap)
{
    snprintf(out, cap, "%s/snapshots/%s", entry, rev);
    if (has_config(out)) return TERN_OK;
    if (!is_dir(out))
        return tern_error(TERN_E_IO, "%s: %s names snapshot %s, which is not in snapshots/", entry, via, rev);
    return tern_error(TERN_E_IO, "%s: %s names snapshot %s, which has no config.json", entry, via, rev);
}

/* A cache entry (models--org--name) at a revision: a ref name under refs/
 * (main when rev is NULL) or a commit hash present under snapshots/. Without
 * a revision and without refs/main, the only snapshot. */
static tern_status resolve_entry(const char *entry, const char *rev, char *out, size_t cap)
{
    char snaps[4096];
    snprintf(snaps, sizeof snaps, "%s/snapshots", entry);
    if (!is_dir(snaps)) return tern_error(TERN_E_IO, "%s: no config.json (and not a Hugging Face cache entry)", entry);
    char hash[256], via[320];
    if (rev) {
        if (!rev[0] || strstr(rev, "..") || rev[0] == '/')
            return tern_error(TERN_E_INVALID, "%s: invalid revision \"%s\"", entry, rev);
        snprintf(via, sizeof via, "refs/%s", rev);
        if (read_ref(entry, rev, hash, sizeof hash)) return snapshot(entry, hash, via, out, cap);
        if (!strchr(rev, '/')) {
            snprintf(out, cap, "%s/%s", snaps, rev);
            if (is_dir(out)) return snapshot(entry, rev, "the revision", out, cap);
        }
        return tern_error(TERN_E_IO, "%s: revision \"%s\" is neither a ref under refs/ nor a snapshot under snapshots/",
                          entry, rev);
    }
    if (read_ref(entry, "main", hash, sizeof hash)) return snapshot(entry, hash, "refs/main", out, cap);
    DIR *d = opendir(snaps);
    if (!d) return tern_error(TERN_E_IO, "%s: cannot list snapshots", entry);
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
    if (found == 0) return tern_error(TERN_E_IO, "%s: no snapshot with a config.json", entry);
    return tern_error(TERN_E_INVALID, "%s: several snapshots and no refs/main to choose one", entry);
}

/* Hugging Face repo ids: letters, digits, '-', '_', '.'; neither part "." or ".." */
static int id_part_ok(const char *s, size_t n)
{
    if (n == 0 || n > 96 || (n <= 2 && s[0] == '.' && (n == 1 || s[1] == '.'))) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.') return 0;
    return 1;
}

int tern_model_repo_id_parse(const char *spec, char *org, char *name, char *rev, size_t cap)
{
    const char *slash = strchr(spec, '/');
    if (!slash) return 0;
    const char *at = strchr(slash, '@');
    size_t no = (size_t)(slash - spec), nn = at ? (size_t)(at - slash - 1) : strlen(slash + 1);
    if (!id_part_ok(spec, no) || !id_part_ok(slash + 1, nn) || no >= cap || nn >= cap) return 0;
    if (at && (!at[1] || strlen(at + 1) >= cap)) return 0;
    memcpy(org, spec, no);
    org[no] = 0;
    memcpy(name, slash + 1, nn);
    name[nn] = 0;
    snprintf(rev, cap, "%s", at ? at + 1 : "");
    return 1;
}

void tern_hf_hub_cache_dir(char *out, size_t cap)
{
    const char *v = getenv("HF_HUB_CACHE");
    if (v && v[0]) { snprintf(out, cap, "%s", v); return; }
    v = getenv("HF_HOME");
    if (v && v[0]) { snprintf(out, cap, "%s/hub", v); return; }
    v = getenv("HOME");
    snprintf(out, cap, "%s/.cache/huggingface/hub", v && v[0] ? v : ".");
}

static tern_status resolve_repo_id(const char *spec, const char *org, const char *name, const char *rev,
                                   char *out, size_t cap)
{
    char hub[2048], entry[4096];
    tern_hf_hub_cache_dir(hub, sizeof hub);
    snprintf(entry, sizeof entry, "%s/models--%s--%s", hub, org, name);
    if (!is_dir(entry))
        return tern_error(TERN_E_IO,
                          "%s: not a directory, and the Hugging Face cache has no %s/%s (looked for %s; the cache is "
                          "HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub). Get it with: "
                          "huggingface-cli download %s/%s",
                          spec, org, name, entry, org, name);
    tern_status st = resolve_entry(entry, rev[0] ? rev : NULL, out, cap);
    if (st != TERN_OK) return tern_error_wrap(st, "%s", spec);
    return TERN_OK;
}

tern_status tern_model_dir_resolve(const char *path, char *out, size_t cap)
{
    if (!path || !path[0]) return tern_error(TERN_E_INVALID, "no model given");
    if (is_dir(path)) {
        if (has_config(path)) {
            snprintf(out, cap, "%s", path);
            return TERN_OK;
        }
        return resolve_entry(path, NULL, out, cap);
    }
    char org[128], name[128], rev[256];
    if (path[0] != '/' && path[0] != '.' && tern_model_repo_id_parse(path, org, name, rev, sizeof org))
        return resolve_repo_id(path, org, name, rev, out, cap);
    return tern_error(TERN_E_IO, "%s: not a directory (nor a Hugging Face repo id ORG/NAME[@REVISION])", path);
}
