/* internal.h: the one header every implementation part includes, as
   Nuklear's parts include nuklear_internal.h. It holds what parts share:
   the public half, the portability layer (port.h), the names of the
   private types, and each concern's declarations in dependency order.
   Each part declares here, through its concern's header, only what other
   parts use of it; the rest stays static in the part.

   In bptrace.h these declarations come first and every part follows, so a
   part may call any other part's functions; data is defined by its part
   before any part that uses it (port.h: BPT__SHARED, BPT__DATA). amalgamate.sh
   takes the order of the headers from the #include lines below. Each part
   also compiles on its own:
       cc -fsyntax-only -DBPTRACE_IMPLEMENTATION -DBPT__PART_ALONE src/X.c
   which make test checks for every part. */
#include "api_control.h"  /* the public half (each public part includes the one before) */
#include "port.h"

/* The private types other parts name before their definition. */
typedef struct bpt__thread bpt__thread;                 /* progress.h */
typedef struct bpt__session bpt__session;               /* session.h */
typedef struct bpt__mfa bpt__mfa;                       /* pattern.h */
typedef struct bpt__ms bpt__ms;                         /* pattern.h */
typedef struct bpt__pattern_entry bpt__pattern_entry;   /* pattern.h */
typedef struct bpt__frame bpt__frame;                   /* frames.h */
typedef struct bpt__hit bpt__hit;                       /* frames.h */

#include "clock.h"
#include "record.h"
#include "progress.h"
#include "session.h"
#include "pattern.h"
#include "breakpoint.h"
#include "timem.h"
#include "frames.h"
#include "sites.h"
#include "interpose.h"
#include "registry.h"

/* The lock order and fork (locks.c). */
BPT__PRIVATE void bpt__locks_init(void);            /* once: the fork handlers */
BPT__DATA(pthread_mutex_t, bpt__intern_lock);       /* intern.c: 3rd in the lock order */
