/* tern chat --model M [--system TEXT] [--max-tokens 512] [--temp 0.0] [--top-p 1.0]
 *     [--top-k 0] [--min-p 0.0] [--seed S] [--chat-template-args JSON] [--stats]
 *     [--threads N] [--precision f32|bf16] [--weights panels|mapped]
 *
 * An interactive chat in the terminal through the model's own chat template,
 * built on the public library API only (tern/model.h, tokenizer.h,
 * chat_template.h, generate.h). Each turn renders the whole conversation and
 * streams the reply as it is generated.
 *
 * Input: see chat_input.h for multi-line input (a trailing backslash
 * continues a line; """ ... """ is a verbatim block). Commands: /reset,
 * /system [TEXT], /help, /exit. Ctrl-C stops the reply being generated (the
 * shown part stays in the conversation); at the prompt a second Ctrl-C in a
 * row, Ctrl-D or /exit quits. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/chat_input.h"
#include "cli/cli_util.h"
#include "tern/chat_template.h"
#include "tern/generate.h"
#include "tern/model.h"
#include "tern/tokenizer.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tern chat --model DIR|ORG/NAME[@REV] [--system TEXT] [--max-tokens 512] [--temp 0.0]\n"
            "       [--top-p 1.0] [--top-k 0] [--min-p 0.0] [--seed S] [--chat-template-args JSON] [--stats]\n"
            "       [--threads N] [--precision f32|bf16] [--weights panels|mapped]\n"
            "\n"
            "Type a message and press Enter. A line ending in \\ continues on the next line;\n"
            "a line \"\"\" starts a block that ends at the next line \"\"\".\n"
            "Commands: /reset  /system [TEXT]  /help  /exit.  Ctrl-C stops a reply; Ctrl-C twice or Ctrl-D quits.\n");
}

static volatile sig_atomic_t g_interrupts;

static void on_sigint(int sig)
{
    (void)sig;
    g_interrupts++;
}

typedef struct {
    tern_model         *model;
    tern_tokenizer     *tok;
    tern_chat_template *tmpl;
    tern_generate_opts  go;
    json_t             *kwargs;   /* owned: --chat-template-args, or NULL */
    json_t             *history;  /* owned: user / assistant messages */
    char               *system;   /* owned, or NULL */
    int                 stats;
    int32_t             eos;
} chat;

typedef struct {
    tern_detok *detok;
    json_t     *reply;   /* owned by the caller: the text shown so far */
    char       *text;
    size_t      len;
    int         stopped;
    int         failed;
} turn;

static int add_text(turn *t, const char *s, size_t n)
{
    char *p = realloc(t->text, t->len + n + 1);
    if (!p) return -1;
    memcpy(p + t->len, s, n);
    t->len += n;
    p[t->len] = '\0';
    t->text = p;
    fwrite(s, 1, n, stdout);
    fflush(stdout);
    return 0;
}

static int on_token(void *user, const tern_token_event *ev)
{
    turn *t = user;
    char *delta = NULL;
    size_t n = 0;
    if (tern_detok_push_n(t->detok, ev->token, &delta, &n) != TERN_OK || add_text(t, delta, n)) t->failed = 1;
    free(delta);
    if (g_interrupts) t->stopped = 1;
    return t->failed || t->stopped;
}

/* The conversation (system prompt first) as the template's messages JSON. */
static char *messages_json(const chat *c)
{
    json_t *m = json_array();
    if (!m) return NULL;
    if (c->system) json_array_append_new(m, json_pack("{s:s,s:s}", "role", "system", "content", c->system));
    json_array_extend(m, c->history);
    char *s = json_dumps(m, JSON_COMPACT);
    json_decref(m);
    return s;
}

/* Renders and encodes the conversation; 0 or -1 with a message printed. */
static int prompt_ids(chat *c, int32_t **ids, int *n)
{
    char *mj = messages_json(c), *kw = c->kwargs ? json_dumps(c->kwargs, JSON_COMPACT) : NULL, *text = NULL;
    tern_status st = mj ? tern_chat_template_render(c->tmpl, mj, NULL, 1, kw, &text)
                        : tern_error(TERN_E_NOMEM, "out of memory");
    /* The template writes any BOS itself, so the post-processor must not. */
    if (st == TERN_OK) st = tern_tokenizer_encode(c->tok, text, strlen(text), 0, ids, n);
    free(mj);
    free(kw);
    free(text);
    if (st != TERN_OK) {
        fprintf(stderr, "tern chat: %s\n", tern_last_error());
        return -1;
    }
    return 0;
}

/* One user message and the model's streamed reply. */
static void respond(chat *c, const char *user_text)
{
    json_t *msg = json_pack("{s:s,s:s}", "role", "user", "content", user_text);
    if (!msg) {
        fprintf(stderr, "tern chat: the input is not valid UTF-8\n");
        return;
    }
    json_array_append_new(c->history, msg);
    int32_t *ids = NULL;
    int n = 0;
    if (prompt_ids(c, &ids, &n)) {
        json_array_remove(c->history, json_array_size(c->history) - 1);
        return;
    }
    int ctx = tern_model_max_context(c->model);
    if (ctx > 0 && n >= ctx) {
        fprintf(stderr, "tern chat: the conversation is %d tokens, the model's context is %d; /reset starts over\n",
                n, ctx);
        json_array_remove(c->history, json_array_size(c->history) - 1);
        free(ids);
        return;
    }
    tern_generate_opts go = c->go;
    if (ctx > 0 && go.max_tokens > ctx - n) go.max_tokens = ctx - n;
    turn t = {0};
    if (tern_detok_create(c->tok, 1, &t.detok) != TERN_OK) {
        fprintf(stderr, "tern chat: %s\n", tern_last_error());
        free(ids);
        return;
    }
    g_interrupts = 0;
    tern_generate_stats stats = {0};
    tern_status st = tern_generate(c->model, ids, n, &go, on_token, &t, &stats);
    free(ids);
    char *rest = NULL;
    size_t rn = 0;
    if (st == TERN_OK && !t.failed && tern_detok_flush_n(t.detok, &rest, &rn) == TERN_OK) add_text(&t, rest, rn);
    free(rest);
    tern_detok_free(t.detok);
    if (st != TERN_OK || t.failed) fprintf(stderr, "\ntern chat: %s\n", st != TERN_OK ? tern_last_error() : "out of memory");
    fputs(t.stopped ? "\n[stopped]\n" : "\n", stdout);
    fflush(stdout);
    json_array_append_new(c->history, json_pack("{s:s,s:s%}", "role", "assistant", "content", t.text ? t.text : "",
                                                t.text ? t.len : 0));
    free(t.text);
    if (c->stats)
        fprintf(stderr, "[prompt %d tokens, %.1f tok/s | reply %d tokens, %.1f tok/s]\n", stats.prompt_tokens,
                stats.prompt_tokens / (stats.prefill_seconds > 0 ? stats.prefill_seconds : 1e-9), stats.generated_tokens,
                stats.generated_tokens > 1 && stats.decode_seconds > 0 ? (stats.generated_tokens - 1) / stats.decode_seconds
                                                                       : 0.0);
    g_interrupts = 0;
}

/* Runs a /command; returns 1 to quit. */
static int command(chat *c, const char *in)
{
    const char *arg = in + strcspn(in, " \t\n");
    size_t cmd_len = (size_t)(arg - in);
    arg += strspn(arg, " \t\n");
    if ((cmd_len == 5 && !memcmp(in, "/exit", 5)) || (cmd_len == 5 && !memcmp(in, "/quit", 5))) return 1;
    if (cmd_len == 6 && !memcmp(in, "/reset", 6)) {
        json_array_clear(c->history);
        printf("[conversation cleared]\n");
    } else if (cmd_len == 7 && !memcmp(in, "/system", 7)) {
        free(c->system);
        c->system = arg[0] ? strdup(arg) : NULL;
        printf(c->system ? "[system prompt set]\n" : "[system prompt cleared]\n");
    } else if (cmd_len == 5 && !memcmp(in, "/help", 5)) {
        printf("/reset          clear the conversation (the system prompt stays)\n"
               "/system [TEXT]  set the system prompt (no TEXT: remove it); the conversation stays\n"
               "/exit           quit (also /quit, Ctrl-D, or Ctrl-C twice at the prompt)\n"
               "A line ending in \\ continues on the next line; a line \"\"\" starts a block that ends at the\n"
               "next line \"\"\" (a block is sent as typed, even when it starts with /). Ctrl-C stops a reply.\n");
    } else {
        printf("[unknown command %.*s: /help lists them]\n", (int)cmd_len, in);
    }
    fflush(stdout);
    return 0;
}

static void loop(chat *c)
{
    int tty = isatty(STDIN_FILENO);
    int ctrl_c = 0;  /* Ctrl-C presses at the prompt with nothing typed in between */
    for (;;) {
        char *in = NULL;
        int block = 0;
        chat_in_status s = chat_input_read(stdin, tty ? stdout : NULL, &in, &block);
        if (s == CHAT_IN_INTERRUPTED) {
            g_interrupts = 0;
            if (++ctrl_c >= 2) { fputc('\n', stdout); break; }
            printf("\n[Ctrl-C again, /exit or Ctrl-D quits]\n");
            continue;
        }
        if (s != CHAT_IN_TEXT) {
            if (s == CHAT_IN_NOMEM) fprintf(stderr, "tern chat: out of memory\n");
            if (tty) fputc('\n', stdout);
            break;
        }
        ctrl_c = 0;
        int quit = 0;
        if (!block && in[0] == '/') quit = command(c, in);
        else if (in[strspn(in, " \t\n")]) respond(c, in);
        free(in);
        if (quit) break;
    }
}

int tern_cmd_chat(int argc, char **argv)
{
    const char *model = NULL, *system = NULL, *kwargs = NULL;
    chat c = {0};
    tern_model_opts mo = {0};
    tern_generate_opts_default(&c.go);
    c.go.max_tokens = 512;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        if (!strcmp(a, "--stats")) { c.stats = 1; continue; }
        if (!(v = cli_value(argc, argv, i))) return 2;
        i++;
        int bad = 0;
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--system")) system = v;
        else if (!strcmp(a, "--chat-template-args")) kwargs = v;
        else if (!strcmp(a, "--max-tokens")) bad = cli_int(a, v, 1, 1 << 24, &c.go.max_tokens);
        else if (!strcmp(a, "--temp") || !strcmp(a, "--temperature")) bad = cli_float(a, v, &c.go.sampling.temperature);
        else if (!strcmp(a, "--top-p")) bad = cli_float(a, v, &c.go.sampling.top_p);
        else if (!strcmp(a, "--top-k")) bad = cli_int(a, v, 0, 1 << 24, &c.go.sampling.top_k);
        else if (!strcmp(a, "--min-p")) bad = cli_float(a, v, &c.go.sampling.min_p);
        else if (!strcmp(a, "--seed")) bad = cli_u64(a, v, &c.go.sampling.seed);
        else if (!strcmp(a, "--threads")) bad = cli_int(a, v, 1, 1024, &mo.n_threads);
        else if (!strcmp(a, "--precision")) bad = cli_precision(a, v, &mo.precision);
        else if (!strcmp(a, "--weights")) bad = cli_weights(a, v, &mo.weights);
        else { fprintf(stderr, "tern chat: unknown option %s\n", a); usage(stderr); return 2; }
        if (bad) return 2;
    }
    if (!model) { usage(stderr); return 2; }
    if (tern_sampling_params_validate(&c.go.sampling) != TERN_OK) {
        fprintf(stderr, "tern chat: %s\n", tern_last_error());
        return 2;
    }
    if (kwargs && !json_is_object(c.kwargs = json_loads(kwargs, 0, NULL))) {
        fprintf(stderr, "tern chat: --chat-template-args must be a JSON object\n");
        json_decref(c.kwargs);
        return 2;
    }
    int rc = 1;
    c.history = json_array();
    if (system && system[0] && !(c.system = strdup(system))) goto done;
    if (tern_model_load(model, &mo, &c.model) || tern_tokenizer_load(tern_model_dir(c.model), &c.tok)) {
        fprintf(stderr, "tern chat: %s\n", tern_last_error());
        goto done;
    }
    if (tern_chat_template_load(tern_model_dir(c.model), &c.tmpl) != TERN_OK) {
        fprintf(stderr, "tern chat: %s has no usable chat template (%s)\n", model, tern_last_error());
        goto done;
    }
    c.eos = tern_tokenizer_eos_id(c.tok);
    if (c.eos >= 0) { c.go.extra_eos = &c.eos; c.go.n_extra_eos = 1; }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;  /* no SA_RESTART: a Ctrl-C at the prompt ends the read */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    if (isatty(STDIN_FILENO))
        printf("tern chat with %s: /help for commands, /exit or Ctrl-D to quit\n", tern_model_dir(c.model));
    fflush(stdout);
    loop(&c);
    rc = 0;
done:
    tern_chat_template_free(c.tmpl);
    tern_tokenizer_free(c.tok);
    tern_model_free(c.model);
    json_decref(c.history);
    json_decref(c.kwargs);
    free(c.system);
    return rc;
}
