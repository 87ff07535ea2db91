/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hutch-pull: `hutch image pull` (docs/images.md, "Pulling"). Only this
 * program links OpenSSL's libssl and http_parser for the registry client
 * (src/lib/registry); `hutch image pull` runs it. The image is pulled into
 * an OCI image layout (a held .tmp-pull-* folder of the image store, or
 * --layout DIR) by a confined child (hutch_ext_pull()) and then imported by
 * the image store (hutch-ext.h's hutch_ext_image_import_pulled()).
 *
 *   hutch-pull [pull] [--tls-verify=BOOL] [--platform OS/ARCH[/VARIANT]]
 *              [--authfile FILE] [--cert-dir DIR] [--layout DIR] [-q] REF [NAME] */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/hutch-ext.h"
#include "cli.h"
#include "log.h"
#include "parse-util.h"
#include "progress.h"

static const char usage_pull[] =
        "usage: hutch image pull [OPTIONS] REF [NAME]\n\n"
        "Downloads the image REF from its registry (the OCI distribution protocol), verifying\n"
        "every blob against its digest. REF is written as Docker writes it: localhost:5000/x:y\n"
        "names the registry localhost:5000, NAME@sha256:HEX pins a digest, and python:3.12\n"
        "is D/library/python:3.12 where D is $HUTCH_REGISTRY_DEFAULT or the first\n"
        "unqualified-search-registries entry of /etc/containers/registries.conf (no default:\n"
        "a short name is an error). Prints the manifest's digest.\n"
        "  NAME                  the name in the image store (default: REF as Docker shows\n"
        "                        it, python:3.12, localhost:5000/x:y)\n"
        "  --layout DIR          write the image as an OCI image layout into DIR instead\n"
        "                        (like skopeo copy docker://REF oci:DIR); no import\n"
        "  --platform OS/ARCH[/VARIANT]\n"
        "                        the image of a multi-platform index (default linux/amd64)\n"
        "  --tls-verify=false    accept any certificate, or plain HTTP (never without it)\n"
        "  --authfile FILE       the docker-style credentials (default $REGISTRY_AUTH_FILE,\n"
        "                        $XDG_RUNTIME_DIR/containers/auth.json, ~/.docker/config.json)\n"
        "  --cert-dir DIR        also trust the CA certificates DIR/*.crt\n"
        "  -q, --quiet           no progress lines\n";

static bool arg_tls_verify = true;
static bool arg_quiet = false;
static const char *arg_layout = NULL;
static const char *arg_authfile = NULL;
static const char *arg_cert_dir = NULL;
static char *arg_platform = NULL;

typedef struct PullProgress {
        Progress p;
        bool quiet;
        char what[96];
} PullProgress;

static void pull_progress_begin(void *userdata, const char *what, int fd, uint64_t size) {
        PullProgress *pp = userdata;

        (void)snprintf(pp->what, sizeof(pp->what), "%s", what);
        pp->p = PROGRESS_NULL;
        progress_begin(&pp->p, pp->what, fd, PROGRESS_FILE_SIZE, size, pp->quiet);
}

static void pull_progress_end(void *userdata, bool ok) {
        PullProgress *pp = userdata;

        progress_end(&pp->p, pp->what, ok);
}

static int parse_args(int argc, char **argv) {
        enum {
                ARG_TLS_VERIFY = 0x100,
                ARG_PLATFORM,
                ARG_AUTHFILE,
                ARG_CERT_DIR,
                ARG_LAYOUT,
        };
        static const struct option options[] = {
                {"help", no_argument, NULL, 'h'},
                {"quiet", no_argument, NULL, 'q'},
                {"tls-verify", optional_argument, NULL, ARG_TLS_VERIFY},
                {"platform", required_argument, NULL, ARG_PLATFORM},
                {"authfile", required_argument, NULL, ARG_AUTHFILE},
                {"cert-dir", required_argument, NULL, ARG_CERT_DIR},
                {"layout", required_argument, NULL, ARG_LAYOUT},
                {},
        };
        int c;

        optind = 0;
        while ((c = getopt_long(argc, argv, "+hq", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        (void)fputs(usage_pull, stdout);
                        return 0;
                case 'q':
                        arg_quiet = true;
                        break;
                case ARG_TLS_VERIFY:
                        if (optarg && parse_boolean(optarg, &arg_tls_verify) < 0) {
                                log_error("invalid --tls-verify value '%s' (true or false)",
                                          optarg);
                                return -EINVAL;
                        }
                        if (!optarg)
                                arg_tls_verify = true;
                        break;
                case ARG_PLATFORM:
                        arg_platform = optarg;
                        break;
                case ARG_AUTHFILE:
                        arg_authfile = optarg;
                        break;
                case ARG_CERT_DIR:
                        arg_cert_dir = optarg;
                        break;
                case ARG_LAYOUT:
                        arg_layout = optarg;
                        break;
                default:
                        log_error("see 'hutch image pull --help'");
                        return -EINVAL;
                }
        }
        if (argc - optind < 1 || argc - optind > 2) {
                log_error("usage: hutch image pull [OPTIONS] REF [NAME]");
                return -EINVAL;
        }
        return 1;
}

/* "os/arch[/variant]" into @o (pointers into @s). */
static int platform_parse(char *s, HutchExtPullOptions *o) {
        char *arch = strchr(s, '/'), *variant;

        if (!arch || arch == s || arch[1] == '\0')
                return -EINVAL;
        *arch++ = '\0';
        variant = strchr(arch, '/');
        if (variant) {
                *variant++ = '\0';
                if (*variant == '\0' || strchr(variant, '/'))
                        return -EINVAL;
        }
        o->os = s;
        o->arch = arch;
        o->variant = variant;
        return 0;
}

/* The name an image pulled as @ref gets in the store: as Docker shows it
 * ("python:3.12", "user/app:1", "localhost:5000/x:y"); NULL for a pull by
 * digest only (the image is then found by its digest). */
static int store_name(const HutchExtPullRef *ref, char **ret) {
        _cleanup_free_ char *full = NULL;
        char *s;

        *ret = NULL;
        if (!ref->tag)
                return 0;
        if (asprintf(&full, "%s/%s:%s", ref->domain, ref->repository, ref->tag) < 0)
                return -ENOMEM;
        s = strdup(hutch_ext_image_ref_familiar(full));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* Pulls into $HUTCH_HOME/images/.tmp-pull-<hash of the repository>: the
 * same folder for the same repository, so a pull that was cut off
 * continues where it stopped (its partial blob stays there, and `hutch
 * image gc` removes it when no pull holds the folder). After the import
 * the folder goes. */
static int pull_into_store(const HutchExtPullRef *ref, const HutchExtPullOptions *o,
                           const char *refstr, const char *name) {
        _cleanup_(hutch_ext_images_freep) HutchExtImages *s = NULL;
        _cleanup_(hutch_ext_image_done) HutchExtImage im = {};
        _cleanup_free_ char *digest = NULL, *dir = NULL, *repo = NULL, *own_name = NULL;
        _cleanup_close_ int hold = -EBADF;
        HutchError err = {};
        int r;

        r = hutch_ext_images_open(&s, &err);
        if (r < 0) {
                log_error("cannot pull '%s': %s", refstr, err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        if (!name) {
                r = store_name(ref, &own_name);
                if (r < 0)
                        return log_error("out of memory"), HUTCH_EXIT_FAILURE;
                name = own_name;
        }
        if (name && !hutch_ext_image_ref_is_valid(name)) {
                log_error("cannot pull '%s': invalid image name '%s'", refstr, name);
                return HUTCH_EXIT_FAILURE;
        }
        if (asprintf(&repo, "%s/%s", ref->domain, ref->repository) < 0 ||
            hutch_ext_image_pull_dir(s, repo, &dir) < 0)
                return log_error("out of memory"), HUTCH_EXIT_FAILURE;

        r = hutch_ext_pull(ref, o, dir, &digest, &hold, &err);
        if (r < 0) {
                log_error("cannot pull '%s': %s", refstr, err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        err = (HutchError){};
        r = hutch_ext_image_import_pulled(s, dir, name, &im, &err);
        if (r < 0) {
                log_error("cannot import '%s': %s", refstr, err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        if (!arg_quiet)
                log_info("pulled %s as %s: %zu layer%s", refstr, name ? name : im.digest,
                         im.n_layers, im.n_layers == 1 ? "" : "s");
        (void)printf("%s\n", im.digest);
        return 0;
}

/* Pulls @ref (a candidate of @refstr; @several: one of many, named in
 * messages) into the store as @name, or into --layout. Returns 0 or
 * HUTCH_EXIT_FAILURE, the error said. */
static int pull_one(const HutchExtPullRef *ref, HutchExtPullOptions *o,
                    const HutchExtPullProgress *ops, const char *refstr, const char *name,
                    bool several) {
        _cleanup_free_ char *digest = NULL, *canonical = NULL;
        HutchError err = {};
        int r;

        o->tls_verify = arg_tls_verify;
        o->cert_dir = arg_cert_dir;
        o->auth_file = arg_authfile;
        o->progress = ops;
        canonical = hutch_ext_pull_ref_string(ref);
        if (!canonical)
                return log_error("out of memory"), HUTCH_EXIT_FAILURE;
        if (ref->alias_where)
                log_info("'%s' is %s (the alias in %s)", refstr, canonical, ref->alias_where);
        if (ref->mirror) {
                char *at;

                /* Named with its mirror in every message of this try. */
                if (asprintf(&at, "%s at the mirror %s", canonical, ref->endpoint) < 0)
                        return log_error("out of memory"), HUTCH_EXIT_FAILURE;
                free(canonical);
                canonical = at;
        }
        if (several && !arg_quiet)
                log_info("trying %s", canonical);
        /* [[registry]] insecure = true: plain HTTP for that registry only,
         * as --tls-verify=false is for one pull. */
        if (ref->insecure)
                o->tls_verify = false;
        if (!o->tls_verify)
                log_warning("pulling %s without verifying TLS (or in plain HTTP)%s", canonical,
                            ref->insecure && arg_tls_verify ? ": insecure in registries.conf" : "");
        if (!arg_layout)
                return pull_into_store(ref, o, several ? canonical : refstr, name);
        r = hutch_ext_pull(ref, o, arg_layout, &digest, NULL, &err);
        if (r < 0) {
                log_error("cannot pull '%s': %s", several ? canonical : refstr,
                          err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        if (!arg_quiet)
                log_info("pulled %s into %s", canonical, arg_layout);
        (void)printf("%s\n", digest);
        return 0;
}

/* Each candidate of @refstr in turn (several: a short name and the
 * search registries, short-name-mode permissive): the first that has the
 * image wins, and each failure is said. */
static int pull_refs(const HutchExtPullRef *refs, size_t n_refs, HutchExtPullOptions *o,
                     const HutchExtPullProgress *ops, const char *refstr, int argc, char **argv) {
        if (arg_layout && argc - optind > 1) {
                log_error("NAME names an image in the store: not with --layout");
                return HUTCH_EXIT_FAILURE;
        }
        for (size_t i = 0; i < n_refs; i++) {
                int r = pull_one(&refs[i], o, ops, refstr,
                                 argc - optind > 1 ? argv[optind + 1] : NULL, n_refs > 1);

                if (r == 0)
                        return 0;
        }
        if (n_refs > 1)
                log_error("cannot pull '%s' from any of its registries and mirrors", refstr);
        return HUTCH_EXIT_FAILURE;
}

static int main_pull(int argc, char **argv) {
        HutchExtPullRef *refs = NULL;
        PullProgress pp = {.quiet = false};
        HutchExtPullProgress ops = {pull_progress_begin, pull_progress_end, &pp};
        HutchExtPullOptions o = {.os = "linux", .arch = "amd64"};
        HutchError err = {};
        const char *refstr;
        size_t n_refs = 0;
        int r;

        r = parse_args(argc, argv);
        if (r <= 0)
                return r < 0 ? HUTCH_EXIT_FAILURE : 0;
        refstr = argv[optind];
        pp.quiet = arg_quiet;
        if (arg_platform && platform_parse(arg_platform, &o) < 0) {
                log_error("invalid --platform '%s' (OS/ARCH[/VARIANT], e.g. linux/arm64)",
                          arg_platform);
                return HUTCH_EXIT_FAILURE;
        }
        r = hutch_ext_pull_candidates(refstr, &refs, &n_refs, &err);
        if (r < 0) {
                log_error("cannot pull '%s': %s", refstr, err.msg[0] ? err.msg : strerror(-r));
                return HUTCH_EXIT_FAILURE;
        }
        r = pull_refs(refs, n_refs, &o, &ops, refstr, argc, argv);
        (void)hutch_ext_pull_refs_free(refs, n_refs);
        return r;
}

int main(int argc, char **argv) {
        log_setup("hutch", LOG_LEVEL_INFO);
        /* `hutch image pull ...` runs `hutch-pull pull ...` */
        if (argc >= 2 && strcmp(argv[1], "pull") == 0)
                return main_pull(argc - 1, argv + 1);
        return main_pull(argc, argv);
}
