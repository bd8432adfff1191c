/* The one lock of FFTW's planner (core/data/fft_plan.h). */
#include "core/data/fft_plan.h"

#include <pthread.h>

static pthread_mutex_t plan_lock = PTHREAD_MUTEX_INITIALIZER;

void fft_plan_lock(void) { pthread_mutex_lock(&plan_lock); }

void fft_plan_unlock(void) { pthread_mutex_unlock(&plan_lock); }
