/* The bridge to a recipe's own Python: spawn, the record stream, and the one-line errors. */
#include "core/data/py_bridge.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/fsio.h"

extern char **environ;

/* core/data/py_helper.py, linked in by the Makefile (ld -r -b binary). */
extern const char _binary_core_data_py_helper_py_start[], _binary_core_data_py_helper_py_end[];

char *py_interpreter(const py_env *env)
{
    if (env && env->python && env->python[0]) return xstrdup(env->python);
    const char *e = getenv("ESPNET3_PYTHON");
    return xstrdup(e && e[0] ? e : "python3");
}

/* sys.path as ESPnet3's `python run.py` in egs3/<corpus>/<task> has it: the recipe folder (so
 * src.* imports) and the folder above egs3/ (so egs3.<corpus>.<task>.dataset imports). */
static json_t *sys_path_of(const char *recipe_dir)
{
    json_t *paths = json_array();
    if (!recipe_dir) return paths;
    char *abs = path_absolute(recipe_dir);
    json_array_append_new(paths, json_string(abs));
    char *egs3 = strstr(abs, "/egs3/");
    while (egs3 && strstr(egs3 + 1, "/egs3/")) egs3 = strstr(egs3 + 1, "/egs3/");
    if (egs3) json_array_append_new(paths, json_stringn(abs, egs3 == abs ? 1 : (size_t)(egs3 - abs)));
    free(abs);
    return paths;
}

int py_bridge_start(py_bridge *b, const py_env *env, const char *mode, json_t *request, const char *where,
                    esp_err *err)
{
    memset(b, 0, sizeof *b);
    b->pid = -1;
    b->python = py_interpreter(env);
    b->where = xstrdup(where);
    json_object_set_new(request, "sys_path", sys_path_of(env ? env->recipe_dir : NULL));
    char *req = json_dumps(request, JSON_COMPACT);
    /* A request past what one argument may hold (128 KiB on Linux) goes through a file. */
    if (strlen(req) > 64 * 1024) {
        const char *tmp = getenv("TMPDIR");
        b->req_file = xasprintf("%s/espnet3_py_request_XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
        int fd = mkstemp(b->req_file);
        size_t len = strlen(req);
        int ok = fd >= 0 && write(fd, req, len) == (ssize_t)len;
        if (fd >= 0) close(fd);
        free(req);
        if (!ok) return esp_fail(err, "%s: cannot write the request for the Python helper: %s", where, strerror(errno));
        req = xasprintf("@%s", b->req_file);
    }
    size_t n = (size_t)(_binary_core_data_py_helper_py_end - _binary_core_data_py_helper_py_start);
    char *script = xstrndup(_binary_core_data_py_helper_py_start, n);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        free(req), free(script);
        return esp_fail(err, "%s: pipe: %s", where, strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 3);
    char *argv[] = {b->python, "-c", script, (char *)mode, req, NULL};
    int rc = posix_spawnp(&b->pid, b->python, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    free(req), free(script);
    if (rc != 0) {
        close(fds[0]);
        b->pid = -1;
        return esp_fail(err, "%s: cannot run the Python interpreter %s: %s (it runs the recipe's Python code: "
                        "install it, or name another with the config key python: or ESPNET3_PYTHON)",
                        where, b->python, strerror(rc));
    }
    b->in = fdopen(fds[0], "rb");
    ESP_CHECK(b->in);
    return 0;
}

/* The text of a Python string field on one line (tracebacks and messages may hold newlines). */
static const char *field(json_t *o, const char *key, char *buf, size_t cap)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (!s) return "";
    snprintf(buf, cap, "%s", s);
    for (char *c = buf; *c; c++)
        if (*c == '\n' || *c == '\r' || *c == '\t') *c = ' ';
    return buf;
}

static int python_error(py_bridge *b, json_t *e, esp_err *err)
{
    char type[128], msg[1024], file[512], func[128], module[256];
    field(e, "type", type, sizeof type);
    field(e, "message", msg, sizeof msg);
    field(e, "file", file, sizeof file);
    field(e, "func", func, sizeof func);
    json_t *item = json_object_get(e, "item");
    if (json_is_integer(item))
        return esp_fail(err, "%s: item %lld %s", b->where, (long long)json_integer_value(item), msg);
    char at[800] = "";
    if (file[0]) snprintf(at, sizeof at, ", raised at %s:%lld in %s", file, (long long)json_integer_value(json_object_get(e, "line")), func);
    if (json_object_get(e, "module"))
        return esp_fail(err, "%s: %s cannot import %s (%s: %s%s; install it in that interpreter, or name another with "
                        "python: or ESPNET3_PYTHON)", b->where, b->python, field(e, "module", module, sizeof module),
                        type, msg, at);
    return esp_fail(err, "%s: %s: %s (in the recipe's Python run by %s%s)", b->where, type, msg, b->python, at);
}

int py_bridge_next(py_bridge *b, json_t **rec, esp_err *err)
{
    *rec = NULL;
    char *line = NULL;
    size_t cap = 0;
    ssize_t got = getline(&line, &cap, b->in);
    if (got <= 0) {
        free(line);
        return esp_fail(err, "%s: %s ended without a result (its messages above say why)", b->where, b->python);
    }
    json_error_t je;
    json_t *o = json_loads(line, 0, &je);
    free(line);
    if (!json_is_object(o)) {
        json_decref(o);
        return esp_fail(err, "%s: a broken record from the Python helper (%s)", b->where, je.text);
    }
    json_t *e = json_object_get(o, "error");
    if (e) {
        int rc = python_error(b, e, err);
        json_decref(o);
        return rc;
    }
    if (json_is_true(json_object_get(o, "end"))) {
        json_decref(o);
        return 0;
    }
    *rec = o;
    return 1;
}

int py_bridge_read(py_bridge *b, void *buf, size_t n, esp_err *err)
{
    if (n && fread(buf, 1, n, b->in) != n)
        return esp_fail(err, "%s: %s stopped in the middle of an item's samples", b->where, b->python);
    return 0;
}

int py_bridge_finish(py_bridge *b, int failed, esp_err *err)
{
    int rc = 0;
    if (b->pid > 0) {
        if (failed) kill(b->pid, SIGTERM);
        int status = 0;
        while (waitpid(b->pid, &status, 0) < 0 && errno == EINTR) {}
        if (!failed && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            rc = WIFSIGNALED(status) ? esp_fail(err, "%s: %s was killed by signal %d", b->where, b->python, WTERMSIG(status))
                                     : esp_fail(err, "%s: %s exited with status %d", b->where, b->python,
                                                WEXITSTATUS(status));
    }
    if (b->in) fclose(b->in);
    if (b->req_file) unlink(b->req_file);
    free(b->req_file);
    free(b->python);
    free(b->where);
    memset(b, 0, sizeof *b);
    return rc;
}
