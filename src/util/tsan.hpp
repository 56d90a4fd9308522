// SPDX-License-Identifier: BSD-3-Clause
// Happens-before that ThreadSanitizer cannot see. A rendezvous buffer goes from the thread
// that offers it to a peer process (in a clear-to-send) to whichever thread of this process
// later copies the peer's data into it: the chain runs through the peer and shared memory,
// which ThreadSanitizer does not follow, so it would report the allocation or the posting
// of the buffer and the copy into it as a race. The offering thread releases the buffer's
// address, the copying thread acquires it; the copying thread releases it again when the
// receive may complete in another thread (the target's half of split data), and the thread
// that completes the receive acquires it. Nothing outside ThreadSanitizer builds.
#pragma once

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define WEFT_TSAN_RELEASE(p) __tsan_release(const_cast<void*>(static_cast<const void*>(p)))
#define WEFT_TSAN_ACQUIRE(p) __tsan_acquire(const_cast<void*>(static_cast<const void*>(p)))
#else
#define WEFT_TSAN_RELEASE(p) ((void)(p))
#define WEFT_TSAN_ACQUIRE(p) ((void)(p))
#endif
