/* t_frames_autodisarm_escape: t_frames_altstack_escape with the alternate
   signal stack set up with SS_AUTODISARM (Linux 4.7): the kernel disarms
   it while a handler runs on it, and a siglongjmp out of the handler
   leaves it disarmed. */
#define _GNU_SOURCE 1
#include <signal.h>
#if !defined(SS_AUTODISARM)
#  define SS_AUTODISARM (1U << 31)   /* Linux, include/uapi/linux/signal.h */
#endif
#define ALTSTACK_FLAGS ((int)SS_AUTODISARM)
#include "t_frames_altstack_escape.c"
