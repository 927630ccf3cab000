/* t_frames_autodisarm: t_frames_altstack with the alternate signal stack
   set up with SS_AUTODISARM (Linux 4.7): the kernel disarms it while a
   handler runs on it, and sigaltstack(2) reports it disabled there. */
#define _GNU_SOURCE 1
#include <signal.h>
#if !defined(SS_AUTODISARM)
#  define SS_AUTODISARM (1U << 31)   /* Linux, include/uapi/linux/signal.h */
#endif
#define ALTSTACK_FLAGS ((int)SS_AUTODISARM)
#include "t_frames_altstack.c"
