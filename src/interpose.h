/* interpose.h: functions of the C and C++ runtimes that bptrace defines in
   the program in place of theirs (interposition), to see a control-flow
   switch that moves return addresses or stacks under the shadow frames: a
   throw (unwind.c) and a ucontext switch (fibers.c). Each definition does
   its part, then calls the runtime's, found after bptrace's in the
   dynamic linker's search order (interpose.c).
   With BPT_NO_INTERPOSE (for a static link, where the runtime's own
   definitions collide with these, and dlsym has nothing to find) none is
   defined: a throw through a return frame then calls std::terminate, and
   fibers that switch stacks must not use return frames. tcc has no native
   sites, so nothing to keep right: none either. */

#if defined(BPT_NATIVE) && !defined(BPT_NO_INTERPOSE)
#  define BPT__INTERPOSE 1
/* A definition that stands in for the runtime's: its assembler name is
   the runtime's (an asm label on the declaration, so that the runtime's
   own declaration, which the user's file may include, does not conflict),
   exported even under -fvisibility=hidden, with C linkage. */
#  if defined(__cplusplus)
#    define BPT__INTERPOSED extern "C" __attribute__((used, visibility("default")))
#  else
#    define BPT__INTERPOSED __attribute__((used, visibility("default")))
#  endif
/* The runtime's definition of name (the next after bptrace's), found once
   and kept in *cache. Never NULL: without one (a static binary) there is
   nothing to forward to, and it aborts with a message saying so. */
BPT__PRIVATE void *bpt__interposed_next(bpt__atomic_ptr *cache, const char *name);
#endif
