/* A program built against an installed libtern (pkg-config tern): loads a
 * model, submits two greedy requests to one engine at once and prints each
 * one's generated ids on a line, "A: 1 2 3" and "B: ...". Uses the public
 * headers only. usage: engine_demo MODEL_DIR PROMPT_A PROMPT_B N_TOKENS */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/engine.h>
#include <tern/model.h>
#include <tern/tokenizer.h>

typedef struct {
    int32_t ids[256];
    int n, done;
} out_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static int on_token(void *user, const tern_token_event *ev)
{
    out_t *o = user;
    if (o->n < 256) o->ids[o->n++] = ev->token;
    return 0;
}

static void on_done(void *user, const tern_request_result *res)
{
    out_t *o = user;
    if (res->status) fprintf(stderr, "request failed: %s\n", res->error);
    pthread_mutex_lock(&mu);
    o->done = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

int main(int argc, char **argv)
{
    if (argc != 5) return 2;
    tern_model *m;
    tern_tokenizer *tok;
    tern_engine *e;
    if (tern_model_load(argv[1], NULL, &m) || tern_tokenizer_load(tern_model_dir(m), &tok) ||
        tern_engine_create(m, NULL, &e)) {
        fprintf(stderr, "%s\n", tern_last_error());
        return 1;
    }
    out_t outs[2] = {{{0}, 0, 0}, {{0}, 0, 0}};
    for (int i = 0; i < 2; i++) {
        int32_t *ids;
        int n;
        const char *p = argv[2 + i];
        if (tern_tokenizer_encode(tok, p, strlen(p), 1, &ids, &n)) return 1;
        tern_request_opts o;
        tern_request_opts_default(&o);
        o.max_tokens = atoi(argv[4]);
        tern_request_cb cb = {on_token, NULL, on_done, &outs[i]};
        if (tern_engine_submit(e, ids, n, &o, &cb, NULL)) {
            fprintf(stderr, "%s\n", tern_last_error());
            return 1;
        }
        free(ids);
    }
    pthread_mutex_lock(&mu);
    while (!outs[0].done || !outs[1].done) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < 2; i++) {
        printf("%c:", 'A' + i);
        for (int t = 0; t < outs[i].n; t++) printf(" %d", outs[i].ids[t]);
        printf("\n");
    }
    tern_engine_free(e);
    tern_tokenizer_free(tok);
    tern_model_free(m);
    return 0;
}
