/* Progress line of the sgrad programs on stderr: percent done, learning rate, words/sec/thread,
 * running loss and ETA. On a terminal one line is redrawn in place (\r); otherwise a new
 * line is printed every few seconds, so logs stay readable.
 */
#define _POSIX_C_SOURCE 200809L
#include "tools.h"

#include <unistd.h>

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

bool tc_progress_due(const tc_progress *p)
{
    return p->f && tc_now() - p->last_print >= (p->tty ? 0.2 : 5.0);
}

void tc_log_init(tc_log *l, FILE *f, int threads)
{
    l->f = f;
    l->threads = threads > 0 ? threads : 1;
    l->start = l->last_time = tc_now();
    l->last_words = -1; /* the first update writes a record */
    l->next_words = 0;
    l->loss = 0;
    l->n = 0;
}

void tc_log_update(tc_log *l, int epoch, int64_t words, int64_t total, int64_t steps, double lr,
                    double loss_sum, int64_t n, bool force)
{
    if (!l->f) return;
    l->loss += loss_sum;
    l->n += n;
    if (!force && words < l->next_words) return;
    const double now = tc_now();
    const double dt = now - l->last_time;
    const int64_t dw = l->last_words < 0 ? 0 : words - l->last_words;
    char loss[32] = "null";
    if (l->n > 0) snprintf(loss, sizeof loss, "%.6g", l->loss / (double)l->n);
    fprintf(l->f,
            "{\"epoch\":%d,\"words\":%lld,\"total_words\":%lld,\"progress\":%.6f,\"steps\":%lld,"
            "\"lr\":%.6g,\"loss\":%s,\"words_per_sec_thread\":%.1f,\"elapsed_s\":%.3f}\n",
            epoch, (long long)words, (long long)total, total > 0 ? (double)words / (double)total : 1.0,
            (long long)steps, lr, loss, dt > 0 && dw > 0 ? (double)dw / dt / l->threads : 0.0, now - l->start);
    l->last_time = now;
    l->last_words = words;
    l->next_words = words + (total / 200 > 1 ? total / 200 : 1);
    l->loss = 0;
    l->n = 0;
}
