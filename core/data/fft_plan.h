/* FFTW's planner is not thread-safe, executing a plan is: every plan core/data makes or destroys,
 * float (fftwf) or double (fftw), is made or destroyed between fft_plan_lock and fft_plan_unlock,
 * one lock for the process (the frontend, the waveform augmentation and the reverberation may plan
 * on different threads at once). */
#ifndef ESPNET3_DATA_FFT_PLAN_H
#define ESPNET3_DATA_FFT_PLAN_H

void fft_plan_lock(void);
void fft_plan_unlock(void);

#endif
