/* The limits of the config system. A config file is input we do not control: each limit bounds
 * the memory, time or recursion depth that a file (or the command line) can make the loader use,
 * and exceeding one is a user error "<file>:<line>:<col>: <what> (<hint>)", never a crash. Real
 * configs stay far below every one of them (docs/configs.md lists them). */
#ifndef ESPNET3_CONFIG_LIMITS_H
#define ESPNET3_CONFIG_LIMITS_H

/* Levels of mappings and lists, as written and after composition, overrides and interpolation
 * (a reference copies a value, which may put it deeper). */
#define CFG_MAX_TREE_DEPTH 256

/* Values that YAML aliases (*name) may copy in one file, and the text those copies hold. */
#define CFG_MAX_ALIAS_NODES 1000000
#define CFG_MAX_ALIAS_BYTES (16u << 20)

/* `defaults:` lists: how deep files may include files, and how many files one config may load
 * in all (a file included twice counts twice: this bounds include "diamonds"). */
#define CFG_MAX_DEFAULTS_DEPTH 16
#define CFG_MAX_DEFAULTS_FILES 1000

/* ${...} written inside ${...} (resolver arguments and defaults: ${oc.select:a,${oc.select:b,1}}). */
#define CFG_MAX_INTERP_NESTING 32

/* Parentheses and unary minus signs nested in the integer arithmetic of one ${...}. */
#define CFG_MAX_EXPR_DEPTH 64

/* Values whose resolution needs another value first (a: "x${b}", b: "y${c}", ...): how many may be
 * in progress at once. A value that is exactly one reference (a: ${b}) is followed without
 * nesting, so plain chains are bounded by CFG_MAX_REF_CHAIN instead. */
#define CFG_MAX_REF_NESTING 64

/* Keys being resolved at once: plain reference chains (a: ${b}, b: ${c}, ...) included. */
#define CFG_MAX_REF_CHAIN 1000000

/* Everything above together: references, ${...} and parentheses in progress at once. This is what
 * bounds the C stack the resolver uses. */
#define CFG_MAX_EVAL_DEPTH 256

/* ${load_yaml:...} files whose values are being resolved inside each other (a file that loads
 * itself would otherwise parse again at every level). */
#define CFG_MAX_LOAD_YAML_DEPTH 16

/* Bytes that interpolation may produce over the whole config: text put into strings, values
 * copied by references and ${oc.select:...}, lines read by ${load_line:...}, files read by
 * ${load_yaml:...}. */
#define CFG_MAX_EXPANDED_BYTES (16u << 20)

#endif
