/* The replicas' shared state (replicas.c), open to the tests that drive a merge by hand
 * (tests/test_w2v_train.c). */
#ifndef SG_MODELS_W2V_REPLICAS_H
#define SG_MODELS_W2V_REPLICAS_H

#include "w2v.h"

#include <pthread.h>

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int replicas, slots; /* slots: replicas that may compute now */
    int arrived;         /* at the current barrier */
    uint64_t generation; /* barriers passed */
    bool failed;
    bool any_active;
    sg_tensor *(*tables)[3]; /* each replica's tables (in, out, hs) at the current merge */
    bool *active;
    bool *want_stop;     /* each replica's stop request at the current merge */
    bool stop;           /* a full merge saw a request: every replica stops after it */
    float **x[3];        /* each replica's tables' data (in, out, hs) at the current merge */
    uint8_t ***dirty;    /* dirty[q]: replica q's sg_w2v_merger dirty rows (in, out, hs) */
    float *base[3];      /* the tables at the last merge: in, out, hs */
    int level;           /* the merge under way: 0 full, else hot */
} rep_shared;

typedef struct {
    rep_shared *s;
    int r;
    w2v_parallel par;
    w2v_config cfg;
    const tc_vocab *v;
    w2v_result res;
    w2v_model model;
    int rc;
    sg_model_error err;
} rep_thread;

/* Under the lock: waits for a slot to compute (none once the run failed). */
void w2v_rep_take_slot(rep_shared *s);
/* A replica's thread is done (rc: w2v_train's): its slot goes back, and a failure wakes
 * every replica waiting at a merge, which then fails too. */
void w2v_rep_finish(rep_shared *s, int rc);
/* The replicas' sg_w2v_merger sync (the first call: replica 0's tables for all). */
int w2v_rep_sync(w2v_parallel *p, sg_tensor *const *tables, bool active, bool *any_active);

#endif
