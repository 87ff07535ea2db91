/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* capi-probe: one call of include/hutch.h per invocation, for
 * tests/integration/test_capi.py. It uses nothing but hutch.h and libc, as
 * a program outside this tree would.
 *
 *   capi-probe VERB ARGS...
 *
 * On success a verb prints its result (JSON, or a file's raw bytes for
 * read) and exits 0; on failure it prints
 *   {"error":CODE,"message":"...","field":"..."}
 * and exits 1 (2 for a usage error). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hutch.h>

static void json_str(const char *s) {
        putchar('"');
        for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
                if (*c == '"' || *c == '\\')
                        printf("\\%c", *c);
                else if (*c < 0x20 || *c >= 0x7f)
                        printf("\\u%04x", *c);
                else
                        putchar(*c);
        }
        putchar('"');
}

static int failed(int r, const hutch_error *err) {
        printf("{\"error\":%d,\"ret\":%d,\"message\":", err->code, r);
        json_str(err->message);
        printf(",\"field\":");
        json_str(err->field);
        printf("}\n");
        return 1;
}

static void print_info(const hutch_file_info *i) {
        printf("{\"name\":");
        json_str(i->name);
        printf(",\"type\":\"%s\",\"size\":%llu,\"mode\":%u,\"mtime_ms\":%lld}", i->type,
               (unsigned long long)i->size, i->mode, (long long)i->mtime_ms);
}

static void print_sandbox(const hutch_sandbox_info *i) {
        printf("{\"name\":\"%s\",\"id\":\"%s\",\"running\":%s,\"created_ms\":%llu,"
               "\"last_used_ms\":%llu,\"disk_bytes\":%llu,\"parent\":\"%s\"",
               i->name, i->id, i->running ? "true" : "false", (unsigned long long)i->created_ms,
               (unsigned long long)i->last_used_ms, (unsigned long long)i->disk_bytes, i->parent);
        /* hutch_get()'s policy as recorded (hutch_list() has none). */
        if (i->policy_json)
                printf(",\"policy\":%s,\"disk_limit_bytes\":%llu", i->policy_json,
                       (unsigned long long)i->disk_limit_bytes);
        printf("}");
}

/* A number in @base (10 or 8), digits only; -1 when it is not one. */
static long long num(const char *s, unsigned base) {
        long long v = 0;

        if (!*s)
                return -1;
        for (; *s; s++) {
                if (*s < '0' || *s >= (char)('0' + base) || v > (1LL << 50))
                        return -1;
                v = v * base + (*s - '0');
        }
        return v;
}

/* Reads stdin to EOF. */
static char *read_stdin(size_t *ret_len) {
        size_t len = 0, size = 4096;
        char *buf = malloc(size);
        ssize_t n;

        while (buf && (n = read(0, buf + len, size - len)) > 0) {
                len += (size_t)n;
                if (len == size) {
                        char *b = realloc(buf, size *= 2);

                        if (!b) {
                                free(buf);
                                return NULL;
                        }
                        buf = b;
                }
        }
        *ret_len = len;
        return buf;
}

/* policy [--json DOC] [--workspace SPEC] [--limit NAME=VALUE] [--network M]
 * [--env SPEC] [--workdir DIR] [--bind SPEC] [--allow-host P] [--secret S]
 * [--json-try DOC]: the policy from these, in this order. */
static int build_policy(int argc, char **argv, int *i, hutch_policy **ret, hutch_error *err) {
        hutch_policy *p = hutch_policy_new();
        int r = 0;

        if (!p)
                return -ENOMEM;
        for (; r >= 0 && *i + 1 < argc && strncmp(argv[*i], "--", 2) == 0 &&
               strcmp(argv[*i], "--") != 0;
             *i += 2) {
                const char *flag = argv[*i], *v = argv[*i + 1];

                if (strcmp(flag, "--json") == 0)
                        r = hutch_policy_load_json(p, v, err);
                else if (strcmp(flag, "--json-try") == 0) {
                        /* A failure is reported on stderr, and the policy
                         * must be as it was. */
                        hutch_error e = {0};

                        if (hutch_policy_load_json(p, v, &e) < 0)
                                fprintf(stderr, "%d %s %s\n", e.code, e.field, e.message);
                } else if (strcmp(flag, "--workspace") == 0)
                        r = hutch_policy_set_workspace(p, v, err);
                else if (strcmp(flag, "--network") == 0)
                        r = hutch_policy_set_network(p, v, err);
                else if (strcmp(flag, "--env") == 0)
                        r = hutch_policy_add_env(p, v, err);
                else if (strcmp(flag, "--workdir") == 0)
                        r = hutch_policy_set_workdir(p, v, err);
                else if (strcmp(flag, "--bind") == 0)
                        r = hutch_policy_add_bind(p, v, err);
                else if (strcmp(flag, "--allow-host") == 0)
                        r = hutch_policy_allow_host(p, v, err);
                else if (strcmp(flag, "--secret") == 0)
                        r = hutch_policy_add_secret(p, v, err);
                else if (strcmp(flag, "--limit") == 0) {
                        char name[64];
                        const char *eq = strchr(v, '=');

                        if (!eq || (size_t)(eq - v) >= sizeof(name))
                                return -EINVAL;
                        memcpy(name, v, (size_t)(eq - v));
                        name[eq - v] = '\0';
                        r = hutch_policy_set_limit(p, name, eq + 1, err);
                } else
                        r = -EINVAL;
        }
        if (r < 0) {
                hutch_policy_free(p);
                return r;
        }
        *ret = p;
        return 0;
}

int main(int argc, char **argv) {
        hutch_error err = {0};
        const char *verb = argc > 1 ? argv[1] : "";
        int r;

        if (argc < 2) {
                fprintf(stderr, "usage: capi-probe VERB ARGS...\n");
                return 2;
        }
        if (strcmp(verb, "policy") == 0) {
                hutch_policy *p = NULL;
                char *json = NULL;
                int i = 2;

                r = build_policy(argc, argv, &i, &p, &err);
                if (r >= 0)
                        r = hutch_policy_validate(p, &err);
                if (r >= 0)
                        r = hutch_policy_to_json(p, &json, &err);
                hutch_policy_free(p);
                if (r < 0)
                        return failed(r, &err);
                printf("%s\n", json);
                free(json);
                return 0;
        }
        if (strcmp(verb, "get_policy") == 0) {
                /* get_policy NAME: the stored policy */
                char *json = NULL;

                if (argc != 3)
                        return 2;
                r = hutch_get_policy(argv[2], &json, &err);
                if (r < 0)
                        return failed(r, &err);
                printf("%s\n", json);
                free(json);
                return 0;
        }
        if (strcmp(verb, "update") == 0) {
                /* update NAME [POLICY FLAGS]: the whole policy */
                hutch_policy *p = NULL;
                int i = 3;

                if (argc < 3)
                        return 2;
                r = build_policy(argc, argv, &i, &p, &err);
                if (r < 0)
                        return failed(r, &err);
                r = hutch_update(argv[2], p, &err);
                hutch_policy_free(p);
                if (r < 0)
                        return failed(r, &err);
                printf("{}\n");
                return 0;
        }
        if (strcmp(verb, "run") == 0 || strcmp(verb, "create") == 0) {
                /* run [POLICY FLAGS] -- CMD...; create NAME [--from SNAP] [POLICY FLAGS] */
                hutch_policy *p = NULL;
                const char *name = NULL, *from = NULL;
                int i = 2, first;

                if (verb[0] == 'c') {
                        if (argc < 3)
                                return 2;
                        name = argv[i++];
                        if (i + 1 < argc && strcmp(argv[i], "--from") == 0) {
                                from = argv[i + 1];
                                i += 2;
                        }
                }
                first = i;
                r = build_policy(argc, argv, &i, &p, &err);
                if (r < 0)
                        return failed(r, &err);
                if (verb[0] == 'c') {
                        char id[17] = "";

                        /* --from without policy flags: the snapshot's. */
                        r = hutch_create(name, from && i == first ? NULL : p, from, id, &err);
                        hutch_policy_free(p);
                        if (r < 0)
                                return failed(r, &err);
                        printf("{\"id\":\"%s\"}\n", id);
                        return 0;
                } else {
                        hutch_outcome o = {0};

                        if (i < argc && strcmp(argv[i], "--") == 0)
                                i++;
                        r = hutch_run(p, argv + i, &o, &err);
                        hutch_policy_free(p);
                        if (r < 0)
                                return failed(r, &err);
                        fflush(stdout);
                        fprintf(stderr, "%s\n", o.json);
                        hutch_outcome_done(&o);
                        return 0;
                }
        }
        if (strcmp(verb, "exec") == 0 && argc >= 5) {
                /* exec NAME [--detach] [--timeout MS] [--cwd DIR] [--env K=V] -- CMD...:
                 * the command's stdio is ours; the outcome goes to stderr last. */
                hutch_exec_options o = {.stdin_fd = 0, .stdout_fd = 1, .stderr_fd = 2};
                hutch_outcome out = {0};
                char *env[2] = {NULL, NULL};
                int i = 3;

                for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
                        if (strcmp(argv[i], "--detach") == 0)
                                o.detach = true;
                        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
                                o.timeout_ms = (uint64_t)num(argv[++i], 10);
                        else if (strcmp(argv[i], "--cwd") == 0 && i + 1 < argc)
                                o.cwd = argv[++i];
                        else if (strcmp(argv[i], "--env") == 0 && i + 1 < argc) {
                                env[0] = argv[++i];
                                o.env = env;
                        } else if (strcmp(argv[i], "--no-stdio") == 0)
                                o.stdin_fd = o.stdout_fd = o.stderr_fd = -1;
                        else
                                return 2;
                }
                if (i + 1 >= argc)
                        return 2;
                o.argv = argv + i + 1;
                r = hutch_exec(argv[2], &o, &out, &err);
                if (r < 0)
                        return failed(r, &err);
                fflush(stdout);
                fprintf(stderr, "%s\n", o.detach ? "{\"detached\":true}" : out.json);
                hutch_outcome_done(&out);
                return 0;
        }
        if (strcmp(verb, "exec-detached") == 0 && argc >= 5 && strcmp(argv[3], "--") == 0) {
                /* exec-detached NAME -- CMD...: {"id":N} */
                hutch_exec_options o = {.argv = argv + 4, .stdin_fd = -1};
                uint64_t id = 0;

                r = hutch_exec_detached(argv[2], &o, &id, &err);
                if (r < 0)
                        return failed(r, &err);
                printf("{\"id\":%llu}\n", (unsigned long long)id);
                return 0;
        }
        if (strcmp(verb, "exec-list") == 0 && argc == 3) {
                hutch_exec_info *l = NULL;
                size_t n = 0;

                r = hutch_exec_list(argv[2], &l, &n, &err);
                if (r < 0)
                        return failed(r, &err);
                printf("[");
                for (size_t i = 0; i < n; i++) {
                        printf("%s{\"id\":%llu,\"pid\":%d,\"start_ms\":%llu,\"detached\":%s,"
                               "\"argv\":[",
                               i ? "," : "", (unsigned long long)l[i].id, l[i].pid,
                               (unsigned long long)l[i].start_ms, l[i].detached ? "true" : "false");
                        for (size_t j = 0; l[i].argv[j]; j++) {
                                printf("%s", j ? "," : "");
                                json_str(l[i].argv[j]);
                        }
                        printf("]}");
                }
                printf("]\n");
                hutch_exec_list_free(l, n);
                return 0;
        }
        if (strcmp(verb, "exec-signal") == 0 && argc == 6) {
                /* exec-signal NAME ID SIGNAL GRACE_MS */
                r = hutch_exec_signal(argv[2], (uint64_t)num(argv[3], 10), (int)num(argv[4], 10),
                                      (uint64_t)num(argv[5], 10), &err);
                if (r < 0)
                        return failed(r, &err);
                printf("{}\n");
                return 0;
        }
        if (strcmp(verb, "exec-wait") == 0 && argc == 4) {
                hutch_outcome out = {0};

                r = hutch_exec_wait(argv[2], (uint64_t)num(argv[3], 10), &out, &err);
                if (r < 0)
                        return failed(r, &err);
                printf("%s\n", out.json);
                hutch_outcome_done(&out);
                return 0;
        }
        if (strcmp(verb, "exec-output") == 0 && (argc == 4 || argc == 5)) {
                /* exec-output NAME ID [--follow]: the raw streams on ours */
                r = hutch_exec_output(argv[2], (uint64_t)num(argv[3], 10),
                                      argc == 5 && strcmp(argv[4], "--follow") == 0, 1, 2, &err);
                if (r < 0)
                        return failed(r, &err);
                return 0;
        }
        if (strcmp(verb, "read") == 0 && (argc == 4 || argc == 5)) {
                char *data = NULL;
                size_t len = 0;

                r = hutch_file_read(argv[2], argv[3],
                                    argc == 5 ? (size_t)num(argv[4], 10) : 1 << 20, &data, &len,
                                    &err);
                if (r < 0)
                        return failed(r, &err);
                fwrite(data, 1, len, stdout);
                free(data);
                return 0;
        }
        if (strcmp(verb, "write") == 0 && argc == 5) {
                /* write NAME PATH MODE(octal) < DATA */
                size_t len = 0;
                char *data = read_stdin(&len);

                if (!data)
                        return 2;
                r = hutch_file_write(argv[2], argv[3], data, len, (unsigned)num(argv[4], 8), &err);
                free(data);
                if (r < 0)
                        return failed(r, &err);
                printf("{}\n");
                return 0;
        }
        if (strcmp(verb, "archive-get") == 0 && argc == 5) {
                /* archive-get NAME DIR MAX: the tar on stdout */
                char *data = NULL;
                size_t len = 0;

                r = hutch_file_archive_get(argv[2], argv[3], (size_t)num(argv[4], 10), &data, &len,
                                           &err);
                if (r < 0)
                        return failed(r, &err);
                fwrite(data, 1, len, stdout);
                free(data);
                return 0;
        }
        if (strcmp(verb, "archive-put") == 0 && argc == 5) {
                /* archive-put NAME DIR PARENTS(0|1) < TAR */
                size_t len = 0;
                char *data = read_stdin(&len);

                if (!data)
                        return 2;
                r = hutch_file_archive_put(argv[2], argv[3], data, len,
                                           num(argv[4], 10) ? HUTCH_FILE_PARENTS : 0, &err);
                free(data);
                if (r < 0)
                        return failed(r, &err);
                printf("{}\n");
                return 0;
        }
        if (strcmp(verb, "list") == 0 && argc == 4) {
                hutch_file_info *l = NULL;
                size_t n = 0;

                r = hutch_file_list(argv[2], argv[3], &l, &n, &err);
                if (r < 0)
                        return failed(r, &err);
                printf("[");
                for (size_t i = 0; i < n; i++) {
                        if (i)
                                printf(",");
                        print_info(&l[i]);
                }
                printf("]\n");
                free(l);
                return 0;
        }
        if (strcmp(verb, "stat") == 0 && argc == 4) {
                hutch_file_info info;

                r = hutch_file_stat(argv[2], argv[3], &info, &err);
                if (r < 0)
                        return failed(r, &err);
                print_info(&info);
                printf("\n");
                return 0;
        }
        if (strcmp(verb, "remove") == 0 && argc == 4) {
                r = hutch_file_remove(argv[2], argv[3], &err);
                if (r < 0)
                        return failed(r, &err);
                printf("{}\n");
                return 0;
        }
        if (strcmp(verb, "get") == 0 && argc == 3) {
                hutch_sandbox_info info;

                r = hutch_get(argv[2], &info, &err);
                if (r < 0)
                        return failed(r, &err);
                print_sandbox(&info);
                printf("\n");
                hutch_sandbox_info_done(&info);
                return 0;
        }
        if (strcmp(verb, "describe") == 0 && argc == 3) {
                hutch_sandbox_desc *d = NULL;

                r = hutch_sandbox_describe(argv[2], &d, &err);
                if (r < 0)
                        return failed(r, &err);
                printf("{\"backend\":");
                json_str(d->backend);
                printf(",\"image\":");
                json_str(d->image);
                printf(",\"n_ports\":%u,\"ports\":[", d->n_ports);
                for (unsigned k = 0; k < d->n_ports && k < 16; k++)
                        printf("%s%u", k ? "," : "", (unsigned)d->ports[k]);
                /* The ABI claim: the caller-allocated struct kept its size. */
                printf("],\"info_size\":%zu}\n", sizeof(hutch_sandbox_info));
                free(d);
                return 0;
        }
        if (strcmp(verb, "list-sandboxes") == 0 && argc == 2) {
                hutch_sandbox_info *l = NULL;
                size_t n = 0;

                r = hutch_list(&l, &n, &err);
                if (r < 0)
                        return failed(r, &err);
                printf("[");
                for (size_t i = 0; i < n; i++) {
                        if (i)
                                printf(",");
                        print_sandbox(&l[i]);
                }
                printf("]\n");
                free(l);
                return 0;
        }
        if (strcmp(verb, "snapshots") == 0 && argc == 2) {
                char **l = NULL;

                r = hutch_snapshot_list(&l, &err);
                if (r < 0)
                        return failed(r, &err);
                printf("[");
                for (size_t i = 0; l[i]; i++) {
                        printf(i ? "," : "");
                        json_str(l[i]);
                }
                printf("]\n");
                hutch_strv_free(l);
                return 0;
        }
        if (strcmp(verb, "diff") == 0 && argc == 3) {
                char *json = NULL;

                r = hutch_diff_json(argv[2], &json, &err);
                if (r < 0)
                        return failed(r, &err);
                printf("%s\n", json);
                free(json);
                return 0;
        }
        if (strcmp(verb, "apply") == 0 && argc >= 3) {
                /* apply NAME [--force] [PATH...] */
                bool force = argc > 3 && strcmp(argv[3], "--force") == 0;
                char **paths = argv + (force ? 4 : 3);

                r = hutch_apply(argv[2], *paths ? paths : NULL, force, &err);
                if (r < 0)
                        return failed(r, &err);
                printf("{\"applied\":%d}\n", r);
                return 0;
        }
        if (argc == 3 || argc == 4) {
                /* NAME [SNAP] verbs */
                if (strcmp(verb, "stop") == 0 && argc == 3)
                        r = hutch_stop(argv[2], &err);
                else if (strcmp(verb, "destroy") == 0 && argc == 3)
                        r = hutch_destroy(argv[2], &err);
                else if (strcmp(verb, "snapshot-rm") == 0 && argc == 3)
                        r = hutch_snapshot_remove(argv[2], &err);
                else if (strcmp(verb, "snapshot") == 0 && argc == 4)
                        r = hutch_snapshot(argv[2], argv[3], &err);
                else if (strcmp(verb, "restore") == 0 && argc == 4)
                        r = hutch_restore(argv[2], argv[3], &err);
                else
                        return 2;
                if (r < 0)
                        return failed(r, &err);
                printf("{}\n");
                return 0;
        }
        fprintf(stderr, "capi-probe: unknown verb or arguments\n");
        return 2;
}
