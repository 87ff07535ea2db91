#include "cli.h"
int verb_snapshot(int argc, char **argv) { return 125; }
int verb_diff(int argc, char **argv) { return 125; }
int verb_apply(int argc, char **argv) { return 125; }
