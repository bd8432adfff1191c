/* Top-k selection for the beam search: the k largest of n scores, largest first, as torch.topk
 * (sorted) returns them; equal scores go to the lower index (torch leaves that order unspecified),
 * NaN ranks below everything. O(n log k). */
#ifndef ESPNET3_BEAM_SEARCH_TOPK_H
#define ESPNET3_BEAM_SEARCH_TOPK_H

/* Writes the indices of the k (<= n) best of v[0..n) to out, best first. */
void bs_topk(const double *v, int n, int k, int *out);

#endif
