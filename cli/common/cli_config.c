/* SPDX-License-Identifier: MIT */
/* The configuration flags every command that trains shares (--config,
 * --preset, --set, --print-config, --validate, --list-presets, --keys),
 * applied in command-line order, and `esmtrain-example config`, which
 * resolves, prints and checks a configuration without training. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_config_init(cli_config *cc, const char *cmd) {
  memset(cc, 0, sizeof *cc);
  esmt_status st = esmt_config_create(&cc->cfg);
  if (st) cli_error(cmd, st);
  return st ? 1 : 0;
}

void cli_config_free(cli_config *cc) {
  esmt_config_destroy(cc->cfg);
  cc->cfg = NULL;
}

void cli_config_usage(FILE *f) {
  fprintf(f,
          "  --config FILE.yaml    apply a YAML file (nested keys; `include:` presets or files;\n"
          "                        `-` reads it from standard input; at most 1 MiB)\n"
          "  --preset NAME         apply a preset, e.g. rtx2080super (repeatable; see --list-presets)\n"
          "  --set key=value       set any key, e.g. --set optimizer.lr=1e-3 (repeatable)\n"
          "  --print-config        print every key's resolved value, doc and default\n"
          "  --validate            check the configuration (and its memory plan)\n"
          "  --list-presets        the presets and what hardware each is for\n"
          "  --keys                every key: type, default, allowed values, meaning\n"
          "  (--config, --preset and --set apply in command-line order; later wins;\n"
          "   --flag=value works as well as --flag value)\n");
}

/* "--set" matches "--set" (value in the next argument) and "--set=VALUE". */
int cli_flag_value(const char *flag, int argc, char **argv, int *i, const char **value) {
  size_t n = strlen(flag);
  const char *a = argv[*i];
  if (strncmp(a, flag, n) != 0) return 0;
  if (a[n] == '=') { *value = a + n + 1; return 1; }
  if (a[n] != '\0') return 0;
  *value = *i + 1 < argc ? argv[++*i] : NULL;
  return 1;
}

int cli_config_arg(cli_config *cc, const char *cmd, int argc, char **argv, int *i) {
  const char *a = argv[*i], *v = NULL;
  if (!strcmp(a, "--print-config")) return cc->print_config = 1;
  if (!strcmp(a, "--validate")) return cc->validate = 1;
  if (!strcmp(a, "--list-presets")) return cc->list_presets = 1;
  if (!strcmp(a, "--keys")) return cc->list_keys = 1;
  static const char *const with_value[] = {"--config", "--preset", "--set"};
  int which = -1;
  for (int k = 0; k < 3 && which < 0; k++)
    if (cli_flag_value(with_value[k], argc, argv, i, &v)) which = k;
  if (which < 0) return 0;
  if (!v) {
    fprintf(stderr, "esmtrain-example: %s: %s needs a value (try --help)\n", cmd, with_value[which]);
    return -1;
  }
  esmt_status st = which == 0 ? esmt_config_load_yaml(cc->cfg, v)
                 : which == 1 ? esmt_config_apply_preset(cc->cfg, v)
                              : esmt_config_set_assignment(cc->cfg, v);
  if (st) {
    cli_error(cmd, st);
    return -1;
  }
  return 1;
}

void cli_config_print_presets(const cli_config *cc, FILE *f) {
  int n = 0;
  esmt_config_preset_count(cc ? cc->cfg : NULL, &n);
  for (int i = 0; i < n; i++) {
    esmt_config_preset p = ESMT_CONFIG_PRESET_INIT;
    if (esmt_config_preset_info(cc ? cc->cfg : NULL, i, &p) == ESMT_OK)
      fprintf(f, "%-20s %s\n", p.name, p.description);
  }
  if (!n) fprintf(f, "(no presets found; set ESMTRAIN_CONFIG_PATH to a directory of NAME.yaml)\n");
}

void cli_config_print_keys(FILE *f) {
  static const char *const types[] = {"int", "number", "bool", "string", "enum", "bytes"};
  for (int i = 0; i < esmt_config_key_count(); i++) {
    esmt_config_key k = ESMT_CONFIG_KEY_INIT;
    if (esmt_config_key_info(i, &k) != ESMT_OK) continue;
    char allowed[160] = "";
    if (k.choices) snprintf(allowed, sizeof allowed, " {%s}", k.choices);
    else if ((k.type == ESMT_CONFIG_INT || k.type == ESMT_CONFIG_DOUBLE) && k.max >= 1e18)
      snprintf(allowed, sizeof allowed, " >= %g", k.min);
    else if (k.type == ESMT_CONFIG_INT || k.type == ESMT_CONFIG_DOUBLE)
      snprintf(allowed, sizeof allowed, " [%g, %g]", k.min, k.max);
    fprintf(f, "%-34s %-6s default %-14s%s\n%36s%s\n", k.name, types[k.type],
            k.default_value[0] ? k.default_value : "\"\"", allowed, "", k.doc);
  }
}


static void cfg_bug(const char *key) {
  fprintf(stderr, "esmtrain-example: internal error (please report it): reading config key "
          "'%s': %s\n", key, esmt_last_error());
  exit(70);
}

int64_t cli_cfg_int(const esmt_config *c, const char *key) {
  int64_t v = 0;
  if (esmt_config_get_int(c, key, &v)) cfg_bug(key);
  return v;
}

const char *cli_cfg_str(const esmt_config *c, const char *key) {
  const char *v = "";
  if (esmt_config_get_string(c, key, &v)) cfg_bug(key);
  return v;
}

int cli_config_plan(const esmt_config *c, const char *cmd, FILE *out) {
  /* the backend the run would get, so that precision auto and the CUDA
   * context count as the trainer counts them; none here: planned without */
  esmt_context_options co = ESMT_CONTEXT_OPTIONS_INIT;
  const char *backend = cli_cfg_str(c, "backend.name");
  co.backend = *backend ? backend : NULL;
  co.log_level = ESMT_LOG_ERROR;
  esmt_context *ctx = NULL;
  if (esmt_context_create(&co, &ctx) != ESMT_OK) ctx = NULL;
  esmt_clear_error();
  esmt_model_config mc = ESMT_MODEL_CONFIG_INIT;
  esmt_plan_request pr = ESMT_PLAN_REQUEST_INIT;
  esmt_status st = esmt_config_plan_request(c, ctx, &mc, &pr);
  esmt_plan plan = ESMT_PLAN_INIT;
  if (!st) st = esmt_plan_memory(&pr, &plan);
  if (st && st != ESMT_ERR_OUT_OF_MEMORY) {
    cli_error(cmd, st);
    esmt_context_destroy(ctx);
    return 2;
  }
  static const char *const prec[] = {"fp32", "fp16", "bf16"};
  fprintf(out, "memory (%s, %s%s): %s\n", ctx ? esmt_context_backend_name(ctx) : "no backend here",
          prec[pr.precision], ctx ? "" : "; precision auto planned as fp32", plan.advice);
  esmt_context_destroy(ctx);
  if (!plan.fits) return 3;
  fprintf(out, "configuration is valid; backend: %s\n",
          *backend ? backend : "chosen by the probe (backend.name is empty)");
  return 0;
}

int cli_config_check(const cli_config *cc, const char *cmd, FILE *out) {
  esmt_status st = esmt_config_validate(cc->cfg);
  if (st) {
    cli_error(cmd, st);
    return 2;
  }
  return cli_config_plan(cc->cfg, cmd, out);
}

static void usage(FILE *f) {
  fprintf(f, "usage: esmtrain-example config [options]\n"
             "Resolve a configuration (defaults, then the options below in order) and print it,\n"
             "check it, or list what can be set. With no action, prints it (--print-config).\n");
  cli_config_usage(f);
  fprintf(f, "Exit status: 0 valid, 2 invalid configuration or usage, 3 does not fit in memory.\n");
}

int cmd_config(int argc, char **argv) {
  const char *cmd = "config";
  cli_config cc;
  if (cli_config_init(&cc, cmd)) return 1;
  int rc = 0;
  for (int i = 0; i < argc && !rc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      cli_config_free(&cc);
      return 0;
    }
    int r = cli_config_arg(&cc, cmd, argc, argv, &i);
    if (r < 0) rc = 2;
    else if (r == 0) {
      fprintf(stderr, "esmtrain-example: config: unknown option '%s'%s (try --help)\n", argv[i],
              cli_option_hint(argv[i], usage));
      rc = 2;
    }
  }
  if (!rc && cc.list_presets) cli_config_print_presets(&cc, stdout);
  if (!rc && cc.list_keys) cli_config_print_keys(stdout);
  int print = cc.print_config || (!cc.validate && !cc.list_presets && !cc.list_keys);
  if (!rc && print) {
    char *yaml = NULL;
    esmt_status st = esmt_config_to_yaml(cc.cfg, &yaml);
    if (st) { cli_error(cmd, st); rc = 1; }
    else fputs(yaml, stdout);
    free(yaml);
  }
  if (!rc && cc.validate) rc = cli_config_check(&cc, cmd, stdout);
  cli_config_free(&cc);
  return rc;
}
