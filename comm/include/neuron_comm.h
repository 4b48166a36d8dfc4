/* neuron_comm.h — the collective engine of the `neuron` c10d backend
 * (C11, no PyTorch).  Ranks of one host meet on one POSIX shared-memory
 * segment and run collectives on host-addressable buffers (neuron tensors'
 * memory is host memory in this virtual device).
 *
 * Every call returns 0 on success and -1 on failure; ncomm_error() then
 * gives a message naming the collective ("all_reduce: timed out after 5000 ms
 * waiting for rank 1").  A failed collective leaves the communicator
 * aborted: every later call fails at once, and the other ranks see the abort
 * and fail too instead of waiting for their timeout.
 *
 * A communicator is used by one thread at a time (the backend serialises). */
#ifndef NEURON_COMM_H
#define NEURON_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "neuron_runtime.h" /* nrt_dtype */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncomm ncomm;

typedef enum ncomm_op {
  NCOMM_SUM = 0,
  NCOMM_AVG,     /* sum / world (integers: truncating division) */
  NCOMM_PRODUCT,
  NCOMM_MIN,     /* NaN propagates */
  NCOMM_MAX,     /* NaN propagates */
  NCOMM_OP_COUNT
} ncomm_op;

/* Joins the job's communicator.  key names the job's segment (the backend
 * passes a random token it shared through the c10d store; letters, digits,
 * '-' and '_' only, at most 64 characters).  Rank 0 creates the segment
 * (0600, O_EXCL), the others open it; it is unlinked as soon as every rank has
 * mapped it, so it never outlives the job.  chunk_bytes is each rank's slot
 * size per buffer (0: 1 MiB; the segment holds 2 per rank).  timeout_ms
 * bounds every wait, the rendezvous included.  On failure *out is NULL and
 * the message is in err. */
int ncomm_create(const char *key, int rank, int world, size_t chunk_bytes,
                 int64_t timeout_ms, ncomm **out, char *err, size_t errlen);
void ncomm_destroy(ncomm *c);
const char *ncomm_error(const ncomm *c);
int ncomm_rank(const ncomm *c);
int ncomm_world(const ncomm *c);
void ncomm_set_timeout(ncomm *c, int64_t timeout_ms);

/* out[i] = op over ranks of in[i], count elements; in may equal out. */
int ncomm_all_reduce(ncomm *c, const void *in, void *out, size_t count, nrt_dtype dt,
                     ncomm_op op);
/* buf (bytes) of rank root is copied to every rank's buf. */
int ncomm_broadcast(ncomm *c, void *buf, size_t bytes, int root);
/* out (world * bytes) = concatenation of every rank's in (bytes), rank order.
 * in may be this rank's block of out. */
int ncomm_all_gather(ncomm *c, const void *in, void *out, size_t bytes);
/* in holds world blocks of count elements; out (count) = op over ranks of
 * their block number `rank`.  out may be this rank's block of in. */
int ncomm_reduce_scatter(ncomm *c, const void *in, void *out, size_t count, nrt_dtype dt,
                         ncomm_op op);
/* All-to-all, uneven: this rank sends send_bytes[j] bytes from in +
 * send_displs[j] to rank j and receives recv_bytes[q] bytes from rank q at
 * out + recv_displs[q] (world entries each, in bytes; recv_bytes[q] must be
 * what rank q sends to this rank).  in and out must not overlap. */
int ncomm_all_to_all(ncomm *c, const void *in, const size_t *send_bytes,
                     const size_t *send_displs, void *out, const size_t *recv_bytes,
                     const size_t *recv_displs);
int ncomm_barrier(ncomm *c);

/* Point to point: messages between two ranks arrive in the order they were
 * sent (no tags).  send returns once the message is copied into the pair's
 * channel (it waits only while the channel's two slots are full); recv
 * waits for it, and fails if the sender's size differs from bytes. */
int ncomm_send(ncomm *c, const void *buf, size_t bytes, int dst);
int ncomm_recv(ncomm *c, void *buf, size_t bytes, int src);

/* Several sends and receives progressed together (batch_isend_irecv): no
 * order between them is needed, so ring exchanges of any size cannot
 * deadlock.  Operations on the same (peer, direction) keep their order. */
typedef struct ncomm_p2p_op {
  int peer;
  int is_send;
  void *buf;
  size_t bytes;
} ncomm_p2p_op;
int ncomm_p2p_batch(ncomm *c, const ncomm_p2p_op *ops, int n);

#ifdef __cplusplus
}
#endif
#endif
