/* A blocking native wait, standing for an event synchronisation or a completion-queue poll.
 *
 * native_wait(us, stamps) sleeps `us` microseconds and writes CLOCK_MONOTONIC (the clock of
 * Python's time.perf_counter_ns on Linux) on entry and on exit into stamps[0] and stamps[1].
 * The stamps are taken inside the call, so they bound exactly the time the call ran, with or
 * without the GIL: a thread timeline built from them shows whether two waits overlapped.
 */
#include <errno.h>
#include <stdint.h>
#include <time.h>

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void native_wait(int64_t us, int64_t *stamps)
{
    struct timespec left = {us / 1000000, (us % 1000000) * 1000};
    stamps[0] = now_ns();
    /* a signal cuts nanosleep short: sleep the rest */
    while (nanosleep(&left, &left) == -1 && errno == EINTR) {
    }
    stamps[1] = now_ns();
}
