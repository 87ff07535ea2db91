/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The parts of `hutch serve --e2b` that only e2b*.c of the control plane
 * use (e2b.h is the contract with envd): the table of E2B sandboxes
 * (e2b-sandboxes.c) and the control plane's routes (e2b-control.c).
 *
 * The table: one record per sandbox, "<table_dir>/<id>.json", a JSON object
 * written atomically (write_file_atomic()); changes to one sandbox are
 * serialised by flock() on "<id>.lock" (e2b_table_lock()). Records (keys):
 * sandboxID, templateID, name (the hutch sandbox), metadata (object of
 * strings), accessToken (string, or null when not secure), startedAt and
 * endAt (ms since the epoch), state ("creating", "running", "paused", "killing"),
 * autoPause, allowInternetAccess, network (as asked, or null). */

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "e2b.h"
#include "hutch.h"

/* [a-z0-9]{E2B_ID_LEN} (e2b-util.c) */
bool e2b_id_is_valid(const char *id);
/* A new random id / access token (getrandom()). 0 or -errno. */
int e2b_id_new(char ret[E2B_ID_LEN + 1]);
int e2b_token_new(char ret[E2B_TOKEN_LEN + 1]);

/* ---- pure parts (e2b-util.c) ---- */

/* Whether the Host header value @host ("<port>-<id>.<domain>[:N]", a
 * trailing dot and any case allowed) names port 1-65535 of a sandbox id
 * under @domain: then the port in @ret_port and the id (lowercased) in
 * @ret_id. */
bool e2b_host_parse(const char *host, const char *domain, unsigned *ret_port,
                    char ret_id[E2B_ID_LEN + 1]);

/* A chunk-size line of a chunked body ("1a2b", "ff;ext=1"): hex digits,
 * at most 16, then an optional extension. -EBADMSG otherwise. */
int e2b_chunk_size_parse(const char *line, uint64_t *ret);

/* Creates the table folder (0700) under the store and takes the server's
 * lock (-EBUSY: another server uses it). */
int e2b_table_open(E2bServer *srv);
void e2b_table_close(E2bServer *srv);

/* The lock of sandbox @id (blocking): an fd to close, or -errno. Held on
 * the file its name holds (one removed while we waited is taken again). */
int e2b_table_lock(const E2bServer *srv, const char *id);
/* Record @id: -ENOENT when there is none (or @id is malformed). */
int e2b_table_load(const E2bServer *srv, const char *id, json_t **ret);
int e2b_table_save(const E2bServer *srv, json_t *rec);
/* Saves a record whose previous content, durable, is as good after a crash
 * (the server's start destroys every sandbox of its table): without the
 * fsyncs (issue 20's create and kill latency). A reader sees the old
 * record or the new one. */
int e2b_table_save_volatile(const E2bServer *srv, json_t *rec);
/* Removes record @id and its lock file. */
void e2b_table_remove(const E2bServer *srv, const char *id);
/* Every record, as a JSON array (unordered). */
int e2b_table_list(const E2bServer *srv, json_t **ret);

/* Finds @id without checking a token (the port relay). */
int e2b_sandbox_find(const E2bServer *srv, const char *id, E2bSandboxRef *out);

/* Ends sandbox @id (locks it): its hutch sandbox destroyed, its record
 * removed. -ENOENT when unknown. */
int e2b_sandbox_kill(const E2bServer *srv, const char *id, hutch_error *err);
/* The two halves of e2b_sandbox_kill(), so that a client's kill is
 * answered once the sandbox's processes are gone, before its keeper's
 * exit (its disk image's release) and the removal of its files (tens to
 * hundreds of ms). _begin locks @id, stops the hutch sandbox's processes
 * (hutch_ext_halt()) and saves the record as "killing" (which, like
 * "creating", no route shows: gone for the client); on success *ret_lock
 * is the held lock and *ret_keeper a pidfd of the exiting keeper, or
 * -EBADF. _end (with both, which it closes) waits for the keeper's exit,
 * destroys the hutch sandbox and removes the record. A server that ends
 * between the two leaves a "killing" record, destroyed as every record is
 * at its next start. */
int e2b_sandbox_kill_begin(const E2bServer *srv, const char *id, int *ret_lock, int *ret_keeper,
                           hutch_error *err);
int e2b_sandbox_kill_end(const E2bServer *srv, const char *id, int lock, int keeper,
                         hutch_error *err);
/* E2B's network.rules (@rules, the create request's) as hutch secrets
 * added to @policy (docs/e2b.md "network.rules"): each header a rule sets
 * for a host becomes secret E2B_RULE_<HOST>_<HEADER> bound to that host
 * and header, its value in a 0600 file of sandbox @id's secrets folder
 * (<table>/<id>.secrets/). Each host must be within @policy's allow_hosts;
 * anything but header transforms is refused. Returns 0, or -errno with
 * the message (naming the member) in @msg. */
int e2b_rules_to_secrets(const E2bServer *srv, const char *id, json_t *rules, json_t *policy,
                         char *msg, size_t size);
/* The metrics of hutch sandbox @name as E2B's SandboxMetric list
 * (e2b-metrics.c): one sample (cpuCount, cpuUsedPct over 100 ms, memUsed,
 * memTotal, diskUsed, diskTotal; the caller adds the timestamp) when it
 * runs, [] when stopped. memUsed is null where no cgroup serves it. */
int e2b_metrics_sample(const char *name, json_t **ret, hutch_error *err);
/* Removes sandbox @id's secrets folder. */
void e2b_rules_remove(const E2bServer *srv, const char *id);
/* Pauses @rec (its lock held by the caller): the hutch sandbox frozen
 * whole, its processes kept (hutch_ext_pause()), or where it cannot be
 * frozen stopped, files kept; the record saved as paused, "pausedMemory"
 * saying which. -EBUSY with @err, nothing done, while a snapshot holds it
 * frozen. */
int e2b_sandbox_pause_locked(const E2bServer *srv, json_t *rec, hutch_error *err);
/* Thaws @rec's hutch sandbox when its pause froze it (the caller saves
 * the record, resumed): 0 (also when it was stopped meanwhile), or -errno
 * with @err. */
int e2b_sandbox_unpause_locked(json_t *rec, hutch_error *err);

/* Whether a running sandbox's end is at or before @now_ms. */
bool e2b_table_expired(const E2bServer *srv, uint64_t now_ms);
/* Kills (or pauses, with autoPause) every running sandbox past its end. */
void e2b_table_sweep(const E2bServer *srv, uint64_t now_ms);
/* Destroys every sandbox in the table (server start and end). */
void e2b_table_destroy_all(const E2bServer *srv);

/* The control plane: answers @req (e2b-control.c). 0: the connection goes
 * on; 1: close it; -errno. */
int e2b_control_handle(E2bRequest *req);
