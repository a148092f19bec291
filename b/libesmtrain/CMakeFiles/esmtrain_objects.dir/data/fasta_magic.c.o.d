libesmtrain/CMakeFiles/esmtrain_objects.dir/data/fasta_magic.c.o: \
 /work/wip19/libesmtrain/data/fasta_magic.c /usr/include/stdc-predef.h \
 /work/wip19/libesmtrain/data/fasta_magic.h \
 /usr/lib/gcc/x86_64-linux-gnu/12/include/stddef.h \
 /work/wip19/libesmtrain/base/internal.h \
 /work/wip19/include/esmtrain/esmtrain.h \
 /usr/lib/gcc/x86_64-linux-gnu/12/include/stdint.h /usr/include/stdint.h \
 /usr/include/x86_64-linux-gnu/bits/libc-header-start.h \
 /usr/include/features.h /usr/include/features-time64.h \
 /usr/include/x86_64-linux-gnu/bits/wordsize.h \
 /usr/include/x86_64-linux-gnu/bits/timesize.h \
 /usr/include/x86_64-linux-gnu/sys/cdefs.h \
 /usr/include/x86_64-linux-gnu/bits/long-double.h \
 /usr/include/x86_64-linux-gnu/gnu/stubs.h \
 /usr/include/x86_64-linux-gnu/gnu/stubs-64.h \
 /usr/include/x86_64-linux-gnu/bits/types.h \
 /usr/include/x86_64-linux-gnu/bits/typesizes.h \
 /usr/include/x86_64-linux-gnu/bits/time64.h \
 /usr/include/x86_64-linux-gnu/bits/wchar.h \
 /usr/include/x86_64-linux-gnu/bits/stdint-intn.h \
 /usr/include/x86_64-linux-gnu/bits/stdint-uintn.h \
 /work/wip19/include/esmtrain/backend.h \
 /usr/lib/gcc/x86_64-linux-gnu/12/include/stdarg.h /usr/include/string.h
