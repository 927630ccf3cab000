/* pattern.h: what other parts use of trace patterns and match specs
   (pattern.c): the parsed pattern, the match spec a generation holds, the
   patterns a session keeps in force, and the flag groups a pattern sets. */

enum { BPT__NAME_MAX = 127 };

/* A parsed "module:function/arity"; "*" for a part that is any. */
struct bpt__mfa {
    char module[BPT__NAME_MAX + 1];
    char function[BPT__NAME_MAX + 1];
    int arity;                    /* -1: any */
};

/* How a pattern sets its kinds (BPT__KINDS, breakpoint.h), and the
   call-trace actions that need a return frame or a caller (frames.c). */
#define BPT__HOWS (BPT_OFF | BPT_PAUSE | BPT_RESTART)
#define BPT__FRAME_ACTIONS (BPT_RETURN | BPT_EXCEPTION | BPT_RETURN_TO)
#define BPT__CALL_ACTIONS (BPT__FRAME_ACTIONS | BPT_CALLER)

/* A match spec, shared by the generations that use it and freed when the
   last lets go. refc is changed only under the code modification permission;
   readers never touch it (they are done with a generation before its
   references are dropped: steps 8 and 11). */
struct bpt__ms {
    bpt_match_fn pred;
    void *user;
    unsigned actions;
    const char *message;          /* interned */
    uint32_t message_id;          /* its name id (names.c), for records; 0: none */
    int nspec;                    /* argument spec: how many, or 0 for none */
    uint8_t spec[BPT_MAX_ARGS];   /* enum bpt_arg_type */
    uint8_t rettype;              /* enum bpt_arg_type of return_from's value */
    uint32_t refc;
};

/* A pattern in force in a session: bpt_trace_pattern calls are kept in order
   and replayed on functions registered later. */
struct bpt__pattern_entry {
    bpt__pattern_entry *next;
    bpt__mfa mfa;
    unsigned flags;
    bpt__ms *ms;                  /* one reference */
};

BPT__PRIVATE int bpt__pattern_parse(const char *text, bpt__mfa *out);
BPT__PRIVATE int bpt__mfa_match(const bpt__mfa *p, const char *module, const char *name, int arity);
BPT__PRIVATE int bpt__glob(const char *pattern, const char *s);   /* '*' matches any run */
BPT__PRIVATE int bpt__flags_check(unsigned flags);
BPT__PRIVATE int bpt__ms_new(const bpt_match *m, unsigned extra, bpt__ms **out);
BPT__PRIVATE int bpt__ms_message(bpt__ms *ms, const char *message);
BPT__PRIVATE void bpt__ms_ref(bpt__ms *ms);     /* NULL is no match spec: nothing to count */
BPT__PRIVATE void bpt__ms_unref(bpt__ms *ms);
BPT__PRIVATE void bpt__pattern_entry_free(bpt__pattern_entry *e);
