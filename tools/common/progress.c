/* Progress line of the sgrad programs on stderr: percent done, learning rate, words/sec/thread,
 * running loss and ETA. On a terminal one line is redrawn in place (\r); otherwise a new
 * line is printed every few seconds, so logs stay readable.
 */
#define _POSIX_C_SOURCE 200809L
#include "common.h"

#include <time.h>
#include <unistd.h>

double tc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tc_progress_init(tc_progress *p, FILE *f, int threads)
{
    p->f = f;
    p->tty = f && isatty(fileno(f));
    p->start = p->last_print = tc_now();
    p->threads = threads > 0 ? threads : 1;
}

static void fmt_duration(char *buf, size_t n, double s)
{
    if (!(s >= 0) || s > 1e7) {
        snprintf(buf, n, "--:--");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

void tc_progress_update(tc_progress *p, int64_t done, int64_t total, double lr,
                         double loss, bool force)
{
    if (!p->f) return;
    double now = tc_now();
    if (!force && now - p->last_print < (p->tty ? 0.2 : 5.0)) return;
    p->last_print = now;
    double el = now - p->start;
    double frac = total > 0 ? (double)done / (double)total : 1;
    if (frac > 1) frac = 1;
    double wps = el > 0 ? (double)done / el / p->threads : 0;
    char eta[32];
    fmt_duration(eta, sizeof eta, frac > 0 ? el * (1 - frac) / frac : -1);
    fprintf(p->f, "%sprogress %5.1f%%  lr %.6f  words/sec/thread %7.1fk  loss %.4f  eta %s%s",
            p->tty ? "\r" : "", 100 * frac, lr, wps / 1e3, loss, eta,
            p->tty ? (force ? "\n" : "  ") : "\n");
    fflush(p->f);
}
