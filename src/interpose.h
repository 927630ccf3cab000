/* interpose.h: functions of the C and C++ runtimes that bptrace defines in
   the program in place of theirs (interposition), to see a control-flow
   switch that moves return addresses or stacks under the shadow frames: a
   throw (unwind.c) and a ucontext switch (fibers.c). Each definition does
   its part, then calls the runtime's, found after bptrace's in the
   dynamic linker's search order (interpose.c).
   With BPT_NO_INTERPOSE (for a fully static program, where dlsym has
   nothing to find) none is defined: a throw through a return frame then calls std::terminate, and
   fibers that switch stacks must not use return frames. tcc has no native
   sites, so nothing to keep right: none either. */

#if defined(BPT_NATIVE) && !defined(BPT_NO_INTERPOSE)
#  define BPT__INTERPOSE 1
/* A definition in C that stands in for the runtime's: its assembler name
   is the runtime's (an asm label on the declaration, so that the runtime's
   own declaration, which the user's file may include, does not conflict),
   exported even under -fvisibility=hidden, with C linkage, and without a
   patchable entry even in a program built whole with the flags (module
   registration would name it as the runtime's function: tracing it would
   trace bptrace). Strong: a sanitizer runtime linked into the program
   (clang's ASAN) defines its interceptors weak, and this one must win
   over them, as over the C library's. The unwinder's are weak assembly
   stubs instead (unwind.c). */
#  define BPT__INTERPOSED_ATTRS __attribute__((used, visibility("default"), patchable_function_entry(0, 0)))
#  if defined(__cplusplus)
#    define BPT__INTERPOSED extern "C" BPT__INTERPOSED_ATTRS
#  else
#    define BPT__INTERPOSED BPT__INTERPOSED_ATTRS
#  endif
/* The runtime's definition of name (the next after bptrace's), found once
   and kept in *cache. Never NULL: without one (a static binary) there is
   nothing to forward to, and it aborts with a message saying so. */
BPT__PRIVATE void *bpt__interposed_next(bpt__atomic_ptr *cache, const char *name);
#endif
